"""The just-in-time critic: measured acceptance rules per failure type, plus an optional LLM review.

`judge_measurement` is the one function that states what counts as a fix: it reads the
`tools.candidate.Measurement` of a candidate and applies the failure type's primary rule and the guards.
`stop_rule` (with `hit_test` and `DEAD_DIRECTION` for dead-group repairs) hands the same rule to
`measure_candidate`'s sequential test (`tools.sequential` states both tests), and every critique carries
the measurement's cost in its numbers (`cost_*`: probe rollouts and tokens, reused rollouts, sample calls,
scored rollouts, judge calls, seconds), so memory and rounds.jsonl record what each proposal cost. How a
candidate is measured, the rules per failure type, the guards, the sequential tests and the free refusal of
a criteria candidate with no effect (`Critique.no_effect`): see docs/DESIGN.md, section 7 ("The critic's
acceptance rules").

Names used here: "focus" is the event's task, or the new variant for an `add_variant`; c = control group,
d = candidate group of the focus task; "gamed" rollouts are those whose hidden audit score is below
`AUDIT_PASS`, "honest" ones at or above it. The guards, each vetoing on the lower confidence bound of a drop,
are `agents/critic_guards.py`.

Batched updates (an accepted repair generalised to similar tasks, `agents/generalise.py`): each target
task brings its own failure event and its own focus group (its new variant for an `add_variant`). The
batch is accepted when (1) no guard fails on any target's groups, nor the judge-failure guard; (2) the
primary rule holds, in aggregate, on a strict majority of the targets; and (3) the sequential test passes:
the lead target's (the first: the one with the most recent evidence), with the hits of every target
repairing a dead group the same way pooled into its exact test (`batch_stop_rule`, `judge_batch`). A
target where the rule did not hold gets the repair with no measured harm (its guards held).

The LLM critic (optional) only reviews candidates that passed and may veto them; it never accepts on its own.
The accept/reject decision itself is made in `agents/decisions.py` (`after_critique`, `batch_accept`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from langchain_core.language_models import BaseChatModel

from agents import prompts
from agents.context import EvolverContext
from agents.critic_guards import AUDIT_PASS, audit_corr, group_guards, mean_or_none, split_by_audit
from agents.llm import BrainError, ToolBox, ask_with_tools
from agents.schemas import Critique, Review
from harness.detector import DetectorConfig
from harness.types import FailureEvent, HarnessUpdate
from harness.visibility import public_event, redact, redact_reasons
from tools.candidate import Measurement
from tools.group_metrics import GroupMetrics
from tools.measure_settings import MeasureSettings
from tools.probes import ProbeBudgetSpent
from tools.reward_parts import parts_from_json
from tools.sequential import Direction, HitTest, Sequential, StopRule

log = logging.getLogger(__name__)

# Dead-group failure types and the way a repairing rollout leaves the dead level (the exact hit test's direction).
DEAD_DIRECTION: dict[str, Direction] = {"collapse_low": "up", "collapse_high": "down", "flat": "off"}


def focus_task(event: FailureEvent, update: HarnessUpdate) -> str:
    """The task whose groups the rule reads: the new variant of an `add_variant`, else the event's task."""
    for op in update.ops:
        if op.op == "add_variant":
            return op.variant_id
    return event.task_id if event.task_id in update.task_ids else update.task_ids[0]


def _focus(event: FailureEvent, update: HarnessUpdate, measurement: Measurement) -> str:
    focus = focus_task(event, update)
    return focus if focus in measurement.per_task else measurement.task_ids[0]


def _control_is_fresh(update: HarnessUpdate, m: Measurement) -> bool:
    """The control group was sampled from the frozen policy in this measurement.

    Not read from cached training rollouts: neither a criteria re-scoring nor the exact hit test (whose control
    pool is the task's history).
    """
    if update.interface == "criteria":
        return False
    return m.sequential is None or m.sequential.test != "exact"


def reproduces(event: FailureEvent, c: GroupMetrics) -> tuple[bool, str]:
    """Whether the control group `c` shows `event`'s failure on the frozen policy now, and the numbers saying so."""
    return _confirmed(event, c)


