"""Task sampling core: seeded weighted draws over the harness's active tasks and variants.

The sampler holds a *callable* returning the current `HarnessState` rather than a state, so an
update committed at a checkpoint shows up on the very next draw without rebuilding the sampler
(the TRL dataset generator keeps one sampler for the whole run).

Distribution: p_i = (1 - floor) * w_i m_i / Σ w m + floor / N over the N active tasks, where w is
the harness weight and m an optional per-task multiplier (the DAPO-style dynamic-filtering baseline
down-weights tasks whose groups had zero variance through it). The uniform floor keeps every active
task reachable, so a down-weighted task can still show that it recovered.
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

    def weights(self) -> dict[str, float]:
        """Sampling probabilities over the active tasks (sum to 1)."""
        state = self._state()
        ids = state.active_task_ids()
        if not ids:
            raise ValueError(f"harness version {state.version} has no active task with a positive weight")
        raw = {t: state.sampling[t].weight * self._multipliers.get(t, 1.0) for t in ids}
        total = sum(raw.values())
        if total <= 0:  # every multiplier is 0: fall back to uniform rather than divide by zero
            return {t: 1.0 / len(ids) for t in ids}
        return {t: (1.0 - self.floor) * w / total + self.floor / len(ids) for t, w in raw.items()}

    def draw(self, k: int) -> list[str]:
        """k task ids, drawn independently with replacement (GRPO groups may repeat a task)."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        w = self.weights()
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
