"""Provisional updates at a pause: grade each accepted update on its tasks' training groups, revert what failed.

Runs on the main process at the start of every evolver pause (`trainer.evolver_round.review_run`, called by
`EvolverPause.evolve`), before the round takes its events. The rule is `agents.decisions.grade` (confirm / revert /
wait / superseded); this module gathers its inputs and acts on the verdicts:

- the provisional updates are the store's records whose meta carries `provisional` (graphs/nodes.py writes it
  at commit) and whose targets have no verdict yet; a verdict is a memory `ProposalRecord` with id
  `graded_id(version, task)` (outcome `confirmed` or `reverted`, the numbers and reasons as evidence). Both
  live in checkpoints (the store is rolled back with them, the memory restored from their snapshot), so the
  list survives a resume without state of its own (`pending`);
- a target's groups come from the memory's group summaries: "post" are those scored under the update's version
  or a later one that left the task alone, after the commit step; "pre" the last `window` before it;
- the reverted targets of one update become one revert: a new harness version, committed like any other, that
  restores their tasks' parts from the update's parent version (`decisions.revert_update`; meta `revert_of`).
"""

from __future__ import annotations

import logging
from typing import Any

from agents import decisions
from agents.context import EvolverContext
from harness.detector import DetectorConfig, GroupStats
from harness.ops import UpdateRejected
from harness.store import HarnessStore, UpdateRecord
from harness.types import HarnessUpdate
from memory.records import GroupSummary, ProposalRecord
from memory.store import TrainingMemory

log = logging.getLogger(__name__)
MAX_GROUPS = 10_000  # a task's group summaries read back per grading (memory keeps them all)


def graded_id(version: int, task_id: str) -> str:
    """The memory id of a provisional target's verdict."""
    return f"graded:v{version}:{task_id}"


def _targets(rec: UpdateRecord) -> list[decisions.Target]:
    prov = rec.meta.get("provisional") or {}
    return [decisions.Target.model_validate(t) for t in prov.get("targets", [])]


def pending(store: HarnessStore, memory: TrainingMemory) -> list[tuple[UpdateRecord, decisions.Target]]:
    """Every (update record, target) still waiting for its verdict, oldest update first."""
    out = []
    for rec in store.history():
        if rec.update is None:
            continue
        for t in _targets(rec):
            if memory.get("proposals", graded_id(rec.version, t.task_id)) is None:
                out.append((rec, t))
    return out


def _groups(memory: TrainingMemory, task_id: str) -> list[GroupSummary]:
    gs = [g for g in memory.task_history(task_id, last_n=MAX_GROUPS, kinds=("groups",)) if isinstance(g, GroupSummary)]
    return sorted(gs, key=lambda g: (g.step, g.group_index))


def _next_touch(history: list[UpdateRecord], rec: UpdateRecord, tasks: set[str]) -> int | None:
    """The first later version whose update touched one of `tasks` (its groups no longer grade `rec`)."""
    for r in history:
        if r.version > rec.version and r.update is not None and tasks & set(r.update.task_ids):
            return r.version
    return None


