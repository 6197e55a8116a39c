"""Benchmark collection: training-side numbers from each run folder, the job summaries (`compact_summary`,
written by the workers, committed under benchmarks/results/<preset>/), which of them may share a table (one
code hash only: `select_code`), per-run and per-arm summaries, the pairing with the fixed harness and the
issue's targets; `build_results` assembles `results.json`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_spec import ARMS, PRESETS, SPURIOUS_EVENTS, Job
from bench_stats import has_full_curve, mean_of, power_report, sd_of, steps_to_best

from graphs.round_record import RoundRecord
from harness.store import UpdateRecord
from harness.types import INTERFACES
from trainer.run_logs import read_events, read_metrics, read_rounds, read_updates


def collect_run(run_dir: Path) -> dict[str, Any]:
    """Training-side numbers from the run folder the trainer wrote."""
    metrics = read_metrics(run_dir / "metrics.jsonl")
    rounds = read_rounds(run_dir / "rounds.jsonl")
    events = read_events(run_dir / "events.jsonl")
    groups = sum(m.n_groups for m in metrics)
    dead = sum((m.dead_share or 0.0) * m.n_groups for m in metrics)
    per_iface = {i: {"proposals": 0, "accepted": 0, "rejected": 0} for i in INTERFACES}
    decisions: Counter[str] = Counter()
    fails: Counter[str] = Counter()  # the critic's failed checks ("FAIL: std_gain") per interface
    # Training's verdicts on accepted updates (trainer/provisional.py), per interface of the graded update.
    graded = {i: {"confirm": 0, "revert": 0, "superseded": 0} for i in INTERFACES}
    for r in rounds:
        for v in r.provisional.verdicts if r.provisional is not None else []:
            if v.interface in graded and v.verdict in graded[v.interface]:
                graded[v.interface][v.verdict] += 1
        for rep in r.reports:
            for att in rep.attempts:
                fails.update(
                    f"{rep.interface}: {reason.split(':', 1)[-1].strip()}"
                    for reason in att.reasons or []
                    if reason.startswith("FAIL")
                )
            decision = str(rep.decision)
            decisions[decision] += 1
            if rep.interface not in per_iface:
                continue  # no attribution (e.g. skipped event): nothing was proposed
            n = len(rep.attempts)
            acc = 1 if decision == "accepted" else 0
            per_iface[rep.interface]["proposals"] += n
            per_iface[rep.interface]["accepted"] += acc
            per_iface[rep.interface]["rejected"] += n - acc
    event_types = Counter(e.type for e in events)
    times = [m.time for m in metrics if m.time is not None]
    # Can a repair act? Only if its task is drawn again after the round (tasks are drawn at step time, so
    # from step+1 on). Count the groups on updated tasks (or their variants) after it.
    # The plain arm has no harness folder: no updates.
    updates = [u for u in read_updates(run_dir / "harness" / "updates.jsonl") if u.update is not None]
    revisits = 0
    for u in updates:
        assert u.update is not None
        touched = {op.task_id for op in u.update.ops}
        for m in metrics:
            if m.step > u.step:
                revisits += sum(1 for t in m.tasks if t.split(".")[0] in touched)
    update_log = _update_log(run_dir, updates, rounds)
    late = [m for m in metrics if m.step > len(metrics) // 2]
    # Wall time per step: from the step's start (trainer.grpo training_step) to its metrics line (after the
    # evolver pause); summed, it is the training wall time across sittings (resume gaps and model loading are
    # not in it). Older runs without `step_started`: the step time plus the pause.
    walls = [
        m.time - m.step_started
        if m.step_started is not None and m.time is not None
        else (m.train_step_s or 0.0) + m.pause_s
        for m in metrics
    ]
    # The pre-flight round runs before step 1 (trainer/preflight.py): its pause (probes and round) is training wall
    # time and pause that no step's line holds. Its probes, and the critic's, are generation beyond the trained groups.
    preflights = [r for r in rounds if r.preflight is not None]
    pre_pause = sum(r.pause_s for r in preflights)
    # An accepted repair tried on similar tasks (agents/generalise.py) samples probes of its own, in its report's
    # `generalised` numbers.
    probe_rollouts = sum(r.preflight.rollouts for r in preflights if r.preflight is not None) + sum(
        float((a.numbers or {}).get("cost_probe_rollouts") or 0.0)
        for r in rounds
        for rep in r.reports
        for a in [*rep.attempts, *([rep.generalised] if rep.generalised is not None else [])]
    )
    cum, ckpt_wall = pre_pause, {}
    for m, w in zip(metrics, walls):
        cum += w
        ckpt_wall[str(m.step)] = cum
    dapo = [m.ds_groups_kept is not None for m in metrics]
    gen = sum(m.ds_groups_generated if m.ds_groups_generated is not None else m.n_groups for m in metrics)
    trained = sum(m.ds_groups_kept if m.ds_groups_kept is not None else m.n_groups for m in metrics)
    # A DAPO step trains on its kept groups: those the detector still calls dead (std < eps, wider than DAPO's
    # exact zero) are `ds_kept_dead` (0 in runs from before it was counted).
    dead_trained = sum(m.ds_kept_dead if kept else (m.dead_share or 0.0) * m.n_groups for m, kept in zip(metrics, dapo))
    return {
        "steps": [
            {
                "step": m.step,
                "reward": m.reward,
                "reward_std": m.reward_std,
                "dead_share": m.dead_share,
                "n_groups": m.n_groups,
                "pause_s": m.pause_s,
                "harness_version": m.harness_version_now,
                "hinted_share": m.hinted_share,
                "wall_s": w,
                "train_step_s": m.train_step_s,
                "overhead_s": m.harness_overhead_s,
                # Per group, in batch order: which task, its mean and std (what per-task dead shares are read from).
                "tasks": m.tasks or None,
                "group_means": m.group_means or None,
                "group_stds": m.group_stds,
                # The controls' own per-step numbers (None in other arms): fixed-norm's share of the loss normaliser
                # it kept (live groups' tokens / all tokens), skip's exploration probability at the step's draw.
                "ln_token_share": _share(extra.get("ln_tokens_live"), extra.get("ln_tokens_all")),
                "skip_explore": extra.get("skip_explore"),
            }
            for m, w, extra in zip(metrics, walls, (m.model_extra or {} for m in metrics))
        ],
        "zero_var_share": dead / groups if groups else None,
        # DAPO trains only on groups with variance: the share among the groups the step trained on.
        "zero_var_trained": dead_trained / trained if trained else None,
        "groups_generated": gen,
        "groups_trained": trained,
        "ds_short": sum(m.ds_short for m in metrics),
        "wall_s": pre_pause + sum(walls),
        "ckpt_wall": ckpt_wall,
        "train_step_s": sum(m.train_step_s or 0.0 for m in metrics),
        "overhead_s": sum(m.harness_overhead_s or 0.0 for m in metrics),
        "sampler_s": sum(m.sampler_s for m in metrics),
        "reward_overhead_s": sum(m.reward_overhead_s for m in metrics),
        "pause_s": pre_pause + sum(m.pause_s for m in metrics),
        "preflight_pause_s": pre_pause,
        # The pre-flight's, the critic's and the generalised repairs' probes (the fallback's are not counted).
        "probe_rollouts": probe_rollouts,
        "probe_groups": probe_rollouts / group_size(run_dir) if probe_rollouts else 0.0,
        "loop_s": (times[-1] - times[0]) if len(times) > 1 else None,
        "judge_warnings": int(sum(m.judge_warnings for m in metrics)),
        "rounds": len(rounds),
        "round_errors": sum(1 for r in rounds if r.error),
        "decisions": dict(decisions),
        "fallbacks": decisions["fallback"],
        "per_interface": per_iface,
        "event_types": dict(event_types),
        "critic_fails": dict(fails),
        "graded": graded,
        "confirmed": sum(g["confirm"] for g in graded.values()),
        "reverted": sum(g["revert"] for g in graded.values()),
        "spurious_events": sum(event_types[t] for t in SPURIOUS_EVENTS),
        "updates": len(updates),
        "update_log": update_log,
        "updated_task_revisits": revisits,
        "hinted_share": mean_of([m.hinted_share for m in metrics]),
        "train_reward_late": mean_of([m.reward for m in late]),
        # The pre-flight round's probes (trainer/preflight.py): tasks, group means and stds, dead tasks, seconds.
        "preflight": next(
            (r.preflight.model_dump(mode="json", exclude_unset=True) for r in preflights if r.preflight is not None),
            None,
        ),
    }


def _share(part: Any, whole: Any) -> float | None:
    return None if part is None or not whole else float(part) / float(whole)


def group_size(run_dir: Path) -> int:
    """The run's GRPO group size G (its resolved config.yaml)."""
    import yaml

    return int(yaml.safe_load((run_dir / "config.yaml").read_text())["train"]["num_generations"])


