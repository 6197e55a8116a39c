"""Benchmark runs: plan the jobs (base-model eval + one job per arm and seed), run each job through the
trainer (in this process or as worker processes on a frozen copy of the code, `benchmarks/bench_code.py`) and
evaluate its checkpoints on the held-out tasks (`benchmarks/bench_eval.py`), scheduling the workers.

Every job is resumable: an interrupted training run resumes from its last complete checkpoint (the trainer's
`--resume` semantics), a checkpoint's finished eval is cached and skipped. A job ends by writing its small
JSON summary to `<results>/<job>.json` (config and overrides, the code it ran: commit, dirty flag and a hash
of the code, per-checkpoint scores and wall time, zero-variance share, pause, overhead, generation count);
a job is done for a given code when its summary carries that code's hash.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench_collect import collect_run, compact_summary
from bench_eval import eval_checkpoint
from bench_spec import ARMS, PRESETS, ROOT, Job, Preset

from trainer.io import atomic_write_json


# -- planning ----------------------------------------------------------------------------------------------
def pick_eval_tasks(suite: str, per_domain: int, seed: int = 0, split: str = "test") -> list[str]:
    """A fixed, seeded subset of `split` tasks, `per_domain` from every domain (mixed difficulty); 0 = all."""
    import random

    from harness.data import load_suite

    tasks = [t for t in load_suite(suite) if t.split == split]
    picked: list[str] = []
    for domain in sorted({t.domain for t in tasks}):
        ids = sorted(t.id for t in tasks if t.domain == domain)
        random.Random(f"{seed}:{domain}").shuffle(ids)
        picked.extend(sorted(ids[:per_domain] if per_domain > 0 else ids))
    return picked


def pick_train_heldout(suite: str, pool: list[str], per_domain: int, seed: int = 0) -> list[str]:
    """The second held-out set: the suite's train-split tasks that no arm's pool (`pool`) contains, `per_domain` of
    each domain in a fixed seeded pick (0 = all). Empty when the pool is every train task."""
    import random

    from harness.data import load_suite

    left = [t for t in load_suite(suite) if t.split == "train" and t.id not in set(pool)]
    picked: list[str] = []
    for domain in sorted({t.domain for t in left}):
        ids = sorted(t.id for t in left if t.domain == domain)
        random.Random(f"heldout-train:{seed}:{domain}").shuffle(ids)
        picked.extend(sorted(ids[:per_domain] if per_domain > 0 else ids))
    return picked


def full_curve(args: argparse.Namespace, seed: int) -> bool:
    """Whether a job at `seed` evaluates every `--eval-every` checkpoint (the first `--full-curve-seeds` of `--seeds`)
    or only its final one beside the base model (step 0)."""
    return args.full_curve_seeds == 0 or seed in args.seeds[: args.full_curve_seeds]


def common_overrides(args: argparse.Namespace, preset: Preset) -> list[str]:
    return [
        *preset.extra,
        f"train.max_steps={args.steps}",
        f"train.batch_size={args.batch}",
        f"train.num_generations={args.group}",
        f"train.save_steps={save_steps(args)}",
        f"harness.evolve_every={args.evolve_every}",
        f"train.max_completion_length={args.max_tokens}",
        "train.save_total_limit=null",
        *args.sets,
    ]


def save_steps(args: argparse.Namespace) -> int:
    """Checkpoint interval: every evolver round needs one (trainer rule) and so does every eval point."""
    return math.gcd(args.evolve_every, args.eval_every)


def plan(args: argparse.Namespace, code_root: Path = ROOT, code: dict[str, Any] | None = None) -> list[Job]:
    """Jobs in run order. Config and suite paths point into `code_root` (a frozen snapshot of the code); run
    folders sit under `<out>/runs/<code hash>/` so that a resumed job never continues another code's run."""
    preset = PRESETS[args.preset]
    import yaml

    code = code or {}
    base_cfg = yaml.safe_load((code_root / preset.config).read_text())
    suite = str(code_root / base_cfg["data"]["suite"])
    eval_tasks = pick_eval_tasks(suite, args.eval_per_domain)
    pool_ids = pick_eval_tasks(suite, args.train_per_domain, split="train") if args.train_per_domain else []
    pool = [f"data.tasks=[{','.join(pool_ids)}]"] if pool_ids else []
    train_heldout = (
        pick_train_heldout(suite, pool_ids, args.train_heldout_per_domain) if args.train_heldout_k and pool_ids else []
    )
    out = Path(args.out) / "runs" / str(code.get("code_hash", "local"))[:12]
    results = Path(args.results)
    shared = dict(
        config=str(code_root / preset.config),
        eval_tasks=eval_tasks,
        eval_k=args.eval_k,
        eval_every=args.eval_every,
        max_tokens=args.max_tokens,
        eval_seed=args.eval_seed,
        preset=args.preset,
        greedy=args.greedy,
        noise_seed=args.noise_seed,
        code=code,
        ifeval_max_tokens=args.ifeval_max_tokens,
        train_heldout_tasks=train_heldout,
        train_heldout_k=args.train_heldout_k if train_heldout else 0,
    )
    jobs = [
        Job(
            kind="base",
            name="base",
            # The arms' pool, so that the worker's check of the second held-out set (train tasks outside the pool)
            # reads the pool the arms train on, not the config's own task list.
            overrides=[*pool, f"data.suite={suite}"],
            run_dir=str(out / "base"),
            model=base_cfg["model"]["name"],
            summary_path=str(results / "base.json"),
            **shared,
        )
    ]
    ablation_seeds = args.ablation_seeds if args.ablation_seeds is not None else args.seeds[:1]
    # Order: every key arm at the first seed, then the other seeds, then ablations, so a time budget that
    # runs out cuts ablations and extra seeds first, never the headline comparison.
    order: list[tuple[str, int]] = []
    for seed in args.seeds:
        order += [(a, seed) for a in args.arms if ARMS[a].key]
    order += [(a, s) for s in ablation_seeds for a in args.arms if not ARMS[a].key]
    for arm, seed in order:
        name = f"{arm}-s{seed}"
        run_dir = out / name
        overrides = [
            *common_overrides(args, preset),
            *pool,
            *ARMS[arm].overrides,
            f"train.seed={seed}",
            f"data.suite={suite}",
            f"run_dir={run_dir}",
        ]
        full = full_curve(args, seed)
        jobs.append(
            Job(
                kind="arm",
                name=name,
                overrides=overrides,
                run_dir=str(run_dir),
                arm=arm,
                seed=seed,
                runner=ARMS[arm].runner,
                summary_path=str(results / f"{name}.json"),
                overrides_arm=list(ARMS[arm].overrides),
                full_curve=full,
                **{**shared, "eval_every": args.eval_every if full else args.steps},  # final only: step 0 is base's
            )
        )
    return jobs


