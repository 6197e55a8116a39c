"""Benchmark: HarnessRL (co-evolving harness) against a fixed harness and dynamic filtering.

Every arm is one `harnessrl train` run (through `trainer.grpo.train`, the function the CLI calls) of the
same preset config, differing only in the `harness.*` overrides below; arms share seeds, data, batch,
group size and step budget. Each run checkpoints at every evolver round and every `--eval-every` steps;
afterwards the checkpoints at multiples of `--eval-every`, the last one and the base model (step 0) are
scored on one fixed subset of held-out tasks with `trainer.evaluate.evaluate` (k samples, the training
temperature, the same sampling seed for every model, so arms are compared with common random numbers).
From the run folder (`metrics.jsonl`, `rounds.jsonl`, `events.jsonl`) it collects zero-variance share, pause
time, evolver proposals per interface and judge warnings. The report (`--report`, Markdown) holds the tables,
the targets check and the plots; the raw numbers go to `<out>/results.json`.

Arms (`--arms`, comma separated; `key` = fixed, dapo, harnessrl, harnessrl-dapo, fixed-norm, skip; `all` = every
arm):

    fixed        plain rubric GRPO, harness never changes            harness.evolver=false
    dynfilter    fixed + DAPO-style dynamic filtering                 + harness.dynamic_filtering=true
    dapo         fixed + DAPO dynamic sampling (over-sample x2, drop)  + harness.dynamic_sampling=2
    harnessrl    evolver with rule brains, 3 interfaces, memory, critic
    harnessrl-dapo  harnessrl on top of dapo (evolver + dynamic sampling; needs beta=0, one process)
    no-sampling / no-guidance / no-criteria   harnessrl minus one interface
    no-memory    harnessrl without memory evidence                    evolver.memory=false
    no-critic    harnessrl accepting every valid proposal             evolver.critic=false
    no-confirm   harnessrl whose accepted updates are final (no grade) harness.confirm_window=0
    no-preflight harnessrl without the pre-flight round before step 1   harness.preflight=false
    fixed-norm   fixed, zero-variance groups' rows out of the loss normaliser  + harness.live_token_norm=true
    skip         fixed + skip tasks predicted dead (no LLM, harness/skip.py)  + harness.skip_dead=true

Key arms run with every seed in `--seeds`; ablations with `--ablation-seeds` (default: the first seed).
Seeds past the first `--full-curve-seeds` (2) are cheaper: their runs are evaluated at step 0 (the base model) and
their final step only, so the held-out curves and "steps to fixed's best" come from the seeds with full curves.
DAPO shares its task draws with fixed at every step (common random numbers: an over-sampled step's first batch/G
draws are fixed's, the surplus comes from a second stream, trainer/sampler.py). Beside the test tasks, a second
held-out set (`--train-heldout-k`): the suite's train-split tasks that no arm's pool contains, from the same
generator, evaluated on the base and each final checkpoint. `--stand-ins DIR` lets an older code's summaries stand
in for an arm shown equal on every held-out task at two seeds (the report names each).
Jobs run as separate processes (`--jobs N` at a time, one torch thread each); `--jobs 0` runs them
in this process (tests). Finished runs are reused: rerunning the same command after an interruption
only runs what is missing; `--render-only` rebuilds the report from finished runs.

This file is the CLI; the work lives beside it: `bench_spec.py` (arms, presets, the job record),
`bench_run.py` (plan, run and evaluate jobs), `bench_collect.py` (numbers from the run folders, summaries,
targets), `bench_render.py` (plots and the Markdown report).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/compare.py --preset smollm2 --steps 8 --seeds 0,1 \\
        --arms all --jobs 2 --stop-after 85 --out runs/bench --report benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Run from anywhere: the repository root goes first on the path (a worker runs this file inside the frozen
# code snapshot, so its root wins over the editable install); the sibling bench_* modules are imported by
# plain name (benchmarks/ is not a package: nothing imports it).
sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:
    sys.path.insert(1, str(HERE))

from bench_code import code_state, snapshot_code  # noqa: E402
from bench_collect import build_results, code_groups, collect, load_summaries  # noqa: E402
from bench_render import plots, render  # noqa: E402
from bench_run import execute, plan, run_job  # noqa: E402
from bench_spec import ARMS, KEY_ARMS, PRESETS, Job  # noqa: E402

from harness.atomic import atomic_write_text  # noqa: E402
from trainer.io import atomic_write_json  # noqa: E402  (light: no torch)


# -- CLI ---------------------------------------------------------------------------------------------------
def _csv_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def parse_arms(text: str) -> list[str]:
    names: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        expand = {"all": list(ARMS), "key": KEY_ARMS}.get(part, [part])
        for a in expand:
            if a not in ARMS:
                raise argparse.ArgumentTypeError(f"unknown arm {a!r}; choose from {list(ARMS)} (or 'key', 'all')")
            if a not in names:
                names.append(a)
    if not names:
        raise argparse.ArgumentTypeError("--arms is empty")
    return names


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmarks/compare.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train every arm (same seeds, data and step budget) through the HarnessRL trainer, evaluate "
        "checkpoints on a fixed held-out subset, and write a Markdown report with plots.",
        epilog="Arms: " + ", ".join(f"{a} ({ARMS[a].label})" for a in ARMS) + ".\n"
        "Presets (defaults of the budget options):\n"
        + "".join(
            f"  {n}: {p.config}, {p.steps} steps, batch {p.batch}, G={p.group}, evolver every {p.evolve_every}, "
            f"eval every {p.eval_every} ({p.eval_per_domain}/domain, k={p.eval_k}, {p.max_tokens} tokens), "
            f"train pool {p.train_per_domain or 'all'}/domain"
            f"{', ' + ' '.join(p.extra) if p.extra else ''}{' [' + p.note + ']' if p.note else ''}\n"
            for n, p in PRESETS.items()
        )
        + "Example (the real benchmark):\n  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/compare.py --preset smollm2 "
        "--steps 8 --seeds 0,1 --arms all --jobs 2 --out runs/bench --report benchmarks/RESULTS.md\n"
        "Example (smoke, seconds):\n  .venv/bin/python benchmarks/compare.py --preset tiny --steps 2 --arms all "
        "--jobs 0 --out /tmp/bench-tiny",
    )
    p.add_argument(
        "--preset",
        choices=list(PRESETS),
        default="smollm2",
        help="smollm2: SmolLM2-135M-Instruct + LoRA (configs/cpu-demo.yaml), the real benchmark; "
        "tiny: random tiny model (configs/tiny.yaml), seconds per arm, for smoke tests; "
        "gpu-4b: configs/gpu-4b.yaml on a GPU (never run in CI; report RESULTS-gpu.md)",
    )
    p.add_argument("--steps", type=int, help="GRPO steps per arm (the shared step budget; default from the preset)")
    p.add_argument(
        "--seeds",
        type=_csv_ints,
        default=[0, 1],
        help=f"training seeds for the key arms ({', '.join(KEY_ARMS)}), e.g. 0,1 (default 0,1)",
    )
    p.add_argument(
        "--ablation-seeds",
        type=_csv_ints,
        default=None,
        help="seeds for the ablation arms (default: the first of --seeds)",
    )
    p.add_argument(
        "--arms",
        type=parse_arms,
        default=list(ARMS),
        help=f"comma-separated arms, or 'key' / 'all' (default all): {', '.join(ARMS)}",
    )
    p.add_argument("--out", default=None, help="benchmark folder: runs, logs, results.json (default runs/bench-PRESET)")
    p.add_argument(
        "--report", default=None, help="Markdown report path (default OUT/RESULTS.md); plots go next to it in plots/"
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="jobs run at the same time, each its own process with one torch thread (default from the "
        "preset; 0 = sequentially inside this process, used by the smoke test)",
    )
    p.add_argument("--batch", type=int, help="completions per step (default from the preset)")
    p.add_argument("--group", type=int, help="GRPO group size G (default from the preset)")
    p.add_argument("--evolve-every", type=int, help="steps between evolver rounds (default from the preset)")
    p.add_argument(
        "--eval-every",
        type=int,
        help="held-out eval of the checkpoints at multiples of this step interval (and the last step)",
    )
    p.add_argument("--eval-per-domain", type=int, help="held-out tasks per domain in the fixed eval subset")
    p.add_argument("--eval-k", type=int, help="samples per eval task (Avg@k)")
    p.add_argument(
        "--train-per-domain",
        type=int,
        help="training pool: train tasks per domain, a fixed seeded pick (0 = all train tasks)",
    )
    p.add_argument("--eval-seed", type=int, default=1234, help="sampling seed of every eval (default 1234)")
    p.add_argument(
        "--full-curve-seeds",
        type=int,
        help="the first N of --seeds evaluate every --eval-every checkpoint; later seeds only the base (step 0) and "
        "their final checkpoint, and the curves and steps to fixed's best come from the first N (default from the "
        "preset: 2; 0 = every seed)",
    )
    p.add_argument(
        "--train-heldout-k",
        type=int,
        help="the second held-out set: the suite's train-split tasks in no arm's pool, sampled at this k on the base "
        "and each final checkpoint, reported beside the test tasks (default from the preset: 2; 0 = off)",
    )
    p.add_argument(
        "--train-heldout-per-domain",
        type=int,
        help="tasks per domain of the second held-out set, a fixed seeded pick (default from the preset; 0 = all)",
    )
    p.add_argument(
        "--stand-ins",
        default=None,
        metavar="DIR",
        help="let summaries of an older code hash (in DIR, e.g. a committed benchmarks/results/<preset>-<hash> folder, "
        "and those of other code in --results) stand in for an arm's missing seeds where that arm was shown equal on "
        "every held-out task at two seeds under both codes (bench_collect.stand_ins); the report names each",
    )
    p.add_argument("--max-tokens", type=int, help="completion tokens in training and eval (default from the preset)")
    p.add_argument(
        "--ifeval-max-tokens",
        type=int,
        default=None,
        help="the external yardstick: greedy answers of N tokens to data/ifeval-heldout (52 prompts), "
        "scored by IFEval's own checkers, for the base model and each run's last checkpoint "
        "(default from the preset: 128; 0 = off)",
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra trainer override for every arm, e.g. --set evolver.sample_k=4 (repeatable)",
    )
    p.add_argument(
        "--stop-after",
        type=float,
        default=None,
        metavar="MIN",
        help="start no new job after MIN minutes; the report lists what was not run",
    )
    p.add_argument(
        "--render-only", action="store_true", help="rebuild the report from the job summaries; train nothing"
    )
    p.add_argument(
        "--results", default=None, help="folder of the job summaries (default benchmarks/results/PRESET); commit it"
    )
    p.add_argument(
        "--horizon-results",
        default=None,
        metavar="DIR",
        help="job summaries of a longer-horizon run of some arms (the same preset with more --steps, its own "
        "--results folder, e.g. benchmarks/results/smollm2-80): the report adds their per-checkpoint audit "
        "curve against fixed, with intervals, from the summaries of this table's code only",
    )
    p.add_argument(
        "--pilot-results",
        default=str(HERE / "results" / "pilot"),
        help="job summaries of the pilot (eval noise, step time) for the power section "
        "(default benchmarks/results/pilot)",
    )
    p.add_argument(
        "--commit",
        default=None,
        help="render the summaries of this code (a commit or code-hash prefix); default: the code "
        "version with most jobs (ties: the newest). Summaries of other code are never mixed in",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one job spec (JSON file)
    return p


def resolve_args(args: argparse.Namespace) -> argparse.Namespace:
    preset = PRESETS[args.preset]
    for name in (
        "steps",
        "batch",
        "group",
        "evolve_every",
        "eval_every",
        "eval_per_domain",
        "eval_k",
        "max_tokens",
        "train_per_domain",
        "jobs",
        "full_curve_seeds",
        "train_heldout_k",
        "train_heldout_per_domain",
    ):
        if getattr(args, name) is None:
            setattr(args, name, getattr(preset, name))
    args.greedy, args.noise_seed = preset.greedy, preset.noise_seed
    if args.ifeval_max_tokens is None:
        args.ifeval_max_tokens = preset.ifeval_max_tokens
    problems = []
    if args.eval_per_domain < 0:
        problems.append("--eval-per-domain must be >= 0 (0 = every held-out task)")
    for name in ("steps", "batch", "group", "evolve_every", "eval_every", "eval_k", "max_tokens"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be >= 1")
    if args.batch % args.group:
        problems.append(f"--batch ({args.batch}) must be a multiple of --group ({args.group})")
    if args.jobs < 0:
        problems.append("--jobs must be >= 0")
    if args.ifeval_max_tokens < 0:
        problems.append("--ifeval-max-tokens must be >= 0 (0 = off)")
    for name in ("full_curve_seeds", "train_heldout_k", "train_heldout_per_domain"):
        if getattr(args, name) < 0:
            problems.append(f"--{name.replace('_', '-')} must be >= 0")
    if not args.seeds:
        problems.append("--seeds is empty")
    if problems:
        raise SystemExit("compare.py: " + "; ".join(problems))
    args.out = args.out or str(ROOT / "runs" / f"bench-{args.preset}")
    args.report = args.report or str(Path(args.out) / preset.report_name)
    args.results = args.results or str(HERE / "results" / args.preset)
    return args


# Overrides that may differ between a table's jobs and a longer-horizon job of the same protocol.
PER_JOB = ("train.max_steps=", "train.save_steps=", "train.seed=", "run_dir=", "data.suite=")


def protocol(job: dict[str, Any]) -> dict[str, Any]:
    """What must match for a longer-horizon job to sit beside a table's jobs: the held-out eval, the config and
    the overrides every arm shares (the step budget, seed, arm and folders aside)."""
    shared = sorted(o for o in job["overrides"] if o not in job.get("overrides_arm", []) and not o.startswith(PER_JOB))
    keys = ("eval_tasks", "eval_k", "eval_seed", "max_tokens", "greedy", "noise_seed", "ifeval_max_tokens")
    return {k: job.get(k) for k in keys} | {"config": Path(job["config"]).name, "shared overrides": shared}


def load_horizon(folder: Path, code_hash: str | None, report: Path, table_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The longer-horizon pair's runs of `code_hash` (this table's code; other code is listed, never mixed in).
    A run of another protocol than the table's (eval, config, shared overrides) is refused: its curve would not
    be comparable."""
    if not folder.is_dir():
        raise SystemExit(f"compare.py: --horizon-results {folder}: no such folder")
    groups = code_groups(load_summaries(folder))
    mine = [g for g in groups if code_hash and g["code_hash"] == code_hash]
    base, runs = collect(mine[0]["jobs"] if mine else [], {})
    if table_runs:
        ref = protocol(table_runs[0]["job"])
        for r in runs:
            got = protocol(r["job"])
            bad = [k for k in ref if got[k] != ref[k]]
            if bad:
                raise SystemExit(
                    f"compare.py: --horizon-results {folder / r['job']['summary_path']}: not this table's protocol "
                    f"({', '.join(f'{k}: {got[k]!r} here, {ref[k]!r} in the table' for k in bad)})"
                )
    own = folder / "RESULTS.md"
    return {
        "dir": os.path.relpath(folder, report.parent),
        "report": os.path.relpath(own, report.parent) if own.is_file() else None,
        "code_hash": code_hash,
        "base": base,
        "runs": runs,
        "other_code": [
            {"code_hash": g["code_hash"], "jobs": sorted(j["name"] for j in g["jobs"])} for g in groups if g not in mine
        ],
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.worker:
        run_job(Job(**json.loads(Path(args.worker).read_text())))
        return 0
    args = resolve_args(args)
    args.command = "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/compare.py " + " ".join(shlex.quote(a) for a in argv)
    out, report = Path(args.out), Path(args.report)
    out.mkdir(parents=True, exist_ok=True)
    if args.jobs > 0 and not args.render_only:
        code_root, code = snapshot_code(out)
    else:
        code_root, code = ROOT, code_state()
    jobs = plan(args, code_root, code)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    args.git = {"head": code["commit"][:7], "changed_files": code["changed_files"], "taken": code["taken"]}
    t0 = time.monotonic()
    status = (
        {}
        if args.render_only
        else execute(jobs, args.jobs, out, None if args.stop_after is None else args.stop_after * 60, code_root)
    )
    runtime = time.monotonic() - t0
    rendered_only = False
    if args.render_only:
        prev = out / "results.json"
        old = json.loads(prev.read_text()) if prev.is_file() else None
        if old is not None and not old.get("rendered_only"):  # keep the original run's timing and command
            started, runtime, args.command = old["started"], old["runtime_s"], old["command"]
            args.finished, args.git = old["finished"], old.get("git", args.git)  # the code that ran, not today's tree
            status = {k: v for k, v in old["status"].items()}
        else:  # no run of this out folder: the report says it comes from the summaries alone
            rendered_only = True
    results = build_results(args, jobs, status, started, runtime, report)
    results["rendered_only"] = rendered_only
    if args.horizon_results:
        code_hash = (results.get("code") or {}).get("code_hash")
        results["horizon"] = load_horizon(Path(args.horizon_results), code_hash, report, results["runs"])
    results["plots"] = plots(results, Path(results["plot_dir"])) if results["runs"] else []
    atomic_write_json(out / "results.json", results)
    atomic_write_text(report, render(results, report))
    print(f"[bench] report: {report}  raw: {out / 'results.json'}", flush=True)
    failed = [k for k, v in status.items() if v.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
