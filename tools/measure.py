"""Just-in-time measurement of a candidate harness update on the frozen policy (the critic's numbers).

`measure_candidate(state, update, endpoint, judge)` applies the update to a copy of the harness
(`harness.ops.apply`; an invalid update raises `UpdateRejected`), builds a control group (current
harness) and a candidate group per affected task, scores both with the `Judge` (training criteria)
and the hidden audit criteria, and returns per-group metrics, weighted summaries, deltas, what the
measurement cost (`Cost`) and, when the critic passed its rule, the sequential test (`Sequential`).

**What a group is: the visits the next steps will make.** Training resumes at step s+1 after a
round at step s, so every prompt is rendered as a visit at s+1 sees it (`harness.guidance`): a
visit is hinted with probability `hinted_share` and then shows the first ceil(fraction * n) hints
of the reveal schedule. A side is therefore one or two *strata* (the hinted prompt, weight
`hinted_share`, and the unhinted prompt, weight 1 - `hinted_share`), each sampled as a group of k
rollouts; the side's mean, std, audit mean, pass rates and leak hits are the strata's values weighted
by visit probability (the std is the expected within-visit std, what a GRPO group's advantage sees;
leak hits are expected per k rollouts). Schedules and fades are thus measured, not just hint texts.

How the two sides are built, per interface:

- **criteria**: prompts do not change, so no rollout needs generating: the candidate rubric
  re-scores the rollouts the task already has — `prior_rollouts` (its latest training group, see
  `latest_rollouts`) plus the round's control probes of its most frequent visit prompt — and the
  control rubric scores the same texts (paired: the delta is the rubric's effect alone). Fresh
  control probes are drawn only when that pool is smaller than the look's group size.
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
task's two groups, `agents.critic.stop_rule`), groups start at `sample_k` rollouts and double up to
`sample_k_max` while the decision is undecided. At each look the rule is re-evaluated on `BOOTSTRAP`
bootstrap resamples of the rollouts (resampled jointly on both sides when they are paired, within
each stratum otherwise); the share of resamples in which it holds is `p_pass`. The test stops with
"pass" when p_pass >= 1 - alpha/L and with "fail" when p_pass <= alpha/L, L being the number of looks
the budget allows (Bonferroni over looks: the chance that an early stop is on the wrong side of the
rule is at most `alpha`, default `ALPHA` = 0.1, up to the bootstrap's own approximation); at the
cap it is "undecided", which the critic rejects. Without a rule one look of `sample_k` is taken.
Fixed budgets: `k=n` sets sample_k = sample_k_max = n.

**Shared control probes.** Probe rollouts live in a `ProbeCache` keyed by the round's step and the
request (prompt, max_tokens, temperature, seed): pass the round's cache to every measurement of the
round and each prompt is sampled once, then only extended. Without one, a private cache serves this
call alone.

**Cost.** `Cost` counts the rollouts generated for this measurement (cache and training rollouts
excluded: those are `reused_rollouts`), their tokens (the endpoint's tokenizer when it implements
`tools.endpoint.TokenCounter`, else words), the endpoint calls, the rollouts scored, the judge's LLM
requests (the judge's counter moved during the call: lanes measuring concurrently on one judge count
each other's requests) and the wall-clock seconds.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.checks import max_ngram_repeats, words
from harness.detector import REPEAT_NGRAM, DetectorConfig, hint_overlap
from harness.guidance import hint_leaks_reference, render_prompt, visible_hints
from harness.ops import apply
from harness.types import HarnessState, HarnessUpdate, Hint, Task
from tools.endpoint import PolicyEndpoint, TokenCounter
from tools.judge import Judge, run_sync

if TYPE_CHECKING:
    from memory.store import TrainingMemory

EXAMPLE_CHARS = 300
ALPHA = 0.1  # overall error rate of the sequential test's early stops (see the module docstring)
BOOTSTRAP = 400  # resamples per look: the Monte Carlo error of p_pass near 1 - alpha/3 is about 0.01


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupMetrics(_Model):
    """One side's rollouts of one task under one harness: raw per-rollout numbers and the visit-weighted
    summary (one stratum: plain group statistics; two: see the module docstring)."""

    task_id: str
    harness_version: int
    n: int  # rollouts scored, all strata together
    rewards: list[float]
    lengths: list[int]  # words per rollout
    audits: list[float | None]
    mean: float
    std: float  # expected within-visit std
    min: float
    max: float
    dead: bool  # std < eps: zero advantage, the group teaches nothing
    in_band: bool  # tau_lo < mean < tau_hi
    length_corr: float | None  # Spearman(length, reward) within a visit; None when either side is constant
    audit_mean: float | None
    leak_hits: float  # expected hinted rollouts per group that copy a hint (>= leak_overlap of its 4-grams) or the reference
    pass_rates: dict[str, float]
    hinted: bool
    max_repeat: int
    examples: list[str] = Field(default_factory=list)  # best and worst rollout, truncated
    verdicts: list[dict[str, bool]] = Field(default_factory=list)  # per rollout
    leaks: list[bool] = Field(default_factory=list)  # per rollout
    strata: list[int] = Field(default_factory=list)  # per rollout: index of its visit prompt in `stratum_weights`
    stratum_weights: list[float] = Field(default_factory=lambda: [1.0])  # probability of each visit prompt


class Summary(_Model):
    """Weighted summary of one side over the affected groups (weights: see module docstring)."""

    n_groups: int
    weight: float
    mean: float | None
    mean_std: float | None
    dead_share: float | None
    band_share: float | None
    length_corr: float | None
    audit_mean: float | None
    leak_hits: float
    dead_weight: float  # sampling mass on dead groups (absolute, comparable across sides)
    band_weight: float  # sampling mass on in-band groups


class Cost(_Model):
    """What one measurement cost (see the module docstring)."""

    probe_rollouts: int = 0  # generated by the endpoint for this measurement
    probe_tokens: int = 0
    tokens_by: Literal["tokenizer", "words"] = "words"
    reused_rollouts: int = 0  # training rollouts and cached probes used at no generation cost
    sample_calls: int = 0
    scored_rollouts: int = 0  # (text, rubric) pairs scored, both sides
    judge_calls: int = 0
    seconds: float = 0.0


class Sequential(_Model):
    """The sequential test of the critic's rule (see the module docstring)."""

    alpha: float
    alpha_per_look: float
    max_looks: int
    ks: list[int]  # group size (rollouts per visit prompt) at each look taken
    p_pass: list[float]  # share of bootstrap resamples in which the rule held, per look
    resamples: int
    decision: Literal["pass", "fail", "undecided"]


