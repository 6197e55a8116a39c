"""Generalising an accepted repair: the same repair, re-targeted at other tasks with the same failure signature.

A per-task repair helps training only when the policy meets that task again; the same defect usually sits
in sibling tasks (one rubric style per domain, one check type per kind of criterion). So when the critic
accepts a repair on task A, the evolver proposes it for A's look-alikes as ONE batched `HarnessUpdate`,
measured and accepted like any other candidate (`agents/critic.py`, `judge_batch`) and committed only then.

**The failure signature** of a repair: (failure type, domain, criterion signature). The criterion signature
is `rules_bank.criterion_signature` ("<kind>/<check type>") of the criterion the accepted update touched
(edit/split/reweight/remove ops name it); a repair that touched none (hints, variants, pitfalls, new
criteria, sampling) has no criterion part.

**Where similar tasks come from** (`sightings` gathers them for `graphs.nodes.generalise`, newest first):
memory's failure events of the same type on other tasks of the same domain (`TrainingMemory.events_like`),
then the current harness's other active tasks of that domain whose latest training groups in memory make a
fresh detector report the same failure type.

**The rule** (`build_batch`): a sighted task B is a target when, in this order of checks, B is known, is a
training task (a held-out / test-split task, which has no sampling entry, is never touched), is active,
has the source's domain, shows the source's failure type, has no events of its own in this round (its own
lane handles them), was not repaired for this failure type since its event, the repair maps onto B (below),
B's touched criterion has the same signature, the mapped update validates on the current harness, and the
batch still has room (at most `max_tasks` targets and 16 ops). Every other sighted task is listed with why.

**Mapping a repair onto B** (`retarget`): a rule template is rendered again for B with B's own event and
unmet criteria (`proposer.render_template`: the same hint template phrased from B's criteria, the same
tightening on B's stuffed criterion, the same constraint for a variant). An LLM's update is mapped op by op:
schedules are copied, new criteria and pitfalls are copied under a fresh id, a criterion edit that wrapped
A's check in more parts (an `all_of` starting with A's check) wraps B's matching criterion (same kind and
check type; B's event criterion first) in the same parts, a criterion reweight applies the same factor;
any other op (hint texts, prompts, sampling) is specific to A, so B is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import proposer
from agents import rules_bank as bank
from harness.checks import AllOf, Check
from harness.detector import Detector, DetectorConfig, GroupStats
from harness.ops import validate as validate_update
from harness.types import (
    AddCriterion,
    AddPitfall,
    Criterion,
    EditCriterion,
    FailureEvent,
    HarnessState,
    HarnessUpdate,
    RemoveCriterion,
    ReweightCriterion,
    SetSchedule,
    SplitCriterion,
    Task,
)
from memory.records import GroupSummary

if TYPE_CHECKING:
    from memory.store import TrainingMemory

MAX_BATCH_OPS = 16  # HarnessUpdate's own limit on ops


@dataclass(frozen=True)
class Sighting:
    """Another task seen with the failure.

    The event (from memory or a fresh detector), where it was seen, the criteria its best recent rollout missed
    (what hint templates target) and the step of its latest accepted or fallback proposal for this failure type
    (None: never repaired).
    """

    task_id: str
    event: FailureEvent
    seen_in: str
    unmet: tuple[str, ...] = ()
    repaired_at: int | None = None


@dataclass
class Batch:
    """The batched candidate.

    One update over the targets (None when none qualified), each target's event (lead first) and share of the
    ops, and every sighted task left out with the reason.
    """

    update: HarnessUpdate | None
    events: dict[str, FailureEvent] = field(default_factory=dict)
    per_task: dict[str, HarnessUpdate] = field(default_factory=dict)
    seen_in: dict[str, str] = field(default_factory=dict)
    signatures: dict[str, str] = field(default_factory=dict)  # target -> signature of its event's criterion (memory)
    skipped: list[str] = field(default_factory=list)
    signature: str = ""

    def report(self) -> dict[str, Any]:
        return {
            "targets": list(self.events),
            "seen_in": self.seen_in,
            "skipped": self.skipped,
            "signature": self.signature,
            "signatures": self.signatures,
        }


def touched_criteria(update: HarnessUpdate, task_id: str) -> list[str | None]:
    """Ids of the existing criteria of `task_id` that `update` edits, splits, reweights or removes."""
    return [
        op.criterion_id
        for op in update.ops
        if op.task_id == task_id
        and isinstance(op, EditCriterion | SplitCriterion | RemoveCriterion | ReweightCriterion)
    ]


def _parts(check: Check | None) -> list[Check]:
    if check is None:
        return []
    return list(check.checks) if isinstance(check, AllOf) else [check]


def _matching(target: Task, source: Criterion, event: FailureEvent) -> Criterion | None:
    """B's criterion that plays A's criterion's part.

    Same kind and check type, B's event criterion first, else the only one of that signature (two candidates
    would make the choice a guess).
    """
    same = [c for c in target.criteria if bank.signature_of(c) == bank.signature_of(source)]
    first = next((c for c in same if c.id == event.criterion_id), None)
    return first or (same[0] if len(same) == 1 else None)


def _map_llm_ops(
    update: HarnessUpdate, source: Task, target: Task, event: FailureEvent
) -> tuple[list[Any] | None, str]:
    """An LLM update's ops re-targeted at `target` (module docstring), or (None, why) when one does not map."""
    out: list[Any] = []
    taken = {c.id for c in target.criteria}
    by_id = {c.id: c for c in source.criteria}
    for op in update.ops:
        if op.task_id != source.id:
            return None, f"op {op.op} touches {op.task_id}, not the repaired task"
        if isinstance(op, SetSchedule):
            out.append(op.model_copy(update={"task_id": target.id}))
        elif isinstance(op, AddCriterion | AddPitfall):
            cid = bank.fresh_id(op.criterion.id, taken)
            taken.add(cid)
            out.append(
                op.model_copy(update={"task_id": target.id, "criterion": op.criterion.model_copy(update={"id": cid})})
            )
        elif isinstance(op, EditCriterion | ReweightCriterion) and op.criterion_id in by_id:
            src = by_id[op.criterion_id]
            dst = _matching(target, src, event)
            if dst is None:
                return None, f"no criterion of {target.id} matches {src.id} (kind and check type)"
            if isinstance(op, ReweightCriterion):
                w = round(dst.weight * op.weight / src.weight, 1)
                if w == 0 or (w > 0) != (dst.weight > 0) or abs(w) > 10:
                    return None, f"reweighting {dst.id} by the same factor gives weight {w}"
                out.append(ReweightCriterion(task_id=target.id, criterion_id=dst.id, weight=w))
                continue
            old, new = _parts(src.check), _parts(op.check)
            if op.text is not None or op.clear_check or not old or new[: len(old)] != old or len(new) == len(old):
                return None, f"the edit of {src.id} is specific to its check (only wrapping it in more parts maps)"
            out.append(
                EditCriterion(
                    task_id=target.id,
                    criterion_id=dst.id,
                    check=AllOf(checks=[*_parts(dst.check), *new[len(old) :]][:8]),
                )
            )
        else:
            return None, f"op {op.op} is specific to {source.id}"
    return out, ""


