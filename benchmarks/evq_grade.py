"""The evolver-quality benchmark's grading: whether an accepted update holds, and the two-round cases.

`grade_round` samples W follow-up training-like groups of the graded task under the harness a round left
(`evq_detect.follow_up`), records them in memory as the trainer records groups, and applies the trainer's
pause-time rule (`trainer.provisional.review`, which applies `agents.decisions.grade`): the update is confirmed
or its revert committed. For a two-round case, `no_second_round` says why round 2 is skipped and `seen_again`
gives it its event (W more groups under the harness as it then is, observed by a fresh detector); `case_row`
sums a case's rounds. Part of `benchmarks/evolver_quality.py` (modules in `benchmarks/` import each other by
plain name); the grading half of its API adapter is here.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from evq_cases import EXPECTED, Case
from evq_detect import Visit, detect_again, follow_up, matching_event, planted_event

from agents import decisions
from agents.context import EvolverContext
from harness.detector import DetectorConfig, GroupStats, RolloutRecord
from harness.store import HarnessStore
from harness.types import FailureEvent, HarnessState
from tools.judge import Judge
from trainer import provisional


# == API adapter (grading): the evolver internals this file names ==========================================
def record_group(memory: Any, stats: GroupStats, records: list[RolloutRecord], *, domain: str, version: int) -> None:
    """Write one detector group to memory the way the trainer's reward function does."""
    order = sorted(range(len(records)), key=lambda i: records[i].reward)
    memory.add_group(
        stats,
        best=records[order[-1]],
        worst=records[order[0]],
        harness_version=version,
        domain=domain,
        group_index=0,
        texts=[r.text for r in records],
    )


def provisional_targets(store: HarnessStore, since_version: int) -> list[tuple[int, decisions.Target]]:
    """(version, target) of every provisional update committed after `since_version`.

    The graph writes the targets into the store record's meta at commit (`decisions.provisional_meta`)."""
    out = []
    for rec in store.history():
        if rec.version > since_version and rec.update is not None:
            for t in (rec.meta.get("provisional") or {}).get("targets", []):
                out.append((rec.version, decisions.Target.model_validate(t)))
    return out


def grade_updates(
    store: HarnessStore, memory: Any, step: int, *, window: int, ctx: EvolverContext, detector: DetectorConfig
) -> dict[str, Any]:
    """The trainer's pause-time grading of provisional updates on the training groups in memory.

    Verdicts (`agents.decisions.grade`), a revert committed for each failed update, the verdicts in memory."""
    return provisional.review(store, memory, step, window=window, ctx=ctx, detector=detector)


# == end of the API adapter ==============================================================================


def in_training(state: HarnessState, task_id: str) -> bool:
    """The task (or an active variant of it) is still drawn by the sampler."""
    active = set(state.active_task_ids())
    return task_id in active or any(v.parent_id == task_id and vid in active for vid, v in state.variants.items())


def record_visits(memory: Any, visits: Sequence[Visit], domain: str) -> None:
    for v in visits:
        record_group(memory, v.stats, v.records, domain=domain, version=v.stats.harness_version or 0)


def grade_round(
    c: Case,
    idx: int,
    row: dict[str, Any],
    step: int,
    store: HarnessStore,
    grading_memory: Any,
    endpoint: Any,
    judge: Judge,
    cfg: DetectorConfig,
    ctx: EvolverContext,
    args: argparse.Namespace,
) -> int:
    """Grade the round's accepted update on the case's task; returns the step the grading ended at.

    W follow-up training-like groups of the graded task (its new variant for an `add_variant`) under the harness
    the round left, recorded in memory as training records them, then the trainer's confirm/revert rule; while it
    waits (a fade-out plan's unhinted visits do not count) W more groups, up to `args.max_followups` windows.
    `endpoint` is the benchmark's counting endpoint (`evq_probes.ProbeEndpoint`). Fills the row's verdict
    fields."""
    row.update(
        graded=False,
        verdict=None,
        verdict_reasons=[],
        verdict_numbers={},
        revert_version=None,
        graded_on=None,
        followup_rollouts=0,
        followup_seconds=0.0,
    )
    mine = [(v, t) for v, t in provisional_targets(store, row["version_before"]) if t.task_id == c.task.id]
    if not row["accepted"] or not mine:
        return step  # nothing accepted, or an update training groups cannot grade (a pure reweight)
    version, t = mine[-1]
    row.update(graded=True, graded_on=t.graded_on)
    state = store.latest()  # what training draws next (a batched repair of the same round may have followed)
    for _ in range(args.max_followups):
        c0, t0 = endpoint.count.snapshot(), time.perf_counter()
        visits = follow_up(
            state,
            t.graded_on,
            endpoint,
            judge,
            after_step=step,
            window=args.confirm_window,
            k=args.k,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            salt=idx,
        )
        row["followup_seconds"] += time.perf_counter() - t0 + endpoint.count.charged_seconds - c0["charged_seconds"]
        row["followup_rollouts"] += endpoint.count.requested - c0["requested"]
        record_visits(grading_memory, visits, state.task(t.graded_on).domain)
        step += args.confirm_window
        graded = grade_updates(store, grading_memory, step, window=args.confirm_window, ctx=ctx, detector=cfg)
        mine = [v for v in graded.get("verdicts", []) if v["version"] == version and v["task_id"] == c.task.id]
        if mine:
            v = mine[0]
            row.update(
                verdict=v["verdict"],
                verdict_reasons=v["reasons"],
                verdict_numbers=v["numbers"],
                revert_version=v.get("revert_version"),
            )
            break
        row["verdict"] = "wait"
    row["followup_seconds"] = round(row["followup_seconds"], 3)
    return step