def _update_log(run_dir: Path, updates: list[UpdateRecord], rounds: list[RoundRecord]) -> list[dict[str, Any]]:
    """One line per harness update, for the report's "which updates moved the curve": its step, interface, tasks
    and their domains (from the run's first harness version), the ops, where it came from (a rule brain's template,
    the fallback, a revert) and training's verdict on each of its tasks, the pause that gave it and why (none: the
    update was never graded: a fallback, a revert, or no training group on its task before the run ended)."""
    first = run_dir / "harness" / "versions" / "v000000.json"
    tasks = json.loads(first.read_text())["tasks"] if first.is_file() else {}
    domain = {tid: t["domain"] for tid, t in tasks.items()}
    # An update that touched several tasks is graded per task: {version: {task: (verdict, pause step, reasons)}}.
    verdicts: dict[int, dict[str, tuple[str, int, list[str]]]] = defaultdict(dict)
    for r in rounds:
        for v in r.provisional.verdicts if r.provisional is not None else []:
            verdicts[v.version][v.task_id] = (v.verdict, r.step, v.reasons)
    log = []
    for u in updates:
        assert u.update is not None  # `collect_run` passes committed updates only
        meta, ops = u.meta, u.update.ops
        ids = sorted({op.task_id for op in ops})
        # A variant task (`<id>.<n>`) belongs to its parent's domain.
        domains = sorted({domain.get(t.split(".")[0], "?") for t in ids})
        origin = (
            "fallback"
            if meta.get("fallback")
            else "revert"
            if meta.get("revert_of")
            else meta.get("template") or meta.get("source")
        )
        log.append(
            {
                "version": u.version,
                "step": u.step,
                "interface": u.update.interface,
                "tasks": ids,
                "domains": domains,
                "ops": [op.op for op in ops],
                "failure_type": meta.get("failure_type"),
                "origin": origin,
                # Training's verdicts per task (confirm / revert / superseded) and the pause that gave each.
                "verdicts": {
                    t: {"verdict": v, "step": st, "reasons": why}
                    for t, (v, st, why) in sorted(verdicts[u.version].items())
                },
            }
        )
    return log


