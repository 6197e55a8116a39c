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
could only raise the test's bounds (`_Rollouts.defer_control_top_up`): a candidate that does not pass on the cached
pool is refused on any topped-up one too, and one that passes gets the top-up and is decided again, look by look, as
the topped-up pool decides. A candidate stratum whose prompt is the control's shares that pool. The candidate's
hits are counted on its other strata, and a pass also needs the rule's point estimate to hold.

Probe rollouts are shared by the round's measurements through a `tools.probes.ProbeCache`; what one
measurement cost is a `tools.probes.Cost`. The per-group statistics are `tools.group_metrics`.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.detector import DetectorConfig
from harness.guidance import prompt_digest, render_prompt, visible_hints
from harness.ops import apply
from harness.types import HarnessState, HarnessUpdate, Hint, Task
from tools.endpoint import PolicyEndpoint
from tools.group_metrics import GroupMetrics, Row, Strata, Summary, group_metrics, score_rows, summarise
from tools.judge import Judge, run_sync
from tools.probes import Cost, ProbeCache, count_tokens
from tools.reward_parts import RewardPart
from tools.sequential import (
    ALPHA,
    BOOTSTRAP,
    Decision,
    ExactPlan,
    Sequential,
    StopRule,
    dead_level,
    decide,
    decide_hits,
    looks,
    null_tail,
    p_pass,
    pooled_plan,
)

# The exact hit test's control pool holds at least this many times the candidate's cap: p0's uncertainty then costs
# about half the power that the candidate's own noise does (with a pool the size of the cap it costs as much).
CONTROL_FACTOR = 2


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


# -- what a side samples -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Spec:
    """A visit prompt to sample and score: a task as one harness version sees it, with the hints shown."""

    task: Task
    hints: tuple[Hint, ...]
    messages: tuple[tuple[str, str], ...]

    @property
    def prompt_key(self) -> str:
        return json.dumps(self.messages)

    @property
    def digest(self) -> str:
        """The key of this prompt's cached training groups (`GroupStats.prompt_digest`)."""
        return prompt_digest([{"role": r, "content": c} for r, c in self.messages])


@dataclass(frozen=True)
class _Stratum:
    weight: float  # probability that a visit sees this prompt
    spec: _Spec


class _HintedVisit(random.Random):
    """The rng of a visit that is hinted whenever hinted_share > 0.

    `visible_hints` then returns what a hinted visit sees, with the schedule logic kept in one place
    (`harness.guidance`).
    """

    def random(self) -> float:
        return 0.0


def _strata(state: HarnessState, task_id: str, step: int) -> list[_Stratum]:
    """The visit prompts of `task_id` at `step` with their probabilities (see the module docstring)."""
    task = state.task(task_id)
    g = state.guidance_for(task_id)
    shown = visible_hints(g, step, _HintedVisit())
    share = g.schedule.hinted_share if shown else 0.0
    out = []
    if share > 0:
        out.append(_Stratum(share, _spec(task, shown, g.schedule.placement)))
    if share < 1:
        out.append(_Stratum(1.0 - share, _spec(task, [], g.schedule.placement)))
    return out


def _spec(task: Task, hints: list[Hint], placement: Literal["user", "system"]) -> _Spec:
    msgs = render_prompt(task, hints, placement)
    return _Spec(task, tuple(hints), tuple((m["role"], m["content"]) for m in msgs))


def _weight(state: HarnessState, task_id: str) -> float:
    s = state.sampling.get(task_id)
    return 0.0 if s is None or s.status != "active" else float(s.weight)


# -- the measurement ---------------------------------------------------------------------------------------
# The default budget, written once: `agents.context.EvolverContext` (the knobs `evolver.sample_k` /
# `evolver.sample_k_max`, with their help) takes its defaults from here, the lowest layer that uses them.
SAMPLE_K = 4  # rollouts per visit prompt and side at the first look
SAMPLE_K_MAX = 16  # the cap the groups double up to while the sequential test is undecided