def _confirmed(event: FailureEvent, c: GroupMetrics) -> tuple[bool, str]:
    t = event.type
    if t in ("collapse_low", "collapse_high", "flat"):
        return c.dead, f"control group dead={c.dead} (std {c.std:.3f})"
    if t == "spurious_length":
        ok = c.length_corr is not None and c.length_corr >= 0.3
        return ok, f"control corr(reward, length)={c.length_corr}"
    if t in ("spurious_audit", "stuffing"):
        gamed, honest = split_by_audit(c)
        g = mean_or_none([c.rewards[i] for i in gamed])
        h = mean_or_none([c.rewards[i] for i in honest])
        ok = g is not None and (h is None or g >= h - 0.05) and g > 0
        return ok, f"control reward of gamed rollouts {g}, honest {h}"
    if t == "blind_criterion":
        rate = c.pass_rates.get(event.criterion_id or "")
        return rate in (0.0, 1.0), f"control pass rate of {event.criterion_id}: {rate}"
    return c.leak_hits > 0, f"control leak hits {c.leak_hits}"


@dataclass
class _Verdict:
    """The failure type's primary rule and the group guards on one (control, candidate) pair."""

    primary: str
    ok: bool
    numbers: dict[str, float | None]
    reasons: list[str]
    guards: list[tuple[bool, str]]