class Measurement(_Model):
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
            return {"mean": round(m.mean, 3), "std": round(m.std, 3), "dead": m.dead, "in_band": m.in_band,
                    "audit_mean": None if m.audit_mean is None else round(m.audit_mean, 3),
                    "length_corr": None if m.length_corr is None else round(m.length_corr, 3),
                    "leak_hits": round(m.leak_hits, 3), "rewards": [round(r, 3) for r in m.rewards]}

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "interface": self.interface, "k": self.k,
            "control": {k: r(v) if isinstance(v, float) else v for k, v in self.control.model_dump().items()},
            "candidate": {k: r(v) if isinstance(v, float) else v for k, v in self.candidate.model_dump().items()},
            "deltas": {k: r(v) for k, v in self.deltas.items()},
            "per_task": {t: {side: g(m) for side, m in sides.items()} for t, sides in self.per_task.items()},
            "weights": self.weights, "judge_failures": self.judge_failures,
            "cost": self.cost.model_dump(),
            "sequential": None if self.sequential is None else self.sequential.model_dump(),
        }


@dataclass(frozen=True)
class StopRule:
    """The critic's acceptance rule on the focus task's groups: `holds(control, candidate, paired)`."""

    task_id: str
    holds: Callable[[GroupMetrics, GroupMetrics, bool], bool]


