"""Issue 30's yardsticks: did HarnessRL revive the tasks the fixed harness leaves dead, and at what cost?

Reads HarnessRL run folders (their metrics.jsonl carry each step's task ids and group stds; rounds.jsonl the rounds)
and, per seed, the fixed arm twice: a short fixed run folder for the per-task dead shares of steps 1 to
`--early` (the fixed arm's committed job summaries predate per-step task ids) and the committed 40-step fixed job
summary for the totals after step `--early`. Both fixed sources draw the same tasks at one seed: the fixed harness
never changes, so its sampler's draws depend on the seed alone.

    .venv/bin/python benchmarks/revive_report.py --harnessrl runs/h30-s0 runs/h30-s1 \
        --fixed-early runs/fixed8-s0 runs/fixed8-s1 \
        --fixed-summary benchmarks/results/smollm2-40-11a77c985112/fixed-s0.json \
            benchmarks/results/smollm2-40-11a77c985112/fixed-s1.json \
        --out benchmarks/results/revive/smollm2-40.json

Per seed it reports: the chronic tasks (dead share >= 0.5 in fixed's early steps), the share of HarnessRL's groups on
them after the early steps that vary, whether each got an accepted repair by then that training confirmed, dead
groups after the early steps (HarnessRL vs fixed), the zero-variance share of all trained groups, extra generation
(pre-flight, critic and generalisation probes over trained rollouts; the critic's split by round kind, failure class,
interface and decision), the share of accepted updates that answered
dead groups, and the pause's share of training wall time. Per task it splits HarnessRL's cut in dead groups into
fewer draws and fewer dead groups per draw, with fixed's early dead rate as the baseline rate (`per_task_cut`: an
estimate, since a task's dead rate moves as the policy learns) and, where the fixed run folder covers every step,
with fixed's own per-task rates over the same late steps (`late_cut`: exact, the two parts add up to the cut).
`--cut` computes only the latter from job summaries, for sittings whose run folders are gone.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:  # the bench_* siblings import each other by their bare names
    sys.path.insert(1, str(HERE))

from bench_collect import group_size  # noqa: E402

from agents.repair_ladder import DEAD_TYPES  # noqa: E402
from harness.detector import DetectorConfig  # noqa: E402
from trainer.io import read_jsonl  # noqa: E402
from trainer.round_events import EVENT_CLASS  # noqa: E402

EPS = DetectorConfig().eps  # the detector's default: a group is dead when its reward std is below it
TAU_LO, TAU_HI = DetectorConfig().tau_lo, DetectorConfig().tau_hi  # the detector's all-low / all-high levels


def per_task(metrics: list[dict[str, Any]], lo: int, hi: int) -> dict[str, list[int]]:
    """Task -> [groups, dead groups] over steps lo..hi (inclusive)."""
    out: dict[str, list[int]] = {}
    for m in metrics:
        if not lo <= m["step"] <= hi:
            continue
        if "tasks" not in m or "group_stds" not in m:
            raise ValueError(f"metrics step {m['step']}: no per-step task ids / group stds (run it on newer code)")
        for tid, std in zip(m["tasks"], m["group_stds"]):
            c = out.setdefault(tid, [0, 0])
            c[0] += 1
            c[1] += std < EPS
    return out


def dead_levels(metrics: list[dict[str, Any]], lo: int, hi: int) -> dict[str, Any]:
    """HarnessRL's dead groups over steps lo..hi by level, as the detector types them (all-low: mean <= tau_lo,
    all-high: mean >= tau_hi, flat: constant partial credit between), and per task its dead groups' levels.

    Reads each step's `tasks`, `group_means` and `group_stds` (metrics.jsonl rows, or a job summary's `steps`).
    """
    kinds = {"all_low": 0, "all_high": 0, "flat": 0}
    tasks: dict[str, dict[str, Any]] = {}
    for m in metrics:
        if not lo <= m["step"] <= hi:
            continue
        for tid, mean, std in zip(m["tasks"], m["group_means"], m["group_stds"]):
            row = tasks.setdefault(tid, {"groups": 0, "dead": 0, "dead_levels": []})
            row["groups"] += 1
            if std >= EPS:
                continue
            row["dead"] += 1
            row["dead_levels"].append(round(mean, 2))
            kinds["all_low" if mean <= TAU_LO else "all_high" if mean >= TAU_HI else "flat"] += 1
    return {"kinds": kinds, "tasks": {t: r for t, r in sorted(tasks.items()) if r["dead"]}}


VARIANT = re.compile(r"^(.+?)\.v\d+-")  # a harder variant's id: `<task id>.v<version>-<constraint>`


def base_task(tid: str) -> str:
    """The pool task a sampled id stands for: a variant's task (agents/sampling_templates.py), else itself."""
    m = VARIANT.match(tid)
    return m.group(1) if m else tid


