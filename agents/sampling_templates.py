"""The rule templates of the sampling interface: harder variants of a saturated task, and down-weighting.

A variant is the task's prompt plus one constraint from `rules_bank.CONSTRAINTS` and the matching programmatic
criterion; the sized variants set a word budget from what the policy writes (`TemplateInput.signals`), and a budget
every probe kept to is re-sized from the critic's numbers.
"""

from __future__ import annotations

from agents import rules_bank as bank
from agents.template_input import Template, TemplateInput
from harness.checks import Check, WordCount
from harness.types import (
    AddVariant,
    Criterion,
    HarnessUpdate,
    Message,
    Reweight,
    Task,
)


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


def _harder_variant(p: TemplateInput, name: str, instruction: str, criterion_text: str, check: Check) -> AddVariant:
    """The task's prompt plus `instruction`, with an essential criterion checking it; the parent drawn half as often."""
    taken = set(p.state.tasks) | set(p.state.variants)
    vid = bank.fresh_id(f"{p.task.id}.v{p.state.version + 1}-{name}"[:120], taken)
    prompt = [m.model_copy() for m in p.task.prompt]
    prompt[-1] = Message(role="user", content=f"{prompt[-1].content.rstrip()} {instruction}")
    crit = Criterion(
        id=bank.fresh_id(f"evo-{name}", p.taken_ids),
        text=criterion_text,
        weight=5.0,
        kind="essential",
        check=check,
        origin="evolver:variant",
    )
    weight = p.state.sampling[p.task.id].weight
    return AddVariant(
        task_id=p.task.id,
        variant_id=vid,
        prompt=prompt,
        extra_criteria=[crit],
        weight=weight,
        parent_weight=round(weight * 0.5, 3),
    )


def t_variant(p: TemplateInput) -> HarnessUpdate | None:
    c = _pick_constraint(p)
    if c is None:
        return None
    op = _harder_variant(p, c.name, c.instruction, c.criterion_text, c.check)
    p.label = f"variant:{c.name}"
    return p.update(
        "sampling",
        [op],
        f"saturated task: derive a harder variant ({c.instruction!r})",
        "the variant's group is neither all-0 nor all-1 (std up), the parent is sampled half as often",
    )


def _has_word_budget(task: Task) -> bool:
    """The task already sets a word budget (a word_count with a max): a budget variant would contradict it."""
    return any(isinstance(c.check, WordCount) and c.check.max is not None for c in task.criteria)


def _budget_variant(p: TemplateInput, budget: int, rationale: str) -> HarnessUpdate | None:
    """A harder variant of the task asking for at most `budget` words (an essential word_count criterion)."""
    floor = min(bank.WORD_FLOOR, max(1, budget // 2))
    if budget <= floor:
        return None
    op = _harder_variant(
        p,
        f"words{budget}",
        f"Answer in at most {budget} words.",
        f"Answers within {budget} words",
        WordCount(min=floor, max=budget),
    )
    return p.update("sampling", [op], rationale, "about half the rollouts meet the budget: std up")


def t_variant_sized(p: TemplateInput) -> HarnessUpdate | None:
    """A harder variant whose word budget is the median length of the task's own cached rollouts.

    About half of what the policy writes now would miss it, so the saturated group splits (a fixed budget is
    either always met or never met by short answers).
    """
    if not p.sized or _has_word_budget(p.task):
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


def downweight(factor: float) -> Template:
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
