"""Task sampling core: seeded weighted draws over the harness's active tasks and variants.

The sampler holds a *callable* returning the current `HarnessState` rather than a state, so an
update committed at a checkpoint shows up on the very next draw without rebuilding the sampler
(the TRL dataset generator keeps one sampler for the whole run).

The distribution (harness weight w times an optional per-task multiplier m, the dynamic-filtering
baseline's, plus a uniform floor over the N drawable tasks) and quarantines: see docs/DESIGN.md, section 3
("Sampling"). Callers pass the training step the draw belongs to; without one, quarantines are judged at the
step the harness version was committed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from harness.types import HarnessState


class TaskSampler:
    def __init__(self, state_provider: Callable[[], HarnessState], seed: int, floor: float = 0.1) -> None:
        if not 0.0 <= floor <= 1.0:
            raise ValueError(f"floor must be in [0, 1], got {floor}")
        self._state = state_provider
        self._rng = random.Random(seed)
        self.floor = floor
        self._multipliers: dict[str, float] = {}

    def set_multiplier(self, task_id: str, m: float) -> None:
        """Extra factor on a task's weight (1 = neutral). Tasks not active in the harness ignore it."""
        if not m >= 0.0:  # also rejects NaN
            raise ValueError(f"multiplier for {task_id!r} must be >= 0, got {m}")
        self._multipliers[task_id] = float(m)

    def weights(self, step: int | None = None, *, multipliers: bool = True) -> dict[str, float]:
        """Sampling probabilities over the tasks drawable at training step `step` (sum to 1).

        `multipliers=False`: as if every multiplier were 1 (the harness's own weights and the floor).
        """
        state = self._state()
        ids = state.drawable_task_ids(step)
        if not ids:
            at = state.step if step is None else step
            raise ValueError(
                f"harness version {state.version} has no active task with a positive weight "
                f"that is not quarantined at step {at}"
            )
        raw = {t: state.sampling[t].weight * (self._multipliers.get(t, 1.0) if multipliers else 1.0) for t in ids}
        total = sum(raw.values())
        if total <= 0:  # every multiplier is 0: fall back to uniform rather than divide by zero
            return {t: 1.0 / len(ids) for t in ids}
        return {t: (1.0 - self.floor) * w / total + self.floor / len(ids) for t, w in raw.items()}

    def draw(self, k: int, step: int | None = None) -> list[str]:
        """Draw k task ids for training step `step`, independently with replacement.

        GRPO groups may repeat a task.
        """
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        w = self.weights(step)
        ids = list(w)
        return self._rng.choices(ids, weights=[w[t] for t in ids], k=k)

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable sampler state (rng and multipliers), for training resume."""
        version, internal, gauss = self._rng.getstate()
        return {"rng": [version, list(internal), gauss], "multipliers": dict(self._multipliers), "floor": self.floor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self._rng.setstate((version, tuple(internal), gauss))
        self._multipliers = {str(k): float(v) for k, v in state["multipliers"].items()}
        self.floor = float(state["floor"])