def run_summary(run: dict[str, Any], base: dict[str, Any] | None) -> dict[str, Any]:
    """Per-run headline numbers; scores on the 0-100 scale."""
    evals = {int(k): v for k, v in run["evals"].items()}
    if base is not None:
        evals.setdefault(0, base["eval"])
    steps = sorted(evals)
    best_step = max(steps, key=lambda s: (evals[s]["avg_at_k"], -s))  # ties: the earliest
    # A seed past the preset's full_curve_seeds was evaluated at step 0 and its final step only: its "best" would be
    # the better of two points, so it has none (None: left out of the arm's means of best_*).
    full = has_full_curve(run)
    # The second held-out set (train-split tasks outside every pool), on the base and the final checkpoint.
    th = lambda e, key: None if not e or not e.get("train_heldout") else pct(e["train_heldout"][key])  # noqa: E731
    final = evals[steps[-1]]
    b = base["eval"] if base else None
    pct = lambda x: None if x is None else 100.0 * x  # noqa: E731
    gap = lambda e: None if e["audit"] is None else 100.0 * (e["avg_at_k"] - e["audit"])  # noqa: E731
    # The external yardstick (IFEval's checkers, greedy), where the eval ran it: the base and the last checkpoint.
    ife = lambda e, key: None if not e or not e.get("ifeval") else 100.0 * e["ifeval"][key]  # noqa: E731
    wall = run["train_s"]
    greedy = {s: evals[s].get("greedy") for s in steps}
    walls = {int(k): v for k, v in run.get("ckpt_wall", {}).items()}
    walls[0] = 0.0
    return {
        "greedy_curve": [
            (s, pct(greedy[s]["avg_at_k"]) if greedy[s] else None, pct(greedy[s]["audit"]) if greedy[s] else None)
            for s in steps
        ],
        "wall_curve": [(s, walls.get(s)) for s in steps],
        "final_greedy_score": pct(greedy[steps[-1]]["avg_at_k"]) if greedy[steps[-1]] else None,
        "final_greedy_audit": pct(greedy[steps[-1]]["audit"]) if greedy[steps[-1]] else None,
        "zero_var_trained": run.get("zero_var_trained"),
        "overhead_s": run.get("overhead_s"),
        "train_step_s": run.get("train_step_s"),
        "overhead_share": (run["overhead_s"] / run["train_step_s"]) if run.get("train_step_s") else None,
        "groups_generated": run.get("groups_generated"),
        "groups_trained": run.get("groups_trained"),
        # Generated beyond trained: DAPO's over-sampling, and the pre-flight's and critic's probes as groups.
        "extra_generation": (((run["groups_generated"] + run.get("probe_groups", 0.0)) / run["groups_trained"]) - 1.0)
        if run.get("groups_trained")
        else None,
        "step_wall_s": (wall - run["pause_s"]) / len(run["steps"]) if run.get("steps") else None,
        "ds_short": run.get("ds_short", 0),
        "curve": [(s, pct(evals[s]["avg_at_k"]), pct(evals[s]["audit"])) for s in steps],
        "full_curve": full,
        "best_step": best_step if full else None,
        "best_score": pct(evals[best_step]["avg_at_k"]) if full else None,
        "best_audit": pct(evals[best_step]["audit"]) if full else None,
        "max_audit": max(pct(evals[s]["audit"]) or 0 for s in steps) if full else None,
        "final_train_heldout": th(final, "avg_at_k"),
        "final_train_heldout_audit": th(final, "audit"),
        "base_train_heldout": th(b, "avg_at_k"),
        "base_train_heldout_audit": th(b, "audit"),
        "final_step": steps[-1],
        "final_score": pct(final["avg_at_k"]),
        "final_audit": pct(final["audit"]),
        "final_ifeval": ife(final, "prompt_strict"),
        "final_ifeval_inst": ife(final, "instruction_strict"),
        "base_ifeval": ife(b, "prompt_strict"),
        "base_ifeval_inst": ife(b, "instruction_strict"),
        "final_domains": {
            d: {"score": pct(v["avg_at_k"]), "audit": pct(v["audit"])} for d, v in final["domains"].items()
        },
        "best_domains": {
            d: {"score": pct(v["avg_at_k"]), "audit": pct(v["audit"])} for d, v in evals[best_step]["domains"].items()
        },
        "length_corr_final": final["length_corr"],
        "length_corr_base": b["length_corr"] if b else None,
        "words_final": final["mean_words"],
        "words_base": b["mean_words"] if b else None,
        "gap_final": gap(final),
        "gap_base": gap(b) if b else None,
        "gap_growth": (gap(final) - gap(b)) if b and gap(final) is not None and gap(b) is not None else None,
        "zero_var_share": run["zero_var_share"],
        "wall_s": wall,
        "pause_s": run["pause_s"],
        "pause_share": run["pause_s"] / wall if wall else None,
        "eval_s": sum(v["seconds"] for v in run["evals"].values()),
        "judge_warnings": run["judge_warnings"] + run.get("eval_judge_warnings", 0),
        "per_interface": run["per_interface"],
        "fallbacks": run["fallbacks"],
        "rounds": run["rounds"],
        "accepted": sum(v["accepted"] for v in run["per_interface"].values()),
        "proposals": sum(v["proposals"] for v in run["per_interface"].values()),
        # Training's verdicts (None in summaries from before they were collected: rendered as "–").
        "confirmed": run.get("confirmed"),
        "reverted": run.get("reverted"),
        "graded": run.get("graded"),
        "round_errors": run["round_errors"],
        "event_types": run["event_types"],
        "spurious_events": run["spurious_events"],
        "harness_version": run["summary"]["harness_version"],
        "dead_curve": [(s["step"], s["dead_share"]) for s in run["steps"]],
    }


