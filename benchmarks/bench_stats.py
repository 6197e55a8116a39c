"""Benchmark statistics: means, paired per-task differences with bootstrap intervals at equal steps and at
equal wall time, steps to the fixed arm's best, and the power calculation (part of `benchmarks/compare.py`)."""

from __future__ import annotations

import math
from typing import Any


def mean_of(xs: list[float | None]) -> float | None:
    """Mean of the known values (None where there is none)."""
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def sd_of(xs: list[float | None]) -> float | None:
    """Sample standard deviation of the known values (None with fewer than two)."""
    vals = [x for x in xs if x is not None]
    if len(vals) < 2:
        return None
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))


def has_full_curve(run: dict[str, Any]) -> bool:
    """Whether the run was evaluated at every `--eval-every` checkpoint (False: a seed past the preset's
    `full_curve_seeds`, evaluated at step 0 and its final step only; summaries from before issue 32 have full
    curves)."""
    return bool(run.get("job", {}).get("full_curve", True))


# -- paired comparisons with intervals (equal steps, equal wall time) ----------------------------------------
def _eval_at(run: dict[str, Any], base: dict[str, Any] | None, step: int) -> dict[str, Any] | None:
    if step == 0:
        return base["eval"] if base else None
    return run["evals"].get(str(step))


def task_diffs(ev_a: dict[str, Any] | None, ev_b: dict[str, Any] | None, metric: str, greedy: bool) -> list[float]:
    """Per-task differences a - b in points (paired by task; `metric` 'avg' or 'audit')."""
    if ev_a is None or ev_b is None:
        return []
    if greedy:
        ev_a, ev_b = ev_a.get("greedy"), ev_b.get("greedy")
        if ev_a is None or ev_b is None:
            return []
    ta, tb = ev_a["tasks"], ev_b["tasks"]
    return [
        100.0 * (ta[t][metric] - tb[t][metric])
        for t in ta
        if t in tb and ta[t].get(metric) is not None and tb[t].get(metric) is not None
    ]


def step_at_wall(run: dict[str, Any], wall: float) -> int:
    """The last evaluated checkpoint reached within `wall` seconds of training (0 = the base model)."""
    best = 0
    for s, w in run["summary"]["wall_curve"]:
        if s and w is not None and w <= wall + 1e-6:
            best = max(best, s)
    return best


def paired(
    runs: list[dict[str, Any]],
    base: dict[str, Any] | None,
    arm: str,
    ref: str,
    *,
    metric: str,
    greedy: bool = False,
    equal_time: bool = False,
    at_step: int | None = None,
) -> dict[str, Any] | None:
    """arm - ref per seed (final checkpoints, the checkpoints each reached within the shorter of the two
    training wall times, or both at `at_step`) with a bootstrap 95% interval over seeds and tasks."""
    from bench_power import bootstrap_ci

    # At equal wall time a run needs its full curve (a cheaper seed has no checkpoint between 0 and its last).
    keep = (lambda r: has_full_curve(r)) if equal_time else (lambda r: True)
    mine = {r["seed"]: r for r in runs if r["arm"] == arm and keep(r)}
    refs = {r["seed"]: r for r in runs if r["arm"] == ref and keep(r)}
    seeds = sorted(set(mine) & set(refs))
    if not seeds:
        return None
    per_seed, diffs, steps = [], [], []
    for sd in seeds:
        a, b = mine[sd], refs[sd]
        if at_step is not None:
            sa = sb = at_step
        elif equal_time:
            t = min(a["summary"]["wall_s"], b["summary"]["wall_s"])
            sa, sb = step_at_wall(a, t), step_at_wall(b, t)
        else:
            sa, sb = a["summary"]["final_step"], b["summary"]["final_step"]
        d = task_diffs(_eval_at(a, base, sa), _eval_at(b, base, sb), metric, greedy)
        diffs.append(d)
        per_seed.append(sum(d) / len(d) if d else None)
        steps.append((sa, sb))
    ci = bootstrap_ci(diffs)
    return {
        "seeds": seeds,
        "per_seed": per_seed,
        "steps": steps,
        "mean": None if ci is None else ci[0],
        "lo": None if ci is None else ci[1],
        "hi": None if ci is None else ci[2],
        "sd": sd_of(per_seed),
    }