def retarget(
    template: str, update: HarnessUpdate, source: Task, state: HarnessState, sighting: Sighting, step: int
) -> tuple[HarnessUpdate | None, str]:
    """The accepted `update` (made by `template`) re-targeted at the sighted task, or (None, why)."""
    ev, tid = sighting.event, sighting.task_id
    if template and template != "llm":
        mapped = proposer.render_template(template, ev, update.interface, state, step, list(sighting.unmet))
        if mapped is None:
            return None, f"template {template} does not apply to {tid}"
        return mapped.model_copy(update={"event_id": ev.id}), ""
    ops, why = _map_llm_ops(update, source, state.task(tid), ev)
    if ops is None:
        return None, why
    return HarnessUpdate(
        interface=update.interface,
        ops=ops,
        event_id=ev.id,
        rationale=update.rationale,
        predicted_effect=update.predicted_effect,
    ), ""


def build_batch(
    event: FailureEvent,
    update: HarnessUpdate,
    template: str,
    source_state: HarnessState,
    state: HarnessState,
    sightings: list[Sighting],
    *,
    max_tasks: int,
    busy: set[str],
    step: int,
    proposal_id: str,
) -> Batch:
    """The batched candidate for an accepted repair (the rule in the module docstring).

    `source_state`: the harness the repair was proposed on (before its commit); `state`: the harness now (after
    it), which the batch is validated on; `busy`: tasks with events of their own in this round."""
    source = source_state.task(event.task_id)
    signature = bank.criterion_signature(source, touched_criteria(update, source.id))
    batch = Batch(update=None, signature=signature)
    seen: set[str] = {event.task_id}
    ops: list[Any] = []
    for s in sightings:
        tid = s.task_id
        if tid in seen:
            continue
        seen.add(tid)
        why = _ineligible(s, event, source, state, busy)
        mapped: HarnessUpdate | None = None
        if why is None:
            mapped, why = retarget(template, update, source, state, s, step)
        if mapped is not None and signature:
            got = bank.criterion_signature(state.task(tid), touched_criteria(mapped, tid))
            if got != signature:
                why, mapped = f"the repair touches a {got or 'no'} criterion there, not a {signature} one", None
        if mapped is not None and (errors := validate_update(state, mapped)):
            why, mapped = f"does not validate: {errors[0]}", None
        if mapped is not None and len(batch.events) >= max_tasks:
            why, mapped = f"cap of {max_tasks} similar tasks per repair reached", None
        if mapped is not None and len(ops) + len(mapped.ops) > MAX_BATCH_OPS:
            why, mapped = f"the batch is full ({len(ops)} ops, at most {MAX_BATCH_OPS})", None
        if mapped is None:
            batch.skipped.append(f"{tid}: {why}")
            continue
        batch.events[tid], batch.per_task[tid], batch.seen_in[tid] = s.event, mapped, s.seen_in
        batch.signatures[tid] = bank.criterion_signature(state.task(tid), [s.event.criterion_id])
        ops.extend(mapped.ops)
    if ops:
        batch.update = HarnessUpdate(
            interface=update.interface,
            ops=ops,
            event_id=event.id,
            rationale=f"generalised from {proposal_id} ({template or 'update'} on {event.task_id}, accepted) to "
            f"{', '.join(batch.events)}: same {event.type} in {source.domain}"
            + (f", criterion {signature}" if signature else ""),
            predicted_effect=update.predicted_effect,
        )
    return batch


