"""Just-in-time measurement of a candidate harness update on the frozen policy (the critic's numbers).

`measure_candidate(state, update, endpoint, judge, settings)` applies the update to a copy of the harness
(`harness.ops.apply`; an invalid update raises `UpdateRejected`), builds a control group (current
harness) and a candidate group per affected task, scores both with the `Judge` (training criteria)
and the hidden audit criteria, and returns per-group metrics, weighted summaries, deltas, what the
measurement cost (`Cost`) and, when the critic passed its rule, the sequential test (`Sequential`).

**What a group is: the visits the next steps will make.** After a round at step s the next training step
draws its prompts with the sampler at `global_step` s (trainer/sampler.py: the step before its update, the
step the update then becomes s+1), so every prompt is rendered as a visit drawn at s sees it (`harness.guidance`): a
visit is hinted with probability `hinted_share` and then shows the first ceil(fraction * n) hints
of the reveal schedule. A side is therefore one or two *strata* (the hinted prompt, weight
`hinted_share`, and the unhinted prompt, weight 1 - `hinted_share`), each sampled as a group of k
rollouts; the side's mean, std, audit mean, pass rates and leak hits are the strata's values weighted
by visit probability (the std is the expected within-visit std, what a GRPO group's advantage sees;
leak hits are expected per k rollouts). Schedules and fades are thus measured, not just hint texts.

How the two sides are built, per interface:

- **criteria**: prompts do not change, so no rollout needs generating: the candidate rubric
  re-scores the rollouts the task already has — `prior_rollouts` (every cached training group of the task
  in memory, see `tools.probes.task_rollouts`) plus the round's control probes of its most frequent visit
  prompt — and the control rubric scores the same texts (paired: the delta is the rubric's effect alone).
  Fresh control probes are drawn only when that pool is smaller than the look's group size.
- **guidance**: control strata from the current guidance, candidate strata from the candidate's
  (a stratum whose prompt is unchanged reuses the control's rollouts).
- **sampling**: `add_variant` compares the new variant (candidate) with its parent (control);
  reweight/retire/revive do not change any group, so both sides are the same groups under the current
  rubric and the summaries differ by their sampling weights (a retired task has weight 0). Read
  `dead_weight`/`band_weight` (sampling mass on dead / in-band groups) for these: a side whose total
  weight is 0 has undefined shares.

For criteria and guidance updates every group weighs 1. Sampling is batched: one `endpoint.sample`
call per side and look, all affected prompts together, with the same seed on both sides (common
random numbers); a prompt sampled on the control side is reused, never resampled, on the candidate side.

**Adaptive budget (sequential test).** With a `rule` (the critic's acceptance rule on the focus
task's two groups), groups start at `sample_k` rollouts and double up to `sample_k_max` while the
test of the rule is undecided (`tools.sequential`); without a rule one look of `sample_k` is taken.
Fixed budgets: `k=n` sets sample_k = sample_k_max = n. A rule with a `HitTest` (a dead-group repair on a
guidance or sampling candidate) runs the exact hit test, and its control pool is fixed before the first
look: for each control stratum, `control_history` (cached training rollouts keyed by the prompt they were sampled
with, `tools.probes.prompt_rollouts`: the parent's prompts, for a new variant) holds that prompt's own training
rollouts, hinted or not, which are re-scored under the current rubric as its pool, and fresh control probes top a
pool up only when it holds fewer than `CONTROL_FACTOR` * `sample_k_max` rollouts. That top-up is deferred while it
could only raise the test's bounds (`Rollouts.defer_control_top_up`): a candidate that does not pass on the cached
pool is refused on any topped-up one too, and one that passes gets the top-up and is decided again, look by look, as
the topped-up pool decides. A candidate stratum whose prompt is the control's shares that pool. The candidate's
hits are counted on its other strata, and a pass also needs the rule's point estimate to hold.

Probe rollouts are shared by the round's measurements through a `tools.probes.ProbeCache`; what one
measurement cost is a `tools.probes.Cost`. The per-group statistics are `tools.group_metrics`.

Where the parts live: both sides' strata and the pools fixed up front in `tools.candidate_plan`; the rollouts, their
scores and the deferred control top-up in `tools.candidate_rollouts`; one look of the exact hit test and its record
in `tools.hit_test`; the looks, the decision and the `Measurement` here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.ops import apply
from harness.types import HarnessState, HarnessUpdate
from tools.candidate_plan import check_rule, make_plan
from tools.candidate_rollouts import Rollouts
from tools.endpoint import PolicyEndpoint
from tools.group_metrics import GroupMetrics, Summary, group_metrics, summarise
from tools.hit_test import exact_look, exact_record
from tools.judge import Judge, run_sync
from tools.measure_settings import MeasureSettings
from tools.probes import Cost, ProbeBudgetSpent, ProbeCache
from tools.sequential import Decision, Sequential, StopRule, decide, looks, p_pass


class Measurement(BaseModel):
    """Control vs candidate groups of one candidate update (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    interface: str
    task_ids: list[str]
    candidate_version: int
    k: int  # group size per visit prompt at the last look
    seed: int
    step: int
    per_task: dict[str, dict[str, GroupMetrics]]  # task id -> {"control": ..., "candidate": ...}
    weights: dict[str, dict[str, float]]  # task id -> {"control": w, "candidate": w}
    paired: dict[str, bool]  # task id -> both sides scored the same rollouts
    control: Summary
    candidate: Summary
    deltas: dict[str, float | None]  # candidate - control
    judge_failures: int  # LLM verdicts not given after retries + checks that could not decide (timeouts)
    cost: Cost = Field(default_factory=Cost)
    sequential: Sequential | None = None  # None: no rule was given, one look of sample_k

    def compact(self) -> dict:
        """A short JSON-able view for an LLM agent: summaries, deltas, per-task headline numbers, cost."""

        def g(m: GroupMetrics) -> dict:
            return {
                "mean": round(m.mean, 3),
                "std": round(m.std, 3),
                "dead": m.dead,
                "in_band": m.in_band,
                "audit_mean": None if m.audit_mean is None else round(m.audit_mean, 3),
                "length_corr": None if m.length_corr is None else round(m.length_corr, 3),
                "leak_hits": round(m.leak_hits, 3),
                "rewards": [round(r, 3) for r in m.rewards],
            }

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "interface": self.interface,
            "k": self.k,
            "control": {k: r(v) if isinstance(v, float) else v for k, v in self.control.model_dump().items()},
            "candidate": {k: r(v) if isinstance(v, float) else v for k, v in self.candidate.model_dump().items()},
            "deltas": {k: r(v) for k, v in self.deltas.items()},
            "per_task": {t: {side: g(m) for side, m in sides.items()} for t, sides in self.per_task.items()},
            "weights": self.weights,
            "judge_failures": self.judge_failures,
            "cost": self.cost.model_dump(),
            "sequential": None if self.sequential is None else self.sequential.model_dump(),
        }


