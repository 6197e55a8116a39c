"""The sequential tests of the critic's acceptance rule: how many rollouts a measurement spends, and when it stops.

With a `StopRule` (the critic's acceptance rule on the focus task's two groups, `agents.critic.stop_rule`),
`tools.candidate.measure_candidate` starts the candidate's groups at `sample_k` rollouts and doubles them up to
`sample_k_max` while the decision is undecided (`looks`). Two tests, chosen by the rule:

**Exact hit test (dead-group repairs that generate new groups; `StopRule.hits` is a `HitTest`).** A dead group's
rewards sit at one level; a repair works when rollouts leave that level in the repairing direction. The level
is the median reward of the control pool, and a rollout is a *hit* when its reward is above level + eps
("up", collapse_low), below level - eps ("down", collapse_high) or at least eps away ("off", flat); eps is the
detector's. The control pool (x0 hits of n0 rollouts) is fixed before the first look: the task's cached
training rollouts, topped up with fresh control probes to twice `sample_k_max` when the history is shorter
(`tools.candidate_plan.CONTROL_FACTOR`). Under "no effect" a candidate rollout hits with the control's rate p0;
p0 is unknown, so the null distribution of the candidate's hits is the binomial averaged over p0's posterior
Beta(x0 + 1/2, n0 - x0 + 1/2) (Jeffreys prior; `exact_plan` integrates it on `P0_GRID` quantiles). At look j
with N_j candidate rollouts (the strata whose prompt the control does not share) and X_j hits:

- pass when X_j >= a_j, the smallest bound such that the null chance of crossing any bound up to look j is
  at most alpha * N_j / N_L (linear alpha spending over the information; exact, computed by dynamic
  programming over the looks; the futility bound is non-binding, so it does not enter the type I error);
- fail (futility) when X_j <= b_j, the largest bound with P(X_j <= b_j) <= beta * (N_j - N_{j-1}) / N_L under
  the alternative rate p0_mean + `min_rate_gain` (Bonferroni over looks: a true repair of that size is
  failed early at most beta of the time). A look too small to have the power gets b_j = -1: an all-zero
  first group of 4 is "undecided", never "fail";
- else undecided; undecided at the cap rejects (`decide_hits`).

The critic adds its point rule (std gain, candidate not dead, guards) to a pass: crossing the bound with a
candidate that is still dead (every rollout a hit) is not a repair (`tools.candidate`). A batched update (one
template on several tasks) pools its targets in one test (`StopRule.pooled`, `pooled_plan`): each target's hits
are counted against its own level, and the null lets every target hit at its own control rate.

**Bootstrap test (every other rule).** At each look the rule is re-evaluated on `BOOTSTRAP` bootstrap
resamples of the rollouts (resampled jointly on both sides when they are paired, within each stratum
otherwise); the share of resamples in which it holds is `p_pass`. The test stops with "pass" when p_pass >=
1 - alpha/L and with "fail" when p_pass <= alpha/L, L being the number of looks the budget allows (Bonferroni
over looks, up to the bootstrap's own approximation); at the cap it is "undecided", which the critic rejects
(`decide`). Criteria candidates are paired and re-score the task's whole cached history at the first look.

Without a rule one look of `sample_k` is taken. The record of either test is a `Sequential`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.detector import DetectorConfig
from tools.group_metrics import GroupMetrics, Strata, group_metrics, resample

ALPHA = 0.1  # overall error rate of the sequential test's early stops (see the module docstring)
BOOTSTRAP = 400  # resamples per look: the Monte Carlo error of p_pass near 1 - alpha/3 is about 0.01
P0_GRID = 200  # quantiles of p0's posterior the exact test averages over (error of a tail probability < 1/400)

Decision = Literal["pass", "fail", "undecided"]
Direction = Literal["up", "down", "off"]


class Sequential(BaseModel):
    """The sequential test of the critic's rule (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    alpha: float
    alpha_per_look: float  # bootstrap: the Bonferroni share; exact: the first look's spent alpha
    max_looks: int
    ks: list[int]  # group size (rollouts per visit prompt) at each look taken
    p_pass: list[float]  # bootstrap: share of resamples in which the rule held; exact: the null tail P(X >= x)
    resamples: int
    decision: Decision
    test: Literal["bootstrap", "exact"] = "bootstrap"
    hits: list[int] = Field(default_factory=list)  # exact: candidate hits per look
    trials: list[int] = Field(default_factory=list)  # exact: candidate rollouts counted per look
    pass_at: list[int] = Field(default_factory=list)  # exact: pass bound a_j per look taken
    fail_at: list[int] = Field(default_factory=list)  # exact: futility bound b_j per look taken (-1: none)
    control_hits: int | None = None  # exact: x0
    control_n: int | None = None  # exact: n0
    control_spared: int = 0  # exact: fresh control probes not drawn: the candidate did not pass without them
    control_late: int = 0  # exact: fresh control probes drawn after the candidate passed without them
    level: float | None = None  # exact: the dead level (median control reward) of the focus task
    pooled: list[str] = Field(default_factory=list)  # exact: further focus tasks pooled into the test
    direction: Direction | None = None