def arm_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean (and sd over seeds) of every scalar in the per-run summaries."""
    out: dict[str, Any] = {"n": len(runs), "seeds": [r["seed"] for r in runs]}
    for key in (
        "best_score",
        "best_audit",
        "max_audit",
        "best_step",
        "final_score",
        "final_audit",
        "zero_var_share",
        "length_corr_final",
        "length_corr_base",
        "gap_growth",
        "wall_s",
        "pause_s",
        "pause_share",
        "eval_s",
        "judge_warnings",
        "fallbacks",
        "rounds",
        "round_errors",
        "spurious_events",
        "words_final",
        "final_greedy_score",
        "final_greedy_audit",
        "zero_var_trained",
        "overhead_share",
        "extra_generation",
        "step_wall_s",
        "overhead_s",
        "final_ifeval",
        "final_ifeval_inst",
        "final_train_heldout",
        "final_train_heldout_audit",
        "accepted",
        "proposals",
        "confirmed",
        "reverted",
    ):
        vals = [r["summary"].get(key) for r in runs]
        out[key] = mean_of(vals)
        out[key + "_sd"] = sd_of(vals)
    out["per_interface"] = {
        i: {k: sum(r["summary"]["per_interface"][i][k] for r in runs) for k in ("proposals", "accepted", "rejected")}
        for i in INTERFACES
    }
    graded = [r["summary"].get("graded") for r in runs]
    out["graded"] = (
        None
        if any(g is None for g in graded)
        else {
            i: {k: sum(g.get(i, {}).get(k, 0) for g in graded) for k in ("confirm", "revert", "superseded")}
            for i in INTERFACES
        }
    )
    for key in ("proposals", "accepted", "confirmed", "reverted"):  # summed over seeds (None: a summary lacks it)
        vals = [r["summary"].get(key) for r in runs]
        out[key + "_total"] = None if any(v is None for v in vals) else sum(vals)
    domains = sorted({d for r in runs for d in r["summary"]["final_domains"]})
    out["final_domains"] = {
        d: {m: mean_of([r["summary"]["final_domains"].get(d, {}).get(m) for r in runs]) for m in ("score", "audit")}
        for d in domains
    }
    return out


def paired_vs_fixed(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per arm: final score/audit minus the fixed arm's at the same seed (0-100 points)."""
    fixed = {r["seed"]: r["summary"] for r in runs if r["arm"] == "fixed"}
    out: dict[str, dict[str, Any]] = {}
    for arm in ARMS:
        if arm == "fixed":
            continue
        mine = sorted((r["seed"], r["summary"]) for r in runs if r["arm"] == arm and r["seed"] in fixed)
        if not mine:
            continue
        out[arm] = {
            "seeds": [sd for sd, _ in mine],
            "score": [s["final_score"] - fixed[sd]["final_score"] for sd, s in mine],
            "audit": [
                None
                if s["final_audit"] is None or fixed[sd]["final_audit"] is None
                else s["final_audit"] - fixed[sd]["final_audit"]
                for sd, s in mine
            ],
        }
    return out


