"""The rule templates of the criteria interface.

Word floors and repetition limits on stuffed or format-only criteria (`all_of`), pitfall criteria, tightening or
loosening blind criteria, graded splits and additions for flat groups, a graded split of a criterion no answer
meets into its full and partial forms, loosening the hardest criterion of an all-low task. Numbers (floors, padding
lengths) are sized from the task's cached rollouts when there are enough, and the partial form is chosen on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from agents import rules_bank as bank
from agents.template_input import MIN_SIGNAL_ROLLOUTS, Template, TemplateInput
from harness.checks import Check, CheckTimeout
from harness.types import (
    AddCriterion,
    AddPitfall,
    Criterion,
    EditCriterion,
    HarnessUpdate,
    ReweightCriterion,
    SplitCriterion,
)


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
    if p.sized and p.signals.length_q25 is not None:
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
    if p.sized:
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


def _halve_weights(p: TemplateInput, halve: Callable[[Criterion], bool], why: str, effect: str) -> HarnessUpdate | None:
    """Halve the weight of the positive criteria `halve` picks, keeping at least one content criterion whole.

    Halving every positive criterion would change nothing: the template does not apply then.
    """
    ops = [
        ReweightCriterion(task_id=p.task.id, criterion_id=c.id, weight=bank._split_weight(c.weight, 2))
        for c in p.task.criteria
        if c.weight > 0 and halve(c) and abs(c.weight) > 0.1
    ]
    if not ops or len(ops) == sum(c.weight > 0 for c in p.task.criteria):
        return None
    return p.update("criteria", ops[:8], why, effect)


def t_reweight_contrast(p: TemplateInput) -> HarnessUpdate | None:
    """Halve the weight of the contrast criteria (as `t_tighten_contrast` finds them), keeping one content criterion."""
    ids = set(p.signals.contrast_criteria)
    return _halve_weights(
        p,
        lambda c: c.id in ids,
        "the criteria that credit gamed rollouts carry less of the reward",
        "gamed rollouts lose reward; the other criteria decide more of the score",
    )


def t_reweight_format(p: TemplateInput) -> HarnessUpdate | None:
    return _halve_weights(
        p,
        bank.is_format_only,
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


def _pass_rate(check: Check, texts: list[str]) -> float | None:
    """The share of `texts` that meet `check`; None when the check cannot decide one of them (a regex timeout)."""
    try:
        return sum(check.evaluate(t) for t in texts) / len(texts)
    except CheckTimeout:
        return None


def t_split_partial(p: TemplateInput) -> HarnessUpdate | None:
    """Split a criterion none of the task's cached answers meets into its full form and a partial form.

    The partial form (`rules_bank.partial_forms`) is chosen on the answers themselves: among the positive criteria
    no answer meets, the form that some answers meet and others miss, with the largest spread it would add to their
    rewards (half the criterion's weight over the rubric's, times the form's pass-rate spread). Nothing when the
    task has fewer cached answers than a group, or no form splits them: a graded part everyone or no one meets
    leaves the groups as dead as before.
    """
    texts = [t for t in p.signals.texts if t]
    if len(texts) < MIN_SIGNAL_ROLLOUTS:
        return None
    positive = sum(c.weight for c in p.task.criteria if c.weight > 0)
    best: tuple[float, Criterion, Check, float] | None = None
    for c in p.task.criteria:
        if c.weight <= 0 or c.check is None or _pass_rate(c.check, texts) != 0.0:
            continue
        for form in bank.partial_forms(c.check):
            rate = _pass_rate(form, texts)
            if rate is None or not 0.0 < rate < 1.0:
                continue
            spread = bank._split_weight(c.weight, 2) / positive * math.sqrt(rate * (1.0 - rate))
            if best is None or spread > best[0]:
                best = (spread, c, form, rate)
    if best is None:
        return None
    _, c, form, rate = best
    parts = bank.partial_split(c, form, p.taken_ids - {c.id})
    return p.update(
        "criteria",
        [SplitCriterion(task_id=p.task.id, criterion_id=c.id, into=parts)],
        f"{p.event.type}: no cached answer meets {c.id}; split it into its full form and a partial form "
        f"{rate:.0%} of them meet",
        "the answers that meet the partial form earn half its credit: group std up",
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
    for c in p.targets(("essential", "important")):
        new = bank.loosened(c.check) if c.check is not None else None
        if new is not None:
            return p.update(
                "criteria",
                [EditCriterion(task_id=p.task.id, criterion_id=c.id, check=new)],
                f"collapse_low: loosen the unmet criterion {c.id}",
                "some rollouts meet it: std up",
            )
    return None