def _ineligible(s: Sighting, event: FailureEvent, source: Task, state: HarnessState, busy: set[str]) -> str | None:
    tid = s.task_id
    if not state.has_task(tid):
        return f"unknown in harness v{state.version}"
    task = state.task(tid)
    if task.split != "train" or tid not in state.sampling:
        return "held-out task: never touched"
    if state.sampling[tid].status != "active":
        return f"{state.sampling[tid].status}"
    if task.domain != source.domain:
        return f"domain {task.domain!r}, not {source.domain!r}"
    if s.event.type != event.type:
        return f"its failure is {s.event.type}, not {event.type}"
    if tid in busy:
        return "has events of its own in this round (its lane handles them)"
    if s.repaired_at is not None and s.repaired_at >= s.event.step:
        return f"already repaired at step {s.repaired_at} (its {event.type} was seen at step {s.event.step})"
    return None


def sightings(
    mem: TrainingMemory, detector_config: DetectorConfig, event: FailureEvent, domain: str, now: HarnessState
) -> list[Sighting]:
    """Other tasks of `domain` seen with `event`'s failure type, newest first (module docstring).

    Memory's events of that type first, then active tasks whose latest training groups make a fresh detector
    report it."""

    def extras(tid: str) -> tuple[tuple[str, ...], int | None]:
        groups = [g for g in mem.task_history(tid, last_n=1, kinds=("groups",)) if isinstance(g, GroupSummary)]
        unmet = tuple(c for c, ok in groups[-1].best.verdicts.items() if not ok) if groups and groups[-1].best else ()
        mine = [p for p in mem.proposals_for(tid) if p.failure_type == event.type]
        undone = max((p.step for p in mine if p.outcome == "reverted"), default=-1)  # training undid the repair then
        fixed = [p.step for p in mine if p.outcome in ("accepted", "fallback") and p.step > undone]
        return unmet, max(fixed) if fixed else None

    out: list[Sighting] = []
    for rec in mem.events_like(event.type, domain=domain, exclude_task=event.task_id):
        if all(s.task_id != rec.task_id for s in out):
            out.append(Sighting(rec.task_id, rec.event, f"memory event {rec.event.id}", *extras(rec.task_id)))
    seen = {s.task_id for s in out} | {event.task_id}
    for tid in now.active_task_ids():
        if tid in seen or now.task(tid).domain != domain:
            continue
        detector, found = Detector(detector_config), None
        for g in mem.task_history(tid, last_n=detector_config.window, kinds=("groups",)):
            assert isinstance(g, GroupSummary)
            seen = detector.observe(GroupStats.model_validate(g.stats))
            found = next((e for e in seen if e.type == event.type), found)
        if found is not None:
            out.append(Sighting(tid, found, f"latest groups (steps {found.window})", *extras(tid)))
    return out