class ProbeCache:
    """Probe rollouts of one evolver round, shared by every candidate measured in it.

    Keyed by request (prompt, max_tokens, temperature, seed): within a round the policy is frozen, so
    the prompt fixes the distribution whatever task or harness version asked. The round is its step;
    a request at another step starts a new round and drops the old entries, so a cache that outlives
    a round (a long-lived server's services) never serves a stale policy's texts. Thread-safe: the
    evolver measures one lane per task in worker threads.
    """

    def __init__(self) -> None:
        self._step: int | None = None
        self._texts: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def get(self, step: int, key: str) -> list[str]:
        with self._lock:
            return list(self._texts.get(key, [])) if self._step == step else []

    def extend(self, step: int, key: str, have: int, texts: Sequence[str]) -> list[str]:
        """Append `texts`, drawn when the entry held `have` texts; returns the entry now."""
        with self._lock:
            if self._step != step:
                self._step, self._texts = step, {}
            cur = self._texts.setdefault(key, [])
            # Another lane may have extended the same prompt meanwhile: keep its texts, add only what is missing.
            cur.extend(texts[max(0, len(cur) - have):])
            return list(cur)


def latest_rollouts(memory: TrainingMemory, task_ids: Sequence[str]) -> dict[str, list[str]]:
    """The completions of each task's latest training group in memory (`GroupSummary.texts`), for the
    criteria re-scoring; tasks without a stored group are left out."""
    out: dict[str, list[str]] = {}
    for tid in task_ids:
        groups = memory.task_history(tid, last_n=1, kinds=("groups",))
        texts = list(groups[-1].texts) if groups else []  # type: ignore[union-attr]
        if texts:
            out[tid] = texts
    return out


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


@dataclass(frozen=True)
class _Stratum:
    weight: float  # probability that a visit sees this prompt
    spec: _Spec


class _HintedVisit(random.Random):
    """The rng of a visit that is hinted whenever hinted_share > 0: `visible_hints` then returns what a
    hinted visit sees, with the schedule logic kept in one place (`harness.guidance`)."""

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


def _looks(sample_k: int, sample_k_max: int) -> list[int]:
    """Group sizes of the successive looks: sample_k, doubling, capped at sample_k_max."""
    out = [sample_k]
    while out[-1] < sample_k_max:
        out.append(min(2 * out[-1], sample_k_max))
    return out


# -- statistics ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Row:
    """One scored rollout."""

    text: str
    reward: float
    length: int
    audit: float | None
    verdicts: dict[str, bool]
    leak: bool
    repeat: int


def _avg_ranks(x: Sequence[float]) -> list[float]:
    """0-based ranks, ties sharing their average (plain Python: groups are a few dozen rollouts at most)."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for t in order[i : j + 1]:
            ranks[t] = (i + j) / 2.0
        i = j + 1
    return ranks


def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman correlation with averaged ties; None under 3 points or for a constant side (as the detector)."""
    if len(x) < 3:
        return None
    rx, ry = _avg_ranks(x), _avg_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry)) / math.sqrt(vx * vy)


def _wmean(pairs: Sequence[tuple[float | None, float]]) -> float | None:
    vals = [(v, w) for v, w in pairs if v is not None]
    tw = sum(w for _, w in vals)
    return None if tw <= 0 else sum(v * w for v, w in vals) / tw


_Strata = Sequence[tuple[float, bool, Sequence[_Row]]]  # per visit prompt: (probability, hinted, scored rollouts)


