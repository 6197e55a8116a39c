"""The attributor: which harness interface's update can repair a failure event.

Rule brain (the paper's routing prior, docs/DESIGN.md §6): collapse_low -> guidance,
collapse_high -> sampling, flat / spurious_* / stuffing / blind_criterion -> criteria,
guidance_leak -> guidance. A blind criterion stays on criteria while that interface is enabled (`RUBRIC_ONLY`), for
both brains. Three things move the others off the prior, always with a note saying why:
- a disabled interface (ablation) is skipped for the next one in the failure type's preference order;
- memory (anti-oscillation): when this task already has `REJECTED_LIMIT` rejected proposals on the
  preferred interface, the next interface is tried instead. A dead failure (collapse_low, collapse_high, flat)
  climbs its repair ladder instead (`agents/repair_ladder.py`): the interface of the first (interface, template)
  rung that has not failed on this task, so a failed repair leads to the next one rather than off the interface.
- memory (cross-task): when the chosen interface has no accepted proposal on similar cases of other tasks
  (same failure type, same domain or criterion signature; `evidence["cross_task"]`) and another enabled
  interface has, the one with the most such successes is used; `evidence_used` names those records.

LLM brain: the same inputs plus the prior go to the model, which may first look things up with its
tools (task_history, similar_cases, current_harness; memory tools only with use_memory); its answer must name an enabled
interface, and cited evidence ids that are not in the evidence are dropped (hallucinations). If the
model fails (timeout, malformed output, disabled interface) the rule attribution is used and the
failure is recorded in `notes` (`source="llm_fallback"`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from langchain_core.language_models import BaseChatModel

from agents import prompts
from agents import repair_ladder as ladder
from agents.llm import BrainError, ToolBox, ask_with_tools
from agents.schemas import Attribution
from harness.types import FailureEvent
from harness.visibility import public_event, redact

log = logging.getLogger(__name__)

# Preference order per failure type: the first entry is the paper's prior, the rest are where to go
# when memory says the prior keeps failing on this task.
PREFERENCE: dict[str, tuple[str, ...]] = {
    "collapse_low": ("guidance", "criteria", "sampling"),
    "collapse_high": ("sampling", "criteria", "guidance"),
    "flat": ("criteria", "guidance", "sampling"),
    "spurious_length": ("criteria", "sampling", "guidance"),
    "spurious_audit": ("criteria", "sampling", "guidance"),
    "stuffing": ("criteria", "sampling", "guidance"),
    # Never sampling: the group is not dead (its other criteria still teach), so drawing the task less would give
    # up that signal to answer a diagnostic (the fallback leaves it too: `agents.fallback.TEACHING_FAILURES`).
    "blind_criterion": ("criteria", "guidance"),
    "guidance_leak": ("guidance", "sampling", "criteria"),
}
DIAGNOSES: dict[str, str] = {
    "collapse_low": (
        "every rollout scores low: the policy never finds the rewarded behaviour, so the group has no advantage"
    ),
    "collapse_high": "every rollout scores high: the task is saturated and teaches nothing",
    "flat": "rollouts get the same partial score: the rubric is too coarse to tell them apart",
    "spurious_length": "reward follows response length rather than content",
    "spurious_audit": "training reward is up while the hidden audit score is flat or down: credit without content",
    "stuffing": "rollouts repeat rubric keywords to collect credit",
    "blind_criterion": "a criterion is always or never met, so it carries no signal",
    "guidance_leak": "rollouts copy the hint: guidance reveals too much",
}
REJECTED_LIMIT = 2
# Failures whose groups still teach (the detector fires blind_criterion only on groups with reward variance), so a
# repair cannot lower the dead share and is worth only what the rubric gains. A criteria edit is screened by re-scoring
# cached answers (no generation); a hint needs fresh probe rollouts on the frozen policy. On the smollm2-40 benchmark
# such hints were about a fifth of HarnessRL's probe rollouts and none was confirmed by training in six seeds
# (benchmarks/results/revive/RESULTS.md), so these failures are repaired in the rubric only while criteria is enabled.
RUBRIC_ONLY = frozenset({"blind_criterion"})


def interfaces_for(event: FailureEvent, enabled: list[str]) -> list[str]:
    """The enabled interfaces the attributor may choose from for this event (`RUBRIC_ONLY` narrows them)."""
    if event.type in RUBRIC_ONLY and "criteria" in enabled:
        return ["criteria"]
    return enabled


def rejected_counts(evidence: dict[str, Any]) -> dict[str, int]:
    """Rejected proposals per interface on this task, from the memory evidence.

    An accepted update that training then reverted (agents/decisions.py) counts as rejected.
    """
    counts: dict[str, int] = {}
    for p in evidence.get("proposals", []):
        if p.get("outcome") in ("rejected", "invalid", "reverted"):
            counts[p["interface"]] = counts.get(p["interface"], 0) + 1
    return counts


def rule_attribution(
    event: FailureEvent, evidence: dict[str, Any], enabled: list[str], *, use_memory: bool = True
) -> Attribution:
    order = PREFERENCE[event.type]
    notes = [f"prior for {event.type}: {order[0]}"]
    if (narrowed := interfaces_for(event, enabled)) != enabled:
        notes.append(f"{event.type} is repaired in the rubric only: criteria edits are screened on cached answers")
        enabled = narrowed
    rejected = rejected_counts(evidence) if use_memory else {}
    cited: list[str] = []
    chosen: str | None = None
    allowed: list[str] = []  # the interfaces a cross-task success may move the choice to
    climbs = use_memory and event.type in ladder.DEAD_TYPES
    if climbs:
        chosen, allowed = _ladder(event, evidence, enabled, notes, cited)
    for iface in order if chosen is None else ():
        if iface not in enabled:
            notes.append(f"{iface} is disabled (ablation): skipped")
            continue
        if rejected.get(iface, 0) >= REJECTED_LIMIT and any(
            i in enabled and rejected.get(i, 0) < REJECTED_LIMIT for i in order
        ):
            notes.append(
                f"memory: {rejected[iface]} rejected {iface} proposals on {event.task_id}: trying the next interface"
            )
            cited += [p["id"] for p in evidence.get("proposals", []) if p["interface"] == iface][-REJECTED_LIMIT:]
            continue
        chosen = iface
        break
    if chosen is None and not any(i in enabled for i in order):  # e.g. interfaces=[sampling] and a blind criterion
        chosen = enabled[0]
        notes.append(f"none of the interfaces that repair {event.type} ({', '.join(order)}) is enabled; using {chosen}")
    elif chosen is None:  # every enabled interface failed repeatedly: go back to the best enabled one
        chosen = next(i for i in order if i in enabled)
        notes.append(f"every enabled interface was rejected before; using {chosen}")
    used: list[str] = []
    if use_memory:
        if not climbs:
            allowed = [i for i in order if i in enabled and rejected.get(i, 0) < REJECTED_LIMIT]
        chosen, used = _cross_task(event, evidence, chosen, allowed)
        if used:
            notes.append(f"memory: similar cases of other tasks were repaired on {chosen}: using it")
            cited += [line.split()[1] for line in used]
    diagnosis = DIAGNOSES[event.type]
    if event.criterion_id:
        diagnosis += f" (criterion {event.criterion_id})"
    confidence = 0.8 if chosen == order[0] else 0.5
    return Attribution(
        interface=chosen,
        diagnosis=diagnosis,
        confidence=confidence,
        evidence_ids=cited,
        source="rules",  # type: ignore[arg-type]
        notes=notes,
        evidence_used=used,
    )


def _ladder(
    event: FailureEvent, evidence: dict[str, Any], enabled: list[str], notes: list[str], cited: list[str]
) -> tuple[str | None, list[str]]:
    """(the interface of the dead task's next rung or None, the interfaces with a rung left); notes and cites it."""
    order = ladder.order_for(event.type, PREFERENCE[event.type], evidence)
    if order != PREFERENCE[event.type]:
        notes.append(f"ladder: {order[0]} first: the best recent rollout misses a format-only criterion")
    notes += [f"{i} is disabled (ablation): skipped" for i in order if i not in enabled]
    failed = ladder.failed_labels(evidence)
    # An LLM proposer's failures name no rung: they count per interface, as for the other failure types.
    by_llm = rejected_counts({"proposals": [p for p in evidence.get("proposals", []) if p.get("template") == "llm"]})
    if worn := [i for i in enabled if by_llm.get(i, 0) >= REJECTED_LIMIT]:
        if len(worn) < len(enabled):
            notes.append(f"memory: {', '.join(worn)} rejected {REJECTED_LIMIT}+ LLM proposals on {event.task_id}")
            enabled = [i for i in enabled if i not in worn]
    if used := ladder.climbed_from(event, evidence):
        notes.append(f"ladder: climbing past {', '.join(sorted(used))} within this round")
        enabled = [i for i in enabled if i not in used]
    rung = ladder.next_rung(event.type, order, evidence, enabled)
    if rung is None:
        if failed:
            notes.append(
                f"ladder: every rung is spent on {event.task_id} ({', '.join(failed)}); starting again from the prior "
                "(the policy has changed since the first tries)"
            )
        return None, [i for i in order if i in enabled]
    i, iface, name = rung
    after = f" after spent rungs on {event.task_id}: {', '.join(failed)}" if failed else ""
    notes.append(f"ladder: rung {i + 1} ({iface}/{name}){after}")
    cited += [p["id"] for p in ladder.failed_proposals(evidence)][-4:]
    return iface, [j for j in order if j in enabled and ladder.next_rung(event.type, (j,), evidence, enabled)]


def _cross_task(
    event: FailureEvent, evidence: dict[str, Any], chosen: str, allowed: list[str]
) -> tuple[str, list[str]]:
    """(interface, evidence lines): `chosen` unless it has no accepted similar case and an `allowed` interface has."""
    domain = evidence.get("task", {}).get("domain", "")
    signature = evidence.get("signature", "")
    wins: dict[str, list[str]] = {}
    for r in evidence.get("cross_task", []):
        if r.get("outcome") != "accepted" or r.get("task_id") == event.task_id:
            continue
        if r.get("failure_type") != event.type or not (
            r.get("domain") == domain or (signature and r.get("signature") == signature)
        ):
            continue
        wins.setdefault(r["interface"], []).append(
            f"proposal {r['id']} accepted on {r['task_id']}: interface {r['interface']}"
        )
    if wins.get(chosen) or not any(wins.get(i) for i in allowed):
        return chosen, []
    best = max(allowed, key=lambda i: (len(wins.get(i, [])), -allowed.index(i)))
    return best, wins[best][-3:]


def llm_attribution(
    llm: BaseChatModel,
    event: FailureEvent,
    evidence: dict[str, Any],
    enabled: list[str],
    *,
    use_memory: bool = True,
    toolbox: ToolBox | None = None,
) -> Attribution:
    prior = rule_attribution(event, evidence, enabled, use_memory=use_memory)
    enabled = interfaces_for(event, enabled)
    system = prompts.render(prompts.ATTRIBUTOR_SYSTEM, enabled=", ".join(enabled))
    user = prompts.render(
        prompts.ATTRIBUTOR_USER,
        event=json.dumps(public_event(event)),
        task=json.dumps(redact(evidence.get("task", {})), indent=1),
        prior=prior.model_dump_json(include={"interface", "diagnosis", "notes"}),
        history=_lines(evidence.get("history", []) if use_memory else []),
        similar=_lines(evidence.get("similar", []) if use_memory else []),
    )
    try:
        out = ask_with_tools(llm, Attribution, system, user, toolbox)
        if out.interface not in enabled:
            raise BrainError(f"LLM chose interface {out.interface!r}, not one allowed for {event.type} ({enabled})")
    except BrainError as err:
        log.warning("attributor LLM failed on %s: %s; using the rule prior", event.id, err)
        return prior.model_copy(update={"source": "llm_fallback", "notes": [*prior.notes, f"LLM failed: {err}"]})
    known = (
        {r["id"] for r in evidence.get("history", [])}
        | {r["id"] for r in evidence.get("similar", [])}
        | {p["id"] for p in evidence.get("proposals", [])}
    )
    cited = [i for i in out.evidence_ids if i in known]
    notes = [f"rule prior was {prior.interface}"]
    if dropped := [i for i in out.evidence_ids if i not in known]:
        notes.append(f"dropped evidence ids not in the evidence: {dropped}")
    return out.model_copy(update={"evidence_ids": cited, "source": "llm", "notes": notes, "evidence_used": []})


def _lines(records: list[dict[str, Any]]) -> str:
    return "\n".join(f"[{r['id']}] {r.get('document', '')}" for r in records) or "(none)"