def _rule(
    event: FailureEvent, update: HarnessUpdate, c: GroupMetrics, d: GroupMetrics, paired: bool, ctx: EvolverContext
) -> _Verdict:
    """Primary rule and guards on the focus groups (everything except the measurement-level guards)."""
    std_gain = d.std - c.std
    n: dict[str, float | None] = {
        "control_mean": c.mean,
        "candidate_mean": d.mean,
        "control_std": c.std,
        "candidate_std": d.std,
        "std_gain": std_gain,
        "control_dead": float(c.dead),
        "candidate_dead": float(d.dead),
        "control_leak_hits": float(c.leak_hits),
        "candidate_leak_hits": float(d.leak_hits),
        "control_audit_mean": c.audit_mean,
        "candidate_audit_mean": d.audit_mean,
        "control_length_corr": c.length_corr,
        "candidate_length_corr": d.length_corr,
        "candidate_length_median": float(median(d.lengths)) if d.lengths else None,  # words; sizes a re-sized budget
        "control_audit_corr": audit_corr(c),
        "candidate_audit_corr": audit_corr(d),
    }
    reasons: list[str] = []
    only_reweight = all(op.op in ("reweight", "retire", "revive") for op in update.ops)
    t = event.type
    revives_with_new_groups = t in DEAD_DIRECTION and (
        update.interface == "guidance" or any(op.op == "add_variant" for op in update.ops)
    )
    # A repair that makes new groups passes the exact hit test first (tools/sequential.py): the rate of rollouts that
    # leave the dead level rose beyond noise. Its point rule then asks only that the candidate's group varies at least
    # as much as the control's, not a fixed reward-unit gain: training scales each group's advantages by the group's
    # own std (TRL's default scale_rewards="group", which trainer/grpo.py keeps), so a revived group whose answers
    # differ by one light criterion teaches as much as one whose rewards spread widely. Re-scored or reweighted
    # candidates have no such test and keep `min_std_gain`.
    need = 0.0 if revives_with_new_groups else ctx.min_std_gain
    std_ok = std_gain >= need and not d.dead
    std_why = f"std {c.std:.3f} -> {d.std:.3f} (gain {std_gain:+.3f}, need >= {need}), candidate dead={d.dead}"

    if only_reweight:
        primary, (ok, why) = "confirmed", _confirmed(event, c)
        reasons.append(f"sampling reweight: the failure must hold on the frozen policy now: {why}")
    elif t in ("collapse_low", "flat"):
        primary, ok = "std_gain", std_ok
        reasons.append(std_why)
    elif t == "collapse_high":
        primary, ok = "std_gain", std_ok and d.mean < c.mean
        reasons.append(f"{std_why}; mean {c.mean:.3f} -> {d.mean:.3f} (must fall)")
    elif t == "spurious_length":
        cc, dc = c.length_corr, d.length_corr
        drop = None if cc is None else cc - (dc if dc is not None else 0.0)
        n["length_corr_drop"] = drop
        primary = "length_corr_drop"
        ok = drop is not None and drop >= ctx.min_corr_drop and (not d.dead or c.dead)
        reasons.append(
            f"corr(reward, length) {cc} -> {dc} (drop {drop}, need >= {ctx.min_corr_drop}), candidate dead={d.dead}"
        )
    elif t in ("spurious_audit", "stuffing"):
        gamed, _ = split_by_audit(c if paired else d)
        g_c = mean_or_none([c.rewards[i] for i in split_by_audit(c)[0]])
        g_d = mean_or_none([d.rewards[i] for i in split_by_audit(d)[0]])
        gamed_drop = None if g_c is None or g_d is None else g_c - g_d
        ca, da = n["control_audit_corr"], n["candidate_audit_corr"]
        corr_gain = None if ca is None or da is None else da - ca
        n["gamed_drop"], n["audit_corr_gain"] = gamed_drop, corr_gain
        primary = "gamed_drop"
        # The correlation path never accepts an update that pays the gamed rollouts more: a loosened criterion can
        # raise every reward, honest ones a little more, and lift the correlation while the hack earns more.
        pays_more = gamed_drop is not None and gamed_drop < 0
        ok = (gamed_drop is not None and gamed_drop >= ctx.min_gamed_drop) or (
            corr_gain is not None and corr_gain >= ctx.min_audit_delta and not pays_more
        )
        reasons.append(
            f"reward of gamed rollouts (audit < {AUDIT_PASS}) {g_c} -> {g_d} "
            f"(drop {gamed_drop}, need >= {ctx.min_gamed_drop}); "
            f"corr(reward, audit) {ca} -> {da} (gain {corr_gain}, or need >= {ctx.min_audit_delta}"
            f"{' with no rise in the gamed reward' if pays_more else ''})"
        )
        if not gamed:
            reasons.append("no rollout fails the audit in this measurement: nothing gamed to penalise")
    elif t == "blind_criterion":
        cid = event.criterion_id or ""
        rates = {k: v for k, v in d.pass_rates.items() if k == cid or k.startswith(cid + ".")}
        discriminating = [k for k, v in rates.items() if 0.0 < v < 1.0]
        n["criterion_pass_rate_before"] = c.pass_rates.get(cid)
        n["criterion_discriminating_parts"] = float(len(discriminating))
        primary = "pass_rate_in_band"
        # A criterion that already discriminates under the control is not blind: moving its pass rate around
        # inside (0, 1) repairs nothing, so only a std gain can accept (a false event must not pass on noise).
        blind_now = c.pass_rates.get(cid) in (0.0, 1.0, None)
        ok = (bool(discriminating) and blind_now) or std_ok
        reasons.append(
            f"pass rates of {cid} and its parts under the candidate {rates} (control "
            f"{c.pass_rates.get(cid)}{'' if blind_now else ': already discriminating'}); {std_why}"
        )
    else:  # guidance_leak
        primary, ok = "leak_hits", d.leak_hits < c.leak_hits
        reasons.append(f"leak hits {c.leak_hits:g} -> {d.leak_hits:g} (must fall)")

    guards = group_guards(
        t,
        update,
        c,
        d,
        paired,
        n,
        alpha=ctx.critic_alpha,
        max_audit_drop=ctx.max_audit_drop,
        max_mean_drop=ctx.max_mean_drop,
        revives_with_new_groups=revives_with_new_groups,
        dead_repair=t in DEAD_DIRECTION,
    )
    return _Verdict(primary=primary, ok=ok, numbers=n, reasons=reasons, guards=guards)


