"""The rule proposer's templates.

One function per kind of minimal `HarnessUpdate`, ordered per (interface, failure type) in `TEMPLATES`.

Each template reads a `TemplateInput` (the event, the harness, the task, the attempts so far with the
critic's verdicts) and returns an update, or None when it does not apply. The templates make real updates:

- sampling: a harder variant of a saturated task (prompt + one constraint from
  `rules_bank.CONSTRAINTS` + the matching programmatic criterion), or a down-weight;
- guidance: hints derived from unmet criteria (phrased from their text and check phrases, never
  containing the reference answer) with a fade-out schedule; for leaks, a faster fade, removing the
  copied hint, or rewording it to the abstract requirement;
- criteria: word floors and repetition limits on stuffed / format-only criteria (`all_of`), pitfall
  criteria, tightening or loosening blind criteria, graded splits of coarse criteria.

Templates that need a number (a word budget, a floor, a padding length) size it from the task's own cached
rollouts (`TemplateInput.signals`, `agents/rollout_signals.py`) when there are at least `MIN_SIGNAL_ROLLOUTS`,
so the update splits what the policy actually writes; criteria the gamed rollouts meet far more often than the
honest ones (criterion ids only) are the first targets of spurious-reward repairs. Some templates read the
critic's last numbers (a variant that came out dead-low steps to an easier constraint; a word budget every probe
kept to is re-sized to the median the policy writes under it; a tightening that cost honest rollouts too much
reward uses a lower word floor). Which template is tried when is `agents/proposer.py`'s
decision (`rule_proposal`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents import rules_bank as bank
from agents.rollout_signals import RolloutSignals
from harness.checks import WordCount
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
    RemoveHint,
    Reweight,
    ReweightCriterion,
    Schedule,
    SetSchedule,
    SplitCriterion,
    Task,
)

FADE_STEPS = 100


@dataclass
class TemplateInput:
    """What a template reads: the event, the harness and its task, the attempts so far (with the critic's verdicts)."""

    event: FailureEvent
    state: HarnessState
    task: Task
    step: int
    attempts: list[dict[str, Any]]
    unmet: list[str] = field(default_factory=list)
    label: str | None = None  # a template that picks among options names the one it used here
    constraint: str | None = None  # re-rendering "variant:<name>" for another task: that constraint, no other
    signals: RolloutSignals = field(default_factory=RolloutSignals)  # what the task's cached rollouts show

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
        return HarnessUpdate(
            interface=interface,
            ops=ops,
            rationale=rationale,
            event_id=self.event.id,  # type: ignore[arg-type]
            predicted_effect=effect,
        )


Template = Callable[[TemplateInput], HarnessUpdate | None]


# -- sampling --------------------------------------------------------------------------------------
def _pick_constraint(p: TemplateInput) -> bank.Constraint | None:
    if p.constraint is not None:
        return next(
            (c for c in bank.CONSTRAINTS if c.name == p.constraint and not bank.constraint_used(p.task, c)), None
        )
    tried = {a["template"].split(":", 1)[1] for a in p.attempts if a["template"].startswith("variant:")}
    # A harder variant already in training that asks for a constraint makes that constraint taken: a saturated
    # parent drawn again gets a *different* variant (or, none left, the template list's down-weighting).
    siblings = [p.state.task(v) for v in p.state.harder_variants(p.task.id)]
    options = [
        c
        for c in bank.CONSTRAINTS
        if c.name not in tried
        and not bank.constraint_used(p.task, c)
        and not any(bank.constraint_used(v, c) for v in siblings)
    ]
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


def t_variant(p: TemplateInput) -> HarnessUpdate | None:
    c = _pick_constraint(p)
    if c is None:
        return None
    taken = set(p.state.tasks) | set(p.state.variants)
    vid = bank.fresh_id(f"{p.task.id}.v{p.state.version + 1}-{c.name}"[:120], taken)
    prompt = [m.model_copy() for m in p.task.prompt]
    prompt[-1] = Message(role="user", content=f"{prompt[-1].content.rstrip()} {c.instruction}")
    crit = Criterion(
        id=bank.fresh_id(f"evo-{c.name}", p.taken_ids),
        text=c.criterion_text,
        weight=5.0,
        kind="essential",
        check=c.check,
        origin="evolver:variant",
    )
    weight = p.state.sampling[p.task.id].weight
    op = AddVariant(
        task_id=p.task.id,
        variant_id=vid,
        prompt=prompt,
        extra_criteria=[crit],
        weight=weight,
        parent_weight=round(weight * 0.5, 3),
    )
    p.label = f"variant:{c.name}"
    return p.update(
        "sampling",
        [op],
        f"saturated task: derive a harder variant ({c.instruction!r})",
        "the variant's group is neither all-0 nor all-1 (std up), the parent is sampled half as often",
    )


MIN_SIGNAL_ROLLOUTS = 4  # fewer cached rollouts than one group: the sized templates do not apply


def _sized(p: TemplateInput) -> bool:
    return p.signals.n >= MIN_SIGNAL_ROLLOUTS and p.signals.length_median is not None


def _has_word_budget(task: Task) -> bool:
    """The task already sets a word budget (a word_count with a max): a budget variant would contradict it."""
    return any(isinstance(c.check, WordCount) and c.check.max is not None for c in task.criteria)


def _budget_variant(p: TemplateInput, budget: int, rationale: str) -> HarnessUpdate | None:
    """A harder variant of the task asking for at most `budget` words (an essential word_count criterion)."""
    floor = min(bank.WORD_FLOOR, max(1, budget // 2))
    if budget <= floor:
        return None
    taken = set(p.state.tasks) | set(p.state.variants)
    vid = bank.fresh_id(f"{p.task.id}.v{p.state.version + 1}-words{budget}"[:120], taken)
    instruction = f"Answer in at most {budget} words."
    prompt = [m.model_copy() for m in p.task.prompt]
    prompt[-1] = Message(role="user", content=f"{prompt[-1].content.rstrip()} {instruction}")
    crit = Criterion(
        id=bank.fresh_id(f"evo-words{budget}", p.taken_ids),
        text=f"Answers within {budget} words",
        weight=5.0,
        kind="essential",
        check=WordCount(min=floor, max=budget),
        origin="evolver:variant",
    )
    weight = p.state.sampling[p.task.id].weight
    op = AddVariant(
        task_id=p.task.id,
        variant_id=vid,
        prompt=prompt,
        extra_criteria=[crit],
        weight=weight,
        parent_weight=round(weight * 0.5, 3),
    )
    return p.update("sampling", [op], rationale, "about half the rollouts meet the budget: std up")


def t_variant_sized(p: TemplateInput) -> HarnessUpdate | None:
    """A harder variant whose word budget is the median length of the task's own cached rollouts.

    About half of what the policy writes now would miss it, so the saturated group splits (a fixed budget is
    either always met or never met by short answers).
    """
    if not _sized(p) or _has_word_budget(p.task):
        return None
    budget = int(p.signals.length_median)  # type: ignore[arg-type]
    return _budget_variant(
        p,
        budget,
        f"saturated task: a harder variant with a word budget of {budget} (the median "
        f"length of its {p.signals.n} cached rollouts)",
    )


def _kept_budget(p: TemplateInput) -> tuple[int, float] | None:
    """(budget, median words written under it) of this round's last attempt, a word-budget variant every probe met.

    The critic refused it with the variant's group all-high (dead, mean not below the control's)."""
    last = p.attempts[-1] if p.attempts else {}
    if last.get("template") not in ("variant_sized", "variant_resized"):
        return None
    n = (last.get("critique") or {}).get("numbers") or {}
    written = n.get("candidate_length_median")
    if (
        written is None
        or n.get("candidate_dead") != 1.0
        or (n.get("candidate_mean") or 0.0) < (n.get("control_mean") or 0.0)
    ):
        return None
    ops = ((last.get("update") or {}).get("ops")) or []
    budgets = [
        c["check"]["max"]
        for op in ops
        if op.get("op") == "add_variant"
        for c in op.get("extra_criteria", [])
        if (c.get("check") or {}).get("type") == "word_count" and c["check"].get("max") is not None
    ]
    return (int(budgets[0]), float(written)) if budgets else None


def t_variant_resized(p: TemplateInput) -> HarnessUpdate | None:
    """The word-budget variant the policy kept to, re-sized to what it writes under a budget.

    Told to answer in at most the median length of its plain answers, the policy writes shorter: every probe meets
    the budget and the variant's group stays all-high. The median length of the answers it wrote under that budget
    (the critic's probes of this round's last attempt) is the next budget: about half of what it writes under a
    budget misses it.
    """
    kept = _kept_budget(p)
    if kept is None or _has_word_budget(p.task):
        return None
    old, written = kept
    budget = int(written)
    if budget >= old:
        return None
    return _budget_variant(
        p,
        budget,
        f"saturated task: every probe kept to the {old}-word budget (median {written:g} words): a harder variant "
        f"with a budget of {budget}, the median of what the policy writes under a budget",
    )


def _downweight(factor: float) -> Template:
    def t(p: TemplateInput) -> HarnessUpdate | None:
        w = p.state.sampling[p.task.id].weight
        new = round(w * factor, 3)
        if new == w:
            return None
        return p.update(
            "sampling",
            [Reweight(task_id=p.task.id, weight=new)],
            f"{p.event.type}: spend fewer rollouts on this task until its reward is repaired",
            f"sampling weight {w} -> {new}",
        )

    return t


# -- guidance --------------------------------------------------------------------------------------
def _targets(p: TemplateInput, kinds: tuple[str, ...]) -> list[Criterion]:
    pos = [c for c in p.task.criteria if c.weight > 0 and c.kind in kinds]
    unmet = [c for c in pos if c.id in p.unmet] or pos
    return unmet


def _hints(p: TemplateInput, strong: bool, kinds: tuple[str, ...], share: float, mode: str) -> HarnessUpdate | None:
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
    ops.append(
        SetSchedule(
            task_id=p.task.id,
            schedule=Schedule(
                mode=mode,
                start_step=p.step,
                end_step=p.step + FADE_STEPS,
                floor=0.0,
                hinted_share=share,
                placement="user",
            ),
        )
    )  # type: ignore[arg-type]
    return p.update(
        "guidance",
        ops,
        f"{p.event.type}: show hints for the unmet criteria, fading out",
        "some hinted rollouts meet the criteria: group std up, no leak of the reference",
    )


def t_hint(p: TemplateInput) -> HarnessUpdate | None:
    return _hints(p, strong=False, kinds=("essential",), share=0.75, mode="linear")


def t_hint_strong(p: TemplateInput) -> HarnessUpdate | None:
    return _hints(p, strong=True, kinds=("essential", "important"), share=1.0, mode="sigmoid")


def t_hint_all(p: TemplateInput) -> HarnessUpdate | None:
    return _hints(p, strong=True, kinds=("essential", "important", "optional"), share=1.0, mode="constant")


def t_leak_fade(p: TemplateInput) -> HarnessUpdate | None:
    g = p.state.guidance_for(p.task.id)
    s = g.schedule
    new = Schedule(
        mode="linear",
        start_step=p.step,
        end_step=p.step + 20,
        floor=0.0,
        hinted_share=round(min(s.hinted_share, 1.0) * 0.5, 3),
        placement=s.placement,
    )
    return p.update(
        "guidance",
        [SetSchedule(task_id=p.task.id, schedule=new)],
        "rollouts copy the hint: show it to fewer visits and fade it out fast",
        "fewer leak hits; the task keeps some signal",
    )


def t_leak_remove(p: TemplateInput) -> HarnessUpdate | None:
    hints = p.state.guidance_for(p.task.id).hints
    if not hints:
        return None
    longest = max(hints, key=lambda h: len(h.text))
    return p.update(
        "guidance",
        [RemoveHint(task_id=p.task.id, hint_id=longest.id)],
        f"rollouts copy hint {longest.id!r}: remove it",
        "no leak hits",
    )


def t_leak_abstract(p: TemplateInput) -> HarnessUpdate | None:
    ops: list[Any] = []
    by_id = {c.id: c for c in p.task.criteria}
    for h in p.state.guidance_for(p.task.id).hints:
        c = by_id.get(h.source.removeprefix("criterion:"))
        text = f"Think about this: {c.text.rstrip('.')}." if c else "Answer in your own words."
        if text != h.text and not hint_leaks_reference(text, p.task.reference_answer):
            ops.append(EditHint(task_id=p.task.id, hint_id=h.id, text=text[:400]))
    if not ops:
        return None
    return p.update(
        "guidance", ops[:8], "rollouts copy the hint: reword hints to the abstract requirement", "no leak hits"
    )


# -- criteria --------------------------------------------------------------------------------------
def _edit_checks(
    p: TemplateInput, targets: list[Criterion], floor: int, repeat: int | None, why: str
) -> HarnessUpdate | None:
    ops: list[Any] = []
    for c in targets:
        new = bank.tightened(c.check, floor, repeat)
        if new != c.check:
            ops.append(EditCriterion(task_id=p.task.id, criterion_id=c.id, check=new))
    if not ops:
        return None
    return p.update("criteria", ops[:8], why, "gamed rollouts lose the credit, honest ones keep it")


def _floor(p: TemplateInput, base: int) -> int:
    """The word floor of a tightened check.

    The first quartile of the task's cached rollout lengths when there are enough (at most a quarter of what the
    policy writes now falls below it; `base` would be a number short answers always clear or never reach), else
    `base`. The critic said honest rollouts lost too much reward: a smaller step.
    """
    if _sized(p) and p.signals.length_q25 is not None:
        base = max(3, int(p.signals.length_q25))
    return max(3, base // 2) if "honest" in p.last_reasons else base


def _stuffed(p: TemplateInput) -> list[Criterion]:
    if p.event.criterion_id and any(c.id == p.event.criterion_id for c in p.task.criteria):
        return [c for c in p.task.criteria if c.id == p.event.criterion_id]
    return [
        c
        for c in p.task.criteria
        if c.weight > 0 and c.check is not None and c.check.type in ("contains_any", "contains_all")
    ]


def t_tighten_repeat(p: TemplateInput) -> HarnessUpdate | None:
    return _edit_checks(
        p,
        _stuffed(p),
        _floor(p, bank.WORD_FLOOR),
        bank.REPEAT_LIMIT,
        "keyword stuffing: the stuffed criterion now also needs real content and no repetition",
    )


def t_tighten_repeat_strict(p: TemplateInput) -> HarnessUpdate | None:
    return _edit_checks(p, _stuffed(p), _floor(p, 12), 2, "keyword stuffing: stricter repetition limit and word floor")


def t_tighten_format(p: TemplateInput) -> HarnessUpdate | None:
    targets = [c for c in p.task.criteria if c.weight > 0 and bank.is_format_only(c)] or _stuffed(p)
    return _edit_checks(
        p,
        targets,
        _floor(p, bank.WORD_FLOOR),
        None,
        "credit without content: format-only criteria now need a word floor",
    )


def _pitfall(make: Callable[[set[str]], Criterion], why: str) -> Template:
    def t(p: TemplateInput) -> HarnessUpdate | None:
        crit = make(p.taken_ids)
        if any(c.kind == "pitfall" and c.check == crit.check for c in p.task.criteria):
            return None
        return p.update(
            "criteria",
            [AddPitfall(task_id=p.task.id, criterion=crit)],
            why,
            "gamed rollouts are penalised; honest ones are untouched",
        )

    return t


t_pitfall_repeat = _pitfall(bank.pitfall_repetition, "keyword stuffing: penalise repeated words")
t_pitfall_short = _pitfall(bank.pitfall_too_short, "credit without content: penalise near-empty answers")
PADDING_WORDS = 60  # the padding pitfall's length without cached rollouts to size it from


def t_pitfall_padding(p: TemplateInput) -> HarnessUpdate | None:
    """Penalise answers longer than the upper quartile of the task's cached rollout lengths.

    Only when the higher-reward half of them is the longer one (length is what the reward credits);
    `PADDING_WORDS` without rollouts.
    """
    sig = p.signals
    if _sized(p):
        if (sig.high_reward_length or 0.0) <= (sig.low_reward_length or 0.0):
            return None  # the reward does not credit length here: nothing to penalise
        limit = max(bank.WORD_FLOOR, int(sig.length_q75 or PADDING_WORDS))
    else:
        limit = PADDING_WORDS
    return _pitfall(
        lambda taken: bank.pitfall_padding(taken, limit), f"length gaming: penalise answers over {limit} words"
    )(p)


def t_tighten_contrast(p: TemplateInput) -> HarnessUpdate | None:
    """Tighten the training criteria that the task's gamed rollouts meet far more often than its honest ones.

    The criteria are `RolloutSignals.contrast_criteria` (ids only); they get a word floor and a repetition limit
    sized from the rollouts.
    """
    ids = set(p.signals.contrast_criteria)
    targets = [c for c in p.task.criteria if c.id in ids and c.weight > 0]
    return _edit_checks(
        p,
        targets,
        _floor(p, bank.WORD_FLOOR),
        bank.REPEAT_LIMIT,
        f"the criteria {sorted(c.id for c in targets)} credit the rollouts that game the task: they now "
        "also need real content and no repetition",
    )


def t_reweight_contrast(p: TemplateInput) -> HarnessUpdate | None:
    """Halve the weight of the contrast criteria (as `t_tighten_contrast` finds them), keeping one content criterion."""
    ids = set(p.signals.contrast_criteria)
    ops = [
        ReweightCriterion(task_id=p.task.id, criterion_id=c.id, weight=bank._split_weight(c.weight, 2))
        for c in p.task.criteria
        if c.id in ids and c.weight > 0 and abs(c.weight) > 0.1
    ]
    if not ops or len(ops) == sum(c.weight > 0 for c in p.task.criteria):
        return None
    return p.update(
        "criteria",
        ops[:8],
        "the criteria that credit gamed rollouts carry less of the reward",
        "gamed rollouts lose reward; the other criteria decide more of the score",
    )


def t_reweight_format(p: TemplateInput) -> HarnessUpdate | None:
    ops = [
        ReweightCriterion(task_id=p.task.id, criterion_id=c.id, weight=bank._split_weight(c.weight, 2))
        for c in p.task.criteria
        if c.weight > 0 and bank.is_format_only(c) and abs(c.weight) > 0.1
    ]
    # Halving every positive criterion would change nothing: keep at least one content criterion.
    if not ops or len(ops) == sum(c.weight > 0 for c in p.task.criteria):
        return None
    return p.update(
        "criteria",
        ops[:8],
        "format-only criteria carry too much of the reward: halve their weight",
        "content criteria decide more of the score",
    )


def _blind(p: TemplateInput) -> Criterion | None:
    return next((c for c in p.task.criteria if c.id == p.event.criterion_id), None)


def _always_met(p: TemplateInput) -> bool:
    return float(p.event.stats.get("pass_rate", 1.0)) >= 0.5


def t_blind_edit(p: TemplateInput) -> HarnessUpdate | None:
    c = _blind(p)
    if c is None:
        return None
    if _always_met(p):
        return _edit_checks(
            p,
            [c],
            _floor(p, bank.WORD_FLOOR),
            bank.REPEAT_LIMIT,
            f"criterion {c.id} is always met: tighten it with a word floor and a repetition limit",
        )
    if c.check is None:
        return None
    new = bank.loosened(c.check)
    if new is None:
        return None
    return p.update(
        "criteria",
        [EditCriterion(task_id=p.task.id, criterion_id=c.id, check=new)],
        f"criterion {c.id} is never met: loosen its check",
        "the criterion's pass rate moves into (0, 1)",
    )


def t_blind_split(p: TemplateInput) -> HarnessUpdate | None:
    c = _blind(p)
    if c is None:
        return None
    parts = (
        bank.strict_split(c, p.taken_ids - {c.id}, bank.WORD_FLOOR)
        if _always_met(p)
        else bank.graded_parts(c, p.taken_ids - {c.id})
    )
    if not parts:
        return None
    return p.update(
        "criteria",
        [SplitCriterion(task_id=p.task.id, criterion_id=c.id, into=parts)],
        f"criterion {c.id} is blind: split it so part of it discriminates",
        "pass rates of the parts differ; group std up",
    )


def t_blind_reweight(p: TemplateInput) -> HarnessUpdate | None:
    c = _blind(p)
    if c is None or c.weight <= 0:
        return None
    new = bank._split_weight(c.weight, 2)
    if new == c.weight:
        return None
    return p.update(
        "criteria",
        [ReweightCriterion(task_id=p.task.id, criterion_id=c.id, weight=new)],
        f"criterion {c.id} carries no signal: halve its weight",
        "other criteria decide more of the score",
    )


def _coarse(p: TemplateInput) -> Criterion | None:
    pos = sorted((c for c in p.task.criteria if c.weight > 0), key=lambda c: -c.weight)
    if p.event.type == "collapse_low":  # the hardest essential first: the unmet one, else the heaviest
        pos = sorted(pos, key=lambda c: (c.id not in p.unmet, -c.weight))
    return next((c for c in pos if bank.graded_parts(c, set()) is not None), None)


def t_split_graded(p: TemplateInput) -> HarnessUpdate | None:
    c = _coarse(p)
    if c is None:
        return None
    parts = bank.graded_parts(c, p.taken_ids - {c.id})
    return p.update(
        "criteria",
        [SplitCriterion(task_id=p.task.id, criterion_id=c.id, into=parts)],  # type: ignore[arg-type]
        f"{p.event.type}: split the coarse criterion {c.id} into graded parts",
        "partial credit per part spreads the scores: group std up",
    )


def t_add_graded(p: TemplateInput) -> HarnessUpdate | None:
    crit = Criterion(
        id=bank.fresh_id("evo-developed", p.taken_ids),
        text="Develops the answer with real content (at least 20 words, no repetition)",
        weight=2.0,
        kind="important",
        check=bank.tightened(None, 20, bank.REPEAT_LIMIT),
        origin="evolver:graded",
    )
    if any(c.check == crit.check for c in p.task.criteria):
        return None
    return p.update(
        "criteria",
        [AddCriterion(task_id=p.task.id, criterion=crit)],
        f"{p.event.type}: add a graded content criterion that some rollouts meet and others miss",
        "group std up",
    )


def t_loosen_hardest(p: TemplateInput) -> HarnessUpdate | None:
    for c in _targets(p, ("essential", "important")):
        new = bank.loosened(c.check) if c.check is not None else None
        if new is not None:
            return p.update(
                "criteria",
                [EditCriterion(task_id=p.task.id, criterion_id=c.id, check=new)],
                f"collapse_low: loosen the unmet criterion {c.id}",
                "some rollouts meet it: std up",
            )
    return None


# A template that reads the critic's probes of the attempt before it (that attempt's template): a refusal of the
# first followed by an accepted second is one repair in two steps, not a failure of the first on similar cases
# (`agents.proposer.template_evidence`).
BUILDS_ON = {"variant_resized": "variant_sized"}

TEMPLATES: dict[str, dict[str, list[tuple[str, Template]]]] = {
    "sampling": {
        "collapse_high": [
            ("variant_sized", t_variant_sized),
            ("variant_resized", t_variant_resized),
            ("variant", t_variant),
            ("variant", t_variant),
            ("variant", t_variant),
            ("downweight", _downweight(0.5)),
        ],
        "*": [("downweight", _downweight(0.5)), ("downweight_more", _downweight(0.25))],
    },
    "guidance": {
        "guidance_leak": [
            ("leak_fade", t_leak_fade),
            ("leak_abstract", t_leak_abstract),
            ("leak_remove", t_leak_remove),
        ],
        "*": [("hint", t_hint), ("hint_strong", t_hint_strong), ("hint_all", t_hint_all)],
    },
    "criteria": {
        "stuffing": [
            ("tighten_contrast", t_tighten_contrast),
            ("tighten_repeat", t_tighten_repeat),
            ("pitfall_repeat", t_pitfall_repeat),
            ("tighten_repeat_strict", t_tighten_repeat_strict),
        ],
        "spurious_length": [
            ("pitfall_padding", t_pitfall_padding),
            ("tighten_format", t_tighten_format),
            ("pitfall_short", t_pitfall_short),
        ],
        "spurious_audit": [
            ("tighten_contrast", t_tighten_contrast),
            ("reweight_contrast", t_reweight_contrast),
            ("tighten_format", t_tighten_format),
            ("pitfall_short", t_pitfall_short),
            ("reweight_format", t_reweight_format),
        ],
        "blind_criterion": [
            ("blind_edit", t_blind_edit),
            ("blind_split", t_blind_split),
            ("blind_reweight", t_blind_reweight),
        ],
        "flat": [("split_graded", t_split_graded), ("add_graded", t_add_graded), ("tighten_format", t_tighten_format)],
        "collapse_low": [("split_graded", t_split_graded), ("loosen_hardest", t_loosen_hardest)],
        "*": [("add_graded", t_add_graded), ("tighten_format", t_tighten_format), ("pitfall_short", t_pitfall_short)],
    },
}


def templates_for(interface: str, failure_type: str) -> list[tuple[str, Template]]:
    """The default template order for a failure type on an interface (its "*" row when it has none)."""
    table = TEMPLATES[interface]
    return table.get(failure_type, table["*"])
