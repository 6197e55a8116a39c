"""Predictive skipping of dead tasks: the zero-LLM control of the benchmark's `skip` arm (`harness.skip_dead`).

A task whose groups came out dead (zero reward variance) several times in a row is likely dead the next time too, so
the sampler skips it before generating: task t, whose last `z_t` groups were all dead, is kept with probability
`keep_t = max(p ** z_t, floor)` and skipped otherwise (its draw goes to another task). A task with a live latest
group (z = 0), or never seen, is always kept; `floor` keeps every task explored however long its dead run. The
exploration probability `p` adapts once per step towards a target dead share: when the step's groups were dead more
often than `target`, p falls by `EXPLORE_STEP` (skip harder), otherwise it rises by as much, within [`floor`, 1].

What it is not: `harness/liveness.py` estimates a task's dead *rate* (a decayed posterior, reset when an update edits
the task) for the evolver's event ranking and its `liveness_weighting`; this counts only the current run of dead
groups, never hears of harness updates, and needs neither an LLM nor the evolver. The sampler applies `keep` as the
task's draw multiplier (`trainer/sampler.py`): rejecting a draw with probability 1 - keep and drawing again is the
same as drawing in proportion to weight x keep.
"""

from __future__ import annotations

from typing import Any

EXPLORE_START = 0.5  # the exploration probability before any step was seen
EXPLORE_STEP = 0.05  # how far one step's dead share above (below) the target moves it down (up)


class DeadRunSkip:
    """Per-task runs of dead groups and the adaptive exploration probability (see the module doc)."""

    def __init__(self, *, target: float, floor: float, explore: float = EXPLORE_START) -> None:
        if not 0.0 <= target <= 1.0:
            raise ValueError(f"skip target dead share must be in [0, 1], got {target}")
        if not 0.0 < floor <= 1.0:
            raise ValueError(f"skip floor must be in (0, 1], got {floor}")
        self.target = target
        self.floor = floor
        self.explore = min(1.0, max(floor, explore))
        self._runs: dict[str, int] = {}  # task -> dead groups in a row, up to its latest group
        self._step_groups = 0  # groups observed since the last `end_step`
        self._step_dead = 0

    def observe(self, task_id: str, dead: bool) -> None:
        """One scored group of the task."""
        self._runs[task_id] = self._runs.get(task_id, 0) + 1 if dead else 0
        self._step_groups += 1
        self._step_dead += int(dead)

    def end_step(self) -> float | None:
        """Adapt the exploration probability to the groups observed since the last call.

        Returns their dead share (None: no group was observed, nothing changes)."""
        if not self._step_groups:
            return None
        share = self._step_dead / self._step_groups
        move = -EXPLORE_STEP if share > self.target else EXPLORE_STEP
        self.explore = min(1.0, max(self.floor, self.explore + move))
        self._step_groups = self._step_dead = 0
        return share

    def dead_run(self, task_id: str) -> int:
        return self._runs.get(task_id, 0)

    def keep(self, task_id: str) -> float:
        """The probability that a draw of the task is kept (1 for a task whose latest group was live)."""
        z = self._runs.get(task_id, 0)
        return 1.0 if z == 0 else max(self.explore**z, self.floor)

    def state_dict(self) -> dict[str, Any]:
        return {
            "explore": self.explore,
            "runs": dict(self._runs),
            "step_groups": self._step_groups,
            "step_dead": self._step_dead,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.explore = float(state["explore"])
        self._runs = {str(t): int(z) for t, z in state["runs"].items()}
        self._step_groups = int(state["step_groups"])
        self._step_dead = int(state["step_dead"])
