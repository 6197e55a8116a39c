"""The evidence an event's brains read: the task as training sees it, and what memory holds about it.

`skip_reason` says why an event gets no per-task update (a batch-level event, a task the harness does not have);
`task_view` is the task's current harness view (prompt, criteria, hints, sampling entry) with the event's criterion
signature; `from_memory` adds the task's history, its proposals (the repair ladder's rungs, `agents/repair_ladder.py`),
similar cases and other tasks' proposals on the same failure type (the rule brains' template evidence), the criteria
even the best recent rollout missed, and what the task's own rollouts do (`agents/rollout_signals.py`). All three
only read; recording the event in memory is the graph's (`graphs/nodes.py` `gather_evidence`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents import rules_bank
from agents.context import EvolverContext
from agents.rollout_signals import rollout_signals
from harness.types import FailureEvent, HarnessState
from memory.records import EventRecord, GroupSummary, Record

if TYPE_CHECKING:  # chromadb loads with the store, only where a run opens one (graphs/services.py)
    from memory.store import TrainingMemory


def skip_reason(event: FailureEvent, harness: HarnessState) -> str | None:
    """Why `event` gets no per-task update on `harness`, or None when its task is there to repair."""
    if event.task_id == "*":
        return "batch-level event: no per-task update"
    if not harness.has_task(event.task_id):
        return f"unknown task {event.task_id!r} in harness v{harness.version}"
    return None


def task_view(event: FailureEvent, harness: HarnessState) -> dict[str, Any]:
    """The evidence without memory: the task in `harness` and the event's criterion signature.

    The memory keys are there, empty, so the brains read the same shape with the memory ablation."""
    task = harness.task(event.task_id)
    return {
        "harness_version": harness.version,
        "task": {
            "id": task.id,
            "domain": task.domain,
            "prompt": task.user_prompt,
            "criteria": [c.model_dump(mode="json", exclude={"origin"}) for c in task.criteria],
            "hints": [h.text for h in harness.guidance_for(task.id).hints],
            "sampling": harness.sampling[task.id].model_dump(mode="json") if task.id in harness.sampling else None,
        },
        "history": [],
        "similar": [],
        "proposals": [],
        "unmet": [],
        "cross_task": [],
        "signature": rules_bank.criterion_signature(task, [event.criterion_id]),
    }


def _records(items: list[Record]) -> list[dict[str, Any]]:
    return [{"id": r.record_id, "kind": r.kind, "document": r.document()} for r in items]


def from_memory(mem: TrainingMemory, record: EventRecord, ctx: EvolverContext) -> dict[str, Any]:
    """The memory part of the evidence for the event `record` holds (already added to `mem`)."""
    event, task_id = record.event, record.event.task_id
    history = mem.task_history(task_id, last_n=ctx.history_last_n)
    out: dict[str, Any] = {
        "history": _records(history),
        "proposals": [
            {
                "id": p.record_id,
                "event_id": p.event_id,  # a climb within the round skips its earlier parts' interfaces
                "interface": p.interface,
                "outcome": p.outcome,
                "step": p.step,
                "revision": p.revision,
                "failure_type": p.failure_type,
                "template": p.template,  # the repair ladder's rungs (agents/repair_ladder.py)
            }
            for p in mem.proposals_for(task_id)
        ],
        "similar": [
            {"id": c.id, "task_id": c.task_id, "document": c.document, "outcome": c.outcome, "deltas": c.deltas}
            for c in mem.similar_cases(
                record.document(), k=ctx.similar_k, failure_type=event.type, exclude_task=task_id
            )
        ],
        # Outcomes of every other task's proposals on this failure type: the rule brains' template evidence.
        "cross_task": [
            {
                "id": p.record_id,
                "event_id": p.event_id,
                "task_id": p.task_id,
                "failure_type": p.failure_type,
                "interface": p.interface,
                "template": p.template,
                "outcome": p.outcome,
                "domain": p.domain,
                "signature": p.signature,
            }
            for p in mem.proposals_like(event.type, exclude_task=task_id)
        ],
    }
    groups = [r for r in history if isinstance(r, GroupSummary) and r.best is not None]
    if groups:  # criteria even the best recent rollout missed: what hints should target
        out["unmet"] = [c for c, ok in groups[-1].best.verdicts.items() if not ok]  # type: ignore[union-attr]
    # What the task's own rollouts do (lengths, repeats, contrasts): the templates size their updates from it.
    cached = [
        g
        for g in mem.task_history(task_id, last_n=ctx.history_last_n, kinds=("groups",))
        if isinstance(g, GroupSummary)
    ]
    out["signals"] = rollout_signals(cached).model_dump(mode="json")
    return out