def hit_test(event: FailureEvent, update: HarnessUpdate, ctx: EvolverContext) -> HitTest | None:
    """The exact hit test for a dead-group repair that makes new groups (a guidance candidate, an `add_variant`).

    None where the bootstrap test applies (criteria candidates re-score the same rollouts, reweights change none).
    """
    direction = DEAD_DIRECTION.get(event.type)
    makes_groups = update.interface == "guidance" or any(op.op == "add_variant" for op in update.ops)
    if direction is None or not makes_groups:
        return None
    return HitTest(direction=direction, min_rate_gain=ctx.min_rate_gain)


def measure_settings(
    ctx: EvolverContext,
    step: int,
    detector_config: DetectorConfig,
    k: int | None = None,
    probe_left: int | None = None,
) -> MeasureSettings:
    """The critic's measurement settings at `step`: the context's budget and sampling, the run's detector thresholds.

    `k` fixes the budget (the fallback's reproduction probe); `probe_left` caps the rollouts the measurement may
    generate (the lane's share of the round's probe budget, `EvolverContext.probe_budget`; None: no cap).
    """
    return MeasureSettings(
        sample_k=ctx.sample_k,
        sample_k_max=ctx.sample_k_max,
        k=k,
        alpha=ctx.critic_alpha,
        max_tokens=ctx.max_tokens,
        temperature=ctx.temperature,
        seed=ctx.seed,
        step=step,
        detector_config=detector_config,
        reward_parts=parts_from_json(ctx.reward_parts, "reward_parts"),
        max_probe_rollouts=probe_left,
    )


def stop_rule(event: FailureEvent, update: HarnessUpdate, ctx: EvolverContext) -> StopRule:
    """The acceptance rule as `measure_candidate`'s sequential test reads it.

    The primary rule and the group guards on the focus task (the judge-failure guard is the measurement's, not a
    group's).
    """

    def holds(c: GroupMetrics, d: GroupMetrics, paired: bool) -> bool:
        v = _rule(event, update, c, d, paired, ctx)
        return v.ok and all(good for good, _ in v.guards)

    return StopRule(task_id=focus_task(event, update), holds=holds, hits=hit_test(event, update, ctx))


AFFINE_TOL = 1e-6  # rewards are weighted sums of 0/1 verdicts: an exact map leaves only float rounding


def same_advantages(control: Sequence[float], candidate: Sequence[float]) -> bool:
    """Whether `candidate` is an increasing affine map of `control`, rollout by rollout (a * r + b, a > 0).

    Training scales each group's advantages by the group's own std (`scale_rewards="group"` in trainer/grpo.py), and
    (r - mean) / std is unchanged by such a map, so a rubric that scores cached rollouts this way teaches exactly
    what the control teaches, whatever its std: for example a criterion that every rollout meets, or none does,
    reweighted. A control of equal rewards maps only to equal rewards (a dead group stays dead).
    """
    if len(control) != len(candidate) or not control:
        return False
    mc, md = sum(control) / len(control), sum(candidate) / len(candidate)
    vc = sum((x - mc) ** 2 for x in control)
    if vc <= AFFINE_TOL**2:
        return all(abs(y - md) <= AFFINE_TOL for y in candidate)
    a = sum((x - mc) * (y - md) for x, y in zip(control, candidate)) / vc
    return a > AFFINE_TOL and all(abs(y - (md + a * (x - mc))) <= AFFINE_TOL for x, y in zip(control, candidate))


def no_effect(m: Measurement, update: HarnessUpdate) -> bool:
    """A criteria candidate that changes no advantage training would compute from the cached rollouts.

    It scores every rollout of every task exactly as the control rubric does, or, when it only reweights criteria,
    as an increasing affine map of it (`same_advantages`). The map test is kept to reweights: they change no verdict,
    so the map they make of a criterion every cached rollout meets (or none does) holds for any rollout that meets it
    likewise. An edit that changes verdicts is judged by its rule even when its pool holds only two distinct
    answers, which any order-keeping edit maps affinely; later groups with more kinds of answers can tell it apart.
    """
    if m.interface != "criteria" or not m.per_task:
        return False
    reweights = all(op.op == "reweight_criterion" for op in update.ops)
    return all(
        m.paired.get(t)
        and (
            same_advantages(sides["control"].rewards, sides["candidate"].rewards)
            if reweights
            else sides["control"].rewards == sides["candidate"].rewards
        )
        for t, sides in m.per_task.items()
    )


