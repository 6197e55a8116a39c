"""The proposer: one minimal `HarnessUpdate` on the attributed interface, revised with the critic's feedback.

Rule brain: an ordered list of templates per (interface, failure type); each attempt on an event
uses the next template not yet tried, and some templates read the critic's last numbers (a variant
that came out dead-low steps to an easier constraint; a tightening that cost honest rollouts too
much reward uses a lower word floor). The templates make real updates:

- sampling: a harder variant of a saturated task (prompt + one constraint from
  `rules_bank.CONSTRAINTS` + the matching programmatic criterion), or a down-weight;
- guidance: hints derived from unmet criteria (phrased from their text and check phrases, never
  containing the reference answer) with a fade-out schedule; for leaks, a faster fade, removing the
  copied hint, or rewording it to the abstract requirement;
- criteria: word floors and repetition limits on stuffed / format-only criteria (`all_of`), pitfall
  criteria, tightening or loosening blind criteria, graded splits of coarse criteria.

Cross-task evidence (rule brain): templates accepted on similar cases of other tasks (same failure type and
interface, same domain or criterion signature; memory proposal records) are tried first, and a template rejected
there repeatedly without a success is skipped; the proposal's `evidence_used` names the records whenever they
changed the choice (`rule_proposal`). `render_template` re-renders an accepted template for another task when
an accepted repair is generalised (`agents/generalise.py`).

LLM brain: the model may first call its tools (current_harness, task_history, similar_cases,
sample_policy, score_responses), then writes the update as JSON; anything that does not parse or names unknown tasks
or criteria becomes `Proposal(update=None, error=...)` that the critic rejects as invalid, so a
hallucinating model costs a revision, never a corrupt harness, and never a sampling change
(`fallback_decision` ignores events whose every attempt was such an answer). The model never sees the
hidden audit: the event and the critic's feedback reach it through `harness.visibility`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict

from agents import prompts, rules_bank as bank
from agents.llm import BrainError, ToolBox, ask_with_tools
from agents.schemas import Attribution, Proposal, ProposalOut
from harness.guidance import hint_leaks_reference
from harness.types import (
    AddCriterion,
    AddHint,
    AddPitfall,
    AddVariant,
    Criterion,
    EditCriterion,
    EditHint,
    FailureEvent,
    HarnessState,
    HarnessUpdate,
    Hint,
    Message,
    Quarantine,
    RemoveHint,
    Retire,
    Reweight,
    ReweightCriterion,
    Schedule,
    SetSchedule,
    SplitCriterion,
    Task,
)
from harness.visibility import public_event, redact, redact_reasons

log = logging.getLogger(__name__)

FADE_STEPS = 100


@dataclass
class _Input:
    event: FailureEvent
    state: HarnessState
    task: Task
    step: int
    attempts: list[dict[str, Any]]
    unmet: list[str] = field(default_factory=list)
    label: str | None = None  # a template that picks among options names the one it used here
    constraint: str | None = None  # re-rendering "variant:<name>" for another task: that constraint, no other

    @property
    def last_numbers(self) -> dict[str, Any]:
        for a in reversed(self.attempts):
            if a.get("critique"):
                return a["critique"].get("numbers", {})
        return {}

    @property
    def last_reasons(self) -> str:
        for a in reversed(self.attempts):
            if a.get("critique"):
                return " ".join(a["critique"].get("reasons", []))
        return ""

    @property
    def taken_ids(self) -> set[str]:
        return {c.id for c in self.task.criteria}

    def update(self, interface: str, ops: list[Any], rationale: str, effect: str) -> HarnessUpdate:
        return HarnessUpdate(interface=interface, ops=ops, rationale=rationale, event_id=self.event.id,  # type: ignore[arg-type]
                             predicted_effect=effect)


Template = Callable[[_Input], HarnessUpdate | None]


# -- sampling --------------------------------------------------------------------------------------
def _pick_constraint(p: _Input) -> bank.Constraint | None:
    if p.constraint is not None:
        return next((c for c in bank.CONSTRAINTS if c.name == p.constraint and not bank.constraint_used(p.task, c)), None)
    tried = {a["template"].split(":", 1)[1] for a in p.attempts if a["template"].startswith("variant:")}
    options = [c for c in bank.CONSTRAINTS if c.name not in tried and not bank.constraint_used(p.task, c)]
    if not options:
        return None
    last = next((c for c in bank.CONSTRAINTS if p.attempts and p.attempts[-1]["template"] == f"variant:{c.name}"), None)
    if last is None:
        return min(options, key=lambda c: abs(c.difficulty - 2))  # start in the middle of the bank
    too_hard = (p.last_numbers.get("candidate_mean") or 0.0) <= 0.1
    # The critic's numbers steer the step: a dead-low variant asks for an easier constraint, a still
    # saturated one for a harder one.
    if too_hard:
        easier = [c for c in options if c.difficulty <= last.difficulty]
        return min(easier or options, key=lambda c: (last.difficulty - c.difficulty) if easier else c.difficulty)
    harder = [c for c in options if c.difficulty >= last.difficulty]
    return min(harder or options, key=lambda c: c.difficulty)


def t_variant(p: _Input) -> HarnessUpdate | None:
    c = _pick_constraint(p)
    if c is None:
        return None
    taken = set(p.state.tasks) | set(p.state.variants)
    vid = bank.fresh_id(f"{p.task.id}.v{p.state.version + 1}-{c.name}"[:120], taken)
    prompt = [m.model_copy() for m in p.task.prompt]
    prompt[-1] = Message(role="user", content=f"{prompt[-1].content.rstrip()} {c.instruction}")
    crit = Criterion(id=bank.fresh_id(f"evo-{c.name}", p.taken_ids), text=c.criterion_text, weight=5.0,
                     kind="essential", check=c.check, origin="evolver:variant")
    weight = p.state.sampling[p.task.id].weight
    op = AddVariant(task_id=p.task.id, variant_id=vid, prompt=prompt, extra_criteria=[crit], weight=weight,
                    parent_weight=round(weight * 0.5, 3))
    p.label = f"variant:{c.name}"
    return p.update("sampling", [op], f"saturated task: derive a harder variant ({c.instruction!r})",
                    "the variant's group is neither all-0 nor all-1 (std up), the parent is sampled half as often")


def _downweight(factor: float) -> Template:
    def t(p: _Input) -> HarnessUpdate | None:
        w = p.state.sampling[p.task.id].weight
        new = round(w * factor, 3)
        if new == w:
            return None
        return p.update("sampling", [Reweight(task_id=p.task.id, weight=new)],
                        f"{p.event.type}: spend fewer rollouts on this task until its reward is repaired",
                        f"sampling weight {w} -> {new}")
    return t


# -- guidance --------------------------------------------------------------------------------------
def _targets(p: _Input, kinds: tuple[str, ...]) -> list[Criterion]:
    pos = [c for c in p.task.criteria if c.weight > 0 and c.kind in kinds]
    unmet = [c for c in pos if c.id in p.unmet] or pos
    return unmet


def _hints(p: _Input, strong: bool, kinds: tuple[str, ...], share: float, mode: str) -> HarnessUpdate | None:
    g = p.state.guidance_for(p.task.id)
    hinted = {h.source for h in g.hints}
    taken = {h.id for h in g.hints}
    ops: list[Any] = []
    for c in _targets(p, kinds):
        if not strong and f"criterion:{c.id}" in hinted:
            continue
        text = bank.safe_hint(c, p.task, strong)
        if text is None or any(h.text == text for h in g.hints):
            continue
        hid = bank.fresh_id(f"h-{c.id}"[:60], taken)
        taken.add(hid)
        ops.append(AddHint(task_id=p.task.id, hint=Hint(id=hid, text=text, source=f"criterion:{c.id}")))
        if len(ops) >= 3:
            break
    if not ops:
        return None
    # Fade-out plan (SmolLM2 spike): hints in the user turn, mixed hinted/unhinted visits, decaying.
    ops.append(SetSchedule(task_id=p.task.id, schedule=Schedule(
        mode=mode, start_step=p.step, end_step=p.step + FADE_STEPS, floor=0.0, hinted_share=share, placement="user")))  # type: ignore[arg-type]
    return p.update("guidance", ops, f"{p.event.type}: show hints for the unmet criteria, fading out",
                    "some hinted rollouts meet the criteria: group std up, no leak of the reference")


def t_hint(p: _Input) -> HarnessUpdate | None:
    return _hints(p, strong=False, kinds=("essential",), share=0.75, mode="linear")


def t_hint_strong(p: _Input) -> HarnessUpdate | None:
    return _hints(p, strong=True, kinds=("essential", "important"), share=1.0, mode="sigmoid")


def t_hint_all(p: _Input) -> HarnessUpdate | None:
    return _hints(p, strong=True, kinds=("essential", "important", "optional"), share=1.0, mode="constant")


def t_leak_fade(p: _Input) -> HarnessUpdate | None:
    g = p.state.guidance_for(p.task.id)
    s = g.schedule
    new = Schedule(mode="linear", start_step=p.step, end_step=p.step + 20, floor=0.0,
                   hinted_share=round(min(s.hinted_share, 1.0) * 0.5, 3), placement=s.placement)
    return p.update("guidance", [SetSchedule(task_id=p.task.id, schedule=new)],
                    "rollouts copy the hint: show it to fewer visits and fade it out fast",
                    "fewer leak hits; the task keeps some signal")


def t_leak_remove(p: _Input) -> HarnessUpdate | None:
    hints = p.state.guidance_for(p.task.id).hints
    if not hints:
        return None
    longest = max(hints, key=lambda h: len(h.text))
    return p.update("guidance", [RemoveHint(task_id=p.task.id, hint_id=longest.id)],
                    f"rollouts copy hint {longest.id!r}: remove it", "no leak hits")


def t_leak_abstract(p: _Input) -> HarnessUpdate | None:
    ops: list[Any] = []
    by_id = {c.id: c for c in p.task.criteria}
    for h in p.state.guidance_for(p.task.id).hints:
        c = by_id.get(h.source.removeprefix("criterion:"))
        text = f"Think about this: {c.text.rstrip('.')}." if c else "Answer in your own words."
        if text != h.text and not hint_leaks_reference(text, p.task.reference_answer):
            ops.append(EditHint(task_id=p.task.id, hint_id=h.id, text=text[:400]))
    if not ops:
        return None
    return p.update("guidance", ops[:8], "rollouts copy the hint: reword hints to the abstract requirement",
                    "no leak hits")


# -- criteria --------------------------------------------------------------------------------------
def _edit_checks(p: _Input, targets: list[Criterion], floor: int, repeat: int | None, why: str) -> HarnessUpdate | None:
    ops: list[Any] = []
    for c in targets:
        new = bank.tightened(c.check, floor, repeat)
        if new != c.check:
            ops.append(EditCriterion(task_id=p.task.id, criterion_id=c.id, check=new))
    if not ops:
        return None
    return p.update("criteria", ops[:8], why, "gamed rollouts lose the credit, honest ones keep it")


def _floor(p: _Input, base: int) -> int:
    # The critic said honest rollouts lost too much reward: take a smaller step.
    return max(3, base // 2) if "honest" in p.last_reasons else base


def _stuffed(p: _Input) -> list[Criterion]:
    if p.event.criterion_id and any(c.id == p.event.criterion_id for c in p.task.criteria):
        return [c for c in p.task.criteria if c.id == p.event.criterion_id]
    return [c for c in p.task.criteria if c.weight > 0 and c.check is not None and c.check.type in ("contains_any", "contains_all")]


def t_tighten_repeat(p: _Input) -> HarnessUpdate | None:
    return _edit_checks(p, _stuffed(p), _floor(p, bank.WORD_FLOOR), bank.REPEAT_LIMIT,
                        "keyword stuffing: the stuffed criterion now also needs real content and no repetition")


def t_tighten_repeat_strict(p: _Input) -> HarnessUpdate | None:
    return _edit_checks(p, _stuffed(p), _floor(p, 12), 2, "keyword stuffing: stricter repetition limit and word floor")


def t_tighten_format(p: _Input) -> HarnessUpdate | None:
    targets = [c for c in p.task.criteria if c.weight > 0 and bank.is_format_only(c)] or _stuffed(p)
    return _edit_checks(p, targets, _floor(p, bank.WORD_FLOOR), None,
                        "credit without content: format-only criteria now need a word floor")


def _pitfall(make: Callable[[set[str]], Criterion], why: str) -> Template:
    def t(p: _Input) -> HarnessUpdate | None:
        crit = make(p.taken_ids)
        if any(c.kind == "pitfall" and c.check == crit.check for c in p.task.criteria):
            return None
        return p.update("criteria", [AddPitfall(task_id=p.task.id, criterion=crit)], why,
                        "gamed rollouts are penalised; honest ones are untouched")
    return t


t_pitfall_repeat = _pitfall(bank.pitfall_repetition, "keyword stuffing: penalise repeated words")
t_pitfall_short = _pitfall(bank.pitfall_too_short, "credit without content: penalise near-empty answers")
t_pitfall_padding = _pitfall(lambda taken: bank.pitfall_padding(taken, 60), "length gaming: penalise padding")


def t_reweight_format(p: _Input) -> HarnessUpdate | None:
    ops = [ReweightCriterion(task_id=p.task.id, criterion_id=c.id, weight=bank._split_weight(c.weight, 2))
           for c in p.task.criteria if c.weight > 0 and bank.is_format_only(c) and abs(c.weight) > 0.1]
    # Halving every positive criterion would change nothing: keep at least one content criterion.
    if not ops or len(ops) == sum(c.weight > 0 for c in p.task.criteria):
        return None
    return p.update("criteria", ops[:8], "format-only criteria carry too much of the reward: halve their weight",
                    "content criteria decide more of the score")


def _blind(p: _Input) -> Criterion | None:
    return next((c for c in p.task.criteria if c.id == p.event.criterion_id), None)


def _always_met(p: _Input) -> bool:
    return float(p.event.stats.get("pass_rate", 1.0)) >= 0.5


def t_blind_edit(p: _Input) -> HarnessUpdate | None:
    c = _blind(p)
    if c is None:
        return None
    if _always_met(p):
        return _edit_checks(p, [c], _floor(p, bank.WORD_FLOOR), bank.REPEAT_LIMIT,
                            f"criterion {c.id} is always met: tighten it with a word floor and a repetition limit")
    if c.check is None:
        return None
    new = bank.loosened(c.check)
    if new is None:
        return None
    return p.update("criteria", [EditCriterion(task_id=p.task.id, criterion_id=c.id, check=new)],
                    f"criterion {c.id} is never met: loosen its check", "the criterion's pass rate moves into (0, 1)")


def t_blind_split(p: _Input) -> HarnessUpdate | None:
    c = _blind(p)
    if c is None:
        return None
    parts = bank.strict_split(c, p.taken_ids - {c.id}, bank.WORD_FLOOR) if _always_met(p) else bank.graded_parts(c, p.taken_ids - {c.id})
    if not parts:
        return None
    return p.update("criteria", [SplitCriterion(task_id=p.task.id, criterion_id=c.id, into=parts)],
                    f"criterion {c.id} is blind: split it so part of it discriminates",
                    "pass rates of the parts differ; group std up")


def t_blind_reweight(p: _Input) -> HarnessUpdate | None:
    c = _blind(p)
    if c is None or c.weight <= 0:
        return None
    new = bank._split_weight(c.weight, 2)
    if new == c.weight:
        return None
    return p.update("criteria", [ReweightCriterion(task_id=p.task.id, criterion_id=c.id, weight=new)],
                    f"criterion {c.id} carries no signal: halve its weight", "other criteria decide more of the score")


def _coarse(p: _Input) -> Criterion | None:
    pos = sorted((c for c in p.task.criteria if c.weight > 0), key=lambda c: -c.weight)
    if p.event.type == "collapse_low":  # the hardest essential first: the unmet one, else the heaviest
        pos = sorted(pos, key=lambda c: (c.id not in p.unmet, -c.weight))
    return next((c for c in pos if bank.graded_parts(c, set()) is not None), None)


def t_split_graded(p: _Input) -> HarnessUpdate | None:
    c = _coarse(p)
    if c is None:
        return None
    parts = bank.graded_parts(c, p.taken_ids - {c.id})
    return p.update("criteria", [SplitCriterion(task_id=p.task.id, criterion_id=c.id, into=parts)],  # type: ignore[arg-type]
                    f"{p.event.type}: split the coarse criterion {c.id} into graded parts",
                    "partial credit per part spreads the scores: group std up")


def t_add_graded(p: _Input) -> HarnessUpdate | None:
    crit = Criterion(id=bank.fresh_id("evo-developed", p.taken_ids), text="Develops the answer with real content (at least 20 words, no repetition)",
                     weight=2.0, kind="important", check=bank.tightened(None, 20, bank.REPEAT_LIMIT), origin="evolver:graded")
    if any(c.check == crit.check for c in p.task.criteria):
        return None
    return p.update("criteria", [AddCriterion(task_id=p.task.id, criterion=crit)],
                    f"{p.event.type}: add a graded content criterion that some rollouts meet and others miss",
                    "group std up")


def t_loosen_hardest(p: _Input) -> HarnessUpdate | None:
    for c in _targets(p, ("essential", "important")):
        new = bank.loosened(c.check) if c.check is not None else None
        if new is not None:
            return p.update("criteria", [EditCriterion(task_id=p.task.id, criterion_id=c.id, check=new)],
                            f"collapse_low: loosen the unmet criterion {c.id}", "some rollouts meet it: std up")
    return None


TEMPLATES: dict[str, dict[str, list[tuple[str, Template]]]] = {
    "sampling": {
        "collapse_high": [("variant", t_variant), ("variant", t_variant), ("variant", t_variant), ("downweight", _downweight(0.5))],
        "*": [("downweight", _downweight(0.5)), ("downweight_more", _downweight(0.25))],
    },
    "guidance": {
        "guidance_leak": [("leak_fade", t_leak_fade), ("leak_abstract", t_leak_abstract), ("leak_remove", t_leak_remove)],
        "*": [("hint", t_hint), ("hint_strong", t_hint_strong), ("hint_all", t_hint_all)],
    },
    "criteria": {
        "stuffing": [("tighten_repeat", t_tighten_repeat), ("pitfall_repeat", t_pitfall_repeat), ("tighten_repeat_strict", t_tighten_repeat_strict)],
        "spurious_length": [("pitfall_padding", t_pitfall_padding), ("tighten_format", t_tighten_format), ("pitfall_short", t_pitfall_short)],
        "spurious_audit": [("tighten_format", t_tighten_format), ("pitfall_short", t_pitfall_short), ("reweight_format", t_reweight_format)],
        "blind_criterion": [("blind_edit", t_blind_edit), ("blind_split", t_blind_split), ("blind_reweight", t_blind_reweight)],
        "flat": [("split_graded", t_split_graded), ("add_graded", t_add_graded), ("tighten_format", t_tighten_format)],
        "collapse_low": [("split_graded", t_split_graded), ("loosen_hardest", t_loosen_hardest)],
        "*": [("add_graded", t_add_graded), ("tighten_format", t_tighten_format), ("pitfall_short", t_pitfall_short)],
    },
}


def templates_for(interface: str, failure_type: str) -> list[tuple[str, Template]]:
    table = TEMPLATES[interface]
    return table.get(failure_type, table["*"])


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
    """A memory proposal counts as a similar case: same failure type and interface, and the same domain or the
    same criterion signature (kind/check type of the event's criterion)."""
    return (record.get("failure_type") == failure_type and record.get("interface") == interface
            and (record.get("domain") == domain or (bool(signature) and record.get("signature") == signature)))


def template_evidence(similar: Sequence[dict[str, Any]], event: FailureEvent, interface: str, domain: str,
                      signature: str) -> _Evidence:
    """Outcomes of the rule templates on similar cases of other tasks (`similar`: memory proposal records as
    `graphs.nodes.gather_evidence` lists them under "cross_task"). Fallbacks and LLM answers carry no template."""
    ev = _Evidence()
    for r in similar:
        label = str(r.get("template") or "")
        if not label or label == "llm" or r.get("task_id") == event.task_id:
            continue
        if not similar_case(r, event.type, interface, domain, signature):
            continue
        line = f"proposal {r['id']} {r['outcome']} on {r['task_id']}: template {label}"
        if r.get("outcome") == "accepted":
            ev.accepted.setdefault(_family(label), []).append(line)
        elif r.get("outcome") in ("rejected", "invalid"):
            ev.rejected.setdefault(_family(label), []).append(line)
    return ev


def _ordered(templates: list[tuple[str, Template]], ev: _Evidence) -> list[tuple[str, Template]]:
    """Templates that succeeded on similar cases first (most successes first, then the default order), then the
    rest in the default order; those that failed repeatedly there and never succeeded are left out."""
    promoted = sorted((t for t in templates if ev.promoted(t[0])), key=lambda t: -len(ev.accepted[t[0]]))
    rest = [t for t in templates if not ev.promoted(t[0]) and not ev.skipped(t[0])]
    return promoted + rest


def _first(order: list[tuple[str, Template]], p: _Input, used: list[str]) -> tuple[str, HarnessUpdate | None, list[str]]:
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


def rule_proposal(event: FailureEvent, attribution: Attribution, state: HarnessState, attempts: list[dict[str, Any]],
                  step: int, unmet: list[str] | None = None, *, similar: Sequence[dict[str, Any]] = (),
                  signature: str = "") -> Proposal:
    """The next template's update for this event; `Proposal(update=None)` when none is left.

    `similar`: cross-task proposal records (memory, `gather_evidence`'s "cross_task"; empty with the memory
    ablation). A template accepted on a similar case (`similar_case`) is tried first; one rejected there
    `SKIP_AFTER_FAILURES` times and never accepted is skipped. When that evidence changes the choice against the
    default order, the proposal's `evidence_used` names the records that did."""
    task = state.task(event.task_id)
    p = _Input(event=event, state=state, task=task, step=step, attempts=attempts, unmet=unmet or [])
    used = [a["template"] for a in attempts]
    default = templates_for(attribution.interface, event.type)
    ev = template_evidence(similar, event, attribution.interface, task.domain, signature)
    label, update, skipped = _first(_ordered(default, ev), p, used)
    if update is None:
        left_out = [n for n, _ in default if ev.skipped(n)]
        return Proposal(update=None, template="", source="rules",
                        error=f"no {attribution.interface} template left for {event.type} (tried {used}, not applicable "
                              f"{skipped}, skipped after failures on similar cases {left_out})")
    evidence: list[str] = []
    if similar:  # what the default order would have chosen: evidence is recorded only when it changed the choice
        d = _Input(event=event, state=state, task=task, step=step, attempts=attempts, unmet=unmet or [])
        default_label, _, _ = _first(default, d, used)
        if _family(default_label) != _family(label):
            if ev.promoted(_family(label)):
                evidence += ev.accepted[_family(label)][-3:]
            if default_label and ev.skipped(_family(default_label)):
                evidence += [f"skipped {_family(default_label)}: {line}" for line in ev.rejected[_family(default_label)][-3:]]
    return Proposal(update=update, template=label, rationale=update.rationale, source="rules", evidence_used=evidence)


def render_template(label: str, event: FailureEvent, interface: str, state: HarnessState, step: int,
                    unmet: list[str] | None = None) -> HarnessUpdate | None:
    """Template `label` (as a proposal records it) rendered for `event`'s task, or None when it does not apply
    there: how an accepted rule repair is re-targeted at a similar task (`agents/generalise.py`). A variant
    label keeps its constraint; any other template is phrased from the new task's own criteria and event."""
    family, _, option = label.partition(":")
    template = next((t for name, t in templates_for(interface, event.type) if name == family), None)
    if template is None:
        return None
    p = _Input(event=event, state=state, task=state.task(event.task_id), step=step, attempts=[], unmet=unmet or [],
               constraint=(option or None) if family == "variant" else None)
    return template(p)


# -- LLM brain -------------------------------------------------------------------------------------
def _task_view(task: Task, state: HarnessState) -> dict[str, Any]:
    return {
        "id": task.id, "domain": task.domain, "prompt": task.user_prompt,
        "criteria": [c.model_dump(mode="json", exclude={"origin"}) for c in task.criteria],
        "guidance": state.guidance_for(task.id).model_dump(mode="json"),
        "sampling": state.sampling[task.id].model_dump(mode="json") if task.id in state.sampling else None,
    }


def _public_critique(critique: dict[str, Any] | None) -> dict[str, Any] | None:
    """The critic's verdict as the proposer may read it: audit-based numbers and reasons withheld."""
    if critique is None:
        return None
    return {**redact(critique), "reasons": redact_reasons(critique.get("reasons", []))}


def llm_proposal(llm: BaseChatModel, event: FailureEvent, attribution: Attribution, state: HarnessState,
                 attempts: list[dict[str, Any]], toolbox: ToolBox | None = None) -> Proposal:
    task = state.task(event.task_id)
    feedback = [{"template": a["template"], "update": a.get("update"), "critique": _public_critique(a.get("critique"))}
                for a in attempts]
    system = prompts.render(prompts.PROPOSER_SYSTEM, interface=attribution.interface, task_id=task.id)
    user = prompts.render(prompts.PROPOSER_USER, event=json.dumps(public_event(event)), attribution=attribution.model_dump_json(),
                          task=json.dumps(_task_view(task, state), indent=1), feedback=json.dumps(feedback, indent=1) if feedback else "(first attempt)")
    try:
        out = ask_with_tools(llm, ProposalOut, system, user, toolbox)
    except BrainError as err:
        log.warning("proposer LLM failed on %s: %s", event.id, err)
        return Proposal(update=None, template="llm", source="llm", error=f"LLM proposer failed: {err}")
    update = out.update.model_copy(update={"event_id": event.id})
    if update.interface != attribution.interface:
        return Proposal(update=None, template="llm", source="llm",
                        error=f"LLM proposed on interface {update.interface!r}, attribution is {attribution.interface!r}")
    return Proposal(update=update, template="llm", rationale=out.rationale or update.rationale, source="llm")


# -- fallback --------------------------------------------------------------------------------------
FALLBACK_MIN_WEIGHT = 0.05  # a fallback never sets weight 0: a weight-0 task leaves training for good
QUARANTINE_STEPS = 4  # one evolver round at the default harness.evolve_every; then the task is drawn again


class Fallback(BaseModel):
    """The fallback's decision for one event: the sampling update to commit (None: leave sampling as it
    is) and why, in words fit for the proposal record and the report."""

    model_config = ConfigDict(extra="forbid")

    update: HarnessUpdate | None
    reason: str


def _measured(attempt: dict[str, Any]) -> bool:
    return bool((attempt.get("critique") or {}).get("measured"))


def fallback_decision(event: FailureEvent, state: HarnessState, attempts: Sequence[dict[str, Any]] | None = None, *,
                      step: int | None = None, quarantine_steps: int = QUARANTINE_STEPS) -> Fallback:
    """The safe sampling change once every candidate for `event` was rejected (docs/DESIGN.md §6).

    No task leaves training through it:

    - only a *confirmed* failure (`event.confirmed`: at least two groups of the detector's window showed
      it) changes sampling; one noisy group never does;
    - `attempts` (the event's candidates, as the graph records them) made only of LLM answers that gave
      no measurable candidate (prose, malformed JSON, a wrong interface) change nothing: a garbage
      answer costs a revision, never a sampling change on its own;
    - collapse_high retires the task only while a harder variant of it is active; otherwise, like
      collapse_low, the weight is halved (never below FALLBACK_MIN_WEIGHT, never 0);
    - every other failure, and a collapse_low task already at the minimum weight, is quarantined until
      `step + quarantine_steps` (`step` defaults to the later of the event's and the harness's step);
      the sampler draws it again from then on with no further update.

    The reason is also the update's rationale, so a committed fallback carries it into the store's log.
    """
    tid = event.task_id
    entry = state.sampling.get(tid)
    if entry is None:
        return Fallback(update=None, reason=f"task {tid!r} has no sampling entry (held-out or unknown): nothing to change")
    if entry.status != "active":
        return Fallback(update=None, reason=f"task {tid!r} is {entry.status}: nothing to change")
    if not event.confirmed:
        return Fallback(update=None, reason=(
            f"{event.type} seen in {event.window_hits} group(s) of the detector window, not confirmed: "
            "one noisy group never changes a task's sampling"))
    if attempts and all(a.get("source") == "llm" and not _measured(a) for a in attempts):
        return Fallback(update=None, reason=(
            f"no candidate was measured: all {len(attempts)} LLM answer(s) were unusable; a garbage answer costs "
            "a revision, never a sampling change"))
    now = step if step is not None else max(event.step, state.step)
    confirmed = f"{event.type} confirmed in {event.window_hits} groups and not repaired"
    variants = state.harder_variants(tid) if event.type == "collapse_high" else []
    half = max(FALLBACK_MIN_WEIGHT, round(entry.weight * 0.5, 3))
    op: Any
    if variants:
        op = Retire(task_id=tid)
        why = f"fallback: {confirmed}; retire the saturated task, its harder variant {variants[0]!r} is active"
    elif event.type in ("collapse_low", "collapse_high") and half < entry.weight:
        op = Reweight(task_id=tid, weight=half)
        why = f"fallback: {confirmed}; halve the task's sampling weight {entry.weight:g} -> {half:g} (it stays in training)"
    else:
        until = now + quarantine_steps
        op = Quarantine(task_id=tid, until_step=until)
        why = f"fallback: {confirmed}; quarantine the task until step {until}, then it is drawn again"
    update = HarnessUpdate(interface="sampling", ops=[op], rationale=why, event_id=event.id,
                           predicted_effect="fewer rollouts spent on the broken task; no task leaves training")
    return Fallback(update=update, reason=why)


def fallback_update(event: FailureEvent, state: HarnessState, attempts: Sequence[dict[str, Any]] | None = None, *,
                    step: int | None = None, quarantine_steps: int = QUARANTINE_STEPS) -> HarnessUpdate | None:
    """`fallback_decision`'s update (its reason is the update's rationale); None when sampling stays as is."""
    return fallback_decision(event, state, attempts, step=step, quarantine_steps=quarantine_steps).update