@dataclass(frozen=True)
class MeasureSettings:
    """How one measurement samples and when it stops: budget, frozen-policy sampling, step, detector thresholds.

    Fixed for a round; `agents.critic.measure_settings` builds it from the graph's context.
    """

    sample_k: int = SAMPLE_K
    sample_k_max: int = SAMPLE_K_MAX
    k: int | None = None  # a fixed budget: sample_k = sample_k_max = k
    alpha: float = ALPHA  # overall error rate of the sequential test
    resamples: int = BOOTSTRAP  # bootstrap resamples per look (the exact hit test needs none)
    max_tokens: int = 48
    temperature: float = 1.0
    seed: int = 0  # both sides sample with it (common random numbers)
    step: int = 0  # the step training paused at: prompts are rendered as the next draw, at this step, sees them
    detector_config: DetectorConfig = field(default_factory=DetectorConfig)
    # The run's parts beside the rubric: probes are scored as training scores its groups (tools.reward_parts).
    reward_parts: tuple[RewardPart, ...] = ()

    def __post_init__(self) -> None:
        if self.k is not None:  # frozen: the fixed budget is resolved once, here
            object.__setattr__(self, "sample_k", self.k)
            object.__setattr__(self, "sample_k_max", self.k)
        if self.sample_k < 2:
            raise ValueError(f"k must be >= 2 to measure a group's spread, got sample_k={self.sample_k}")
        if self.sample_k_max < self.sample_k:
            raise ValueError(f"sample_k_max ({self.sample_k_max}) must be >= sample_k ({self.sample_k})")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")


_Sides = dict[str, dict[str, list[_Stratum]]]  # side ("control"/"candidate") -> task id -> its strata


@dataclass
class _Plan:
    """What each side samples, before any rollout: strata, sampling weights, the pools fixed up front."""

    sides: _Sides
    weights: dict[str, dict[str, float]]  # task id -> side -> sampling weight
    pools_prior: dict[str, list[str]]  # prompt key -> training rollouts re-scored with it (criteria, exact control)
    floor: dict[str, int]  # prompt key -> rollouts its pool holds from the first look (the exact test's control)
    paired: dict[str, bool]  # task id -> both sides score the same rollouts


def _check_rule(rule: StopRule | None, task_ids: list[str]) -> None:
    if rule is not None and rule.task_id not in task_ids:
        raise ValueError(f"rule.task_id {rule.task_id!r} is not among the update's tasks {task_ids}")
    if rule is not None and any(t not in task_ids for t in rule.pooled):
        raise ValueError(f"rule.pooled {list(rule.pooled)} are not all among the update's tasks {task_ids}")


def _plan(
    state: HarnessState,
    candidate_state: HarnessState,
    update: HarnessUpdate,
    rule: StopRule | None,
    prior: Mapping[str, Sequence[str]],
    history: Mapping[str, Sequence[str]],
    settings: MeasureSettings,
    exact: bool,
) -> _Plan:
    """Both sides' strata per affected task (module docstring: how the sides are built, per interface)."""
    criteria = update.interface == "criteria"
    sampling = update.interface == "sampling"
    visit = settings.step  # the next training step draws its prompts at global_step = the pause's step
    plan = _Plan(sides={"control": {}, "candidate": {}}, weights={}, pools_prior={}, floor={}, paired={})
    sides = plan.sides
    for tid in update.task_ids:
        new_variant = not state.has_task(tid)
        # A new variant has no control group of its own: its parent's group is the baseline.
        base_id = candidate_state.task(tid).parent_id if new_variant else tid
        control = _strata(state, base_id, visit)
        if criteria:
            # One pool: the rubric is what changes, not the prompt (module docstring).
            top = max(control, key=lambda s: s.weight)
            sides["control"][tid] = [_Stratum(1.0, top.spec)]
            sides["candidate"][tid] = [
                _Stratum(
                    1.0,
                    _spec(candidate_state.task(tid), list(top.spec.hints), state.guidance_for(tid).schedule.placement),
                )
            ]
            plan.pools_prior.setdefault(top.spec.prompt_key, []).extend(prior.get(tid, []))
        else:
            sides["control"][tid] = control
            sides["candidate"][tid] = _strata(candidate_state, tid, visit)
            if exact and rule is not None and (tid == rule.task_id or tid in rule.pooled):
                # The exact test's control pool is fixed before the first look: each control prompt's cached training
                # rollouts (hinted or not), topped up with fresh probes to CONTROL_FACTOR x the cap (tools.sequential).
                for s in control:
                    pool = plan.pools_prior.setdefault(s.spec.prompt_key, [])
                    if not pool:
                        pool.extend(history.get(s.spec.digest, []))
                    plan.floor[s.spec.prompt_key] = CONTROL_FACTOR * settings.sample_k_max
        if sampling:
            plan.weights[tid] = {
                "control": 0.0 if new_variant else _weight(state, tid),
                "candidate": _weight(candidate_state, tid),
            }
        else:
            plan.weights[tid] = {"control": 1.0, "candidate": 1.0}
    plan.paired = {
        t: [(s.weight, s.spec.prompt_key) for s in sides["control"][t]]
        == [(s.weight, s.spec.prompt_key) for s in sides["candidate"][t]]
        for t in update.task_ids
    }
    return plan


