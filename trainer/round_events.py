"""The choice of a round's events: which pending failures an evolver round repairs, and which it drops.

`take_events` takes them from the run's pending list (`trainer.harness_run.HarnessRun.add_events` queues them):
events about a harness an update already replaced are stale (`stale_check`), a task is repaired once per round
(its other events are superseded), a dead group seen once on a task whose recent groups are mostly live is
dropped (`live_check`), and tasks are ranked first by a fixed order of failure classes (`EVENT_CLASS`,
`SLOT_ORDER`; docs/DESIGN.md §2) and, among dead failures or blind criteria of one class, by the informative groups a
repair would buy (`repair_values`); events beyond `harness.max_events` wait for the next round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from harness.store import HarnessStore
from harness.types import FailureEvent

if TYPE_CHECKING:
    from memory.store import TrainingMemory
    from trainer.harness_run import HarnessRun

log = logging.getLogger(__name__)

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
# The classes ranked by repair value within their slot (`rank`); a hack's repair is worth its harm, not dead groups.
VALUED_CLASSES = ("dead", "blind")


class RepairValue(NamedTuple):
    """What repairing an event's task could buy: the groups it is expected to train dead from here on."""

    dead_rate: float  # the task's estimated dead rate (harness.liveness.Liveness.dead_rate)
    draw_p: float  # the probability a training group draws the task at this step (the sampler's weights)
    groups_left: float  # draw_p x groups per step x steps left: the task's expected groups from here on
    value: float  # dead_rate x groups_left: the dead groups a repair that revives the task would make informative

    def as_record(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self._asdict().items()}


def repair_values(run: HarnessRun, events: list[FailureEvent], step: int, processes: int = 1) -> dict[str, RepairValue]:
    """Event id -> `RepairValue` of its task at training step `step` (batch-level events, task "*", are worth 0).

    Groups per step is `train.batch_size / train.num_generations` on each of `processes`; steps left count to
    `train.max_steps`. The draw probability is the harness's, without the sampler's multipliers: a repair resets a
    task's liveness weighting (and dynamic filtering lifts its multiplier once it varies), so a revived task is drawn
    at that rate. A task the sampler cannot draw now (quarantined, weight 0) has draw probability 0.
    """
    cfg = run.cfg.train
    per_step = cfg.batch_size // cfg.num_generations * processes
    steps_left = max(0, cfg.max_steps - step)
    if not run.state.drawable_task_ids(step):
        weights: dict[str, float] = {}  # nothing can be drawn now: no repair buys a group
    elif run.sampler is not None:
        weights = run.sampler.core.weights(step, multipliers=False)
    else:
        weights = _uniform(run, step)
    out = {}
    for e in events:
        if e.task_id == "*":
            out[e.id] = RepairValue(0.0, 0.0, 0.0, 0.0)
            continue
        d, p = run.liveness.dead_rate(e.task_id), weights.get(e.task_id, 0.0)
        left = p * per_step * steps_left
        out[e.id] = RepairValue(d, p, left, d * left)
    return out


def _uniform(run: HarnessRun, step: int) -> dict[str, float]:
    ids = run.state.drawable_task_ids(step)
    return {t: 1.0 / len(ids) for t in ids} if ids else {}


class RoundEvents(NamedTuple):
    taken: list[FailureEvent]  # handed to the evolver round
    superseded: list[FailureEvent]  # another event on the same task was taken
    stale: list[FailureEvent]  # about a harness version an update already replaced
    live: list[FailureEvent]  # a dead group seen once on a task whose recent training groups are mostly live
    values: dict[str, RepairValue] = {}  # event id -> its task's repair value, for the events taken and waiting


def rank(e: FailureEvent, value: float = 0.0) -> tuple[float, float, int, int]:
    """Sort key of a pending event whose `RepairValue.value` is `value`.

    Its priority class; then, for a dead failure or a blind criterion, the more dead groups its repair would make
    informative first (a task drawn often and dead often before one drawn rarely); then the failure seen in more
    groups first (more likely real, more rollouts wasted), then the most recent.

    A blind criterion is valued like a dead failure of its task: a group whose answers tie on every criterion is
    dead at a constant partial credit (flat), and a criterion that all of them meet or all miss is what leaves them
    tied, so a split or edit that makes it discriminate lowers the chance that a group of G ties. On a task that
    never goes dead the same edit only refines a rubric that already teaches.
    """
    key = (EVENT_CLASS.get(e.type), e.confirmed)
    cls = SLOT_ORDER.index(key) if key in SLOT_ORDER else len(SLOT_ORDER)
    worth = value if EVENT_CLASS.get(e.type) in VALUED_CLASSES else 0.0
    return cls + (100 if e.task_id == "*" else 0), -worth, -e.window_hits, -e.step


