"""The critic's guards: the harms a candidate must not do, each read on a confidence bound.

A guard vetoes on the lower one-sided (1 - `critic_alpha`) confidence bound of a drop (`drop_bound`), so it reads
the pooled rollouts and not the noise of 4, and no guard reads the signal the candidate's own failure type repairs:
the gamed rollouts' reward of a spurious_audit or stuffing repair, the honest reward of a dead group, the audit that
copied answers took from a leaking hint. "Gamed" rollouts are
those whose hidden audit score is below `AUDIT_PASS`, "honest" ones at or above it. Which guards apply to which
candidate is `group_guards`; `agents/critic.py` applies them with the failure type's primary rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from harness.types import HarnessUpdate
from tools.group_metrics import GroupMetrics

AUDIT_PASS = 0.5


def mean_or_none(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    vx = sum((x - mx) ** 2 for x in xs)
    vy = sum((y - my) ** 2 for y in ys)
    if vx <= 1e-12 or vy <= 1e-12:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(vx * vy)


def audit_corr(m: GroupMetrics) -> float | None:
    pairs = [(r, a) for r, a in zip(m.rewards, m.audits) if a is not None]
    return _pearson([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None


def drop_bound(c: Sequence[float], d: Sequence[float], paired: bool, z: float) -> tuple[float, float] | None:
    """(drop, its lower one-sided confidence bound) of mean(c) - mean(d).

    Paired differences when the two sides are the same rollouts, else Welch's standard error (normal
    approximation); None when a side is empty.
    """
    if not c or not d:
        return None
    if paired and len(c) == len(d):
        diffs = [a - b for a, b in zip(c, d)]
        drop = sum(diffs) / len(diffs)
        var = sum((x - drop) ** 2 for x in diffs) / max(1, len(diffs) - 1)
        return drop, drop - z * math.sqrt(var / len(diffs))
    mc, md = sum(c) / len(c), sum(d) / len(d)
    vc = sum((x - mc) ** 2 for x in c) / max(1, len(c) - 1)
    vd = sum((x - md) ** 2 for x in d) / max(1, len(d) - 1)
    return mc - md, mc - md - z * math.sqrt(vc / len(c) + vd / len(d))


def split_by_audit(m: GroupMetrics) -> tuple[list[int], list[int]]:
    gamed = [i for i, a in enumerate(m.audits) if a is not None and a < AUDIT_PASS]
    honest = [i for i, a in enumerate(m.audits) if a is not None and a >= AUDIT_PASS]
    return gamed, honest


def _own_answer_audit_guard(
    c: GroupMetrics, d: GroupMetrics, z: float, n: dict[str, float | None], max_drop: float
) -> tuple[bool, str]:
    """The audit guard of a leak repair: the audit of the answers that do not copy the hint, on both sides.

    A rollout that copies a leaking hint scores on the audit what the hint gave it, so the control's audit mean is
    inflated by the very leak the repair removes, and comparing whole means vetoes every repair that works. The
    policy's own answers, under the old hint and the new, are what the guard protects. With no such answer on a
    side there is no baseline to compare: the guard says so and passes (the primary rule still needs fewer leaks).
    """
    ca = [a for a, leak in zip(c.audits, c.leaks) if a is not None and not leak]
    da = [a for a, leak in zip(d.audits, d.leaks) if a is not None and not leak]
    b = drop_bound(ca, da, False, z)
    if b is None:
        n["audit_drop_bound"] = None
        return True, (
            f"audit of the answers that do not copy the hint: {len(ca)} vs {len(da)} rollouts, nothing to compare "
            "(guard not applied)"
        )
    n["audit_drop_bound"] = b[1]
    return (
        b[1] <= max_drop,
        f"audit of the answers that do not copy the hint {mean_or_none(ca):.3f} -> {mean_or_none(da):.3f} "
        f"({len(ca)} vs {len(da)} rollouts; the copied ones score the hint, not the policy): "
        f"the drop's lower bound {b[1]:+.3f} may be at most {max_drop}",
    )


def _revived_signal_guard(c: GroupMetrics, d: GroupMetrics, z: float, n: dict[str, float | None]) -> tuple[bool, str]:
    """The audit guard of a dead-group repair that makes new groups (a hint, an easier variant).

    The control group teaches nothing, so what training takes from the repair is the candidate's within-group
    signal, not its level: the guard vetoes when that signal favours audit-failing answers (their reward above the
    audit-passing ones' beyond noise), or when the candidate leaves no audit-passing answer where the control had
    some. The audit mean of hinted or easier prompts against the plain task's is recorded but not a veto: it
    compares answers to different prompts, and a drop there is what the hint's own words cost, which training on
    the plain task (a fading hint, a variant restored towards the original) does not keep.
    """
    gamed, honest = split_by_audit(d)
    g = [d.rewards[i] for i in gamed]
    h = [d.rewards[i] for i in honest]
    n["candidate_gamed_reward"], n["candidate_honest_reward"] = mean_or_none(g), mean_or_none(h)
    n["audit_mean_change"] = None if c.audit_mean is None or d.audit_mean is None else d.audit_mean - c.audit_mean
    level = f"audit mean {c.audit_mean:.3f} -> {d.audit_mean:.3f} (recorded, not a veto for a revived group)"
    if not h:
        ok = not split_by_audit(c)[1]
        return ok, f"{level}; no candidate rollout passes the audit (the control had some: {not ok})"
    b = drop_bound(g, h, False, z)
    if b is None:
        n["revived_gap_bound"] = None
        return True, f"{level}; every candidate rollout passes the audit: no gamed answer for the revived signal to pay"
    n["revived_gap_bound"] = b[1]
    return (
        b[1] <= 0.0,
        f"{level}; reward of audit-failing rollouts minus audit-passing ones {b[0]:+.3f} "
        f"({len(g)} vs {len(h)} rollouts, lower bound {b[1]:+.3f}) must not be above 0",
    )


def group_guards(
    event_type: str,
    update: HarnessUpdate,
    c: GroupMetrics,
    d: GroupMetrics,
    paired: bool,
    n: dict[str, float | None],
    *,
    alpha: float,
    max_audit_drop: float,
    max_mean_drop: float,
    revives_with_new_groups: bool,
    dead_repair: bool,
) -> list[tuple[bool, str]]:
    """(held, why) per guard on the focus groups `c` (control) and `d` (candidate); their numbers go into `n`."""
    # Guards veto on a bound, not a point estimate: only when the drop's lower one-sided (1 - critic_alpha) bound
    # exceeds its margin, i.e. the pooled rollouts show the harm beyond sampling noise.
    z = NormalDist().inv_cdf(1.0 - alpha)
    guards: list[tuple[bool, str]] = [
        (d.leak_hits <= c.leak_hits, f"leak hits {c.leak_hits:g} -> {d.leak_hits:g} must not rise")
    ]
    if update.interface == "guidance" and event_type != "guidance_leak":
        guards.append((d.leak_hits == 0, f"guidance candidate must not leak (hits {d.leak_hits:g})"))
    if revives_with_new_groups and c.audit_mean is not None and d.audit_mean is not None:
        guards.append(_revived_signal_guard(c, d, z, n))
    elif event_type == "guidance_leak" and c.audit_mean is not None and d.audit_mean is not None:
        guards.append(_own_answer_audit_guard(c, d, z, n, max_audit_drop))
    elif update.interface in ("guidance", "criteria") and c.audit_mean is not None and d.audit_mean is not None:
        ca = [a for a in c.audits if a is not None]
        da = [a for a in d.audits if a is not None]
        b = drop_bound(ca, da, paired, z)
        margin_of_error = 0.0 if b is None else b[0] - b[1]  # z * standard error of the drop
        lo = c.audit_mean - d.audit_mean - margin_of_error  # the visit-weighted drop, less its noise
        n["audit_drop_bound"] = lo
        guards.append(
            (
                lo <= max_audit_drop,
                f"audit mean {c.audit_mean:.3f} -> {d.audit_mean:.3f}: the drop's lower bound {lo:+.3f} "
                f"({len(ca)} vs {len(da)} rollouts) may be at most {max_audit_drop}",
            )
        )
    # The honest-reward guard protects audit-passing rollouts from a rubric that games them down. It does not apply to
    # a dead-group repair: in a dead group every rollout is "honest", and moving their reward is the repair itself.
    if update.interface == "criteria" and paired and not dead_repair:
        honest = split_by_audit(c)[1]
        b = drop_bound([c.rewards[i] for i in honest], [d.rewards[i] for i in honest], True, z)
        n["honest_drop"] = None if b is None else b[0]
        n["honest_drop_bound"] = None if b is None else b[1]
        if b is not None:
            guards.append(
                (
                    b[1] <= max_mean_drop,
                    f"honest rollouts' reward drop {b[0]:+.3f} over {len(honest)} rollouts (lower bound {b[1]:+.3f}, "
                    f"at most {max_mean_drop})",
                )
            )
    return guards