def first_reach(curve: list[tuple[int, float | None]], target: float) -> int | None:
    """The first step of `curve` ((step, score) in step order) whose score reaches `target` (None: never). The one
    rule of "steps to fixed's best", shared by the report, its targets and `pair_summaries.py --reach`."""
    return next((s for s, score in curve if score is not None and score >= target), None)


def steps_to_best(runs: list[dict[str, Any]], arm: str) -> list[dict[str, Any]]:
    """Per seed with full curves: fixed's best held-out score and its step, and the first step `arm` reached it."""
    out = []
    for fr in (r for r in runs if r["arm"] == "fixed" and has_full_curve(r)):
        hr = next((r for r in runs if r["arm"] == arm and r["seed"] == fr["seed"] and has_full_curve(r)), None)
        if hr is None:
            continue
        fs = fr["summary"]
        reach = first_reach([(s, score) for s, score, _ in hr["summary"]["curve"]], fs["best_score"])
        out.append(
            {
                "seed": fr["seed"],
                "fixed_best_step": fs["best_step"],
                "fixed_best": fs["best_score"],
                "reached_at": reach,
                "ratio": None if reach is None or fs["best_step"] == 0 else reach / fs["best_step"],
            }
        )
    return out


# -- power ----------------------------------------------------------------------------------------------------
# The first sitting (8 steps, 10 eval tasks x k=4; RESULTS.md before issue 13): HarnessRL - fixed, final audit,
# per seed 0-3. Its sd is the only measured seed-to-seed sd of a paired difference so far.
PREVIOUS_SITTING = {
    "audit_diffs": [2.0, 2.2, -1.3, -1.1],
    "score_diffs": [1.1, 2.1, -1.5, -1.2],
    "eval_tasks": 10,
    "eval_k": 4,
    "steps": 8,
}
DETECT_POINTS = 2.0  # the difference the benchmark must detect (audit points)


def pilot_numbers(pilot: list[dict[str, Any]]) -> dict[str, Any]:
    """Eval noise (same model, two eval seeds) and step / eval times from the pilot's summaries."""
    from bench_power import eval_noise

    noise: dict[str, list[float]] = {"avg": [], "audit": []}
    n_tasks, k = None, None
    models = []
    for s in pilot:
        evs = [s["eval"]] if s["kind"] == "base" else [s["evals"][max(s["evals"], key=int)]] if s.get("evals") else []
        for ev in evs:
            if ev.get("noise"):
                models.append(s["name"])
                n_tasks, k = len(ev["tasks"]), ev.get("k")
                for key in noise:
                    got = eval_noise(ev["tasks"], ev["noise"]["tasks"], key)
                    if got:
                        noise[key].append(got["sd_one_eval"])
    arms = [s for s in pilot if s["kind"] == "arm"]
    # Eval noise of a PAIRED difference under common random numbers: (arm - base) measured with the eval seed
    # and again with the second seed; half the variance of the two measurements' difference is one's.
    pair_sd: list[float] = []
    b = next((s["eval"] for s in pilot if s["kind"] == "base" and s["eval"].get("noise")), None)
    for s in arms:
        ev = s["evals"][max(s["evals"], key=int)] if s.get("evals") else None
        if b is None or ev is None or not ev.get("noise"):
            continue
        ta, tb, na, nb = ev["tasks"], b["tasks"], ev["noise"]["tasks"], b["noise"]["tasks"]
        dd = [
            100.0 * ((ta[t]["audit"] - tb[t]["audit"]) - (na[t]["audit"] - nb[t]["audit"]))
            for t in ta
            if all(x.get(t, {}).get("audit") is not None for x in (ta, tb, na, nb))
        ]
        sd_dd = sd_of(dd)
        if sd_dd is not None:
            pair_sd.append(sd_dd / math.sqrt(len(dd)) / math.sqrt(2))
    steps = [st for s in arms for st in s.get("steps", [])]
    step_s = mean_of([st.get("train_step_s") for st in steps])
    step_wall = mean_of([st.get("wall_s", 0.0) - st.get("pause_s", 0.0) for st in steps])
    evals = [ev for s in arms for ev in s.get("evals", {}).values()] + [s["eval"] for s in pilot if s["kind"] == "base"]
    return {
        "models": models,
        "n_tasks": n_tasks,
        "k": k,
        "eval_sd_avg": mean_of(noise["avg"]),
        "eval_sd_audit": mean_of(noise["audit"]),
        "eval_sd_paired_audit": mean_of(pair_sd),
        "step_s": step_s,
        "step_wall_s": step_wall,
        "batch": mean_of([st.get("n_groups") for st in steps]),
        "pause_share": mean_of([s["pause_s"] / s["wall_s"] for s in arms if s.get("wall_s")]),
        "overhead_share": mean_of([s["overhead_s"] / s["train_step_s"] for s in arms if s.get("train_step_s")]),
        "eval_sampled_s": mean_of([ev["seconds"] for ev in evals]),
        "eval_greedy_s": mean_of([ev["greedy"]["seconds"] for ev in evals if ev.get("greedy")]),
        "arms": {
            s["name"]: {"final_audit": 100 * s["evals"][max(s["evals"], key=int)]["audit"]}
            for s in arms
            if s.get("evals")
        },
    }