def _sequential_why(s: Sequential) -> str:
    if s.test == "exact":
        return (
            f"exact hit test {s.decision} at k={s.ks[-1]} (looks {s.ks}): candidate hits {s.hits} of {s.trials} "
            f"({s.direction} of the dead level {s.level}), pass bounds {s.pass_at}, futility bounds {s.fail_at}; "
            f"control {s.control_hits} of {s.control_n} pooled rollouts"
            + (
                f" ({s.control_spared} fresh control probes not drawn: the candidate did not pass without them, and a"
                " top-up only raises the bounds)"
                if s.control_spared
                else ""
            )
            + (
                f" ({s.control_late} fresh control probes drawn once the candidate passed without them, then decided"
                " again)"
                if s.control_late
                else ""
            )
            + f"; alpha {s.alpha} spent over the looks"
        )
    p = s.p_pass[-1] if s.p_pass else None
    return (
        f"sequential test {s.decision} at k={s.ks[-1]} (looks {s.ks}, cap {s.max_looks} looks): the rule held in "
        f"{p} of {s.resamples} bootstrap resamples; accepting needs >= {1 - s.alpha_per_look:.3f} "
        f"(alpha {s.alpha} over the looks)"
    )


def judge_measurement(event: FailureEvent, update: HarnessUpdate, m: Measurement, ctx: EvolverContext) -> Critique:
    """Apply the failure type's acceptance rule and the guards (docs/DESIGN.md, section 7)."""
    focus = _focus(event, update, m)
    c, d = m.per_task[focus]["control"], m.per_task[focus]["candidate"]
    v = _rule(event, update, c, d, bool(m.paired.get(focus)), ctx)
    n = {**v.numbers, "judge_failures": float(m.judge_failures), "k": float(m.k), **cost_numbers(m)}
    reasons = [f"focus group {focus} (paired={m.paired.get(focus)})", *v.reasons]
    # Whether the control group shows the event's failure on the frozen policy now: the fallback acts only on a
    # failure reproduced on fresh probes, never on the detector's training groups alone (agents/fallback.py). A
    # control read from the task's cached training rollouts (criteria re-scoring, the exact test's pool) says
    # nothing about the frozen policy, so it gives no number and the fallback probes for itself.
    if _control_is_fresh(update, m) and event.task_id in m.per_task:
        reproduced, why_reproduced = _confirmed(event, m.per_task[event.task_id]["control"])
        n["control_reproduced"] = float(reproduced)
        reasons.append(f"failure reproduced on the frozen policy: {reproduced} ({why_reproduced})")
    guards = [(m.judge_failures == 0, f"judge failures during the measurement: {m.judge_failures}"), *v.guards]
    if m.sequential is not None:
        s = m.sequential
        p = s.p_pass[-1] if s.p_pass else None
        n["seq_p_pass"], n["seq_looks"] = p, float(len(s.ks))
        if s.test == "exact":
            n["seq_hits"], n["seq_trials"] = float(s.hits[-1]), float(s.trials[-1])
            n["seq_control_hits"], n["seq_control_n"] = float(s.control_hits or 0), float(s.control_n or 0)
            n["seq_control_spared"], n["seq_control_late"] = float(s.control_spared), float(s.control_late)
        guards.append((s.decision == "pass", _sequential_why(s)))
    if no_effect(m, update):
        rows = sum(len(sides["control"].rewards) for sides in m.per_task.values())
        return Critique(
            failure_type=event.type,
            measured_ok=False,
            primary=v.primary,
            numbers=_finite(n),
            no_effect=True,
            reasons=[
                *reasons,
                f"NO EFFECT: the candidate rubric scores all {rows} cached rollouts as the control does, up to an "
                "increasing affine map that leaves every group's advantages unchanged; refused without costing a "
                "revision",
            ],
        )
    failed = [why for good, why in guards if not good]
    reasons.append(("PASS: " if v.ok else "FAIL: ") + v.primary)
    reasons += [f"guard failed: {why}" for why in failed]
    return Critique(
        failure_type=event.type, measured_ok=v.ok and not failed, primary=v.primary, numbers=_finite(n), reasons=reasons
    )