def _group(task_id: str, version: int, strata: _Strata, cfg: DetectorConfig, *, full: bool = True) -> GroupMetrics:
    """Visit-weighted metrics of one side. `full=False` skips validation and examples (bootstrap resamples)."""
    stats: list[tuple[float, float, float, float | None, float | None, float, dict[str, float]]] = []
    rows_all: list[_Row] = []
    index: list[int] = []
    for i, (w, _, rows) in enumerate(strata):
        rewards = [r.reward for r in rows]
        mean = sum(rewards) / len(rewards)
        std = math.sqrt(sum((x - mean) ** 2 for x in rewards) / len(rewards))
        audits = [r.audit for r in rows if r.audit is not None]
        ids: list[str] = []
        for r in rows:
            ids.extend(c for c in r.verdicts if c not in ids)
        rates = {c: sum(r.verdicts[c] for r in rows if c in r.verdicts) / sum(1 for r in rows if c in r.verdicts) for c in ids}
        stats.append((w, mean, std, _spearman([r.length for r in rows], rewards),
                      sum(audits) / len(audits) if audits else None, float(sum(r.leak for r in rows)), rates))
        rows_all.extend(rows)
        index.extend([i] * len(rows))
    mean = sum(w * m for w, m, *_ in stats)
    std = sum(w * s for w, _, s, *_ in stats)
    cids: list[str] = []
    for *_, rates in stats:
        cids.extend(c for c in rates if c not in cids)
    rewards_all = [r.reward for r in rows_all]
    values = dict(
        task_id=task_id, harness_version=version, n=len(rows_all), rewards=rewards_all,
        lengths=[r.length for r in rows_all], audits=[r.audit for r in rows_all], mean=mean, std=std,
        min=min(rewards_all), max=max(rewards_all), dead=std < cfg.eps, in_band=cfg.tau_lo < mean < cfg.tau_hi,
        length_corr=_wmean([(s[3], s[0]) for s in stats]), audit_mean=_wmean([(s[4], s[0]) for s in stats]),
        leak_hits=sum(w * leaks for w, _, _, _, _, leaks, _ in stats),
        pass_rates={c: _wmean([(rates.get(c), w) for w, *_, rates in stats]) for c in cids},
        hinted=any(h for w, h, _ in strata if w > 0),
        max_repeat=max(r.repeat for r in rows_all), verdicts=[r.verdicts for r in rows_all],
        leaks=[r.leak for r in rows_all], strata=index, stratum_weights=[w for w, _, _ in strata],
    )
    if not full:
        return GroupMetrics.model_construct(**values, examples=[])
    order = sorted(range(len(rows_all)), key=lambda i: rewards_all[i])
    examples = [rows_all[order[-1]].text[:EXAMPLE_CHARS], rows_all[order[0]].text[:EXAMPLE_CHARS]]
    return GroupMetrics(**values, examples=examples)


async def _score(spec: _Spec, texts: Sequence[str], judge: Judge, cfg: DetectorConfig) -> list[_Row]:
    task = spec.task
    scores, audits = await asyncio.gather(judge.score(task.criteria, task.user_prompt, list(texts)),
                                          judge.audit(task, list(texts)))
    hint_texts = [h.text for h in spec.hints]
    rows = []
    for t, s, a in zip(texts, scores, audits):
        # A hinted rollout that parrots a hint or reproduces the reference answer is credited by the hint,
        # not learnt; unhinted rollouts containing the reference are just correct, so they do not count.
        leak = bool(hint_texts) and (hint_overlap(t, hint_texts) >= cfg.leak_overlap
                                     or hint_leaks_reference(t, task.reference_answer))
        rows.append(_Row(text=t, reward=float(s.score), length=len(words(t)), audit=a, leak=leak,
                         verdicts={c: v.met for c, v in s.verdicts.items() if v.decided},
                         repeat=max_ngram_repeats(t, REPEAT_NGRAM)))
    return rows


def _summary(groups: Sequence[tuple[GroupMetrics, float]]) -> Summary:
    live = [(m, w) for m, w in groups if w > 0]
    return Summary(
        n_groups=len(live), weight=sum(w for _, w in live),
        mean=_wmean([(m.mean, w) for m, w in live]),
        mean_std=_wmean([(m.std, w) for m, w in live]),
        dead_share=_wmean([(float(m.dead), w) for m, w in live]),
        band_share=_wmean([(float(m.in_band), w) for m, w in live]),
        length_corr=_wmean([(m.length_corr, w) for m, w in live]),
        audit_mean=_wmean([(m.audit_mean, w) for m, w in live]),
        leak_hits=float(sum(m.leak_hits for m, _ in live)),
        dead_weight=sum(w for m, w in live if m.dead),
        band_weight=sum(w for m, w in live if m.in_band),
    )


