"""Paired held-out differences between arms from job summaries of several sittings, with the code each ran.

`compare.py` renders one code version at a time and borrows an older code's summaries only when that arm was shown
equal on every held-out task at two shared seeds (`bench_collect.stand_ins`). While a sitting is spread over
sessions, this script pairs summaries wherever they come from and says which code hash each number came from, so a
hand-written analysis can name every exception. Per pair and seed: arm - ref in points (per-task differences on the
65 held-out tasks, paired by task and eval seed), then the mean over seeds with a paired t interval (seeds only), the
bootstrap interval over seeds and tasks (`bench_power.bootstrap_ci`), the sd of the per-seed differences and the
paired t test's power for a 2-point effect at that sd (`bench_power.power`). `--heldout train` pairs the second
held-out set instead (`compare.py --train-heldout-k`: the suite's train-split tasks in no arm's pool), where both
summaries evaluated it.

    .venv/bin/python benchmarks/pair_summaries.py \\
        --runs 'harnessrl=benchmarks/results/revive/bench-e/harnessrl-s*.json' \\
        --runs 'fixed=benchmarks/results/smollm2-40-1fdbcb4636e8/fixed-s*.json' \\
        --pair harnessrl:fixed --pair harnessrl:dapo@20 --out pairs.json

`--pair A:B` compares each summary's final checkpoint; `A:B@S` takes B's checkpoint at step S (e.g. the last one B
reached within A's training wall time). `--reach A:B` gives, per seed where both arms have held-out curves, the step at
which A first reached B's best score and its ratio to B's best step. A seed found in two files of one arm is an
error: name the files apart.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_power import bootstrap_ci, power  # noqa: E402
from bench_stats import first_reach, sd_of, task_diffs  # noqa: E402

DELTA = 2.0  # points: the effect the benchmark is powered for (issue 32)


def load_runs(specs: list[str]) -> dict[str, dict[int, dict[str, Any]]]:
    """{arm: {seed: summary}} from `NAME=GLOB` specs (several specs may add to one arm)."""
    arms: dict[str, dict[int, dict[str, Any]]] = {}
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not name or not pattern:
            raise SystemExit(f"pair_summaries.py: --runs {spec!r}: expected NAME=GLOB")
        files = sorted(glob.glob(pattern))
        if not files:
            raise SystemExit(f"pair_summaries.py: --runs {spec!r}: no file matches {pattern!r}")
        for f in files:
            s = json.loads(Path(f).read_text())
            if s.get("kind") != "arm":
                continue
            seeds = arms.setdefault(name, {})
            if s["seed"] in seeds:
                raise SystemExit(f"pair_summaries.py: {name} seed {s['seed']} is in two files, the second {f}")
            seeds[s["seed"]] = {**s, "_file": f}
    return arms


def _eval(summary: dict[str, Any], step: int | None) -> tuple[int, dict[str, Any]]:
    evals = summary["evals"]
    at = max(map(int, evals)) if step is None else step
    if str(at) not in evals:
        raise SystemExit(f"pair_summaries.py: {summary['_file']} has no eval at step {at} (has {sorted(evals)})")
    return at, evals[str(at)]


def pair(
    arms: dict[str, dict[int, dict[str, Any]]],
    a: str,
    b: str,
    b_step: int | None,
    metric: str,
    heldout: str = "test",
) -> dict[str, Any] | None:
    """arm a's final checkpoint minus b's (at `b_step`, else its final) on the seeds both ran; `heldout` "train"
    pairs the second held-out set, on the seeds where both evaluated it."""
    # Per seed both ran: (a's step, b's step, a's eval, b's eval) on the held-out set asked for.
    evals: dict[int, tuple[int, int, dict[str, Any], dict[str, Any]]] = {}
    for sd in sorted(set(arms.get(a, {})) & set(arms.get(b, {}))):
        (sa, ea), (sb, eb) = _eval(arms[a][sd], None), _eval(arms[b][sd], b_step)
        if heldout == "train":
            ea, eb = ea.get("train_heldout"), eb.get("train_heldout")
        if ea and eb:
            evals[sd] = (sa, sb, ea, eb)
    if not evals:
        return None
    per_seed, diffs, rows = [], [], []
    for sd, (sa, sb, ea, eb) in evals.items():
        d = task_diffs(ea, eb, metric, False)
        if not d:
            files = f"{arms[a][sd]['_file']} and {arms[b][sd]['_file']}"
            raise SystemExit(f"pair_summaries.py: {files} share no held-out task with {metric}")
        diffs.append(d)
        per_seed.append(sum(d) / len(d))
        rows.append(
            {
                "seed": sd,
                "diff": round(per_seed[-1], 3),
                "steps": [sa, sb],
                "code": [(arms[x][sd].get("code") or {}).get("code_hash", "")[:12] for x in (a, b)],
            }
        )
    n, mean, sd_d = len(per_seed), sum(per_seed) / len(per_seed), sd_of(per_seed)
    t_lo = t_hi = None
    if sd_d is not None:
        from scipy import stats

        half = float(stats.t.ppf(0.975, n - 1)) * sd_d / math.sqrt(n)
        t_lo, t_hi = mean - half, mean + half
    ci = bootstrap_ci(diffs)
    pw = None if sd_d is None or sd_d < 1e-9 else power(DELTA, sd_d, n)
    if pw is not None and math.isnan(pw):  # scipy's noncentral t gives no number at df = 1 and a large effect
        pw = None
    return {
        "pair": f"{a} - {b}" + (f"@{b_step}" if b_step is not None else ""),
        "metric": metric,
        "heldout": heldout,
        "seeds": rows,
        "mean": round(mean, 3),
        "sd": None if sd_d is None else round(sd_d, 3),
        "t95": None if t_lo is None else [round(t_lo, 3), round(t_hi, 3)],
        "boot95": None if ci is None else [round(ci[1], 3), round(ci[2], 3)],
        "power_delta2": None if pw is None else round(pw, 3),
    }


TOTALS = {"audit": "audit", "avg": "avg_at_k"}  # a metric's name in an eval's totals (0-1)


def reach(arms: dict[str, dict[int, dict[str, Any]]], a: str, b: str, metric: str) -> dict[str, Any] | None:
    """Steps to b's best, per seed where both have held-out curves (evals at two or more steps): b's best score and
    its step (ties: the earliest), the first step a reached it, and their ratio (`compare.py`'s "steps to fixed's
    best", with the base model's step 0 left out)."""
    curve = lambda s: sorted((int(k), 100 * v[TOTALS[metric]]) for k, v in s["evals"].items() if int(k) > 0)  # noqa: E731
    rows = []
    for sd in sorted(set(arms.get(a, {})) & set(arms.get(b, {}))):
        ca, cb = curve(arms[a][sd]), curve(arms[b][sd])
        if len(ca) < 2 or len(cb) < 2:
            continue  # a seed evaluated at its final step only
        best_step, best = max(cb, key=lambda x: (x[1], -x[0]))
        at = first_reach(ca, best)
        rows.append(
            {
                "seed": sd,
                "ref_best_step": best_step,
                "ref_best": round(best, 3),
                "reached_at": at,
                "ratio": None if at is None else round(at / best_step, 3),
                "curves": {a: [[st, round(v, 3)] for st, v in ca], b: [[st, round(v, 3)] for st, v in cb]},
            }
        )
    if not rows:
        return None
    ratios = [r["ratio"] for r in rows]
    mean = None if None in ratios else round(sum(ratios) / len(ratios), 3)
    return {"reach": f"{a} to {b}'s best", "metric": metric, "seeds": rows, "mean_ratio": mean}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", action="append", required=True, help="NAME=GLOB of job summaries (repeatable)")
    ap.add_argument("--pair", action="append", default=[], help="A:B or A:B@STEP (repeatable)")
    ap.add_argument(
        "--reach", action="append", default=[], help="A:B: steps A took to reach B's best held-out score (repeatable)"
    )
    ap.add_argument("--metric", action="append", choices=("audit", "avg"), help="default: audit and avg")
    ap.add_argument(
        "--heldout",
        choices=("test", "train"),
        default="test",
        help="which held-out set --pair compares: the test tasks (default) or the second set of train-split tasks "
        "outside every pool, on the seeds where both summaries have it",
    )
    ap.add_argument("--out", help="write the pairs as JSON here")
    args = ap.parse_args(argv)
    arms = load_runs(args.runs)
    out: dict[str, Any] = {"command": "benchmarks/pair_summaries.py " + " ".join(argv or sys.argv[1:]), "pairs": []}
    for spec in args.pair:
        a, sep, rest = spec.partition(":")
        b, at, step = rest.partition("@")
        if not sep or not a or not b:
            raise SystemExit(f"pair_summaries.py: --pair {spec!r}: expected A:B or A:B@STEP")
        for metric in args.metric or ["audit", "avg"]:
            label = metric if args.heldout == "test" else f"{metric}, second held-out set"
            p = pair(arms, a, b, int(step) if at else None, metric, args.heldout)
            if p is None:
                print(f"{spec} ({label}): no seed in common")
                continue
            out["pairs"].append(p)
            per = ", ".join(f"s{r['seed']} {r['diff']:+.2f}" for r in p["seeds"])
            print(
                f"{p['pair']} ({label}): {p['mean']:+.2f}, t95 {p['t95']}, boot95 {p['boot95']}, sd {p['sd']}, "
                f"power(2) {p['power_delta2']}  [{per}]"
            )
    for spec in args.reach:
        a, sep, b = spec.partition(":")
        if not sep or not a or not b:
            raise SystemExit(f"pair_summaries.py: --reach {spec!r}: expected A:B")
        for metric in args.metric or ["audit", "avg"]:
            r = reach(arms, a, b, metric)
            if r is None:
                print(f"--reach {spec} ({metric}): no seed where both have a held-out curve")
                continue
            out.setdefault("reach", []).append(r)
            per = ", ".join(
                f"s{x['seed']} {x['reached_at']}/{x['ref_best_step']} ({x['ref_best']:.2f})" for x in r["seeds"]
            )
            print(f"{r['reach']} ({metric}): mean ratio {r['mean_ratio']}  [{per}]")
    if not args.pair and not args.reach:
        raise SystemExit("pair_summaries.py: nothing to do: give --pair or --reach")
    out["runs"] = {
        name: {
            str(sd): {"file": s["_file"], "code": (s.get("code") or {}).get("code_hash", "")[:12]}
            for sd, s in r.items()
        }
        for name, r in arms.items()
    }
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