# -- two-round cases ----------------------------------------------------------------------------------------
def no_second_round(prev: dict[str, Any], state: HarnessState, c: Case) -> str | None:
    """Why a two-round case stops after round 1 (None: it goes on): a confirmed repair, or the task out of training."""
    if prev["verdict"] == "confirm":
        return "round 1 left a confirmed repair"
    if not in_training(state, c.task.id):
        return "the task is out of training"
    return None


def seen_again(
    c: Case,
    idx: int,
    step: int,
    store: HarnessStore,
    grading_memory: Any,
    endpoint: Any,
    judge: Judge,
    cfg: DetectorConfig,
    args: argparse.Namespace,
) -> tuple[FailureEvent, int, int]:
    """Round 2's event, the step after the groups that showed it and the rollouts they took.

    W more groups of the task under the harness as it now is (after a revert, a fallback or nothing), recorded
    in memory, seen by a fresh detector window (or the planted event when it misses)."""
    c0 = endpoint.count.snapshot()
    visits = follow_up(
        store.latest(),
        c.task.id,
        endpoint,
        judge,
        after_step=step,
        window=args.confirm_window,
        k=args.k,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        salt=idx + 1000,
    )
    record_visits(grading_memory, visits, c.task.domain)
    step += args.confirm_window
    again = matching_event(c, detect_again(visits, cfg))
    return again or planted_event(c, visits, step), step, endpoint.count.requested - c0["requested"]


def case_row(
    arm: str, c: Case, rounds: Sequence[dict[str, Any]], skipped: str | None, end: HarnessState
) -> dict[str, Any]:
    """A case's result row from its rounds (`end`: the harness after the last)."""
    verdicts = [r["verdict"] for r in rounds]
    return {
        "arm": arm,
        "case": c.case_id,
        "defect": c.defect,
        "task_id": c.task.id,
        "rounds_planned": c.rounds,
        "rounds": list(rounds),
        "second_round_skipped": skipped,
        "expected_interface": EXPECTED[c.defect][1],
        "interface": rounds[0]["interface"],
        "decision": rounds[0]["decision"],
        "templates": rounds[0]["templates"],
        "accepted": any(r["accepted"] for r in rounds),
        "confirmed": "confirm" in verdicts,
        "reverted": sum(v == "revert" for v in verdicts),
        "undecided": sum(v in ("wait", "superseded") for v in verdicts),
        "accepted_ungraded": sum(r["accepted"] and not r["graded"] for r in rounds),
        "fallback": any(r["fallback"] for r in rounds),
        "repaired": "confirm" in verdicts and c.defect != "control",
        "in_training_after": in_training(end, c.task.id),
        "weight_after": end.sampling[c.task.id].weight if c.task.id in end.sampling else None,
        "other_tasks_touched": sorted({t for r in rounds for t in r["other_tasks_touched"]}),
        "decisions": len(rounds),
        "probe_rollouts": sum(r["probe_rollouts"] for r in rounds),
        "generated_rollouts": sum(r["generated_rollouts"] for r in rounds),
        "seconds": round(sum(r["seconds"] for r in rounds), 3),
        "followup_rollouts": sum(r["followup_rollouts"] + r["event_rollouts"] for r in rounds),
    }