def review(
    store: HarnessStore,
    memory: TrainingMemory,
    step: int,
    *,
    window: int,
    ctx: EvolverContext,
    detector: DetectorConfig,
) -> dict[str, Any]:
    """Grade the pending provisional updates; commit one revert per update with reverted targets.

    Returns rounds.jsonl's `provisional` entry: every verdict given now (with numbers and reasons), the revert
    versions, and how many targets still wait."""
    history = store.history()
    verdicts: list[dict[str, Any]] = []
    waiting = 0
    todo = pending(store, memory)
    by_version: dict[int, list[tuple[decisions.Target, decisions.Decision]]] = {}
    records = {rec.version: rec for rec, _ in todo}
    for rec, t in todo:
        assert rec.update is not None  # pending() skips recovery records
        superseded_by = _next_touch(history, rec, {t.graded_on, *t.restore})
        groups = _groups(memory, t.graded_on)
        post = [
            GroupStats.model_validate(g.stats)
            for g in groups
            if g.step > rec.step
            and g.harness_version >= rec.version
            and (superseded_by is None or g.harness_version < superseded_by)
        ]
        # The guards' baseline: the event's task before the commit (the parent of a new variant).
        pre = [
            GroupStats.model_validate(g.stats)
            for g in _groups(memory, t.task_id)
            if g.harness_version < rec.version and g.step <= rec.step
        ][-window:]
        d = decisions.grade(
            t, rec.update.interface, pre, post, window=window, ctx=ctx, detector=detector, superseded_by=superseded_by
        )
        if d.verdict == "wait":
            waiting += 1
            continue
        by_version.setdefault(rec.version, []).append((t, d))
    reverts: list[int] = []
    for version, graded in sorted(by_version.items()):
        rec = records[version]
        assert rec.update is not None
        failed = [(t, d) for t, d in graded if d.verdict == "revert"]
        revert_version: int | None = None
        refused: str | None = None
        if failed:
            tasks = list(dict.fromkeys(x for t, _ in failed for x in t.restore))
            reasons = "; ".join(d.reasons[0] for _, d in failed)
            upd = decisions.revert_update(
                rec.update.interface,
                tasks,
                store.load(rec.parent_version or 0),
                store.latest(),
                rationale=f"revert v{version} on {', '.join(tasks)}: {reasons}",
                event_id=failed[0][0].event_id,
            )
            if upd is None:
                refused = "nothing to restore: the parts are already as the parent version had them"
            else:
                try:
                    new = store.commit(
                        upd,
                        step=step,
                        meta={
                            "source": "revert",
                            "revert_of": version,
                            "targets": [t.task_id for t, _ in failed],
                            "reasons": [r for _, d in failed for r in d.reasons],
                            "numbers": {t.task_id: d.numbers for t, d in failed},
                        },
                    )
                except UpdateRejected as err:
                    refused = f"revert refused: {err}"
                else:
                    revert_version = new.version
                    reverts.append(new.version)
            if refused:
                log.warning("provisional v%d: %s", version, refused)
        for t, d in graded:
            entry = {
                "version": version,
                "task_id": t.task_id,
                "graded_on": t.graded_on,
                "failure_type": t.failure_type,
                "interface": rec.update.interface,
                "template": rec.meta.get("template", ""),
                "source": rec.meta.get("source", ""),
                **d.as_dict(),
                "revert_version": revert_version if d.verdict == "revert" else None,
                "line": d.line(f"{t.task_id} v{version} ({t.failure_type})")
                + (f" -> revert v{revert_version}" if d.verdict == "revert" and revert_version else "")
                + (f" ({refused})" if d.verdict == "revert" and refused else ""),
            }
            verdicts.append(entry)
            _remember(memory, rec, t, d, entry, step)
    counts = {k: sum(v["verdict"] == k for v in verdicts) for k in ("confirm", "revert", "superseded")}
    return {
        "window": window,
        "verdicts": verdicts,
        "revert_versions": reverts,
        "waiting": waiting,
        "n_confirmed": counts["confirm"],
        "n_reverted": counts["revert"],
        "n_superseded": counts["superseded"],
    }


OUTCOME = {"confirm": "confirmed", "revert": "reverted", "superseded": "superseded"}


def _remember(
    memory: TrainingMemory,
    rec: UpdateRecord,
    t: decisions.Target,
    d: decisions.Decision,
    entry: dict[str, Any],
    step: int,
) -> None:
    """The verdict as a memory record next to the proposal's "accepted" one.

    A reverted update is a negative case with its evidence, a confirmed one a positive case; a superseded one is
    marked so and never graded again.
    """
    assert rec.update is not None
    ops = [op for op in rec.update.ops if op.task_id in t.restore] or list(rec.update.ops)
    prov = rec.meta.get("provisional") or {}
    memory.add_proposal(
        ProposalRecord(
            proposal_id=graded_id(rec.version, t.task_id),
            event_id=t.event_id,
            task_id=t.task_id,
            step=step,
            failure_type=t.failure_type,
            interface=rec.update.interface,
            update=HarnessUpdate(interface=rec.update.interface, ops=ops, rationale=rec.update.rationale),
            measurements=dict(d.numbers),
            outcome=OUTCOME[d.verdict],  # type: ignore[arg-type]
            reasons=[f"{d.verdict} after training: " + r for r in d.reasons]
            + ([f"reverted by v{entry['revert_version']}"] if entry.get("revert_version") else []),
            harness_version=rec.version,
            template=str(rec.meta.get("template", "")),
            generalised_from=str(prov.get("proposal_id", "")) if rec.meta.get("source") == "generalise" else "",
        )
    )