def late_cut(h_rows: list[dict[str, Any]], f_rows: list[dict[str, Any]], early: int, steps: int) -> dict[str, Any]:
    """HarnessRL's cut in dead groups after `early`, split with fixed's own per-task dead rates over the same steps.

    Per pool task (a variant's groups count as its task's): fixed's late dead rate r, then
    fewer draws = (fixed's late groups - HarnessRL's) x r and revival = HarnessRL's late groups x r - its dead groups.
    The two add up to fixed's late dead groups minus HarnessRL's exactly. Needs a fixed run that covers the steps.
    """
    if max(r["step"] for r in f_rows) < steps:
        raise ValueError(f"the fixed rows end before step {steps}: no late per-task rates")

    def pooled(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tid, (g, d) in per_task(rows, early + 1, steps).items():
            c = out.setdefault(base_task(tid), [0, 0])
            c[0] += g
            c[1] += d
        return out

    h, f = pooled(h_rows), pooled(f_rows)
    tasks = {}
    for t in sorted(set(h) | set(f)):
        (fg, fd), (hg, hd) = f.get(t, [0, 0]), h.get(t, [0, 0])
        rate = fd / fg if fg else 0.0
        tasks[t] = {
            "fixed_late": {"groups": fg, "dead": fd},
            "harnessrl_late": {"groups": hg, "dead": hd},
            "cut_by_fewer_draws": round((fg - hg) * rate, 2),
            "cut_by_revival": round(hg * rate - hd, 2),
        }
    return {
        "fewer_draws": round(sum(r["cut_by_fewer_draws"] for r in tasks.values()), 2),
        "revival": round(sum(r["cut_by_revival"] for r in tasks.values()), 2),
        "fixed_late_dead": sum(r["fixed_late"]["dead"] for r in tasks.values()),
        "harnessrl_late_dead": sum(r["harnessrl_late"]["dead"] for r in tasks.values()),
        "tasks": tasks,
    }


def early_steps(f_early: Path) -> list[dict[str, Any]]:
    """The fixed arm's per-step rows: a run folder's metrics.jsonl, or a committed job summary's `steps`."""
    if f_early.is_dir():
        return read_jsonl(f_early / "metrics.jsonl")
    return json.loads(f_early.read_text())["steps"]


def seed_report(h_dir: Path, f_early: Path, f_summary: Path, early: int) -> dict[str, Any]:
    h_metrics = read_jsonl(h_dir / "metrics.jsonl")
    rounds = read_jsonl(h_dir / "rounds.jsonl")
    steps = max(m["step"] for m in h_metrics)
    f_rows = early_steps(f_early)
    f_tasks = per_task(f_rows, 1, early)
    chronic = sorted(t for t, (g, d) in f_tasks.items() if g and d / g >= 0.5)
    h_late = per_task(h_metrics, early + 1, steps)
    h_early = per_task(h_metrics, 1, early)
    fixed = json.loads(f_summary.read_text())
    f_steps = [s for s in fixed["steps"] if s["step"] <= steps]  # the steps HarnessRL ran, no more
    f_late_dead = sum(s["dead_share"] * s["n_groups"] for s in f_steps if s["step"] > early)
    f_late_groups = sum(s["n_groups"] for s in f_steps if s["step"] > early)
    f_zero_var = sum(s["dead_share"] * s["n_groups"] for s in f_steps) / sum(s["n_groups"] for s in f_steps)
    h_late_dead = sum(d for _, d in h_late.values())
    h_late_groups = sum(g for g, _ in h_late.values())
    trained = sum(m["n_groups"] for m in h_metrics)
    h_dead_all = sum(m["dead_share"] * m["n_groups"] for m in h_metrics)
    # Accepted repairs and training's verdicts on them, per task.
    accepted: dict[str, list[dict[str, Any]]] = {}
    verdicts: dict[int, str] = {}
    probe_rollouts = 0.0
    gen_rollouts = 0.0
    pre_rollouts = 0
    spend: dict[tuple[str, str, str, str], list[float]] = {}  # (round, class, interface, decision) -> [n, rollouts]
    for r in rounds:
        pre_rollouts += int((r.get("preflight") or {}).get("rollouts") or 0)
        for v in (r.get("provisional") or {}).get("verdicts") or []:
            verdicts[int(v["version"])] = v["verdict"]
        for rep in r.get("reports") or []:
            nums = [a.get("numbers") or {} for a in rep.get("attempts") or []]
            cost = sum(float(n.get("cost_probe_rollouts") or 0.0) for n in nums)
            spared = sum(float(n.get("seq_control_spared") or 0.0) for n in nums)
            late = sum(float(n.get("seq_control_late") or 0.0) for n in nums)
            probe_rollouts += cost
            key = (
                "preflight" if r.get("preflight") is not None else "regular",
                EVENT_CLASS.get(rep.get("failure_type") or "", "other"),
                rep.get("interface") or "none",
                rep.get("decision") or "none",
            )
            row = spend.setdefault(key, [0, 0.0, 0.0, 0.0])
            row[0] += 1
            row[1] += cost
            row[2] += spared
            row[3] += late
            # An accepted repair tried on similar tasks (agents/generalise.py) samples probes of its own.
            gen = (rep.get("generalised") or {}).get("numbers") or {}
            gen_rollouts += float(gen.get("cost_probe_rollouts") or 0.0)
            if rep.get("decision") == "accepted" and rep.get("committed_version") is not None:
                accepted.setdefault(rep["task_id"], []).append(
                    {
                        "step": r["step"],
                        "version": rep["committed_version"],
                        "failure_type": rep.get("failure_type"),
                        "interface": rep.get("interface"),
                        "template": (rep.get("attempts") or [{}])[-1].get("template"),
                    }
                )
    for reps in accepted.values():
        for a in reps:
            a["verdict"] = verdicts.get(int(a["version"]), "pending")
    n_acc = sum(len(v) for v in accepted.values())
    n_acc_dead = sum(a["failure_type"] in DEAD_TYPES for v in accepted.values() for a in v)
    pause = sum(float(r.get("pause_s") or 0.0) for r in rounds)
    train_s = sum(float(m.get("train_step_s") or 0.0) for m in h_metrics)
    rollouts_per_group = group_size(h_dir)
    chronic_rows = {}
    for t in chronic:
        hg, hd = h_late.get(t, [0, 0])
        fg, fd = f_tasks[t]
        by_early = [a for a in accepted.get(t, []) if a["step"] <= early]
        chronic_rows[t] = {
            "fixed_early": {"groups": fg, "dead": fd},
            "harnessrl_early": dict(zip(("groups", "dead"), h_early.get(t, [0, 0]))),
            "harnessrl_late": {"groups": hg, "dead": hd, "varying_share": (hg - hd) / hg if hg else None},
            "repairs_by_early": by_early,
            "confirmed_repair_by_early": any(a["verdict"] == "confirm" for a in by_early),
        }
    late_groups = sum(r["harnessrl_late"]["groups"] for r in chronic_rows.values())
    late_dead = sum(r["harnessrl_late"]["dead"] for r in chronic_rows.values())
    split = {}
    f_early_groups = sum(g for g, _ in f_tasks.values())
    for t, (fg, fd) in f_tasks.items():
        rate = fd / fg if fg else 0.0
        hg, hd = h_late.get(t, [0, 0])
        f_draws_late = f_late_groups * fg / f_early_groups  # fixed's early draw share
        split[t] = {
            "fixed_early_dead_rate": round(rate, 3),
            "harnessrl_late": {"groups": hg, "dead": hd},
            "cut_by_fewer_draws": round((f_draws_late - hg) * rate, 2),
            "cut_by_revival": round(hg * rate - hd, 2),
        }
    covers = max(r["step"] for r in f_rows) >= steps
    return {
        "steps": steps,
        "chronic": chronic_rows,
        "chronic_late_varying_share": (late_groups - late_dead) / late_groups if late_groups else None,
        "dead_after_early": {"harnessrl": h_late_dead, "fixed": round(f_late_dead, 2), "groups": h_late_groups},
        "dead_after_early_ratio": h_late_dead / f_late_dead if f_late_dead else None,
        "zero_var_trained": {"harnessrl": h_dead_all / trained, "fixed": f_zero_var},
        "zero_var_ratio": (h_dead_all / trained) / f_zero_var if f_zero_var else None,
        "extra_generation": {
            "preflight_rollouts": pre_rollouts,
            "critic_probe_rollouts": probe_rollouts,
            "generalise_probe_rollouts": gen_rollouts,
            "trained_rollouts": trained * rollouts_per_group,
            "share": (pre_rollouts + probe_rollouts + gen_rollouts) / (trained * rollouts_per_group),
        },
        # Where the critic's probes went: reports and their attempts' probe rollouts per round kind, failure class
        # (trainer.round_events.EVENT_CLASS), interface and decision, the most costly first; `control_spared`: the
        # exact test's control top-ups not drawn, the candidate having failed without them; `control_late`: those drawn
        # once it passed without them (tools/candidate_rollouts.py, `Rollouts.defer_control_top_up`).
        "critic_probes": [
            {
                "round": k[0],
                "class": k[1],
                "interface": k[2],
                "decision": k[3],
                "reports": n,
                "rollouts": c,
                "control_spared": sp,
                "control_late": lt,
            }
            for k, (n, c, sp, lt) in sorted(spend.items(), key=lambda kv: -kv[1][1])
        ],
        "accepted": {"all": n_acc, "dead": n_acc_dead, "share_dead": n_acc_dead / n_acc if n_acc else None},
        "accepted_updates": accepted,
        "pause": {"pause_s": round(pause, 1), "train_s": round(train_s, 1), "share": pause / (pause + train_s)},
        "per_task_cut": split,
        # The same cut split with fixed's own late per-task rates, when the fixed run folder covers the steps.
        "late_cut": late_cut(h_metrics, f_rows, early, steps) if covers else None,
        "dead_levels_after_early": dead_levels(h_metrics, early + 1, steps),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--levels",
        nargs="+",
        metavar="SUMMARY",
        help="only the dead groups' levels after --early, from HarnessRL job summaries (their per-step rows)",
    )
    ap.add_argument(
        "--cut",
        nargs="+",
        metavar="H=F",
        help="only the dead-group cut after --early split with fixed's own late per-task rates (`late_cut`): pairs of "
        "a HarnessRL job summary or run folder and a fixed one that covers its steps, same seed",
    )
    ap.add_argument("--harnessrl", nargs="+", help="HarnessRL run folders, one per seed")
    ap.add_argument(
        "--fixed-early",
        nargs="+",
        help="short fixed run folders or their job summaries (bench_collect), same seeds and order",
    )
    ap.add_argument("--fixed-summary", nargs="+", help="40-step fixed job summaries, same order")
    ap.add_argument("--early", type=int, default=8, help="the early steps (default 8: the first regular round)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    command = "benchmarks/revive_report.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.levels:
        levels = {}
        for f in args.levels:
            rows = json.loads(Path(f).read_text())["steps"]
            levels[Path(f).stem] = dead_levels(rows, args.early + 1, max(r["step"] for r in rows))
        total = {k: sum(v["kinds"][k] for v in levels.values()) for k in ("all_low", "all_high", "flat")}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"command": command, "total": total, **levels}, indent=1) + "\n")
        print(f"dead groups after step {args.early} by level, {len(levels)} runs: {total}")
        return 0
    if args.cut:
        pairs = [pair.split("=", 1) for pair in args.cut]
        if any(len(p) != 2 for p in pairs):
            ap.error("--cut takes HARNESSRL_SUMMARY=FIXED_SOURCE pairs")
        cuts = {}
        for h, f in pairs:
            h_rows = early_steps(Path(h))
            cuts[Path(h).stem] = late_cut(h_rows, early_steps(Path(f)), args.early, max(r["step"] for r in h_rows))
        total = {k: round(sum(c[k] for c in cuts.values()), 2) for k in ("fewer_draws", "revival")}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"command": command, "total": total, **cuts}, indent=1) + "\n")
        for name, c in cuts.items():
            print(
                f"{name}: fewer draws {c['fewer_draws']}, revival {c['revival']} (fixed {c['fixed_late_dead']} dead "
                f"after step {args.early}, HarnessRL {c['harnessrl_late_dead']})"
            )
        print(f"total: {total}")
        return 0
    if not (args.harnessrl and args.fixed_early and args.fixed_summary):
        ap.error("give --harnessrl, --fixed-early and --fixed-summary (or --levels)")
    if not len(args.harnessrl) == len(args.fixed_early) == len(args.fixed_summary):
        ap.error("give one --harnessrl, --fixed-early and --fixed-summary per seed, in the same order")
    seeds = {
        Path(h).name: seed_report(Path(h), Path(fe), Path(fs), args.early)
        for h, fe, fs in zip(args.harnessrl, args.fixed_early, args.fixed_summary)
    }
    out = {"command": command, **seeds}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=float) + "\n")
    for name, s in seeds.items():
        print(f"{name}: chronic {list(s['chronic'])}, late varying share on them {s['chronic_late_varying_share']}")
        print(f"  dead after early: {s['dead_after_early']} ratio {s['dead_after_early_ratio']}")
        print(f"  zero-var trained: {s['zero_var_trained']} ratio {s['zero_var_ratio']}")
        print(f"  extra generation {s['extra_generation']}")
        print(f"  accepted {s['accepted']}, pause {s['pause']}")
        for t, r in s["chronic"].items():
            print(f"  {t}: {r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