@dataclass(frozen=True)
class HitTest:
    """The exact hit test of a dead-group repair (module docstring): which way a hit leaves the level."""

    direction: Direction
    min_rate_gain: float

    def is_hit(self, reward: float, level: float, eps: float) -> bool:
        """Whether a rollout left the dead `level` in the repairing direction.

        `eps` is the detector's `DetectorConfig.eps`.
        """
        if self.direction == "up":
            return reward > level + eps
        if self.direction == "down":
            return reward < level - eps
        return abs(reward - level) >= eps


@dataclass(frozen=True)
class StopRule:
    """The critic's acceptance rule on the focus task's groups: `holds(control, candidate, paired)`.

    With `hits`, the exact hit test decides the looks and `holds` is the point rule a pass must also meet.
    """

    task_id: str
    holds: Callable[[GroupMetrics, GroupMetrics, bool], bool]
    hits: HitTest | None = field(default=None)
    pooled: tuple[str, ...] = ()  # exact test only: more focus tasks whose hits pool with task_id's (`pooled_plan`)


def looks(sample_k: int, sample_k_max: int) -> list[int]:
    """Group sizes of the successive looks: sample_k, doubling, capped at sample_k_max."""
    out = [sample_k]
    while out[-1] < sample_k_max:
        out.append(min(2 * out[-1], sample_k_max))
    return out


def dead_level(rewards: Sequence[float]) -> float:
    """The level a dead group sits at: the median reward of the control pool."""
    if not rewards:
        raise ValueError("dead_level: the control pool is empty")
    return float(np.median(np.asarray(rewards, dtype=float)))


def _binom_pmf(n: int, p: np.ndarray) -> np.ndarray:
    """The pmf of Binomial(n, p) for each p (rows), x = 0..n (columns)."""
    x = np.arange(n + 1)
    logc = np.array([math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in x])
    pp = np.clip(p, 1e-12, 1 - 1e-12)[:, None]
    return np.exp(logc[None, :] + x[None, :] * np.log(pp) + (n - x)[None, :] * np.log1p(-pp))


def p0_quantiles(x0: int, n0: int, m: int = P0_GRID) -> np.ndarray:
    """The m mid-quantiles of the Jeffreys posterior Beta(x0 + 1/2, n0 - x0 + 1/2) of the control hit rate."""
    a, b = x0 + 0.5, n0 - x0 + 0.5
    xs = np.linspace(0.0, 1.0, 40001)[1:-1]
    logpdf = (a - 1) * np.log(xs) + (b - 1) * np.log1p(-xs)
    w = np.exp(logpdf - logpdf.max())
    cdf = np.cumsum(w) / w.sum()
    return np.interp((np.arange(m) + 0.5) / m, cdf, xs)