def power_report(runs: list[dict[str, Any]], pilot: list[dict[str, Any]], budget: dict[str, Any]) -> dict[str, Any]:
    """Seeds needed to detect a 2-audit-point paired difference with 80% power (two-sided 0.05), and the power
    the seeds at hand achieve. Inputs: the previous sitting's paired sd, the pilot's eval noise, and (when the
    rendered runs have >= 2 paired seeds) the measured sd of HarnessRL - fixed."""
    from bench_power import power, sd_d_for_eval, seeds_needed

    prev = PREVIOUS_SITTING
    sd_prev = sd_of(prev["audit_diffs"])
    p = pilot_numbers(pilot) if pilot else {}
    out: dict[str, Any] = {"delta": DETECT_POINTS, "sd_prev": sd_prev, "prev": prev, "pilot": p}
    e = p.get("eval_sd_audit")
    if e is not None and p.get("n_tasks") and p.get("k"):
        per_sample = e * math.sqrt(p["n_tasks"] * p["k"])  # eval sd ~ 1/sqrt(tasks x samples)
        e_prev = per_sample / math.sqrt(prev["eval_tasks"] * prev["eval_k"])
        e_new = per_sample / math.sqrt(len(budget["eval_tasks"]) * budget["eval_k"])
        out.update(
            eval_sd_prev=e_prev,
            eval_sd_new=e_new,
            sd_train=math.sqrt(max(0.0, sd_prev**2 - 2 * e_prev**2)),
            sd_projected=sd_d_for_eval(sd_prev, e_prev, e_new),
        )
        ep = p.get("eval_sd_paired_audit")
        if ep is not None:
            # Under common random numbers the paired difference carries less eval noise than two independent
            # evals (2 x e^2): use the measured paired eval noise instead, scaled the same way.
            scale = math.sqrt(p["n_tasks"] * p["k"])
            ep_prev = ep * scale / math.sqrt(prev["eval_tasks"] * prev["eval_k"])
            ep_new = ep * scale / math.sqrt(len(budget["eval_tasks"]) * budget["eval_k"])
            train = math.sqrt(max(0.0, sd_prev**2 - ep_prev**2))
            out.update(
                eval_sd_paired_prev=ep_prev,
                eval_sd_paired_new=ep_new,
                sd_train=train,
                sd_projected=math.sqrt(train**2 + ep_new**2),
            )
    sd_use = out.get("sd_projected", sd_prev)
    out["needed_prev_sd"] = seeds_needed(DETECT_POINTS, sd_prev)
    out["needed"] = seeds_needed(DETECT_POINTS, sd_use)
    pair = paired(runs, None, "harnessrl", "fixed", metric="audit") if runs else None
    measured = [d for d in (pair or {}).get("per_seed", []) if d is not None]
    out["n_seeds"] = len(measured)
    out["sd_measured"] = sd_of(measured)
    sd_now = out["sd_measured"] if out["sd_measured"] is not None else sd_use
    out["power_now"] = power(DETECT_POINTS, sd_now, len(measured)) if len(measured) >= 2 else None
    out["power_by_n"] = {n: power(DETECT_POINTS, sd_use, n) for n in (2, 3, 4, 6, 8, 10)}
    return out
