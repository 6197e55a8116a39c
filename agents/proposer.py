"""The proposer: one minimal `HarnessUpdate` on the attributed interface, revised with the critic's feedback.

Rule brain: an ordered list of templates per (interface, failure type) (`agents/rule_templates.py`); each
attempt on an event uses the next template not yet tried (`rule_proposal`).

Cross-task evidence (rule brain): templates accepted on similar cases of other tasks (same failure type and
interface, same domain or criterion signature; memory proposal records) are tried first, and a template rejected
there repeatedly without a success is skipped; the proposal's `evidence_used` names the records whenever they
changed the choice (`rule_proposal`). `render_template` re-renders an accepted template for another task when
an accepted repair is generalised (`agents/generalise.py`).

LLM brain: the model may first call its tools (current_harness, task_history, similar_cases,
sample_policy, score_responses), then writes the update as JSON. An answer that is not usable after the retries (it
does not parse or fit the schema) or that picks another interface hands the decision to the rule brain (`fallback=`,
`source: llm_fallback`); a schema-valid update the harness refuses (unknown tasks or criteria) fails the graph's
validate node and costs a revision. So a hallucinating model never corrupts the harness and never changes sampling
on its own. The model never
sees the hidden audit: the event and the critic's feedback reach it through `harness.visibility`.

When every candidate was rejected, the safe sampling change is `agents/fallback.py`'s.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from agents import prompts
from agents.llm import BrainError, ToolBox, ask_with_tools
from agents.rollout_signals import RolloutSignals
from agents.rule_templates import BUILDS_ON, templates_for
from agents.schemas import Attribution, Proposal, ProposalOut, proposal_schema
from agents.template_input import Template, TemplateInput
from harness.types import FailureEvent, HarnessState, HarnessUpdate, Task
from harness.visibility import public_event, redact, redact_reasons

log = logging.getLogger(__name__)


SKIP_AFTER_FAILURES = 2  # a template rejected this often on similar cases, and never accepted there, is skipped


def _family(label: str) -> str:
    """The template a label came from: "variant:bullets3" -> "variant" (one family, several slots)."""
    return label.split(":", 1)[0]


@dataclass
class _Evidence:
    """Cross-task outcomes per template family on similar cases (see `template_evidence`)."""

    accepted: dict[str, list[str]] = field(default_factory=dict)  # family -> evidence lines
    rejected: dict[str, list[str]] = field(default_factory=dict)

    def promoted(self, family: str) -> bool:
        return bool(self.accepted.get(family))

    def skipped(self, family: str) -> bool:
        return not self.accepted.get(family) and len(self.rejected.get(family, [])) >= SKIP_AFTER_FAILURES


def similar_case(record: dict[str, Any], failure_type: str, interface: str, domain: str, signature: str) -> bool:
    """Whether a memory proposal counts as a similar case.

    Same failure type and interface, and the same domain or the same criterion signature (kind/check type of the
    event's criterion).
    """
    return (
        record.get("failure_type") == failure_type
        and record.get("interface") == interface
        and (record.get("domain") == domain or (bool(signature) and record.get("signature") == signature))
    )


def template_evidence(
    similar: Sequence[dict[str, Any]], event: FailureEvent, interface: str, domain: str, signature: str
) -> _Evidence:
    """Outcomes of the rule templates on similar cases of other tasks.

    `similar`: memory proposal records as `graphs.nodes.gather_evidence` lists them under "cross_task".
    Fallbacks and LLM answers carry no template; an accepted update that training later reverted counts as a
    failure of its template.
    """
    ev = _Evidence()
    # Training's verdicts on accepted updates (trainer/provisional.py): an accepted proposal whose update training
    # reverted is a failure of its template, not a success; the verdict records themselves are not counted again.
    graded = {r.get("event_id"): r.get("outcome") for r in similar if r.get("outcome") in ("confirmed", "reverted")}
    # A refused attempt that a later attempt of the same event built on and got accepted (a re-sized budget reads
    # the refused variant's probes) was a step of that repair, not a failure of its template.
    stepped = {
        (r.get("event_id"), BUILDS_ON[str(r.get("template"))])
        for r in similar
        if r.get("outcome") == "accepted" and str(r.get("template")) in BUILDS_ON
    }
    for r in similar:
        label = str(r.get("template") or "")
        if not label or label == "llm" or r.get("task_id") == event.task_id:
            continue
        if r.get("outcome") in ("confirmed", "reverted", "superseded"):
            continue
        if r.get("outcome") == "rejected" and (r.get("event_id"), _family(label)) in stepped:
            continue
        if not similar_case(r, event.type, interface, domain, signature):
            continue
        outcome = r.get("outcome")
        if outcome == "accepted" and graded.get(r.get("event_id")) == "reverted":
            outcome = "reverted"
        line = f"proposal {r['id']} {outcome} on {r['task_id']}: template {label}"
        if outcome == "accepted":
            ev.accepted.setdefault(_family(label), []).append(line)
        elif outcome in ("rejected", "invalid", "reverted"):
            ev.rejected.setdefault(_family(label), []).append(line)
    return ev


def _ordered(templates: list[tuple[str, Template]], ev: _Evidence) -> list[tuple[str, Template]]:
    """Templates that succeeded on similar cases first, then the rest in the default order.

    The successful ones go most successes first, then in the default order; those that failed repeatedly there
    and never succeeded are left out.
    """
    promoted = sorted((t for t in templates if ev.promoted(t[0])), key=lambda t: -len(ev.accepted[t[0]]))
    rest = [t for t in templates if not ev.promoted(t[0]) and not ev.skipped(t[0])]
    return promoted + rest


def _first(
    order: list[tuple[str, Template]], p: TemplateInput, used: list[str]
) -> tuple[str, HarnessUpdate | None, list[str]]:
    """The first applicable, untried template of `order`: (label, update, names that gave nothing)."""
    n_variant = sum(t.startswith("variant:") for t in used)
    skipped: list[str] = []
    for name, template in order:
        if name == "variant":
            if n_variant > 0:
                n_variant -= 1  # each "variant" slot is one constraint tried
                continue
        elif name in used:
            continue
        p.label = None
        update = template(p)
        if update is None:
            skipped.append(name)
            continue
        return p.label or name, update, skipped
    return "", None, skipped


def rule_proposal(
    event: FailureEvent,
    attribution: Attribution,
    state: HarnessState,
    attempts: list[dict[str, Any]],
    step: int,
    unmet: list[str] | None = None,
    *,
    similar: Sequence[dict[str, Any]] = (),
    signature: str = "",
    signals: RolloutSignals | None = None,
    failed: Sequence[str] = (),
) -> Proposal:
    """The next template's update for this event; `Proposal(update=None)` when none is left.

    `failed`: template labels that failed on this task in earlier rounds and count as tried (a dead task's repair
    ladder, `agents.repair_ladder.skipped_templates`).

    `similar`: cross-task proposal records (memory, `gather_evidence`'s "cross_task"; empty with the memory
    ablation). `signals`: what the task's cached rollouts show (`agents.rollout_signals`); templates size word
    budgets, floors and thresholds from it. A template accepted on a similar case (`similar_case`) is tried first;
    one rejected there `SKIP_AFTER_FAILURES` times and never accepted is skipped. When that evidence changes the
    choice against the default order, the proposal's `evidence_used` names the records that did."""
    task = state.task(event.task_id)
    sig = signals or RolloutSignals()
    p = TemplateInput(event=event, state=state, task=task, step=step, attempts=attempts, unmet=unmet or [], signals=sig)
    used = [*failed, *(a["template"] for a in attempts)]
    default = templates_for(attribution.interface, event.type)
    ev = template_evidence(similar, event, attribution.interface, task.domain, signature)
    label, update, skipped = _first(_ordered(default, ev), p, used)
    if update is None:
        left_out = [n for n, _ in default if ev.skipped(n)]
        return Proposal(
            update=None,
            template="",
            source="rules",
            error=f"no {attribution.interface} template left for {event.type} (tried {used}, not applicable "
            f"{skipped}, skipped after failures on similar cases {left_out})",
        )
    evidence: list[str] = []
    if similar:  # what the default order would have chosen: evidence is recorded only when it changed the choice
        d = TemplateInput(
            event=event, state=state, task=task, step=step, attempts=attempts, unmet=unmet or [], signals=sig
        )
        default_label, _, _ = _first(default, d, used)
        if _family(default_label) != _family(label):
            if ev.promoted(_family(label)):
                evidence += ev.accepted[_family(label)][-3:]
            if default_label and ev.skipped(_family(default_label)):
                evidence += [
                    f"skipped {_family(default_label)}: {line}" for line in ev.rejected[_family(default_label)][-3:]
                ]
    return Proposal(update=update, template=label, rationale=update.rationale, source="rules", evidence_used=evidence)


def render_template(
    label: str, event: FailureEvent, interface: str, state: HarnessState, step: int, unmet: list[str] | None = None
) -> HarnessUpdate | None:
    """Template `label` (as a proposal records it) rendered for `event`'s task, or None when it does not apply.

    This is how an accepted rule repair is re-targeted at a similar task (`agents/generalise.py`). A variant
    label keeps its constraint; any other template is phrased from the new task's own criteria and event.
    """
    family, _, option = label.partition(":")
    template = next((t for name, t in templates_for(interface, event.type) if name == family), None)
    if template is None:
        return None
    p = TemplateInput(
        event=event,
        state=state,
        task=state.task(event.task_id),
        step=step,
        attempts=[],
        unmet=unmet or [],
        constraint=(option or None) if family == "variant" else None,
    )
    return template(p)


# -- LLM brain -------------------------------------------------------------------------------------
def _task_view(task: Task, state: HarnessState) -> dict[str, Any]:
    return {
        "id": task.id,
        "domain": task.domain,
        "prompt": task.user_prompt,
        "criteria": [c.model_dump(mode="json", exclude={"origin"}) for c in task.criteria],
        "guidance": state.guidance_for(task.id).model_dump(mode="json"),
        "sampling": state.sampling[task.id].model_dump(mode="json") if task.id in state.sampling else None,
    }


def _public_critique(critique: dict[str, Any] | None) -> dict[str, Any] | None:
    """The critic's verdict as the proposer may read it: audit-based numbers and reasons withheld."""
    if critique is None:
        return None
    return {**redact(critique), "reasons": redact_reasons(critique.get("reasons", []))}


def llm_proposal(
    llm: BaseChatModel,
    event: FailureEvent,
    attribution: Attribution,
    state: HarnessState,
    attempts: list[dict[str, Any]],
    toolbox: ToolBox | None = None,
    signals: RolloutSignals | None = None,
    fallback: Callable[[], Proposal] | None = None,
) -> Proposal:
    """The LLM's update for this event.

    It reads the task (with what its cached rollouts show: `signals.public()`, criterion ids and snippets, no
    audit score), the event and the critic's public feedback on earlier attempts.

    An LLM that gives no usable answer after its retries (a `BrainError`: server down, no schema-valid answer), or
    answers on another interface than the attribution's, hands the decision to `fallback` (the rule brain: its
    proposal, marked `source="llm_fallback"` with the LLM's `llm_error`); without one, the attempt is invalid."""
    task = state.task(event.task_id)
    feedback = [
        {"template": a["template"], "update": a.get("update"), "critique": _public_critique(a.get("critique"))}
        for a in attempts
    ]
    system = prompts.render(prompts.PROPOSER_SYSTEM, interface=attribution.interface, task_id=task.id)
    user = prompts.render(
        prompts.PROPOSER_USER,
        event=json.dumps(public_event(event)),
        attribution=attribution.model_dump_json(),
        task=json.dumps(
            {**_task_view(task, state), "rollouts": redact((signals or RolloutSignals()).public())}, indent=1
        ),
        feedback=json.dumps(feedback, indent=1) if feedback else "(first attempt)",
    )
    try:
        out = ask_with_tools(llm, ProposalOut, system, user, toolbox, guided=proposal_schema(attribution.interface))
    except BrainError as err:
        return _failed(event, f"LLM proposer failed: {err}", fallback)
    update = out.update.model_copy(update={"event_id": event.id})
    if update.interface != attribution.interface:
        return _failed(
            event, f"LLM proposed on interface {update.interface!r}, attribution is {attribution.interface!r}", fallback
        )
    return Proposal(update=update, template="llm", rationale=out.rationale or update.rationale, source="llm")


def _failed(event: FailureEvent, why: str, fallback: Callable[[], Proposal] | None) -> Proposal:
    if fallback is None:
        log.warning("proposer LLM on %s: %s", event.id, why)
        return Proposal(update=None, template="llm", source="llm", error=why)
    log.warning("proposer LLM on %s: %s; the rule brain proposes instead", event.id, why)
    return fallback().model_copy(update={"source": "llm_fallback", "llm_error": why})
