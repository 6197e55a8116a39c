"""One look of the exact hit test on a candidate's strata, and its record (`tools.candidate`, `tools.sequential`)."""

from __future__ import annotations

from harness.detector import DetectorConfig
from tools.candidate_plan import Sides, changed_strata
from tools.group_metrics import Strata, group_metrics
from tools.sequential import Decision, ExactPlan, StopRule, dead_level, decide_hits, null_tail, pooled_plan


def exact_look(
    rule: StopRule,
    sides: Sides,
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
            rec["changed"][t] = changed_strata(sides, t)
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


def exact_record(rec: dict) -> dict:
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
