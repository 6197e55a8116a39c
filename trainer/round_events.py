"""The choice of a round's events: which pending failures an evolver round repairs, and which it drops.

`take_events` takes them from the run's pending list (`trainer.harness_run.HarnessRun.add_events` queues them):
events about a harness an update already replaced are stale (`stale_check`), a task is repaired once per round
(its other events are superseded), and tasks are ranked by expected repair value (`EVENT_CLASS`,
`SLOT_ORDER`; docs/DESIGN.md §2); events beyond `harness.max_events` wait for the next round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from harness.store import HarnessStore
from harness.types import FailureEvent

if TYPE_CHECKING:
    from trainer.harness_run import HarnessRun

# Which failures a round repairs first when there are more than `harness.max_events`, ranked by expected repair
# value (docs/DESIGN.md §2). A failure is dead (collapse_low, collapse_high, flat: reward std below eps, so the
# group's advantage is exactly zero and every group a repair makes mixed is learning signal won; the critic's exact
# test has power on them at a few rollouts), a hack (reward hacking and leaks: they teach the wrong behaviour, but
# their repairs are judged on noisier contrasts) or blind (a criterion always or never met: the group keeps signal
# from its other criteria).
EVENT_CLASS = {
    "collapse_low": "dead",
    "collapse_high": "dead",
    "flat": "dead",
    "spurious_audit": "hack",
    "stuffing": "hack",
    "spurious_length": "hack",
    "guidance_leak": "hack",
    "blind_criterion": "blind",
}
# The order of (class, confirmed) pairs; confirmed = the same signal on >= 2 distinct groups. A failure seen in one
# group is often noise (before confirmation counted, one-group spurious events took 46 of 48 round slots on SmolLM2),
# except a dead group: std below eps is an exact fact about that group, and the critic's test (its control pooled
# from the task's cached groups) decides whether the task stays dead. So a one-group dead group ranks after confirmed
# hacks but before confirmed blind criteria, which on SmolLM2 took most slots while dead groups waited. Batch-level
# events (task "*") come last: the evolver records them but cannot update a task for them.
SLOT_ORDER = (("dead", True), ("hack", True), ("dead", False), ("blind", True), ("hack", False), ("blind", False))


class RoundEvents(NamedTuple):
    taken: list[FailureEvent]  # handed to the evolver round
    superseded: list[FailureEvent]  # another event on the same task was taken
    stale: list[FailureEvent]  # about a harness version an update already replaced


def rank(e: FailureEvent) -> tuple[float, int, int]:
    """Sort key of a pending event.

    Its priority class, then the failure seen in more groups first (more likely real, more rollouts wasted), then
    the most recent.
    """
    key = (EVENT_CLASS.get(e.type), e.confirmed)
    cls = SLOT_ORDER.index(key) if key in SLOT_ORDER else len(SLOT_ORDER)
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