class _Rollouts:
    """Each visit prompt's rollouts and their scores as the looks grow them, and what that cost.

    Rollouts are sampled into the round's probe cache (a pool only ever grows at its end) and scored once each.
    """

    def __init__(
        self,
        plan: _Plan,
        task_ids: list[str],
        endpoint: PolicyEndpoint,
        judge: Judge,
        settings: MeasureSettings,
        cache: ProbeCache,
    ) -> None:
        self.plan, self.task_ids, self.endpoint, self.judge, self.settings, self.cache = (
            plan,
            task_ids,
            endpoint,
            judge,
            settings,
            cache,
        )
        self.cost = Cost()
        self.drawn: dict[str, int] = {}  # prompt key -> probes this measurement generated
        self.scored: dict[tuple[str, str, int], list[Row]] = {}  # (side, task id, stratum index) -> scored rows
        self.deferred: dict[str, int] = {}  # prompt key -> its control pool's floor while the top-up is deferred
        self.judge_calls_before = judge.stats.llm_calls
        self.failures_before = judge.stats.llm_failures + judge.stats.check_failures

    def cache_key(self, prompt_key: str) -> str:
        s = self.settings
        return json.dumps([prompt_key, s.max_tokens, float(s.temperature), s.seed])

    def target(self, prompt_key: str, n: int) -> int:
        return max(n, self.plan.floor.get(prompt_key, 0), len(self.plan.pools_prior.get(prompt_key, [])))

    def pool(self, prompt_key: str, n: int) -> list[str]:
        pri = self.plan.pools_prior.get(prompt_key, [])
        held = self.cache.get(self.settings.step, self.cache_key(prompt_key))
        return pri + held[: self.target(prompt_key, n) - len(pri)]

    async def fill(self, n: int) -> None:
        """Make every prompt's pool hold at least n rollouts: one sample call per side and (need, have)."""
        s, step = self.settings, self.settings.step
        done: set[str] = set()
        for side in ("control", "candidate"):
            todo: dict[tuple[int, int], dict[str, _Spec]] = {}
            for tid in self.task_ids:
                for st in self.plan.sides[side][tid]:
                    key = st.spec.prompt_key
                    if key in done:
                        continue
                    done.add(key)
                    want = self.target(key, n) - len(self.plan.pools_prior.get(key, []))
                    have = len(self.cache.get(step, self.cache_key(key)))
                    if have < want:
                        todo.setdefault((want - have, have), {})[key] = st.spec
            for (need, have), specs in todo.items():
                batch = [[{"role": r, "content": c} for r, c in spec.messages] for spec in specs.values()]
                # The seed moves with the texts already held: an extension draws new samples, and both sides
                # extend with the same seed (common random numbers).
                out = await asyncio.to_thread(
                    self.endpoint.sample,
                    batch,
                    n=need,
                    max_tokens=s.max_tokens,
                    temperature=s.temperature,
                    seed=s.seed + have,
                )
                if len(out) != len(batch) or any(len(o) != need for o in out):
                    raise RuntimeError(
                        f"endpoint returned {[len(o) for o in out]} completions for {len(batch)} prompts x n={need}"
                    )
                self.cost.sample_calls += 1
                for key, texts in zip(specs, out):
                    self.cache.extend(step, self.cache_key(key), have, texts)
                    self.drawn[key] = self.drawn.get(key, 0) + len(texts)
                    tokens, self.cost.tokens_by = count_tokens(self.endpoint, list(texts))
                    self.cost.probe_tokens += tokens
                    self.cost.probe_rollouts += len(texts)

    async def _score(self, spec: _Spec, texts: list[str]) -> list[Row]:
        return await score_rows(
            spec.task,
            spec.hints,
            texts,
            self.judge,
            self.settings.detector_config,
            parts=self.settings.reward_parts,
            messages=[{"role": r, "content": c} for r, c in spec.messages],
        )

    async def score_all(self, n: int) -> None:
        """Score the rollouts each stratum gained since the last look (a pool only ever grows at its end)."""
        jobs = []
        for side in ("control", "candidate"):
            for tid in self.task_ids:
                for i, s in enumerate(self.plan.sides[side][tid]):
                    texts = self.pool(s.spec.prompt_key, n)
                    rows = self.scored.setdefault((side, tid, i), [])
                    if len(texts) > len(rows):
                        jobs.append((rows, self._score(s.spec, texts[len(rows) :])))
        for (rows, _), new in zip(jobs, await asyncio.gather(*(j for _, j in jobs))):
            rows.extend(new)
            self.cost.scored_rollouts += len(new)

    async def defer_control_top_up(self, rule: StopRule, sizes: list[int], alpha: float) -> int:
        """Defer the exact test's fresh control probes while a top-up could only raise the test's bounds.

        Control rollouts without a hit narrow p0's posterior downwards and lower the bounds; each control hit raises
        them. So when the plan from the free pools (cached training rollouts and probes already drawn this round)
        equals the plan from pools topped up without a single hit, every top-up gives bounds at least as high: a
        candidate that does not pass on the free pools would not pass on the topped-up ones either, and no top-up is
        drawn for it. One that passes gets its top-up then (`top_up_deferred`) and is decided again on the full pool,
        hit test and point rule, as if the top-up had been drawn first: the point rule's "std up" needs fresh control
        rollouts, since a pool that is only the group which flagged the task has std 0. Applies when every focus
        control prompt already holds at least the largest look and no counted candidate stratum shares a control
        prompt; returns the fresh control probes deferred (0: the top-up is drawn up front).
        """
        assert rule.hits is not None
        now: list[tuple[int, int, int]] = []
        best: list[tuple[int, int, int]] = []
        floors: dict[str, int] = {}
        for t in [rule.task_id, *rule.pooled]:
            strata = self.plan.sides["control"][t]
            pools = [self.pool(st.spec.prompt_key, 0) for st in strata]
            keys = {st.spec.prompt_key for st in strata}
            changed = _changed(self.plan.sides, t)
            counted = [self.plan.sides["candidate"][t][i].spec.prompt_key for i in changed]
            if any(len(p) < sizes[-1] for p in pools) or keys.intersection(counted):
                return 0
            rows = await asyncio.gather(*(self._score(st.spec, p) for st, p in zip(strata, pools)))
            for i, r in enumerate(rows):
                self.scored[("control", t, i)] = list(r)
                self.cost.scored_rollouts += len(r)
            rewards = [row.reward for r in rows for row in r]
            level = dead_level(rewards)
            x0 = sum(rule.hits.is_hit(x, level, self.settings.detector_config.eps) for x in rewards)
            full = sum(max(len(p), self.plan.floor.get(st.spec.prompt_key, 0)) for st, p in zip(strata, pools))
            now.append((x0, len(rewards), len(changed)))
            best.append((x0, full, len(changed)))
            floors.update({st.spec.prompt_key: len(p) for st, p in zip(strata, pools)})
        gain = rule.hits.min_rate_gain
        a, b = pooled_plan(now, sizes, alpha, alpha, gain), pooled_plan(best, sizes, alpha, alpha, gain)
        deferred = sum(b_[1] - n_[1] for n_, b_ in zip(now, best))
        if deferred == 0 or (a.pass_at, a.fail_at) != (b.pass_at, b.fail_at):
            return 0
        self.deferred = {key: self.plan.floor[key] for key in floors}
        self.plan.floor.update(floors)
        return deferred

    async def top_up_deferred(self, n: int) -> int:
        """Draw and score the deferred control top-up (the look's group size is n); returns the rollouts drawn."""
        before = self.cost.probe_rollouts
        self.plan.floor.update(self.deferred)
        self.deferred = {}
        await self.fill(n)
        await self.score_all(n)
        return self.cost.probe_rollouts - before

    def side_rows(self, side: str, tid: str, n: int | None = None) -> Strata:
        """A side's scored strata; with n, each cut to the pool it had at group size n (an earlier look)."""
        return [
            (
                s.weight,
                bool(s.spec.hints),
                self.scored[(side, tid, i)][: None if n is None else len(self.pool(s.spec.prompt_key, n))],
            )
            for i, s in enumerate(self.plan.sides[side][tid])
        ]

    def close(self, k: int, t0: float) -> Cost:
        """The measurement's cost once its last look (group size k) is taken."""
        used = {
            s.spec.prompt_key: len(self.pool(s.spec.prompt_key, k))
            for side in self.plan.sides.values()
            for ss in side.values()
            for s in ss
        }
        self.cost.reused_rollouts = sum(max(0, n - self.drawn.get(key, 0)) for key, n in used.items())
        self.cost.judge_calls = self.judge.stats.llm_calls - self.judge_calls_before
        self.cost.seconds = round(time.monotonic() - t0, 3)
        return self.cost

    def judge_failures(self) -> int:
        return self.judge.stats.llm_failures + self.judge.stats.check_failures - self.failures_before