def targets(by_arm: dict[str, list[dict[str, Any]]], arm_sum: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's four targets, measured (None where an arm needed for it was not run)."""
    rows: list[dict[str, Any]] = []
    h, f, d, hd = arm_sum.get("harnessrl"), arm_sum.get("fixed"), arm_sum.get("dapo"), arm_sum.get("harnessrl-dapo")

    def diff(a, b, key):
        return None if a is None or b is None or a[key] is None or b[key] is None else a[key] - b[key]

    for other, name in ((f, "fixed"), (d, "dapo")):
        for key, what in (("final_audit", "final checkpoint"), ("best_audit", "best checkpoint")):
            v = diff(h, other, key)
            rows.append(
                {
                    "target": f"audit(harnessrl) - audit({name}) >= 3 points ({what})",
                    "value": v,
                    "met": None if v is None else v >= 3.0,
                }
            )
    v = diff(hd, d, "final_audit")
    rows.append(
        {
            "target": "audit(harnessrl-dapo) - audit(dapo) > 0 (final checkpoint)",
            "value": v,
            "met": None if v is None else v > 0.0,
            "note": "its paired interval: the paired-differences table",
        }
    )
    # Against the two controls (issue 32): HarnessRL has to beat both at the final checkpoint.
    for name in ("fixed-norm", "skip"):
        v = diff(h, arm_sum.get(name), "final_audit")
        rows.append(
            {
                "target": f"audit(harnessrl) - audit({name}) > 0 (final checkpoint)",
                "value": v,
                "met": None if v is None else v > 0.0,
                "note": "its paired interval: the paired-differences table",
            }
        )
    # Steps to reach fixed's best held-out score, per seed (paired), from the seeds with full curves.
    # None where HarnessRL never reached it, or where the base model is fixed's best ("reaching it" is free).
    ratios = [r["ratio"] for r in steps_to_best([*by_arm.get("fixed", []), *by_arm.get("harnessrl", [])], "harnessrl")]
    known = [r for r in ratios if r is not None]
    v = mean_of(known) if known and len(known) == len(ratios) else None
    rows.append(
        {
            "target": "harnessrl reaches fixed's best held-out score in <= 60% of fixed's steps",
            "value": v,
            "met": None if v is None else v <= 0.6,
            "note": f"per seed: {['never/undefined' if r is None else round(r, 2) for r in ratios]}",
        }
    )
    v = (
        None
        if not h or not f or f["zero_var_share"] in (None, 0) or h["zero_var_share"] is None
        else h["zero_var_share"] / f["zero_var_share"]
    )
    rows.append(
        {
            "target": "zero-variance share(harnessrl) <= 0.5 x share(fixed)",
            "value": v,
            "met": None if v is None else v <= 0.5,
        }
    )
    v = None if not h else h["pause_share"]
    rows.append(
        {"target": "evolver pause <= 10% of harnessrl wall time", "value": v, "met": None if v is None else v <= 0.10}
    )
    v = None if not h else h.get("overhead_share")
    rows.append(
        {"target": "harness overhead <= 2% of harnessrl step time", "value": v, "met": None if v is None else v <= 0.02}
    )
    return rows


# Issue 22's "where each gain comes from" targets: (key, target in words, measured-vs-limit test).
GAIN_TARGETS = [
    ("accept_share", ">= 25% of proposals accepted", lambda v: v >= 0.25),
    ("confirm_share", ">= 60% of accepted updates confirmed", lambda v: v >= 0.60),
    ("zero_var_ratio", "zero-variance share of trained groups <= 1/2 of fixed's", lambda v: v <= 0.5),
    ("extra_generation", "... at <= 10% extra generation", lambda v: v <= 0.10),
    ("pause_share", "pause <= 10% of wall time", lambda v: v <= 0.10),
    ("overhead_share", "harness overhead <= 2% of step time", lambda v: v <= 0.02),
]


def gain_targets(arm_sum: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per arm (but fixed), each of `GAIN_TARGETS` measured: {"value", "met"} (None where the arm or its
    summaries lack what it needs: no proposals, no verdicts collected, fixed not run). Shares are over the
    seeds' sums (proposals, accepted, confirmed); the rest are the arm's means."""
    f = arm_sum.get("fixed")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for arm, s in arm_sum.items():
        if arm in ("fixed", "plain"):  # the reference, and the arm without harness code
            continue
        prop, acc, conf = s.get("proposals_total"), s.get("accepted_total"), s.get("confirmed_total")
        fz, z = (f or {}).get("zero_var_trained"), s.get("zero_var_trained")
        vals = {
            "accept_share": acc / prop if prop else None,
            "confirm_share": conf / acc if conf is not None and acc else None,
            "zero_var_ratio": z / fz if z is not None and fz else None,
            "extra_generation": s.get("extra_generation"),
            "pause_share": s.get("pause_share"),
            "overhead_share": s.get("overhead_share"),
        }
        out[arm] = {
            k: {"value": vals[k], "met": None if vals[k] is None else bool(test(vals[k]))}
            for k, _, test in GAIN_TARGETS
        }
    return out


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 5)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v) for v in x]
    return x


def compact_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The job summary committed under benchmarks/results/<preset>/: the worker's result with floats rounded."""
    return _round({"schema": 2, **result})


def load_summaries(results_dir: Path) -> list[dict[str, Any]]:
    """Every job summary in the folder (one file per job; a rerun under other code replaces it)."""
    if not results_dir.is_dir():
        return []
    return [json.loads(f.read_text()) for f in sorted(results_dir.glob("*.json"))]


def code_groups(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summaries grouped by the code they ran (code hash), most jobs first, then newest."""
    groups: dict[str, dict[str, Any]] = {}
    for s in summaries:
        c = s.get("code") or {}
        key = c.get("code_hash") or "unknown"
        g = groups.setdefault(key, {"code_hash": key, "commits": set(), "dirty": False, "taken": "", "jobs": []})
        g["commits"].add(c.get("commit", "unknown"))
        g["dirty"] = g["dirty"] or bool(c.get("dirty"))
        g["taken"] = max(g["taken"], c.get("taken", ""))
        g["jobs"].append(s)
    out = sorted(groups.values(), key=lambda g: (len(g["jobs"]), g["taken"]), reverse=True)
    for g in out:
        g["commits"] = sorted(g["commits"])
    return out


def select_code(summaries: list[dict[str, Any]], choose: str | None = None) -> tuple[dict[str, Any] | None, list]:
    """(the group rendered, the groups left out): summaries of different code never share a table. `choose`
    is a prefix of a commit or of a code hash; default: the group with most jobs (ties: the newest)."""
    groups = code_groups(summaries)
    if not groups:
        return None, []
    if choose:
        hits = [
            g for g in groups if g["code_hash"].startswith(choose) or any(c.startswith(choose) for c in g["commits"])
        ]
        if len(hits) != 1:
            raise SystemExit(
                f"compare.py: --commit {choose!r} matches {len(hits)} code versions of the summaries; "
                f"choose one of {[(g['commits'], g['code_hash'][:12]) for g in groups]}"
            )
        chosen = hits[0]
    else:
        chosen = groups[0]
    return chosen, [g for g in groups if g is not chosen]


STAND_IN_SEEDS = 2  # an arm is shown equal under two codes at this many seeds before older summaries stand in


def eval_signature(summary: dict[str, Any]) -> dict[str, Any]:
    """What "equal on every held-out task" compares: per evaluated step, each test task's sampled and greedy score
    and audit, and the final checkpoint's second held-out set; timing and code fields are left out."""

    def tasks(ev: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if ev is None else {t: (v.get("avg"), v.get("audit")) for t, v in ev["tasks"].items()}

    return {
        step: {
            "sampled": tasks(ev),
            "greedy": tasks(ev.get("greedy")),
            "train_heldout": tasks(ev.get("train_heldout")),
        }
        for step, ev in summary["evals"].items()
    }


def stand_ins(
    own: list[dict[str, Any]], others: list[dict[str, Any]], min_seeds: int = STAND_IN_SEEDS
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Summaries of older code that may stand in for this code's missing seeds of an arm, and one exception line each.

    An arm's code path did not change between an older code hash and this one when, at `min_seeds` seeds or more
    that both ran, every held-out task's numbers are equal (`eval_signature`: the same steps, the same sampled and
    greedy score and audit per task). Then the older code's summaries of that arm at seeds this code has not run
    stand in, each marked `stand_in` (the older code hash and the seeds shown equal); nothing else is borrowed.
    Several older codes: the one with most jobs first (`code_groups` order), a seed taken once; within one code a
    job found twice (two folders) counts once."""
    mine: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for s in own:
        if s["kind"] == "arm":
            mine[s["arm"]][s["seed"]] = s
    borrowed: list[dict[str, Any]] = []
    exceptions: list[dict[str, Any]] = []
    for group in others:
        theirs: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
        for s in group["jobs"]:
            if s["kind"] == "arm":
                theirs[s["arm"]].setdefault(s["seed"], s)
        for arm, old in sorted(theirs.items()):
            shared = sorted(set(old) & set(mine[arm]))
            missing = sorted(set(old) - set(mine[arm]))
            if len(shared) < min_seeds or not missing:
                continue
            if any(eval_signature(old[sd]) != eval_signature(mine[arm][sd]) for sd in shared):
                continue
            for sd in missing:
                stand = {**old[sd], "stand_in": {"code_hash": group["code_hash"], "shown_equal_seeds": shared}}
                borrowed.append(stand)
                mine[arm][sd] = stand
            exceptions.append(
                {"arm": arm, "seeds": missing, "code_hash": group["code_hash"], "shown_equal_seeds": shared}
            )
    return borrowed, exceptions


def collect(
    summaries: list[dict[str, Any]], status: dict[str, str]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The base eval and the arm runs among `summaries` (one code version); marks every job in `status`."""
    base = None
    runs = []
    for data in summaries:
        status.setdefault(data["name"], "reused")
        if data["kind"] == "base":
            base = data
        else:
            runs.append(data)
    for r in runs:
        r["summary"] = run_summary(r, base)
    return base, runs


def build_results(
    args: argparse.Namespace, jobs: list[Job], status: dict[str, str], started: str, runtime_s: float, report: Path
) -> dict[str, Any]:
    """Everything `results.json` holds except the plot file names (`bench_render.plots` adds them)."""
    chosen, left_out = select_code(load_summaries(Path(args.results)), getattr(args, "commit", None))
    own = chosen["jobs"] if chosen else []
    borrowed: list[dict[str, Any]] = []
    exceptions: list[dict[str, Any]] = []
    if getattr(args, "stand_ins", None):
        # Older code's summaries: the other code of --results and the folder given (one file per job and folder, so
        # an older code's seeds shown equal usually sit in a folder of their own).
        mine = chosen["code_hash"] if chosen else None
        older = [j for g in left_out for j in g["jobs"]] + load_summaries(Path(args.stand_ins))
        borrowed, exceptions = stand_ins(own, [g for g in code_groups(older) if g["code_hash"] != mine])
    base, runs = collect(own + borrowed, status)
    pilot_dir = Path(getattr(args, "pilot_results", "") or "")
    pilot = load_summaries(pilot_dir) if str(pilot_dir) not in ("", ".") else []
    for job in jobs:
        status.setdefault(job.name, "not run")
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_arm.setdefault(r["arm"], []).append(r)
    arm_sum = {a: arm_summary(by_arm[a]) for a in ARMS if a in by_arm}
    results = {
        "preset": args.preset,
        "command": args.command,
        "started": started,
        "finished": getattr(args, "finished", None) or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runtime_s": runtime_s,
        "jobs": args.jobs,
        "git": args.git,
        "status": status,
        "base": base,
        "runs": runs,
        "arms": arm_sum,
        "targets": targets(by_arm, arm_sum),
        "plot_dir": str(report.parent / "plots"),
        "pilot_dir": str(pilot_dir),
        "results_dir": os.path.relpath(args.results, report.parent),
        # Summaries of the GPU presets beside this preset's folder (the report says when one has not been run).
        "gpu_summaries": {n: len(load_summaries(Path(args.results).parent / n)) for n in ("gpu", "gpu-4b")},
        "code": None
        if chosen is None
        else {k: chosen[k] for k in ("code_hash", "commits", "dirty", "taken")} | {"n_jobs": len(chosen["jobs"])},
        # Older code's summaries standing in for an arm shown equal on every held-out task (`stand_ins`).
        "stand_ins": exceptions,
        "left_out": [
            {
                "code_hash": g["code_hash"],
                "commits": g["commits"],
                "dirty": g["dirty"],
                "jobs": sorted(j["name"] for j in g["jobs"]),
            }
            for g in left_out
        ],
        "budget": {
            "config": PRESETS[args.preset].config,
            "steps": args.steps,
            "batch": args.batch,
            "group": args.group,
            "evolve_every": args.evolve_every,
            "eval_every": args.eval_every,
            "eval_tasks": jobs[0].eval_tasks,
            "eval_per_domain": args.eval_per_domain,
            "eval_k": args.eval_k,
            "max_tokens": args.max_tokens,
            "eval_seed": args.eval_seed,
            "seeds": args.seeds,
            "train_per_domain": args.train_per_domain,
            "full_curve_seeds": getattr(args, "full_curve_seeds", 0),
            "train_heldout_k": jobs[-1].train_heldout_k if jobs else 0,
            "train_heldout_tasks": len(jobs[-1].train_heldout_tasks) if jobs else 0,
            "train_pool": next((o for o in jobs[-1].overrides if o.startswith("data.tasks=")), "all"),
            "ablation_seeds": args.ablation_seeds if args.ablation_seeds is not None else args.seeds[:1],
        },
    }
    results["power"] = power_report(runs, pilot, results["budget"])
    return results