def cost_numbers(m: Measurement) -> dict[str, float | None]:
    """The measurement's cost as critique numbers (they flow into memory and rounds.jsonl with the rest)."""
    c = m.cost
    return {
        "cost_probe_rollouts": float(c.probe_rollouts),
        "cost_probe_tokens": float(c.probe_tokens),
        "cost_reused_rollouts": float(c.reused_rollouts),
        "cost_sample_calls": float(c.sample_calls),
        "cost_scored_rollouts": float(c.scored_rollouts),
        "cost_judge_calls": float(c.judge_calls),
        "cost_seconds": c.seconds,
    }


def _finite(n: dict[str, float | None]) -> dict[str, float | None]:
    return {k: (None if v is None or not math.isfinite(float(v)) else round(float(v), 4)) for k, v in n.items()}


def invalid_critique(event: FailureEvent, errors: list[str]) -> Critique:
    return Critique(
        failure_type=event.type,
        measured_ok=False,
        primary="valid",
        measured=False,
        invalid=True,
        reasons=[f"invalid candidate: {e}" for e in errors],
    )


def over_budget_critique(event: FailureEvent, err: ProbeBudgetSpent) -> Critique:
    """A candidate the round's probe budget cannot measure: refused before any draw, like `no_effect` for free."""
    return Critique(
        failure_type=event.type,
        measured_ok=False,
        primary="probe_budget",
        measured=False,
        over_budget=True,
        numbers={"budget_need": float(err.need), "budget_left": float(err.left)},
        reasons=[f"NOT MEASURED: {err}; refused without costing a revision"],
    )


def unmeasured_critique(event: FailureEvent) -> Critique:
    """Critic ablation (`critic=False`): every valid proposal passes, with no numbers."""
    return Critique(
        failure_type=event.type,
        measured_ok=True,
        primary="none",
        measured=False,
        reasons=["critic disabled (ablation): valid candidates are accepted unmeasured"],
    )


REVIEW_FAILED = "LLM review failed"  # how a failed review starts: the rule critic's measured verdict stands alone


def review_brain(asked: bool, critique: Critique) -> str:
    """Which brain made the critic's decision.

    "rules" (no LLM review asked), "llm" (the review answered) or "llm_fallback" (asked, it failed after its
    retries: the measured verdict of the rule critic stands).
    """
    if not asked:
        return "rules"
    return "llm_fallback" if critique.review.startswith(REVIEW_FAILED) else "llm"


def llm_review(
    llm: BaseChatModel, event: FailureEvent, update: HarnessUpdate, critique: Critique, toolbox: ToolBox | None = None
) -> Critique:
    """Ask the LLM critic to review a candidate that passed; it can only add a veto and a review.

    Its tools (sample_policy, score_responses) read the frozen policy and the current rubric; it has no
    measurement tool, and nothing it answers can turn a failed measurement into an acceptance."""
    system = prompts.render(prompts.CRITIC_SYSTEM)
    # The review LLM sees the measurement without the hidden audit (harness.visibility).
    user = prompts.render(
        prompts.CRITIC_USER,
        event=json.dumps(public_event(event)),
        update=update.model_dump_json(),
        numbers=json.dumps(redact(critique.numbers)),
        reasons="\n".join(redact_reasons(critique.reasons)),
    )
    try:
        review = ask_with_tools(llm, Review, system, user, toolbox)
    except BrainError as err:
        log.warning("critic LLM review failed on %s: %s; keeping the measured verdict", event.id, err)
        return critique.model_copy(update={"review": f"{REVIEW_FAILED} ({err}); measured verdict kept"})
    return critique.model_copy(update={"veto": review.veto, "review": review.review})