@dataclass
class _Looks:
    """The sequential test's record: group sizes looked at, p_pass (or the exact test's tail) per look, outcome."""

    sizes: list[int]
    per_look: float
    ks: list[int] = field(default_factory=list)
    ps: list[float] = field(default_factory=list)
    decision: Decision = "undecided"
    hit_record: dict = field(default_factory=dict)


async def _take_looks(ro: _Rollouts, rule: StopRule | None, versions: tuple[int, int], exact: bool) -> _Looks:
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
    ro: _Rollouts, rule: StopRule, lk: _Looks, j: int, versions: tuple[int, int], paired: bool
) -> Decision:
    """Look j of the exact hit test.

    While the control top-up is deferred (`_Rollouts.defer_control_top_up`) only the hit test is read: its bounds can
    only rise with the top-up, so anything but a pass stands. A pass draws the top-up and decides again from the
    first look on the full control pool, hit test and point rule, as the test would have decided with the top-up
    drawn up front.
    """
    s, focus = ro.settings, [rule.task_id, *rule.pooled]
    deferred, sides, cfg = bool(ro.deferred), ro.plan.sides, s.detector_config
    rows = {t: (ro.side_rows("control", t), ro.side_rows("candidate", t)) for t in focus}
    decision = _exact_look(
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
        decisions.append(_exact_look(rule, sides, rows, lk.sizes, i, s.alpha, lk.hit_record, versions, cfg, paired))
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
    _check_rule(rule, task_ids)
    exact = rule is not None and rule.hits is not None and update.interface != "criteria"
    plan = _plan(state, candidate_state, update, rule, prior_rollouts or {}, control_history or {}, s, exact)
    ro = _Rollouts(plan, task_ids, endpoint, judge, s, probe_cache if probe_cache is not None else ProbeCache())
    lk = await _take_looks(ro, rule, (state.version, candidate_state.version), exact)
    return _measurement(update, state, candidate_state, ro, lk, rule, exact, t0)


def _measurement(
    update: HarnessUpdate,
    state: HarnessState,
    candidate_state: HarnessState,
    ro: _Rollouts,
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
            **_exact_record(lk.hit_record),
        ),
    )