def _resample(strata: _Strata, idx: Sequence[np.ndarray]) -> _Strata:
    return [(w, h, [rows[i] for i in ix]) for (w, h, rows), ix in zip(strata, idx)]


def _p_pass(rule: StopRule, c: _Strata, d: _Strata, paired: bool,
            versions: tuple[int, int], cfg: DetectorConfig, rng: np.random.Generator, resamples: int) -> float:
    """Share of bootstrap resamples of the focus groups in which the rule holds."""
    hits = 0
    for _ in range(resamples):
        ci = [rng.integers(0, len(rows), len(rows)) for _, _, rows in c]
        di = ci if paired else [rng.integers(0, len(rows), len(rows)) for _, _, rows in d]
        gc = _group(rule.task_id, versions[0], _resample(c, ci), cfg, full=False)
        gd = _group(rule.task_id, versions[1], _resample(d, di), cfg, full=False)
        hits += bool(rule.holds(gc, gd, paired))
    return hits / resamples


def _count_tokens(endpoint: PolicyEndpoint, texts: list[str]) -> tuple[int, Literal["tokenizer", "words"]]:
    counted = endpoint.count_tokens(texts) if isinstance(endpoint, TokenCounter) else None
    if counted is not None:
        return counted, "tokenizer"
    return sum(len(words(t)) for t in texts), "words"