# -- the measurement ---------------------------------------------------------------------------------------


@dataclass
class _Looks:
    """The sequential test's record: group sizes looked at, p_pass (or the exact test's tail) per look, outcome."""

    sizes: list[int]
    per_look: float
    ks: list[int] = field(default_factory=list)
    ps: list[float] = field(default_factory=list)
    decision: Decision = "undecided"
    hit_record: dict = field(default_factory=dict)


async def _take_looks(ro: Rollouts, rule: StopRule | None, versions: tuple[int, int], exact: bool) -> _Looks:
    """Grow the groups look by look until the rule's test decides or the cap is reached (one look without a rule)."""
    s = ro.settings
    lk = _Looks(sizes=looks(s.sample_k, s.sample_k_max), per_look=0.0)
    lk.per_look = s.alpha / len(lk.sizes)
    rng = np.random.default_rng(s.seed)
    if exact and rule is not None:
        lk.hit_record["spared"] = await ro.defer_control_top_up(rule, lk.sizes, s.alpha)
    for j, n in enumerate(lk.sizes):
        await ro.fill(n)
        await ro.score_all(n)
        lk.ks.append(n)
        if rule is None:
            break
        paired = ro.plan.paired[rule.task_id]
        if exact:
            lk.decision = await _exact_decision(ro, rule, lk, j, versions, paired)
            lk.ps = list(lk.hit_record["tails"])
            lk.per_look = lk.hit_record["plan"].spent[0]
        else:
            p = p_pass(
                rule,
                ro.side_rows("control", rule.task_id),
                ro.side_rows("candidate", rule.task_id),
                paired,
                versions,
                s.detector_config,
                rng,
                s.resamples,
            )
            lk.ps.append(p)
            lk.decision = decide(p, lk.per_look)
        if lk.decision != "undecided":
            break
    return lk