# -- batched updates (an accepted repair generalised to similar tasks) ---------------------------------------------
def batch_focus(events: dict[str, FailureEvent], update: HarnessUpdate) -> dict[str, FailureEvent]:
    """Focus group id -> the event it answers, per target task of a batched update.

    The focus group is the target's new variant for an `add_variant`, else the target itself; in the order of
    `events` (the lead first).
    """
    variants = {op.task_id: op.variant_id for op in update.ops if op.op == "add_variant"}
    return {variants.get(tid, tid): ev for tid, ev in events.items()}


def batch_stop_rule(events: dict[str, FailureEvent], update: HarnessUpdate, ctx: EvolverContext) -> StopRule:
    """The sequential test of a batched update: the lead target's rule.

    An exact hit test pools every target whose failure is repaired in the same direction (the same template on
    tasks with the same failure), the bootstrap test reads the lead alone.
    """
    focus = batch_focus(events, update)
    lead, ev = next(iter(focus.items()))

    def holds(c: GroupMetrics, d: GroupMetrics, paired: bool) -> bool:
        v = _rule(ev, update, c, d, paired, ctx)
        return v.ok and all(good for good, _ in v.guards)

    hits = hit_test(ev, update, ctx)
    pooled = tuple(
        f for f, e in list(focus.items())[1:] if hits is not None and DEAD_DIRECTION.get(e.type) == hits.direction
    )
    return StopRule(task_id=lead, holds=holds, hits=hits, pooled=pooled)


def judge_batch(
    events: dict[str, FailureEvent], update: HarnessUpdate, m: Measurement, ctx: EvolverContext
) -> Critique:
    """The batched rule (module docstring).

    Every guard on every target, the primary rule on a strict majority of targets, the lead's sequential test.
    Numbers: the lead's, plus `batch_targets`, `batch_rule_held`, cost.
    """
    focus = batch_focus(events, update)
    missing = [f for f in focus if f not in m.per_task]
    if missing:
        raise ValueError(f"judge_batch: focus groups {missing} are not in the measurement's tasks {m.task_ids}")
    verdicts = {
        f: _rule(ev, update, m.per_task[f]["control"], m.per_task[f]["candidate"], bool(m.paired.get(f)), ctx)
        for f, ev in focus.items()
    }
    lead = next(iter(verdicts))
    held = [f for f, v in verdicts.items() if v.ok]
    n = {
        **verdicts[lead].numbers,
        "batch_targets": float(len(verdicts)),
        "batch_rule_held": float(len(held)),
        "judge_failures": float(m.judge_failures),
        "k": float(m.k),
        **cost_numbers(m),
    }
    reasons = [f"batched update on {len(verdicts)} similar tasks (lead {lead})"]
    for f, v in verdicts.items():
        reasons.append(
            f"{f} ({focus[f].type}, paired={m.paired.get(f)}): "
            + ("held: " if v.ok else "did not hold: ")
            + f"{v.primary}; "
            + "; ".join(v.reasons)
        )
    guards = [
        (m.judge_failures == 0, f"judge failures during the measurement: {m.judge_failures}"),
        *((good, f"{f}: {why}") for f, v in verdicts.items() for good, why in v.guards),
    ]
    if m.sequential is not None:
        s = m.sequential
        p = s.p_pass[-1] if s.p_pass else None
        n["seq_p_pass"], n["seq_looks"] = p, float(len(s.ks))
        guards.append((s.decision == "pass", f"on the lead {lead}: {_sequential_why(s)}"))
    majority = 2 * len(held) > len(verdicts)
    failed = [why for good, why in guards if not good]
    reasons.append(
        ("PASS: " if majority else "FAIL: ") + f"rule held on {len(held)} of {len(verdicts)} targets "
        "(needs a strict majority)"
    )
    reasons += [f"guard failed: {why}" for why in failed]
    return Critique(
        failure_type=focus[lead].type,
        measured_ok=majority and not failed,
        primary=verdicts[lead].primary,
        numbers=_finite(n),
        reasons=reasons,
    )