def _changed(sides: _Sides, t: str) -> list[int]:
    """Task t's candidate strata whose prompt its control does not share (all of them when it shares every one)."""
    shared = {s.spec.prompt_key for s in sides["control"][t]}
    cand = sides["candidate"][t]
    return [i for i, s in enumerate(cand) if s.spec.prompt_key not in shared] or list(range(len(cand)))


def _exact_look(
    rule: StopRule,
    sides: dict[str, dict[str, list[_Stratum]]],
    rows: dict[str, tuple[Strata, Strata]],
    sizes: list[int],
    j: int,
    alpha: float,
    rec: dict,
    versions: tuple[int, int],
    cfg: DetectorConfig,
    paired: bool,
    point_rule: bool = True,
) -> Decision:
    """One look of the exact hit test (tools.sequential).

    The plan is fixed at the first look from the control pools of the focus task and any pooled ones; each one's hits
    are counted against its own dead level, on the candidate strata whose prompt its control does not share (else on
    all of them). A pass also needs the rule's point estimate to hold, unless `point_rule` is off.
    """
    assert rule.hits is not None
    test = rule.hits
    if j == 0:
        rec.update(levels={}, changed={}, controls=[], hits=[], trials=[], tails=[], direction=test.direction)
        for t, (c_rows, _) in rows.items():
            rewards = [r.reward for _, _, rr in c_rows for r in rr]
            rec["levels"][t] = level = dead_level(rewards)
            rec["changed"][t] = _changed(sides, t)
            rec["controls"].append(
                (sum(test.is_hit(r, level, cfg.eps) for r in rewards), len(rewards), len(rec["changed"][t]))
            )
        rec["x0"], rec["n0"] = sum(c[0] for c in rec["controls"]), sum(c[1] for c in rec["controls"])
        rec["plan"] = pooled_plan(rec["controls"], sizes, alpha, alpha, test.min_rate_gain)
    plan: ExactPlan = rec["plan"]
    x = n = 0
    for t, (_, d_rows) in rows.items():
        rewards = [r.reward for i in rec["changed"][t] for r in d_rows[i][2]]
        x += sum(test.is_hit(r, rec["levels"][t], cfg.eps) for r in rewards)
        n += len(rewards)
    rec["hits"].append(x)
    rec["trials"].append(n)
    rec["tails"].append(round(null_tail(rec["x0"], rec["n0"], n, x), 6))
    decision = decide_hits(plan, j, x)
    if decision == "pass" and point_rule:
        # Crossing the bound is not enough: the focus candidate must also meet the point rule
        # (not dead, std gain, guards).
        c_rows, d_rows = rows[rule.task_id]
        gc = group_metrics(rule.task_id, versions[0], c_rows, cfg, full=False)
        gd = group_metrics(rule.task_id, versions[1], d_rows, cfg, full=False)
        if not rule.holds(gc, gd, paired):
            decision = "undecided"
    return decision


def _exact_record(rec: dict) -> dict:
    if not rec:
        return {}
    plan: ExactPlan = rec["plan"]
    taken = len(rec["hits"])
    return {
        "test": "exact",
        "hits": rec["hits"],
        "trials": rec["trials"],
        "pass_at": plan.pass_at[:taken],
        "fail_at": plan.fail_at[:taken],
        "control_hits": rec["x0"],
        "control_n": rec["n0"],
        "control_spared": rec.get("spared", 0),
        "control_late": rec.get("late", 0),
        "level": round(rec["levels"][next(iter(rec["levels"]))], 6),
        "direction": rec["direction"],
        "pooled": list(rec["levels"])[1:],
    }


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
    invalid update and `RuntimeError` inside a running event loop (await `ameasure_candidate` there).
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