# -- worker (runs in its own process unless --jobs 0) ------------------------------------------------------
def _eval_setup(job: Job) -> tuple[Any, list, list, Any]:
    """The job's config, held-out test tasks, second held-out set (train tasks outside the pool) and judge."""
    from harness.data import load_suite
    from trainer.config_loader import load_config
    from trainer.harness_run import make_judge

    cfg = load_config(job.config, job.overrides)
    suite = load_suite(cfg.data.suite)
    by_id = {t.id: t for t in suite if t.split == "test"}
    missing = [t for t in job.eval_tasks if t not in by_id]
    if missing:
        raise ValueError(f"eval tasks {missing} are not held-out tasks of {cfg.data.suite}")
    train = {t.id: t for t in suite if t.split == "train"}
    pool = set(cfg.data.tasks or [])
    bad = [t for t in job.train_heldout_tasks if t not in train or t in pool]
    if bad:
        raise ValueError(f"second held-out tasks {bad[:5]} are not train tasks of {cfg.data.suite} outside the pool")
    heldout_train = [train[t] for t in job.train_heldout_tasks]
    judge = make_judge(cfg.evolver.judge_model, cfg.evolver.base_url)
    return cfg, [by_id[t] for t in job.eval_tasks], heldout_train, judge


def bench_dir(job: Job) -> Path:
    """The job's own files beside the trainer's run folder (eval cache, training summary)."""
    return Path(job.run_dir).with_name(Path(job.run_dir).name + ".bench")


def run_base(job: Job) -> dict[str, Any]:
    import torch

    from trainer.policy_models import resolve_model

    cfg, tasks, heldout_train, judge = _eval_setup(job)
    torch.set_num_threads(cfg.train.torch_threads)
    ev = eval_checkpoint(
        resolve_model(job.model),
        None,
        job,
        tasks,
        judge,
        cfg.model.dtype,
        cfg.train.temperature,
        bench_dir(job) / "eval-base.json",
        noise=True,
        heldout_train=heldout_train,
    )
    return {"kind": "base", "name": job.name, "eval": ev, "judge_warnings": _judge_warnings(judge)}


def _judge_warnings(judge: Any) -> int:
    m = judge.stats.as_metrics()
    return int(sum(m.get(k, 0) for k in ("judge/malformed", "judge/errors", "judge/llm_failures")))


def train_resumable(job: Job, cfg: Any) -> dict[str, Any]:
    """Train the job's run to the end: resume from the last complete checkpoint when an earlier attempt was
    interrupted (`harnessrl train --resume`), start afresh otherwise; a finished run is not trained again."""
    from trainer.checkpoint import STATE_FILE, checkpoints

    done = bench_dir(job) / "train.json"
    if done.is_file():
        return json.loads(done.read_text())
    run_dir = Path(job.run_dir)
    if job.runner == "plain":
        from bench_plain import train_plain

        summary = train_plain(cfg)
    else:
        from trainer.grpo import train

        complete = [c for _, c in checkpoints(run_dir) if (c / STATE_FILE).is_file()] if run_dir.is_dir() else []
        if complete:
            print(f"[bench] {job.name}: resuming from {complete[-1].name}", flush=True)
            summary = train(cfg, resume="latest", progress=False)
        else:
            summary = train(cfg, progress=False, overwrite=True)
    atomic_write_json(done, summary)
    return summary