class ExactPlan(BaseModel):
    """The bounds of the exact hit test for one control pool and one set of looks (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trials: list[int]  # N_j: cumulative candidate rollouts at each look
    pass_at: list[int]  # a_j
    fail_at: list[int]  # b_j (-1: no futility stop at that look)
    spent: list[float]  # exact null chance of a pass by look j
    p0_mean: float
    p_alt: float


def null_tail(x0: int, n0: int, n: int, x: int) -> float:
    """P(X >= x) for X the hits of n candidate rollouts under "no effect" (binomial averaged over p0's posterior)."""
    pmf = _binom_pmf(n, p0_quantiles(x0, n0)).mean(axis=0)
    return float(pmf[x:].sum())


def _conv_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise convolution of two pmf matrices (one row per grid point)."""
    out = np.zeros((a.shape[0], a.shape[1] + b.shape[1] - 1))
    for i in range(a.shape[1]):
        out[:, i : i + b.shape[1]] += a[:, i : i + 1] * b
    return out


def _sum_pmf(counts: Sequence[int], rates: Sequence[np.ndarray]) -> np.ndarray:
    """The pmf of a sum of independent Binomial(counts[t], rates[t][g]) per grid point g (Poisson-binomial)."""
    out = np.ones((len(rates[0]), 1))
    for n, p in zip(counts, rates):
        out = _conv_rows(out, _binom_pmf(n, p))
    return out


@lru_cache(maxsize=256)
def _plan(
    controls: tuple[tuple[int, int, int], ...], sizes: tuple[int, ...], alpha: float, beta: float, gain: float
) -> ExactPlan:
    # One target: its posterior's quantiles. Several (a batched update): independent posteriors, combined on a
    # Latin-hypercube grid (each target's quantiles in a fixed shuffled order), so the plan stays deterministic.
    grid = []
    for t, (x0, n0, _) in enumerate(controls):
        q = p0_quantiles(x0, n0)
        grid.append(q if t == 0 else np.random.default_rng(t).permutation(q))
    means = [(x0 + 0.5) / (n0 + 1.0) for x0, n0, _ in controls]
    alts = [np.array([min(1.0, m + gain)]) for m in means]
    trials = [sum(m * n for _, _, m in controls) for n in sizes]
    total = trials[-1]
    dist = np.ones((len(grid[0]), 1))  # per grid point: P(X = x and no pass yet)
    spent, pass_at, fail_at, spents = 0.0, [], [], []
    prev = 0
    for j, n in enumerate(sizes):
        new = _conv_rows(dist, _sum_pmf([m * (n - prev) for _, _, m in controls], grid))
        budget = alpha * trials[j] / total
        # cross[x]: null chance (averaged over the control rates' posterior) of X_j >= x without an earlier pass
        cross = np.cumsum(new.mean(axis=0)[::-1])[::-1]
        top = trials[j]
        a = next((x for x in range(top + 1) if spent + cross[x] <= budget + 1e-12), top + 1)
        spent += float(cross[a]) if a <= top else 0.0
        if a <= top:
            new[:, a:] = 0.0
        alt = np.cumsum(_sum_pmf([m * n for _, _, m in controls], alts)[0])  # P(X_j <= b) under the alternative
        step_share = (trials[j] - (trials[j - 1] if j else 0)) / total
        b = max((x for x in range(top + 1) if alt[x] <= beta * step_share), default=-1)
        pass_at.append(a)
        fail_at.append(min(b, a - 1))
        spents.append(round(spent, 6))
        dist, prev = new, n
    return ExactPlan(
        trials=trials,
        pass_at=pass_at,
        fail_at=fail_at,
        spent=spents,
        p0_mean=float(np.mean(means)),
        p_alt=float(np.mean([a[0] for a in alts])),
    )


def pooled_plan(
    controls: Sequence[tuple[int, int, int]], sizes: Sequence[int], alpha: float, beta: float, min_rate_gain: float
) -> ExactPlan:
    """The exact hit test's bounds for targets pooled in one test (a batched update).

    Per target (x0, n0, m): its control hits x0 of n0 and the m candidate strata it counts; at look j each
    target adds m * sizes[j] rollouts.
    Under "no effect" every target hits at its own control rate (independent Jeffreys posteriors); one target
    with m = 1 is `exact_plan`."""
    for x0, n0, m in controls:
        if not 0 <= x0 <= n0 or n0 < 1 or m < 1:
            raise ValueError(f"exact_plan: control hits x0={x0} of n0={n0} (candidate strata {m})")
    if not controls:
        raise ValueError("exact_plan: no target to test")
    if not sizes or any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] < 1:
        raise ValueError(f"exact_plan: trials must be increasing and positive, got {list(sizes)}")
    key = tuple((int(x0), int(n0), int(m)) for x0, n0, m in controls)
    return _plan(key, tuple(int(n) for n in sizes), float(alpha), float(beta), float(min_rate_gain))


def exact_plan(x0: int, n0: int, trials: Sequence[int], alpha: float, beta: float, min_rate_gain: float) -> ExactPlan:
    """The pass and futility bounds of the exact hit test on one target (module docstring); cached per arguments."""
    return pooled_plan([(x0, n0, 1)], trials, alpha, beta, min_rate_gain)


def decide_hits(plan: ExactPlan, j: int, x: int) -> Decision:
    """The exact test's decision at look j with x candidate hits: pass, fail (futility) or undecided."""
    if x >= plan.pass_at[j]:
        return "pass"
    if x <= plan.fail_at[j]:
        return "fail"
    return "undecided"


def p_pass(
    rule: StopRule,
    c: Strata,
    d: Strata,
    paired: bool,
    versions: tuple[int, int],
    cfg: DetectorConfig,
    rng: np.random.Generator,
    resamples: int,
) -> float:
    """Share of bootstrap resamples of the focus groups in which the rule holds."""
    hits = 0
    for _ in range(resamples):
        ci = [rng.integers(0, len(rows), len(rows)) for _, _, rows in c]
        di = ci if paired else [rng.integers(0, len(rows), len(rows)) for _, _, rows in d]
        gc = group_metrics(rule.task_id, versions[0], resample(c, ci), cfg, full=False)
        gd = group_metrics(rule.task_id, versions[1], resample(d, di), cfg, full=False)
        hits += bool(rule.holds(gc, gd, paired))
    return hits / resamples


def decide(p: float, per_look: float) -> Decision:
    """The bootstrap test's decision of one look: "pass" or "fail" when p_pass clears its bound, else "undecided"."""
    if p >= 1.0 - per_look:
        return "pass"
    if p <= per_look:
        return "fail"
    return "undecided"