def take_events(
    run: HarnessRun,
    limit: int,
    is_stale: Callable[[FailureEvent], bool] | None = None,
    is_live: Callable[[FailureEvent], bool] | None = None,
    values: Callable[[list[FailureEvent]], dict[str, RepairValue]] | None = None,
) -> RoundEvents:
    """Events for the next round from `run.pending_events`: stale and live ones dropped, one per task, at most `limit`.

    A round repairs a task once: of several events on one task the most urgent (then most recent)
    is taken and the others are superseded (dropped: the detector fires again if the failure
    persists under the repaired harness). Tasks are ordered by `rank`, with `values` (event id -> `RepairValue`,
    as `repair_values` gives them; none: every value 0); events beyond `limit` stay pending for the next round.
    Each event costs the critic fresh rollouts, so the limit is what bounds the pause.
    """
    with run.lock:
        worth = values(run.pending_events) if values is not None else {}
        best: dict[str, FailureEvent] = {}
        superseded: list[FailureEvent] = []
        stale: list[FailureEvent] = []
        live: list[FailureEvent] = []
        zero = RepairValue(0.0, 0.0, 0.0, 0.0)
        for e in sorted(run.pending_events, key=lambda e: rank(e, worth.get(e.id, zero).value)):
            if is_stale is not None and is_stale(e):
                stale.append(e)
            elif is_live is not None and is_live(e):
                live.append(e)
            elif e.task_id in best:
                superseded.append(e)
            else:
                best[e.task_id] = e
        ordered = list(best.values())
        run.pending_events = ordered[limit:]
    return RoundEvents(ordered[:limit], superseded, stale, live, {e.id: worth[e.id] for e in ordered if e.id in worth})


def stale_check(store: HarnessStore) -> Callable[[FailureEvent], bool]:
    """A predicate for events about a harness that is gone.

    Rows sampled before an update (the dataloader prefetches one batch) still report the old failure of a task the
    update already changed.
    """
    touched = _touched(store)

    def is_stale(e: FailureEvent) -> bool:
        v = e.stats.get("harness_version")
        return v is not None and touched.get(e.task_id, -1) > int(v)

    return is_stale


def live_check(
    memory: TrainingMemory | None, store: HarnessStore, eps: float, history_rollouts: int
) -> Callable[[FailureEvent], bool]:
    """A predicate for a dead group seen once on a task whose recent training groups are mostly live.

    A group of G rollouts is dead by chance on a task that mostly teaches (a hit rate p leaves (1 - p)^G of its
    groups dead), and no per-task repair removes that chance: the critic's test, whose control is pooled from the
    same cached groups, then spends its full cap of frozen-policy probes to find no effect (issue 22's pilot: three
    such events made a 170 s round). So an unconfirmed dead-group event is dropped when the task's newest training
    groups in memory (up to `history_rollouts` rollouts, the critic's pool, and none from before the last update
    that touched the task) hold more live groups (std >= eps) than dead ones. It costs one memory read, and it is
    never final: the detector fires again, and confirms the failure, if the task keeps going dead. Confirmed dead
    groups, tasks without a live majority (or without memory) and every other failure type pass. A memory that
    cannot be read keeps the event, with a warning: the check must not stop training, and keeping is what the
    round did before it existed.
    """
    touched = _touched(store)

    def is_live(e: FailureEvent) -> bool:
        if memory is None or EVENT_CLASS.get(e.type) != "dead" or e.confirmed or e.task_id == "*":
            return False
        since = touched.get(e.task_id, 0)
        stds: list[float] = []
        held = 0
        try:
            groups = memory.task_history(e.task_id, last_n=history_rollouts, kinds=("groups",))
        except Exception as exc:  # any memory failure: keep the event and say so
            log.warning("live check of %s skipped, the event is kept: memory read failed: %r", e.id, exc)
            return False
        for g in reversed(groups):
            std, n = g.stats.get("std"), int(g.stats.get("n") or 0)  # type: ignore[union-attr]
            if g.harness_version < since or held >= history_rollouts:  # type: ignore[union-attr]
                break
            if isinstance(std, int | float):
                stds.append(float(std))
            held += n
        dead = sum(s < eps for s in stds)
        return len(stds) - dead > dead

    return is_live


def _touched(store: HarnessStore) -> dict[str, int]:
    """Task -> the newest harness version whose update touched it."""
    touched: dict[str, int] = {}
    for rec in store.history():
        if rec.update is not None:
            for tid in rec.update.task_ids:
                touched[tid] = max(touched.get(tid, 0), rec.version)
    return touched
