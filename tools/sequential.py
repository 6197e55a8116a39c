"""The sequential test of the critic's acceptance rule: how many rollouts a measurement spends.

With a `StopRule` (the critic's acceptance rule on the focus task's two groups, `agents.critic.stop_rule`),
`tools.measure.measure_candidate` starts groups at `sample_k` rollouts and doubles them up to
`sample_k_max` while the decision is undecided (`looks`). At each look the rule is re-evaluated on
`BOOTSTRAP` bootstrap resamples of the rollouts (resampled jointly on both sides when they are paired,
within each stratum otherwise); the share of resamples in which it holds is `p_pass`. The test stops with
"pass" when p_pass >= 1 - alpha/L and with "fail" when p_pass <= alpha/L, L being the number of looks
the budget allows (Bonferroni over looks: the chance that an early stop is on the wrong side of the
rule is at most `alpha`, default `ALPHA` = 0.1, up to the bootstrap's own approximation); at the
cap it is "undecided", which the critic rejects (`decide`). Without a rule one look of `sample_k` is
taken. The record of the test is a `Sequential`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from harness.detector import DetectorConfig
from tools.group_metrics import GroupMetrics, Strata, group_metrics, resample

ALPHA = 0.1  # overall error rate of the sequential test's early stops (see the module docstring)
BOOTSTRAP = 400  # resamples per look: the Monte Carlo error of p_pass near 1 - alpha/3 is about 0.01

Decision = Literal["pass", "fail", "undecided"]


class Sequential(BaseModel):
    """The sequential test of the critic's rule (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    alpha: float
    alpha_per_look: float
    max_looks: int
    ks: list[int]  # group size (rollouts per visit prompt) at each look taken
    p_pass: list[float]  # share of bootstrap resamples in which the rule held, per look
    resamples: int
    decision: Decision


@dataclass(frozen=True)
class StopRule:
    """The critic's acceptance rule on the focus task's groups: `holds(control, candidate, paired)`."""

    task_id: str
    holds: Callable[[GroupMetrics, GroupMetrics, bool], bool]


def looks(sample_k: int, sample_k_max: int) -> list[int]:
    """Group sizes of the successive looks: sample_k, doubling, capped at sample_k_max."""
    out = [sample_k]
    while out[-1] < sample_k_max:
        out.append(min(2 * out[-1], sample_k_max))
    return out


def p_pass(rule: StopRule, c: Strata, d: Strata, paired: bool,
           versions: tuple[int, int], cfg: DetectorConfig, rng: np.random.Generator, resamples: int) -> float:
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
    """The stop decision of one look: "pass" or "fail" when p_pass clears its bound, else "undecided"."""
    if p >= 1.0 - per_look:
        return "pass"
    if p <= per_look:
        return "fail"
    return "undecided"