# -- the measurement ---------------------------------------------------------------------------------------
async def ameasure_candidate(
    state: HarnessState,
    update: HarnessUpdate,
    endpoint: PolicyEndpoint,
    judge: Judge,
    *,
    k: int | None = None,
    sample_k: int = 4,
    sample_k_max: int = 16,
    alpha: float = ALPHA,
    rule: StopRule | None = None,
    prior_rollouts: Mapping[str, Sequence[str]] | None = None,
    probe_cache: ProbeCache | None = None,
    resamples: int = BOOTSTRAP,
    max_tokens: int = 48,
    temperature: float = 1.0,
    seed: int = 0,
    step: int = 0,
    detector_config: DetectorConfig | None = None,
) -> Measurement:
    """Async `measure_candidate` (the endpoint's blocking `sample` runs in a worker thread)."""
    t0 = time.monotonic()
    if k is not None:
        sample_k = sample_k_max = k
    if sample_k < 2:
        raise ValueError(f"k must be >= 2 to measure a group's spread, got sample_k={sample_k}")
    if sample_k_max < sample_k:
        raise ValueError(f"sample_k_max ({sample_k_max}) must be >= sample_k ({sample_k})")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    cfg = detector_config or DetectorConfig()
    cache = probe_cache if probe_cache is not None else ProbeCache()
    prior = prior_rollouts or {}
    candidate_state = apply(state, update, step=step)  # UpdateRejected propagates to the caller
    task_ids = update.task_ids
    if rule is not None and rule.task_id not in task_ids:
        raise ValueError(f"rule.task_id {rule.task_id!r} is not among the update's tasks {task_ids}")
    criteria = update.interface == "criteria"
    sampling = update.interface == "sampling"
    visit = step + 1  # training resumes at the next step

    sides: dict[str, dict[str, list[_Stratum]]] = {"control": {}, "candidate": {}}
    weights: dict[str, dict[str, float]] = {}
    pools_prior: dict[str, list[str]] = {}  # prompt key -> training rollouts re-scored with it (criteria)
    for tid in task_ids:
        new_variant = not state.has_task(tid)
        # A new variant has no control group of its own: its parent's group is the baseline.
        base_id = candidate_state.task(tid).parent_id if new_variant else tid
        control = _strata(state, base_id, visit)
        if criteria:
            # One pool: the rubric is what changes, not the prompt (module docstring).
            top = max(control, key=lambda s: s.weight)
            sides["control"][tid] = [_Stratum(1.0, top.spec)]
            sides["candidate"][tid] = [_Stratum(1.0, _spec(candidate_state.task(tid), list(top.spec.hints),
                                                           state.guidance_for(tid).schedule.placement))]
            pools_prior.setdefault(top.spec.prompt_key, []).extend(prior.get(tid, []))
        else:
            sides["control"][tid] = control
            sides["candidate"][tid] = _strata(candidate_state, tid, visit)
        if sampling:
            weights[tid] = {"control": 0.0 if new_variant else _weight(state, tid), "candidate": _weight(candidate_state, tid)}
        else:
            weights[tid] = {"control": 1.0, "candidate": 1.0}
    paired = {t: [(s.weight, s.spec.prompt_key) for s in sides["control"][t]]
              == [(s.weight, s.spec.prompt_key) for s in sides["candidate"][t]] for t in task_ids}

    cost = Cost()
    drawn: dict[str, int] = {}  # prompt key -> probes this call generated
    judge_calls_before = judge.stats.llm_calls
    failures_before = judge.stats.llm_failures + judge.stats.check_failures

    def cache_key(prompt_key: str) -> str:
        return json.dumps([prompt_key, max_tokens, float(temperature), seed])

    def pool(prompt_key: str, n: int) -> list[str]:
        pri = pools_prior.get(prompt_key, [])
        return pri + cache.get(step, cache_key(prompt_key))[: max(n, len(pri)) - len(pri)]

    async def fill(n: int) -> None:
        """Make every prompt's pool hold at least n rollouts: one sample call per side and (need, have)."""
        done: set[str] = set()
        for side in ("control", "candidate"):
            todo: dict[tuple[int, int], dict[str, _Spec]] = {}
            for tid in task_ids:
                for s in sides[side][tid]:
                    key = s.spec.prompt_key
                    if key in done:
                        continue
                    done.add(key)
                    want = max(n, len(pools_prior.get(key, []))) - len(pools_prior.get(key, []))
                    have = len(cache.get(step, cache_key(key)))
                    if have < want:
                        todo.setdefault((want - have, have), {})[key] = s.spec
            for (need, have), specs in todo.items():
                batch = [[{"role": r, "content": c} for r, c in spec.messages] for spec in specs.values()]
                # The seed moves with the texts already held: an extension draws new samples, and both sides
                # extend with the same seed (common random numbers).
                out = await asyncio.to_thread(endpoint.sample, batch, n=need, max_tokens=max_tokens,
                                              temperature=temperature, seed=seed + have)
                if len(out) != len(batch) or any(len(o) != need for o in out):
                    raise RuntimeError(f"endpoint returned {[len(o) for o in out]} completions for {len(batch)} prompts x n={need}")
                cost.sample_calls += 1
                for key, texts in zip(specs, out):
                    cache.extend(step, cache_key(key), have, texts)
                    drawn[key] = drawn.get(key, 0) + len(texts)
                    tokens, cost.tokens_by = _count_tokens(endpoint, list(texts))
                    cost.probe_tokens += tokens
                    cost.probe_rollouts += len(texts)

    scored: dict[tuple[str, str, int], list[_Row]] = {}

    async def score_all(n: int) -> None:
        """Score the rollouts each stratum gained since the last look (a pool only ever grows at its end)."""
        jobs = []
        for side in ("control", "candidate"):
            for tid in task_ids:
                for i, s in enumerate(sides[side][tid]):
                    texts = pool(s.spec.prompt_key, n)
                    rows = scored.setdefault((side, tid, i), [])
                    if len(texts) > len(rows):
                        jobs.append((rows, _score(s.spec, texts[len(rows):], judge, cfg)))
        for (rows, _), new in zip(jobs, await asyncio.gather(*(j for _, j in jobs))):
            rows.extend(new)
            cost.scored_rollouts += len(new)

    def side_rows(side: str, tid: str) -> _Strata:
        return [(s.weight, bool(s.spec.hints), scored[(side, tid, i)]) for i, s in enumerate(sides[side][tid])]

    looks = _looks(sample_k, sample_k_max)
    per_look = alpha / len(looks)
    rng = np.random.default_rng(seed)
    ks: list[int] = []
    ps: list[float] = []
    decision: Literal["pass", "fail", "undecided"] = "undecided"
    for n in looks:
        await fill(n)
        await score_all(n)
        ks.append(n)
        if rule is None:
            break
        versions = (state.version, candidate_state.version)
        p = _p_pass(rule, side_rows("control", rule.task_id), side_rows("candidate", rule.task_id),
                    paired[rule.task_id], versions, cfg, rng, resamples)
        ps.append(p)
        if p >= 1.0 - per_look:
            decision = "pass"
            break
        if p <= per_look:
            decision = "fail"
            break

    per_task: dict[str, dict[str, GroupMetrics]] = {tid: {} for tid in task_ids}
    for tid in task_ids:
        for side, st in (("control", state), ("candidate", candidate_state)):
            # The control of a new variant is its parent's group: it carries the parent's id.
            per_task[tid][side] = _group(sides[side][tid][0].spec.task.id, st.version, side_rows(side, tid), cfg)
    summaries = {
        name: _summary([(per_task[t][name], weights[t][name]) for t in task_ids]) for name in ("control", "candidate")
    }
    c, d = summaries["control"], summaries["candidate"]
    deltas: dict[str, float | None] = {}
    for field in ("mean", "mean_std", "dead_share", "band_share", "length_corr", "audit_mean", "leak_hits",
                  "dead_weight", "band_weight"):
        a, b = getattr(c, field), getattr(d, field)
        deltas[field] = None if a is None or b is None else float(b - a)
    used = {s.spec.prompt_key: len(pool(s.spec.prompt_key, ks[-1])) for side in sides.values() for ss in side.values() for s in ss}
    cost.reused_rollouts = sum(max(0, n - drawn.get(key, 0)) for key, n in used.items())
    cost.judge_calls = judge.stats.llm_calls - judge_calls_before
    cost.seconds = round(time.monotonic() - t0, 3)
    return Measurement(
        interface=update.interface, task_ids=task_ids, candidate_version=candidate_state.version, k=ks[-1], seed=seed,
        step=step, per_task=per_task, weights=weights, paired=paired, control=c, candidate=d, deltas=deltas,
        judge_failures=judge.stats.llm_failures + judge.stats.check_failures - failures_before, cost=cost,
        sequential=None if rule is None else Sequential(alpha=alpha, alpha_per_look=per_look, max_looks=len(looks), ks=ks,
                                                        p_pass=ps, resamples=resamples, decision=decision),
    )


