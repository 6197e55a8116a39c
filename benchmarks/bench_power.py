"""Power of the paired comparison and bootstrap intervals (pure functions, no I/O).

A seed gives one paired difference d = score(arm) - score(fixed) (same seed, same eval draws). With n seeds,
the mean difference has standard error sd_d / sqrt(n); a two-sided test at level alpha detects a true
difference delta with power ~ Phi(delta sqrt(n) / sd_d - z_{1-alpha/2}) (normal approximation), or, more
exactly for few seeds, the paired t test's power from the noncentral t distribution.

sd_d has two parts: training noise (two seeds of one arm end in different places) and eval noise (a finite
sample of held-out responses). `sd_d_for_eval` rescales a measured sd_d to another eval size by removing the
eval part measured at one size and adding it back at the other (eval variance ~ 1 / (tasks x samples)).
"""

from __future__ import annotations

import math
import random
from typing import Any


def _t_power(delta: float, sd: float, n: int, alpha: float) -> float:
    from scipy import stats

    if n < 2 or sd <= 0:
        return float("nan") if sd <= 0 else 0.0
    df = n - 1
    nc = delta * math.sqrt(n) / sd
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(1 - stats.nct.cdf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def power(delta: float, sd: float, n: int, alpha: float = 0.05, *, exact: bool = True) -> float:
    """Power of a two-sided paired test with n seeds (t test if `exact`, else the normal approximation)."""
    if exact:
        return _t_power(delta, sd, n, alpha)
    from scipy import stats

    z = stats.norm.ppf(1 - alpha / 2)
    return float(stats.norm.cdf(delta * math.sqrt(n) / sd - z) + stats.norm.cdf(-delta * math.sqrt(n) / sd - z))


def seeds_needed(delta: float, sd: float, target: float = 0.8, alpha: float = 0.05) -> dict[str, int]:
    """Seeds for `target` power: the normal approximation ((z_a/2 + z_b) sd / delta)^2 and the paired t test."""
    from scipy import stats

    if delta <= 0 or sd <= 0:
        raise ValueError(f"seeds_needed: delta and sd must be > 0 (got {delta}, {sd})")
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(target)
    normal = math.ceil((z * sd / delta) ** 2)
    n = max(2, normal)
    while _t_power(delta, sd, n, alpha) < target:
        n += 1
    return {"normal": normal, "t": n}


def sd_d_for_eval(sd_d: float, eval_sd_from: float, eval_sd_to: float) -> float:
    """sd of paired differences at another eval size: sd_train^2 = sd_d^2 - 2 eval_sd_from^2 (floored at 0),
    then + 2 eval_sd_to^2 (each arm's score carries its own eval noise; conservative under common random numbers)."""
    train_var = max(0.0, sd_d**2 - 2 * eval_sd_from**2)
    return math.sqrt(train_var + 2 * eval_sd_to**2)


def bootstrap_ci(
    diffs_by_seed: list[list[float]], reps: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float] | None:
    """(mean, lo, hi) of the mean paired difference: seeds resampled, then tasks within each seed (the per-task
    differences of one seed, paired by task). One seed: the interval is over tasks only (eval noise)."""
    seeds = [d for d in diffs_by_seed if d]
    if not seeds:
        return None
    rng = random.Random(seed)
    mean = sum(sum(d) / len(d) for d in seeds) / len(seeds)
    stats: list[float] = []
    for _ in range(reps):
        pick = [seeds[rng.randrange(len(seeds))] for _ in seeds] if len(seeds) > 1 else seeds
        vals = []
        for d in pick:
            sample = [d[rng.randrange(len(d))] for _ in d]
            vals.append(sum(sample) / len(sample))
        stats.append(sum(vals) / len(vals))
    stats.sort()
    lo = stats[int((1 - level) / 2 * reps)]
    hi = stats[min(reps - 1, int((1 + level) / 2 * reps))]
    return mean, lo, hi


def eval_noise(a: dict[str, Any], b: dict[str, Any], key: str = "avg") -> dict[str, float] | None:
    """Eval noise from two evals of the SAME model with different eval seeds (per-task tables `{tid: {avg,
    audit}}`, 0-1): the sd of the mean-score difference, in points; one eval's sd is that / sqrt(2)."""
    tids = [t for t in a if t in b and a[t].get(key) is not None and b[t].get(key) is not None]
    if len(tids) < 2:
        return None
    d = [100.0 * (a[t][key] - b[t][key]) for t in tids]
    m = sum(d) / len(d)
    sd_task = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
    sd_mean_diff = sd_task / math.sqrt(len(d))
    return {
        "n_tasks": len(d),
        "mean_diff": m,
        "sd_task_diff": sd_task,
        "sd_mean_diff": sd_mean_diff,
        "sd_one_eval": sd_mean_diff / math.sqrt(2),
    }