async def _exact_decision(
    ro: Rollouts, rule: StopRule, lk: _Looks, j: int, versions: tuple[int, int], paired: bool
) -> Decision:
    """Look j of the exact hit test.

    While the control top-up is deferred (`Rollouts.defer_control_top_up`) only the hit test is read: its bounds can
    only rise with the top-up, so anything but a pass stands. A pass draws the top-up and decides again from the
    first look on the full control pool, hit test and point rule, as the test would have decided with the top-up
    drawn up front.
    """
    s, focus = ro.settings, [rule.task_id, *rule.pooled]
    deferred, sides, cfg = bool(ro.deferred), ro.plan.sides, s.detector_config
    rows = {t: (ro.side_rows("control", t), ro.side_rows("candidate", t)) for t in focus}
    decision = exact_look(
        rule, sides, rows, lk.sizes, j, s.alpha, lk.hit_record, versions, cfg, paired, point_rule=not deferred
    )
    if decision != "pass" or not deferred:
        return decision
    late = await ro.top_up_deferred(lk.sizes[j])
    lk.hit_record.clear()
    lk.hit_record.update(spared=0, late=late)
    decisions = []
    for i, n in enumerate(lk.sizes[: j + 1]):
        rows = {t: (ro.side_rows("control", t), ro.side_rows("candidate", t, n)) for t in focus}
        decisions.append(exact_look(rule, sides, rows, lk.sizes, i, s.alpha, lk.hit_record, versions, cfg, paired))
    return next((d for d in decisions if d != "undecided"), "undecided")


async def ameasure_candidate(
    state: HarnessState,
    update: HarnessUpdate,
    endpoint: PolicyEndpoint,
    judge: Judge,
    settings: MeasureSettings | None = None,
    *,
    rule: StopRule | None = None,
    prior_rollouts: Mapping[str, Sequence[str]] | None = None,
    control_history: Mapping[str, Sequence[str]] | None = None,
    probe_cache: ProbeCache | None = None,
) -> Measurement:
    """Async `measure_candidate` (the endpoint's blocking `sample` runs in a worker thread)."""
    t0 = time.monotonic()
    s = settings if settings is not None else MeasureSettings()
    candidate_state = apply(state, update, step=s.step)  # UpdateRejected propagates to the caller
    task_ids = update.task_ids
    check_rule(rule, task_ids)
    exact = rule is not None and rule.hits is not None and update.interface != "criteria"
    plan = make_plan(
        state, candidate_state, update, rule, prior_rollouts or {}, control_history or {}, s.step, s.sample_k_max, exact
    )
    ro = Rollouts(plan, task_ids, endpoint, judge, s, probe_cache if probe_cache is not None else ProbeCache())
    if s.max_probe_rollouts is not None:
        need = ro.to_draw(s.sample_k_max)
        if need > s.max_probe_rollouts:
            raise ProbeBudgetSpent(need, s.max_probe_rollouts)
    lk = await _take_looks(ro, rule, (state.version, candidate_state.version), exact)
    return _measurement(update, state, candidate_state, ro, lk, rule, exact, t0)


