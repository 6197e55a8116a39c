"""The choice of a round's events: which pending failures an evolver round repairs, and which it drops.

`take_events` takes them from the run's pending list (`trainer.harness_run.HarnessRun.add_events` queues them):
events about a harness an update already replaced are stale (`stale_check`), a task is repaired once per round
(its other events are superseded), and tasks are ranked by expected repair value (`EVENT_PRIORITY`,
`UNCONFIRMED_PENALTY`; docs/DESIGN.md §2); events beyond `harness.max_events` wait for the next round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from harness.store import HarnessStore
from harness.types import FAILURE_TYPES, FailureEvent

if TYPE_CHECKING:
    from trainer.harness_run import HarnessRun

# Which failures a round repairs first when there are more than `harness.max_events`, ranked by expected repair
# value (docs/DESIGN.md): first how sure the failure is (confirmed = the same signal on >= 2 distinct groups), then
# what a measured repair returns. Dead groups (collapse_low, collapse_high, flat: reward std below eps) come first
# among confirmed events: their advantage is exactly zero, so every group a repair makes mixed is learning signal
# won, and the critic's test for them is the one with power at a few rollouts. Reward hacking and leaks next (they
# teach the wrong behaviour, but their repairs are judged on noisier contrasts), then blind criteria (the group
# keeps signal from its other criteria). Batch-level events (task "*") come last: the evolver records them but
# cannot update a task for them.
EVENT_PRIORITY = {
    "collapse_low": 0,
    "collapse_high": 0,
    "flat": 0,
    "spurious_audit": 1,
    "stuffing": 1,
    "spurious_length": 1,
    "guidance_leak": 1,
    "blind_criterion": 2,
}
# An unconfirmed event (one group in the window: often noise) ranks below every confirmed one. Before this rule, on
# SmolLM2 about 2 of 48 round slots went to dead groups while one-group spurious events took the rest.
UNCONFIRMED_PENALTY = len(set(EVENT_PRIORITY.values()))


class RoundEvents(NamedTuple):
    taken: list[FailureEvent]  # handed to the evolver round
    superseded: list[FailureEvent]  # another event on the same task was taken
    stale: list[FailureEvent]  # about a harness version an update already replaced


def rank(e: FailureEvent) -> tuple[float, int, int]:
    """Sort key of a pending event.

    Its priority class, then the failure seen in more groups first (more likely real, more rollouts wasted), then
    the most recent.
    """
    cls = EVENT_PRIORITY.get(e.type, len(FAILURE_TYPES)) + (0 if e.confirmed else UNCONFIRMED_PENALTY)
    return cls + (100 if e.task_id == "*" else 0), -e.window_hits, -e.step


def take_events(run: HarnessRun, limit: int, is_stale: Callable[[FailureEvent], bool] | None = None) -> RoundEvents:
    """Events for the next round from `run.pending_events`: stale ones dropped, one per task, at most `limit`.

    A round repairs a task once: of several events on one task the most urgent (then most recent)
    is taken and the others are superseded (dropped: the detector fires again if the failure
    persists under the repaired harness). Tasks are ordered by `rank`; events beyond `limit` stay pending for the
    next round. Each event costs the critic fresh rollouts, so the limit is what bounds the pause.
    """
    with run.lock:
        best: dict[str, FailureEvent] = {}
        superseded: list[FailureEvent] = []
        stale: list[FailureEvent] = []
        for e in sorted(run.pending_events, key=rank):
            if is_stale is not None and is_stale(e):
                stale.append(e)
            elif e.task_id in best:
                superseded.append(e)
            else:
                best[e.task_id] = e
        ordered = list(best.values())
        run.pending_events = ordered[limit:]
    return RoundEvents(ordered[:limit], superseded, stale)


def stale_check(store: HarnessStore) -> Callable[[FailureEvent], bool]:
    """A predicate for events about a harness that is gone.

    Rows sampled before an update (the dataloader prefetches one batch) still report the old failure of a task the
    update already changed.
    """
    touched: dict[str, int] = {}  # task -> newest version whose update touched it
    for rec in store.history():
        if rec.update is not None:
            for tid in rec.update.task_ids:
                touched[tid] = max(touched.get(tid, 0), rec.version)

    def is_stale(e: FailureEvent) -> bool:
        v = e.stats.get("harness_version")
        return v is not None and touched.get(e.task_id, -1) > int(v)

    return is_stale