def run_arm(job: Job) -> dict[str, Any]:
    cfg, tasks, heldout_train, judge = _eval_setup(job)
    summary = train_resumable(job, cfg)
    run_dir = Path(job.run_dir)
    evals: dict[int, dict[str, Any]] = {}
    every = job.eval_every
    ckpts = sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    for ckpt in ckpts:
        step = int(ckpt.name.split("-")[1])
        if step % every and step != summary["steps"]:
            continue  # saved for an evolver round only
        evals[step] = eval_checkpoint(
            ckpt,
            cfg.model.name,
            job,
            tasks,
            judge,
            cfg.model.dtype,
            cfg.train.temperature,
            bench_dir(job) / f"eval-step-{step}.json",
            noise=step == summary["steps"],
            heldout_train=heldout_train,
        )
    out = {
        "kind": "arm",
        "name": job.name,
        "arm": job.arm,
        "seed": job.seed,
        "summary": summary,
        "evals": {str(k): v for k, v in evals.items()},
        "eval_judge_warnings": _judge_warnings(judge),
    }
    out.update(collect_run(run_dir))
    out["train_s"] = out["wall_s"]  # training wall time: steps + pauses, summed over sittings
    return out


def run_job(job: Job) -> dict[str, Any]:
    """Run one job (resuming what an interrupted attempt left) and write its summary JSON."""
    t0 = time.monotonic()
    result = run_base(job) if job.kind == "base" else run_arm(job)
    result["job_s"] = time.monotonic() - t0
    # Committed with the results: the summary names itself relative to its folder, never by this machine's path.
    result["job"] = {**asdict(job), "summary_path": Path(job.summary_path).name}
    result["code"] = job.code
    summary = compact_summary(result)
    atomic_write_json(Path(job.summary_path), summary)
    return summary


# -- scheduling --------------------------------------------------------------------------------------------
def summary_done(job: Job) -> bool:
    """The job has a summary from this code (same code hash)."""
    f = Path(job.summary_path)
    if not f.is_file():
        return False
    return json.loads(f.read_text()).get("code", {}).get("code_hash") == job.code.get("code_hash")


def oversamples(job: Job) -> bool:
    """Whether the job's run uses DAPO dynamic sampling (`harness.dynamic_sampling` > 0; the last override wins)."""
    values = [o.split("=", 1)[1] for o in job.overrides if o.startswith("harness.dynamic_sampling=")]
    return bool(values) and float(values[-1]) > 0


def next_job(queue: list[Job], running: list[Job]) -> Job | None:
    """The first queued job that may start beside `running`: one over-sampling job at a time. A DAPO step trains
    on several batches' rollouts at once (about 11 GB on SmolLM2-135M at x2, where the other arms need 4-5 GB), and
    two such jobs side by side were killed for memory on a 24 GB machine. None: every queued job must wait."""
    heavy = any(oversamples(j) for j in running)
    return next((j for j in queue if not (heavy and oversamples(j))), None)


def execute(
    jobs: list[Job], n_jobs: int, out: Path, stop_after_s: float | None, code_root: Path = ROOT
) -> dict[str, str]:
    """Run the jobs that have no summary from this code (an interrupted one resumes where it stopped); returns
    {name: status} (done, reused, failed: ..., not run: time budget)."""
    status: dict[str, str] = {}
    todo: list[Job] = []
    for job in jobs:
        if summary_done(job):
            status[job.name] = "reused"
        else:
            todo.append(job)
    t0 = time.monotonic()
    over = lambda: stop_after_s is not None and time.monotonic() - t0 > stop_after_s  # noqa: E731
    if n_jobs == 0:
        for job in todo:
            if over():
                status[job.name] = "not run: time budget"
                continue
            print(f"[bench] {job.name} (in process)", flush=True)
            run_job(job)
            status[job.name] = "done"
        return status
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "LANGSMITH_TRACING": "false",
    }
    running: dict[str, tuple[subprocess.Popen, Job, float, Any]] = {}
    queue = list(todo)
    while queue or running:
        while queue and len(running) < n_jobs:
            job = next_job(queue, [j for _p, j, _t, _l in running.values()])
            if job is None:
                break
            queue.remove(job)
            if over():
                status[job.name] = "not run: time budget"
                continue
            spec = logs / f"{job.name}.job.json"
            atomic_write_json(spec, asdict(job))
            log = open(logs / f"{job.name}.log", "w")  # noqa: SIM115 - closed when the process ends
            proc = subprocess.Popen(
                [sys.executable, str(code_root / "benchmarks" / "compare.py"), "--worker", str(spec)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(ROOT),
            )
            running[job.name] = (proc, job, time.monotonic(), log)
            print(f"[bench] started {job.name} (pid {proc.pid}, log {logs / (job.name + '.log')})", flush=True)
        time.sleep(1.0)
        for name, (proc, _job, started, log) in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            log.close()
            del running[name]
            took = time.monotonic() - started
            status[name] = "done" if rc == 0 else f"failed: exit {rc} (see {logs / (name + '.log')})"
            print(f"[bench] {name}: {status[name]} after {took:.0f}s", flush=True)
    return status