def _measurement(
    update: HarnessUpdate,
    state: HarnessState,
    candidate_state: HarnessState,
    ro: Rollouts,
    lk: _Looks,
    rule: StopRule | None,
    exact: bool,
    t0: float,
) -> Measurement:
    """Per-task group metrics, the sides' weighted summaries, their deltas, cost and the sequential record."""
    s, task_ids = ro.settings, update.task_ids
    per_task: dict[str, dict[str, GroupMetrics]] = {tid: {} for tid in task_ids}
    for tid in task_ids:
        for side, st in (("control", state), ("candidate", candidate_state)):
            # The control of a new variant is its parent's group: it carries the parent's id.
            per_task[tid][side] = group_metrics(
                ro.plan.sides[side][tid][0].spec.task.id, st.version, ro.side_rows(side, tid), s.detector_config
            )
    summaries = {
        name: summarise([(per_task[t][name], ro.plan.weights[t][name]) for t in task_ids])
        for name in ("control", "candidate")
    }
    c, d = summaries["control"], summaries["candidate"]
    deltas: dict[str, float | None] = {}
    for name in (
        "mean",
        "mean_std",
        "dead_share",
        "band_share",
        "length_corr",
        "audit_mean",
        "leak_hits",
        "dead_weight",
        "band_weight",
    ):
        a, b = getattr(c, name), getattr(d, name)
        deltas[name] = None if a is None or b is None else float(b - a)
    cost = ro.close(lk.ks[-1], t0)
    return Measurement(
        interface=update.interface,
        task_ids=task_ids,
        candidate_version=candidate_state.version,
        k=lk.ks[-1],
        seed=s.seed,
        step=s.step,
        per_task=per_task,
        weights=ro.plan.weights,
        paired=ro.plan.paired,
        control=c,
        candidate=d,
        deltas=deltas,
        judge_failures=ro.judge_failures(),
        cost=cost,
        sequential=None
        if rule is None
        else Sequential(
            alpha=s.alpha,
            alpha_per_look=lk.per_look,
            max_looks=len(lk.sizes),
            ks=lk.ks,
            p_pass=lk.ps,
            resamples=0 if exact else s.resamples,
            decision=lk.decision,
            **exact_record(lk.hit_record),
        ),
    )


def measure_candidate(
    state: HarnessState,
    update: HarnessUpdate,
    endpoint: PolicyEndpoint,
    judge: Judge,
    settings: MeasureSettings | None = None,
    *,
    rule: StopRule | None = None,
    prior_rollouts: Mapping[str, Sequence[str]] | None = None,
    control_history: Mapping[str, Sequence[str]] | None = None,
    probe_cache: ProbeCache | None = None,
) -> Measurement:
    """Measure `update` on the frozen policy: control vs candidate (see the module docstring).

    Budget (`settings`, `MeasureSettings`): groups of `sample_k` rollouts, doubled up to `sample_k_max` while the
    sequential test of `rule` is undecided at overall error rate `alpha` (`k` fixes both sizes). `prior_rollouts`
    (task id -> completions, see `task_rollouts`) are re-scored for criteria updates; `control_history` (prompt
    digest -> training completions, see `prompt_rollouts`) is the exact hit test's control pool (module docstring);
    `probe_cache` shares probe rollouts across the round's measurements. Raises `harness.ops.UpdateRejected` for an
    invalid update, `tools.probes.ProbeBudgetSpent` (before any draw) when the largest look could generate more than
    `settings.max_probe_rollouts`, and `RuntimeError` inside a running event loop (await `ameasure_candidate` there).
    """
    return run_sync(
        ameasure_candidate(
            state,
            update,
            endpoint,
            judge,
            settings,
            rule=rule,
            prior_rollouts=prior_rollouts,
            control_history=control_history,
            probe_cache=probe_cache,
        )
    )