def measure_candidate(
    state: HarnessState,
    update: HarnessUpdate,
    endpoint: PolicyEndpoint,
    judge: Judge,
    *,
    k: int | None = None,
    sample_k: int = 4,
    sample_k_max: int = 16,
    alpha: float = ALPHA,
    rule: StopRule | None = None,
    prior_rollouts: Mapping[str, Sequence[str]] | None = None,
    probe_cache: ProbeCache | None = None,
    resamples: int = BOOTSTRAP,
    max_tokens: int = 48,
    temperature: float = 1.0,
    seed: int = 0,
    step: int = 0,
    detector_config: DetectorConfig | None = None,
) -> Measurement:
    """Measure `update` on the frozen policy: control vs candidate (see the module docstring).

    Budget: groups of `sample_k` rollouts, doubled up to `sample_k_max` while the sequential test of
    `rule` is undecided at overall error rate `alpha` (`k` fixes both sizes). `prior_rollouts` (task id
    -> completions, see `latest_rollouts`) are re-scored for criteria updates; `probe_cache` shares
    probe rollouts across the round's measurements. Raises `harness.ops.UpdateRejected` for an invalid
    update and `RuntimeError` inside a running event loop (await `ameasure_candidate` there).
    """
    return run_sync(ameasure_candidate(
        state, update, endpoint, judge, k=k, sample_k=sample_k, sample_k_max=sample_k_max, alpha=alpha, rule=rule,
        prior_rollouts=prior_rollouts, probe_cache=probe_cache, resamples=resamples, max_tokens=max_tokens,
        temperature=temperature, seed=seed, step=step, detector_config=detector_config,
    ))
