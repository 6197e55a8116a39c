"""Benchmark: HarnessRL (co-evolving harness) against a fixed harness and dynamic filtering.

Every arm is one `harnessrl train` run (through `trainer.grpo.train`, the function the CLI calls) of the
same preset config, differing only in the `harness.*` overrides below; arms share seeds, data, batch,
group size and step budget. Each run checkpoints at every evolver round and every `--eval-every` steps;
afterwards the checkpoints at multiples of `--eval-every`, the last one and the base model (step 0) are
scored on one fixed subset of held-out tasks with `trainer.evaluate.evaluate` (k samples, the training
temperature, the same sampling seed for every model, so arms are compared with common random numbers). From the run folder (`metrics.jsonl`, `rounds.jsonl`,
`events.jsonl`) it collects zero-variance share, pause time, evolver proposals per interface and judge
warnings. The report (`--report`, Markdown) holds the tables, the targets check and the plots; the raw
numbers go to `<out>/results.json`.

Arms (`--arms`, comma separated; `key` = the first three, `all` = every arm):

    fixed        plain rubric GRPO, harness never changes            harness.evolver=false
    dynfilter    fixed + DAPO-style dynamic filtering                 + harness.dynamic_filtering=true
    harnessrl    evolver with rule brains, 3 interfaces, memory, critic
    no-sampling / no-guidance / no-criteria   harnessrl minus one interface
    no-memory    harnessrl without memory evidence                    harness.memory=false
    no-critic    harnessrl accepting every valid proposal             harness.critic=false

Key arms run with every seed in `--seeds`; ablations with `--ablation-seeds` (default: the first seed).
Jobs run as separate processes (`--jobs N` at a time, one torch thread each); `--jobs 0` runs them
in this process (tests). Finished runs are reused: rerunning the same command after an interruption
only runs what is missing; `--render-only` rebuilds the report from finished runs.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/compare.py --preset smollm2 --steps 8 --seeds 0,1 \\
        --arms all --jobs 2 --stop-after 85 --out runs/bench --report benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere: repo root on the path

from trainer.io import atomic_write_json, atomic_write_text, read_jsonl  # noqa: E402  (light: no torch)

# -- arms --------------------------------------------------------------------------------------------------
_FULL = ["harness.evolver=true", "harness.interfaces=[sampling,guidance,criteria]", "harness.memory=true",
         "harness.critic=true"]


@dataclass(frozen=True)
class Arm:
    name: str
    label: str
    overrides: tuple[str, ...]
    key: bool  # key arms run with every seed


ARMS: dict[str, Arm] = {a.name: a for a in [
    Arm("fixed", "1 fixed harness", ("harness.evolver=false",), True),
    Arm("dynfilter", "2 fixed + dynamic filtering", ("harness.evolver=false", "harness.dynamic_filtering=true"), True),
    Arm("harnessrl", "3 HarnessRL (rules, all)", tuple(_FULL), True),
    Arm("no-sampling", "4a HarnessRL - sampling", (*_FULL, "harness.interfaces=[guidance,criteria]"), False),
    Arm("no-guidance", "4b HarnessRL - guidance", (*_FULL, "harness.interfaces=[sampling,criteria]"), False),
    Arm("no-criteria", "4c HarnessRL - criteria", (*_FULL, "harness.interfaces=[sampling,guidance]"), False),
    Arm("no-memory", "4d HarnessRL - memory", (*_FULL, "harness.memory=false"), False),
    Arm("no-critic", "4e HarnessRL - critic", (*_FULL, "harness.critic=false"), False),
]}
KEY_ARMS = [a for a in ARMS if ARMS[a].key]
INTERFACES = ("sampling", "guidance", "criteria")
SPURIOUS_EVENTS = ("spurious_length", "spurious_audit", "stuffing", "guidance_leak")


# -- presets -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    config: str  # a file in configs/
    steps: int
    batch: int
    group: int
    evolve_every: int
    eval_every: int  # held-out eval of the checkpoints at multiples of this (and the last step)
    eval_per_domain: int  # held-out tasks per domain in the fixed eval subset
    eval_k: int
    max_tokens: int
    train_per_domain: int = 0  # training pool: this many train tasks per domain (0 = every train task)
    extra: tuple[str, ...] = ()  # preset-specific overrides applied to every arm


PRESETS: dict[str, Preset] = {
    # SmolLM2-135M-Instruct + LoRA (configs/cpu-demo.yaml): the real benchmark.
    # Sized for about an hour for all arms on a *shared* 2-core box, where one step took 40-100 s.
    # The training pool is small (2 tasks per domain) so that tasks are *revisited* within the budget: with all
    # 255 train tasks, 16 groups per run almost never revisit a task, so no per-task repair can act (measured).
    "smollm2": Preset("configs/cpu-demo.yaml", steps=8, batch=8, group=4, evolve_every=2, eval_every=4,
                      eval_per_domain=2, eval_k=4, max_tokens=48, train_per_domain=2,
                      extra=("harness.max_events=3",)),
    # Random tiny model (configs/tiny.yaml): exercises every code path in seconds; numbers are meaningless.
    "tiny": Preset("configs/tiny.yaml", steps=2, batch=8, group=4, evolve_every=1, eval_every=1,
                   eval_per_domain=1, eval_k=2, max_tokens=16, train_per_domain=2,
                   extra=("harness.max_events=2", "harness.sample_k=2", "harness.max_revisions=0")),
}


@dataclass
class Job:
    """One unit of work for a worker: the base-model eval or one (arm, seed) run. JSON-serialisable."""

    kind: str  # "base" | "arm"
    name: str  # folder name under <out>/runs
    config: str
    overrides: list[str]
    run_dir: str
    eval_tasks: list[str]
    eval_k: int
    max_tokens: int
    eval_seed: int
    eval_every: int = 1
    arm: str = ""
    seed: int = 0
    model: str = ""  # base job only: the policy name


# -- planning ----------------------------------------------------------------------------------------------
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


def pick_eval_tasks(suite: str, per_domain: int, seed: int = 0, split: str = "test") -> list[str]:
    """A fixed, seeded subset of `split` tasks, `per_domain` from every domain (mixed difficulty)."""
    import random

    from harness.data import load_suite

    tasks = [t for t in load_suite(suite) if t.split == split]
    picked: list[str] = []
    for domain in sorted({t.domain for t in tasks}):
        ids = sorted(t.id for t in tasks if t.domain == domain)
        random.Random(f"{seed}:{domain}").shuffle(ids)
        picked.extend(sorted(ids[:per_domain]))
    return picked


def common_overrides(args: argparse.Namespace, preset: Preset) -> list[str]:
    return [*preset.extra, f"train.max_steps={args.steps}", f"train.batch_size={args.batch}",
            f"train.num_generations={args.group}", f"train.save_steps={save_steps(args)}",
            f"harness.evolve_every={args.evolve_every}", f"train.max_completion_length={args.max_tokens}",
            "train.save_total_limit=null", *args.sets]


def save_steps(args: argparse.Namespace) -> int:
    """Checkpoint interval: every evolver round needs one (trainer rule) and so does every eval point."""
    return math.gcd(args.evolve_every, args.eval_every)


def plan(args: argparse.Namespace, code_root: Path = ROOT) -> list[Job]:
    """Jobs in run order. Config and suite paths point into `code_root` (a frozen snapshot of the code)."""
    preset = PRESETS[args.preset]
    import yaml

    base_cfg = yaml.safe_load((code_root / preset.config).read_text())
    suite = str(code_root / base_cfg["data"]["suite"])
    eval_tasks = pick_eval_tasks(suite, args.eval_per_domain)
    pool = [f"data.tasks=[{','.join(pick_eval_tasks(suite, args.train_per_domain, split='train'))}]"] \
        if args.train_per_domain else []
    out = Path(args.out)
    shared = dict(config=str(code_root / preset.config), eval_tasks=eval_tasks, eval_k=args.eval_k,
                  eval_every=args.eval_every,
                  max_tokens=args.max_tokens, eval_seed=args.eval_seed)
    jobs = [Job(kind="base", name="base", overrides=[f"data.suite={suite}"], run_dir=str(out / "runs" / "base"),
                model=base_cfg["model"]["name"], **shared)]
    ablation_seeds = args.ablation_seeds if args.ablation_seeds is not None else args.seeds[:1]
    # Order: every key arm at the first seed, then the other seeds, then ablations, so a time budget that
    # runs out cuts ablations and extra seeds first, never the headline comparison.
    order: list[tuple[str, int]] = []
    for seed in args.seeds:
        order += [(a, seed) for a in args.arms if ARMS[a].key]
    order += [(a, s) for s in ablation_seeds for a in args.arms if not ARMS[a].key]
    for arm, seed in order:
        name = f"{arm}-s{seed}"
        run_dir = out / "runs" / name
        overrides = [*common_overrides(args, preset), *pool, *ARMS[arm].overrides, f"train.seed={seed}",
                     f"data.suite={suite}", f"run_dir={run_dir}"]
        jobs.append(Job(kind="arm", name=name, overrides=overrides, run_dir=str(run_dir), arm=arm, seed=seed, **shared))
    return jobs


# -- worker (runs in its own process unless --jobs 0) ------------------------------------------------------
class BatchedEvalEndpoint:
    """Samples every eval prompt in ONE batched call on first use, then answers `evaluate`'s per-task calls
    from that batch, in order; keeps the responses for the length statistics.

    Why: `trainer.evaluate.evaluate` asks for one task at a time (k sequences per generate call); on this CPU
    one batched call over all eval tasks costs about half as much per sequence (measured: 28.7 s for 1 task x 4
    vs 12.7 s per task for 10 tasks x 4, 48 tokens). The one difference: a single sampling seed for the batch
    instead of evaluate's per-task `seed + i`; every model still sees the same random numbers.
    """

    def __init__(self, inner: Any, prompts: list[list[dict]], n: int, max_tokens: int, temperature: float,
                 seed: int) -> None:
        self.inner, self.prompts = inner, prompts
        self.n, self.max_tokens, self.temperature, self.seed = n, max_tokens, temperature, seed
        self._batch: list[list[str]] | None = None
        self.responses: list[list[str]] = []

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        i = len(self.responses)
        if (i >= len(self.prompts) or messages_batch != [self.prompts[i]] or n != self.n
                or max_tokens != self.max_tokens or temperature != self.temperature):
            raise RuntimeError(f"BatchedEvalEndpoint: call {i} does not match the prepared batch "
                               f"(n={n}, max_tokens={max_tokens}, temperature={temperature}); evaluate() changed?")
        if self._batch is None:
            self._batch = self.inner.sample(self.prompts, n=self.n, max_tokens=self.max_tokens,
                                            temperature=self.temperature, seed=self.seed)
        self.responses.append(self._batch[i])
        return [self._batch[i]]


def length_stats(result: dict[str, Any], responses: list[list[str]]) -> dict[str, Any]:
    """Mean words, and the within-task length/score correlation (task means removed: difficulty is not length)."""
    from harness.checks import words

    xs: list[float] = []
    ys: list[float] = []
    all_words: list[int] = []
    for (tid, row), resp in zip(result["tasks"].items(), responses):
        n_words = [len(words(r)) for r in resp]
        all_words += n_words
        if len(n_words) != len(row["scores"]):
            raise RuntimeError(f"eval of {tid}: {len(n_words)} responses but {len(row['scores'])} scores")
        mw, ms = sum(n_words) / len(n_words), sum(row["scores"]) / len(row["scores"])
        xs += [w - mw for w in n_words]
        ys += [s - ms for s in row["scores"]]
    sxx, syy = sum(x * x for x in xs), sum(y * y for y in ys)
    corr = sum(x * y for x, y in zip(xs, ys)) / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None
    return {"mean_words": sum(all_words) / max(1, len(all_words)), "length_corr": corr}


def eval_model(model_dir: Path, base: str | None, job: Job, tasks: list, judge: Any, dtype: str,
               temperature: float) -> dict[str, Any]:
    # `_load_model` is the trainer's own loader (detects a LoRA adapter folder and merges it into the base).
    from tools.local_endpoint import LocalEndpoint
    from trainer.evaluate import _load_model, evaluate

    from harness.guidance import render_prompt

    t0 = time.monotonic()
    model, tok = _load_model(model_dir, base, dtype)
    endpoint = BatchedEvalEndpoint(LocalEndpoint(model, tok, name=f"local:{model_dir.name}"),
                                   [render_prompt(t, []) for t in tasks], job.eval_k, job.max_tokens, temperature,
                                   job.eval_seed)
    res = evaluate(tasks, endpoint, judge, k=job.eval_k, max_tokens=job.max_tokens, temperature=temperature,
                   seed=job.eval_seed, progress=False)
    return {"avg_at_k": res["avg_at_k"], "audit": res["audit"], "domains": res["domains"],
            "tasks": {tid: {"avg": r["avg"], "audit": r["audit"]} for tid, r in res["tasks"].items()},
            **length_stats(res, endpoint.responses), "seconds": time.monotonic() - t0}


def _eval_setup(job: Job) -> tuple[Any, list, Any]:
    from harness.data import load_suite
    from trainer.config import load_config
    from trainer.run import make_judge

    cfg = load_config(job.config, job.overrides)
    by_id = {t.id: t for t in load_suite(cfg.data.suite) if t.split == "test"}
    missing = [t for t in job.eval_tasks if t not in by_id]
    if missing:
        raise ValueError(f"eval tasks {missing} are not held-out tasks of {cfg.data.suite}")
    return cfg, [by_id[t] for t in job.eval_tasks], make_judge(cfg.harness.judge_model, cfg.harness.llm_base_url)


def run_base(job: Job) -> dict[str, Any]:
    import torch

    from trainer.models import resolve_model

    cfg, tasks, judge = _eval_setup(job)
    torch.set_num_threads(cfg.train.torch_threads)
    ev = eval_model(resolve_model(job.model), None, job, tasks, judge, cfg.model.dtype, cfg.train.temperature)
    return {"kind": "base", "name": job.name, "eval": ev, "judge_warnings": _judge_warnings(judge)}


def _judge_warnings(judge: Any) -> int:
    m = judge.stats.as_metrics()
    return int(sum(m.get(k, 0) for k in ("judge/malformed", "judge/errors", "judge/unmet_after_retries")))


def run_arm(job: Job) -> dict[str, Any]:
    from trainer.grpo import train

    cfg, tasks, judge = _eval_setup(job)
    t0 = time.monotonic()
    summary = train(cfg, progress=False)
    train_s = time.monotonic() - t0
    run_dir = Path(job.run_dir)
    evals: dict[int, dict[str, Any]] = {}
    every = job.eval_every
    for ckpt in sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])):
        step = int(ckpt.name.split("-")[1])
        if step % every and step != summary["steps"]:
            continue  # saved for an evolver round only
        evals[step] = eval_model(ckpt, cfg.model.name, job, tasks, judge, cfg.model.dtype,
                                                         cfg.train.temperature)
    out = {"kind": "arm", "name": job.name, "arm": job.arm, "seed": job.seed, "train_s": train_s,
           "summary": summary, "evals": {str(k): v for k, v in evals.items()},
           "eval_judge_warnings": _judge_warnings(judge)}
    out.update(collect_run(run_dir))
    return out


def collect_run(run_dir: Path) -> dict[str, Any]:
    """Training-side numbers from the run folder the trainer wrote."""
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    rounds = read_jsonl(run_dir / "rounds.jsonl") if (run_dir / "rounds.jsonl").is_file() else []
    events = read_jsonl(run_dir / "events.jsonl") if (run_dir / "events.jsonl").is_file() else []
    groups = sum(m.get("n_groups", 0) for m in metrics)
    dead = sum(m.get("dead_share", 0.0) * m.get("n_groups", 0) for m in metrics)
    per_iface = {i: {"proposals": 0, "accepted": 0, "rejected": 0} for i in INTERFACES}
    decisions: dict[str, int] = {}
    fallbacks = errors = 0
    fails: dict[str, int] = {}  # the critic's failed checks ("FAIL: std_gain") per interface
    for r in rounds:
        errors += 1 if r.get("error") else 0
        for rep in r.get("reports", []):
            for att in rep.get("attempts") or []:
                for reason in att.get("reasons") or []:
                    if reason.startswith("FAIL"):
                        key = f"{rep.get('interface')}: {reason.split(':', 1)[-1].strip()}"
                        fails[key] = fails.get(key, 0) + 1
            decision = str(rep.get("decision"))
            decisions[decision] = decisions.get(decision, 0) + 1
            fallbacks += decision == "fallback"
            iface = rep.get("interface")
            if iface not in per_iface:
                continue  # no attribution (e.g. skipped event): nothing was proposed
            n = len(rep.get("attempts") or [])
            acc = 1 if decision == "accepted" else 0
            per_iface[iface]["proposals"] += n
            per_iface[iface]["accepted"] += acc
            per_iface[iface]["rejected"] += n - acc
    event_types: dict[str, int] = {}
    for e in events:
        event_types[e["type"]] = event_types.get(e["type"], 0) + 1
    times = [m["time"] for m in metrics if "time" in m]
    # Can a repair act? Only if its task is drawn again after the round (rows sampled from step+2 on:
    # the dataloader prefetches one batch). Count the groups on updated tasks (or their variants) after it.
    updates = read_jsonl(run_dir / "harness" / "updates.jsonl")
    revisits = 0
    for u in updates:
        touched = {op["task_id"] for op in u["update"]["ops"]}
        for m in metrics:
            if m["step"] > u["step"] + 1:
                revisits += sum(1 for t in m.get("tasks", []) if t.split(".")[0] in touched)
    late = [m for m in metrics if m["step"] > len(metrics) // 2]
    return {
        "steps": [{"step": m["step"], "reward": m.get("reward"), "reward_std": m.get("reward_std"),
                   "dead_share": m.get("dead_share"), "n_groups": m.get("n_groups"), "pause_s": m.get("pause_s", 0.0),
                   "harness_version": m.get("harness_version_after", m.get("harness_version")),
                   "hinted_share": m.get("hinted_share")} for m in metrics],
        "zero_var_share": dead / groups if groups else None,
        "pause_s": sum(m.get("pause_s", 0.0) for m in metrics),
        "loop_s": (times[-1] - times[0]) if len(times) > 1 else None,
        "judge_warnings": int(sum(m.get("judge_warnings", 0) for m in metrics)),
        "rounds": len(rounds), "round_errors": errors, "decisions": decisions, "fallbacks": fallbacks,
        "per_interface": per_iface, "event_types": event_types, "critic_fails": fails,
        "spurious_events": sum(event_types.get(t, 0) for t in SPURIOUS_EVENTS),
        "updates": len(updates), "updated_task_revisits": revisits,
        "hinted_share": _mean([m.get("hinted_share") for m in metrics]),
        "train_reward_late": _mean([m.get("reward") for m in late]),
    }


def run_job(job: Job) -> dict[str, Any]:
    """Run one job and write `<run_dir>/bench.json` (its presence marks the job finished)."""
    t0 = time.monotonic()
    result = run_base(job) if job.kind == "base" else run_arm(job)
    result["job_s"] = time.monotonic() - t0
    result["job"] = asdict(job)
    atomic_write_json(Path(job.run_dir) / "bench.json", result)
    return result


# -- orchestration -----------------------------------------------------------------------------------------
SNAPSHOT_PATHS = ("agents", "graphs", "harness", "memory", "tools", "trainer", "configs", "data/rubric-mix-lite",
                  "benchmarks/compare.py")


def snapshot_code(out: Path) -> Path:
    """Copy the code the workers run into OUT/code: the repository keeps changing while a benchmark runs
    (an hour on a shared checkout), and every arm must run the same code. Workers put the snapshot first
    on sys.path, ahead of the editable install (whose finder comes after the path finder)."""
    import shutil

    dest = out / "code"
    if dest.exists():
        return dest  # resumed benchmark: keep the code the finished runs used
    tmp = out / f".code-{os.getpid()}"
    atomic_write_json(tmp / "git_state.json", git_state())  # what the snapshot was taken from
    for rel in SNAPSHOT_PATHS:
        src, dst = ROOT / rel, tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dst)
    tmp.rename(dest)
    return dest


def git_state() -> dict[str, Any]:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    changed = git("status", "--porcelain").splitlines()
    return {"head": git("rev-parse", "--short", "HEAD"), "changed_files": len(changed),
            "taken": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def _prepare_dir(job: Job) -> bool:
    """True if the job must run. A folder left by an interrupted job is moved aside (kept, never deleted)."""
    run_dir = Path(job.run_dir)
    if (run_dir / "bench.json").is_file():
        return False
    if run_dir.exists():
        aside = run_dir.with_name(f"{run_dir.name}.interrupted-{int(time.time())}")
        run_dir.rename(aside)
        print(f"[bench] {run_dir} was incomplete; moved to {aside}", flush=True)
    return True


def execute(jobs: list[Job], n_jobs: int, out: Path, stop_after_s: float | None,
            code_root: Path = ROOT) -> dict[str, str]:
    """Run the jobs; returns {name: status} (done, reused, failed: ..., not run: time budget)."""
    status: dict[str, str] = {}
    todo: list[Job] = []
    for job in jobs:
        if _prepare_dir(job):
            todo.append(job)
        else:
            status[job.name] = "reused"
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
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LANGSMITH_TRACING": "false"}
    running: dict[str, tuple[subprocess.Popen, Job, float, Any]] = {}
    queue = list(todo)
    while queue or running:
        while queue and len(running) < n_jobs:
            job = queue.pop(0)
            if over():
                status[job.name] = "not run: time budget"
                continue
            spec = logs / f"{job.name}.job.json"
            atomic_write_json(spec, asdict(job))
            log = open(logs / f"{job.name}.log", "w")  # noqa: SIM115 - closed when the process ends
            proc = subprocess.Popen([sys.executable, str(code_root / "benchmarks" / "compare.py"), "--worker", str(spec)],
                                    stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
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


# -- aggregation -------------------------------------------------------------------------------------------
def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _sd(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    if len(vals) < 2:
        return None
    m = sum(vals) / len(vals)
    return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))


def run_summary(run: dict[str, Any], base: dict[str, Any] | None) -> dict[str, Any]:
    """Per-run headline numbers; scores on the 0-100 scale."""
    evals = {int(k): v for k, v in run["evals"].items()}
    if base is not None:
        evals.setdefault(0, base["eval"])
    steps = sorted(evals)
    best_step = max(steps, key=lambda s: (evals[s]["avg_at_k"], -s))  # ties: the earliest
    final = evals[steps[-1]]
    b = base["eval"] if base else None
    pct = lambda x: None if x is None else 100.0 * x  # noqa: E731
    gap = lambda e: None if e["audit"] is None else 100.0 * (e["avg_at_k"] - e["audit"])  # noqa: E731
    wall = run["train_s"]
    return {
        "curve": [(s, pct(evals[s]["avg_at_k"]), pct(evals[s]["audit"])) for s in steps],
        "best_step": best_step, "best_score": pct(evals[best_step]["avg_at_k"]),
        "best_audit": pct(evals[best_step]["audit"]), "max_audit": max(pct(evals[s]["audit"]) or 0 for s in steps),
        "final_step": steps[-1], "final_score": pct(final["avg_at_k"]), "final_audit": pct(final["audit"]),
        "final_domains": {d: {"score": pct(v["avg_at_k"]), "audit": pct(v["audit"])} for d, v in final["domains"].items()},
        "best_domains": {d: {"score": pct(v["avg_at_k"]), "audit": pct(v["audit"])}
                         for d, v in evals[best_step]["domains"].items()},
        "length_corr_final": final["length_corr"], "length_corr_base": b["length_corr"] if b else None,
        "words_final": final["mean_words"], "words_base": b["mean_words"] if b else None,
        "gap_final": gap(final), "gap_base": gap(b) if b else None,
        "gap_growth": (gap(final) - gap(b)) if b and gap(final) is not None and gap(b) is not None else None,
        "zero_var_share": run["zero_var_share"], "wall_s": wall, "pause_s": run["pause_s"],
        "pause_share": run["pause_s"] / wall if wall else None,
        "eval_s": sum(v["seconds"] for v in run["evals"].values()),
        "judge_warnings": run["judge_warnings"] + run.get("eval_judge_warnings", 0),
        "per_interface": run["per_interface"], "fallbacks": run["fallbacks"], "rounds": run["rounds"],
        "round_errors": run["round_errors"], "event_types": run["event_types"],
        "spurious_events": run["spurious_events"], "harness_version": run["summary"]["harness_version"],
        "dead_curve": [(s["step"], s["dead_share"]) for s in run["steps"]],
    }


def arm_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean (and sd over seeds) of every scalar in the per-run summaries."""
    out: dict[str, Any] = {"n": len(runs), "seeds": [r["seed"] for r in runs]}
    for key in ("best_score", "best_audit", "max_audit", "best_step", "final_score", "final_audit", "zero_var_share",
                "length_corr_final", "length_corr_base", "gap_growth", "wall_s", "pause_s", "pause_share", "eval_s",
                "judge_warnings", "fallbacks", "rounds", "round_errors", "spurious_events", "words_final"):
        vals = [r["summary"][key] for r in runs]
        out[key] = _mean(vals)
        out[key + "_sd"] = _sd(vals)
    out["per_interface"] = {i: {k: sum(r["summary"]["per_interface"][i][k] for r in runs)
                                for k in ("proposals", "accepted", "rejected")} for i in INTERFACES}
    domains = sorted({d for r in runs for d in r["summary"]["final_domains"]})
    out["final_domains"] = {d: {m: _mean([r["summary"]["final_domains"].get(d, {}).get(m) for r in runs])
                                for m in ("score", "audit")} for d in domains}
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
        out[arm] = {"seeds": [sd for sd, _ in mine],
                    "score": [s["final_score"] - fixed[sd]["final_score"] for sd, s in mine],
                    "audit": [None if s["final_audit"] is None or fixed[sd]["final_audit"] is None
                              else s["final_audit"] - fixed[sd]["final_audit"] for sd, s in mine]}
    return out


def targets(by_arm: dict[str, list[dict[str, Any]]], arm_sum: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's four targets, measured (None where an arm needed for it was not run)."""
    rows: list[dict[str, Any]] = []
    h, f, d = arm_sum.get("harnessrl"), arm_sum.get("fixed"), arm_sum.get("dynfilter")

    def diff(a, b, key):
        return None if a is None or b is None or a[key] is None or b[key] is None else a[key] - b[key]

    for other, name in ((f, "fixed"), (d, "dynfilter")):
        for key, what in (("final_audit", "final checkpoint"), ("best_audit", "best checkpoint")):
            v = diff(h, other, key)
            rows.append({"target": f"audit(harnessrl) - audit({name}) >= 3 points ({what})", "value": v,
                         "met": None if v is None else v >= 3.0})
    # Steps to reach fixed's best held-out score, per seed (paired).
    ratios = []
    for fr in by_arm.get("fixed", []):
        hr = next((r for r in by_arm.get("harnessrl", []) if r["seed"] == fr["seed"]), None)
        if hr is None:
            continue
        fs = fr["summary"]
        if fs["best_step"] == 0:
            ratios.append(None)  # base model is fixed's best: "reaching it" is free
            continue
        reach = next((s for s, score, _ in hr["summary"]["curve"] if score is not None and score >= fs["best_score"]),
                     None)
        ratios.append(None if reach is None else reach / fs["best_step"])
    known = [r for r in ratios if r is not None]
    v = _mean(known) if known and len(known) == len(ratios) else None
    rows.append({"target": "harnessrl reaches fixed's best held-out score in <= 60% of fixed's steps",
                 "value": v, "met": None if v is None else v <= 0.6,
                 "note": f"per seed: {['never/undefined' if r is None else round(r, 2) for r in ratios]}"})
    v = None if not h or not f or f["zero_var_share"] in (None, 0) or h["zero_var_share"] is None \
        else h["zero_var_share"] / f["zero_var_share"]
    rows.append({"target": "zero-variance share(harnessrl) <= 0.5 x share(fixed)", "value": v,
                 "met": None if v is None else v <= 0.5})
    v = None if not h else h["pause_share"]
    rows.append({"target": "evolver pause <= 10% of harnessrl wall time", "value": v,
                 "met": None if v is None else v <= 0.10})
    return rows


# -- report ------------------------------------------------------------------------------------------------
def _fmt(x: Any, nd: int = 1, sd: Any = None) -> str:
    if x is None:
        return "–"
    s = f"{x:.{nd}f}"
    return s + (f" ± {sd:.{nd}f}" if sd is not None else "")


def plots(results: dict[str, Any], plot_dir: Path) -> list[str]:
    """Two small PNGs: held-out scores over steps, zero-variance share over training. Returns file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir.mkdir(parents=True, exist_ok=True)
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in results["runs"]:
        by_arm.setdefault(r["arm"], []).append(r)
    names = []
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), dpi=80)
    for arm, runs in by_arm.items():
        steps = sorted({s for r in runs for s, _, _ in r["summary"]["curve"]})
        for ax, idx in ((axes[0], 1), (axes[1], 2)):
            ys = [_mean([next((c[idx] for c in r["summary"]["curve"] if c[0] == s), None) for r in runs]) for s in steps]
            ax.plot(steps, ys, marker="o", ms=3, lw=2 if ARMS[arm].key else 1, ls="-" if ARMS[arm].key else "--",
                    label=arm)
    axes[0].set_title("held-out training-criteria score")
    axes[1].set_title("held-out audit score")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel("Avg@k (0-100)")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(plot_dir / "heldout.png")
    plt.close(fig)
    names.append("heldout.png")

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
    for arm, runs in by_arm.items():
        steps = sorted({s for r in runs for s, _ in r["summary"]["dead_curve"]})
        ys = [_mean([next((d for st, d in r["summary"]["dead_curve"] if st == s), None) for r in runs]) for s in steps]
        w = 4  # trailing mean over 4 steps: one step holds only batch/G groups
        smooth = [_mean(ys[max(0, i - w + 1):i + 1]) for i in range(len(ys))]
        ax.plot(steps, smooth, lw=2 if ARMS[arm].key else 1, ls="-" if ARMS[arm].key else "--", label=arm)
    ax.set_title("zero-variance group share (trailing 4-step mean)")
    ax.set_xlabel("step")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(plot_dir / "zero_variance.png")
    plt.close(fig)
    names.append("zero_variance.png")

    paired = paired_vs_fixed(results["runs"])
    if paired:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), dpi=80)
        arms = list(paired)
        for ax, key, title in ((axes[0], "score", "Δ held-out score vs fixed (final)"),
                               (axes[1], "audit", "Δ audit score vs fixed (final)")):
            for i, arm in enumerate(arms):
                vals = [v for v in paired[arm][key] if v is not None]
                ax.bar(i, _mean(vals) or 0.0, color="tab:green" if ARMS[arm].key else "tab:gray", alpha=0.6)
                ax.scatter([i] * len(vals), vals, color="k", s=10, zorder=3)  # one dot per seed
            ax.axhline(0, color="k", lw=0.8)
            ax.axhline(3, color="tab:red", lw=0.8, ls=":")  # the issue's +3-point target
            ax.set_xticks(range(len(arms)))
            ax.set_xticklabels(arms, rotation=35, ha="right", fontsize=7)
            ax.set_title(title)
            ax.set_ylabel("points (0-100)")
            ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(plot_dir / "paired_vs_fixed.png")
        plt.close(fig)
        names.append("paired_vs_fixed.png")
    return names


ANALYSIS_BEGIN, ANALYSIS_END = "<!-- BEGIN ANALYSIS (hand-written, kept on re-render) -->", "<!-- END ANALYSIS -->"


def render(results: dict[str, Any], report: Path) -> str:
    arm_sum = results["arms"]
    lines = [f"# Benchmark: HarnessRL vs fixed harness vs dynamic filtering ({results['preset']} preset)", ""]
    lines += ["Generated by `benchmarks/compare.py` (tables, targets, plots); the analysis section is written by hand.", ""]
    b = results["budget"]
    lines += ["## Setup", "",
              f"- Command: `{results['command']}`",
              f"- Started {results['started']}, finished {results['finished']}; runtime {results['runtime_s'] / 60:.1f} min "
              f"(wall, {results['jobs']} parallel job(s), shared 2-core machine).",
              f"- Code: commit {results['git']['head']} plus {results['git']['changed_files']} uncommitted changes"
              f"{' (snapshot taken ' + results['git']['taken'] + ')' if results['git'].get('taken') else ''}, "
              f"frozen into `<out>/code` for the whole run (every arm runs the same code).",
              f"- Config `{b['config']}`; per arm: {b['steps']} steps x {b['batch']} completions "
              f"({b['batch'] // b['group']} prompts x G={b['group']}), evolver every {b['evolve_every']} steps, "
              f"held-out eval every {b['eval_every']} steps and at the last step.",
              f"- Training pool: {'all train tasks' if not b.get('train_per_domain') else str(b['train_per_domain']) + ' train tasks per domain, `' + b['train_pool'] + '`'}.",
              f"- Held-out eval: fixed subset of {len(b['eval_tasks'])} test tasks ({b['eval_per_domain']} per domain), "
              f"k={b['eval_k']} samples, {b['max_tokens']} tokens, training temperature, eval seed {b['eval_seed']} "
              f"(same random numbers for every model). Scores are Avg@k on 0-100.",
              f"- Seeds: key arms {b['seeds']}, ablations {b['ablation_seeds']}.", ""]
    lines += ["## Runs", "", "| job | status |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in results["status"].items()]
    lines += ["", "## Main table (mean ± sd over seeds)", "",
              "| arm | n | held-out score (best ckpt) | audit (best ckpt) | best step | final score | final audit | "
              "zero-var share | len corr (final / base) | train-audit gap growth | wall s | pause % | judge warn |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm, s in arm_sum.items():
        lines.append(
            f"| {ARMS[arm].label} | {s['n']} | {_fmt(s['best_score'], 1, s['best_score_sd'])} | "
            f"{_fmt(s['best_audit'], 1, s['best_audit_sd'])} | {_fmt(s['best_step'], 0)} | "
            f"{_fmt(s['final_score'], 1, s['final_score_sd'])} | {_fmt(s['final_audit'], 1, s['final_audit_sd'])} | "
            f"{_fmt(s['zero_var_share'], 2, s['zero_var_share_sd'])} | "
            f"{_fmt(s['length_corr_final'], 2)} / {_fmt(s['length_corr_base'], 2)} | {_fmt(s['gap_growth'], 1)} | "
            f"{_fmt(s['wall_s'], 0)} | {_fmt(None if s['pause_share'] is None else 100 * s['pause_share'], 1)} | "
            f"{_fmt(s['judge_warnings'], 0)} |")
    base = results.get("base")
    if base:
        lines += ["", f"Base model (step 0, same eval): score {_fmt(100 * base['eval']['avg_at_k'])}, audit "
                      f"{_fmt(None if base['eval']['audit'] is None else 100 * base['eval']['audit'])}, "
                      f"length corr {_fmt(base['eval']['length_corr'], 2)}."]
    lines += ["", "Columns: *best ckpt* = the evaluated checkpoint (step 0 = base included) with the highest held-out "
                  "training-criteria score (selected on the same eval subset, so optimistic); *len corr* = within-task "
                  "correlation of response word count with the training-criteria score on the held-out eval; "
                  "*train-audit gap growth* = (score - audit) at the final checkpoint minus the same at the base model "
                  "(positive: the training criteria rose more than the hidden audit = spurious reward); *wall s* = "
                  "training wall time (evolver pauses included, eval excluded); *pause %* = share of it spent paused "
                  "in the evolver.", ""]
    lines += ["## Paired with the fixed harness (same seed, same eval draws): final-checkpoint differences", "",
              "| arm | seeds | Δ score per seed | mean Δ score | Δ audit per seed | mean Δ audit |", "|---|---|---|---|---|---|"]
    for arm, d in paired_vs_fixed(results["runs"]).items():
        lines.append(f"| {arm} | {d['seeds']} | {', '.join(_fmt(x) for x in d['score'])} | "
                     f"{_fmt(_mean(d['score']), 1, _sd(d['score']))} | {', '.join(_fmt(x) for x in d['audit'])} | "
                     f"{_fmt(_mean(d['audit']), 1, _sd(d['audit']))} |")
    lines += ["", "## Per domain (final checkpoint, score / audit)", ""]
    domains = sorted({d for s in arm_sum.values() for d in s["final_domains"]})
    lines += ["| arm | " + " | ".join(domains) + " |", "|---|" + "---|" * len(domains)]
    for arm, s in arm_sum.items():
        cells = [f"{_fmt(s['final_domains'].get(d, {}).get('score'))} / {_fmt(s['final_domains'].get(d, {}).get('audit'))}"
                 for d in domains]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    lines += ["", "## Evolver (summed over seeds): proposals / accepted / rejected per interface", "",
              "| arm | rounds | sampling | guidance | criteria | fallbacks | committed updates | groups on updated "
              "tasks after the update | hinted rollouts | round errors | spurious events | events |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm, s in arm_sum.items():
        runs = [r for r in results["runs"] if r["arm"] == arm]
        ev: dict[str, int] = {}
        for r in runs:
            for k, v in r["summary"]["event_types"].items():
                ev[k] = ev.get(k, 0) + v
        pi = s["per_interface"]
        cells = [f"{pi[i]['proposals']} / {pi[i]['accepted']} / {pi[i]['rejected']}" for i in INTERFACES]
        lines.append(f"| {arm} | {sum(r['summary']['rounds'] for r in runs)} | " + " | ".join(cells) +
                     f" | {sum(r['summary']['fallbacks'] for r in runs)} | "
                     f"{sum(r.get('updates', 0) for r in runs)} | {sum(r.get('updated_task_revisits', 0) for r in runs)} | "
                     f"{_fmt(_mean([r.get('hinted_share') for r in runs]), 2)} | "
                     f"{sum(r['summary']['round_errors'] for r in runs)} | "
                     f"{sum(r['summary']['spurious_events'] for r in runs)} | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(ev.items())) or '–'} |")
    lines += ["", "Critic checks that failed (per interface, summed over seeds):", ""]
    for arm in arm_sum:
        fails: dict[str, int] = {}
        for r in results["runs"]:
            if r["arm"] == arm:
                for k, v in r.get("critic_fails", {}).items():
                    fails[k] = fails.get(k, 0) + v
        if fails:
            lines.append(f"- {arm}: " + ", ".join(f"{k} x{v}" for k, v in sorted(fails.items())))
    lines += ["", "## Targets (aims, measured as is)", "", "| target | measured | met? | note |", "|---|---|---|---|"]
    for t in results["targets"]:
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {_fmt(t['value'], 2)} | {met} | {t.get('note', '')} |")
    lines += ["", "## Per run", "", "| run | best step | best score | best audit | final score | final audit | "
              "zero-var | wall s | pause s | eval s | harness version |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        s = r["summary"]
        lines.append(f"| {r['name']} | {s['best_step']} | {_fmt(s['best_score'])} | {_fmt(s['best_audit'])} | "
                     f"{_fmt(s['final_score'])} | {_fmt(s['final_audit'])} | {_fmt(s['zero_var_share'], 2)} | "
                     f"{_fmt(s['wall_s'], 0)} | {_fmt(s['pause_s'], 0)} | {_fmt(s['eval_s'], 0)} | "
                     f"v{s['harness_version']} |")
    lines += ["", "## Plots", ""]
    rel = os.path.relpath(results["plot_dir"], report.parent)
    lines += [f"![{p}]({rel}/{p})" for p in results["plots"]]
    analysis = f"{ANALYSIS_BEGIN}\n## Analysis\n\n(not written yet)\n{ANALYSIS_END}"
    if report.is_file():
        old = report.read_text()
        if ANALYSIS_BEGIN in old and ANALYSIS_END in old:
            analysis = old[old.index(ANALYSIS_BEGIN):old.index(ANALYSIS_END) + len(ANALYSIS_END)]
    lines += ["", analysis, ""]
    return "\n".join(lines)


def collect(jobs: list[Job], status: dict[str, str]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    base = None
    runs = []
    for job in jobs:
        f = Path(job.run_dir) / "bench.json"
        if not f.is_file():
            status.setdefault(job.name, "not run")
            continue
        if status.get(job.name, "reused").startswith(("failed", "not run")):
            status[job.name] = "done (by a later invocation)"  # --render-only after a rerun filled the gap
        status.setdefault(job.name, "reused")
        data = json.loads(f.read_text())
        if job.kind == "base":
            base = data
        else:
            data.update(collect_run(Path(job.run_dir)))  # re-read here: --render-only picks up new measures
            runs.append(data)
    for r in runs:
        r["summary"] = run_summary(r, base)
    return base, runs


def build_results(args: argparse.Namespace, jobs: list[Job], status: dict[str, str], started: str,
                  runtime_s: float, report: Path) -> dict[str, Any]:
    base, runs = collect(jobs, status)
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_arm.setdefault(r["arm"], []).append(r)
    arm_sum = {a: arm_summary(by_arm[a]) for a in ARMS if a in by_arm}
    results = {
        "preset": args.preset, "command": args.command, "started": started,
        "finished": getattr(args, "finished", None) or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runtime_s": runtime_s,
        "jobs": args.jobs, "git": args.git, "status": status, "base": base, "runs": runs, "arms": arm_sum,
        "targets": targets(by_arm, arm_sum), "plot_dir": str(report.parent / "plots"),
        "budget": {"config": PRESETS[args.preset].config, "steps": args.steps, "batch": args.batch, "group": args.group,
                   "evolve_every": args.evolve_every, "eval_every": args.eval_every, "eval_tasks": jobs[0].eval_tasks,
                   "eval_per_domain": args.eval_per_domain, "eval_k": args.eval_k, "max_tokens": args.max_tokens,
                   "eval_seed": args.eval_seed, "seeds": args.seeds, "train_per_domain": args.train_per_domain,
                   "train_pool": next((o for o in jobs[-1].overrides if o.startswith("data.tasks=")), "all"),
                   "ablation_seeds": args.ablation_seeds if args.ablation_seeds is not None else args.seeds[:1]},
    }
    results["plots"] = plots(results, Path(results["plot_dir"])) if runs else []
    return results


# -- CLI ---------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchmarks/compare.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train every arm (same seeds, data and step budget) through the HarnessRL trainer, evaluate "
                    "checkpoints on a fixed held-out subset, and write a Markdown report with plots.",
        epilog="Arms: " + ", ".join(f"{a} ({ARMS[a].label})" for a in ARMS) + ".\n"
               "Presets (defaults of the budget options):\n" + "".join(
                   f"  {n}: {p.config}, {p.steps} steps, batch {p.batch}, G={p.group}, evolver every {p.evolve_every}, "
                   f"eval every {p.eval_every} ({p.eval_per_domain}/domain, k={p.eval_k}, {p.max_tokens} tokens), "
                   f"train pool {p.train_per_domain or 'all'}/domain"
                   f"{', ' + ' '.join(p.extra) if p.extra else ''}\n" for n, p in PRESETS.items()) +
               "Example (the real benchmark):\n  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/compare.py --preset smollm2 "
               "--steps 8 --seeds 0,1 --arms all --jobs 2 --out runs/bench --report benchmarks/RESULTS.md\n"
               "Example (smoke, seconds):\n  .venv/bin/python benchmarks/compare.py --preset tiny --steps 2 --arms all "
               "--jobs 0 --out /tmp/bench-tiny")
    p.add_argument("--preset", choices=list(PRESETS), default="smollm2",
                   help="smollm2: SmolLM2-135M-Instruct + LoRA (configs/cpu-demo.yaml), the real benchmark; "
                        "tiny: random tiny model (configs/tiny.yaml), seconds per arm, for smoke tests")
    p.add_argument("--steps", type=int, help="GRPO steps per arm (the shared step budget; default from the preset)")
    p.add_argument("--seeds", type=_csv_ints, default=[0, 1],
                   help="training seeds for the key arms (fixed, dynfilter, harnessrl), e.g. 0,1 (default 0,1)")
    p.add_argument("--ablation-seeds", type=_csv_ints, default=None,
                   help="seeds for the ablation arms (default: the first of --seeds)")
    p.add_argument("--arms", type=parse_arms, default=list(ARMS),
                   help=f"comma-separated arms, or 'key' / 'all' (default all): {', '.join(ARMS)}")
    p.add_argument("--out", default=None, help="benchmark folder: runs, logs, results.json (default runs/bench-PRESET)")
    p.add_argument("--report", default=None, help="Markdown report path (default OUT/RESULTS.md); plots go next to it "
                                                  "in plots/")
    p.add_argument("--jobs", type=int, default=1,
                   help="arms trained at the same time, each its own process with one torch thread (default 1; "
                        "0 = sequentially inside this process, used by the smoke test)")
    p.add_argument("--batch", type=int, help="completions per step (default from the preset)")
    p.add_argument("--group", type=int, help="GRPO group size G (default from the preset)")
    p.add_argument("--evolve-every", type=int, help="steps between evolver rounds (default from the preset)")
    p.add_argument("--eval-every", type=int, help="held-out eval of the checkpoints at multiples of this step "
                                                  "interval (and the last step)")
    p.add_argument("--eval-per-domain", type=int, help="held-out tasks per domain in the fixed eval subset")
    p.add_argument("--eval-k", type=int, help="samples per eval task (Avg@k)")
    p.add_argument("--train-per-domain", type=int,
                   help="training pool: train tasks per domain, a fixed seeded pick (0 = all train tasks)")
    p.add_argument("--eval-seed", type=int, default=1234, help="sampling seed of every eval (default 1234)")
    p.add_argument("--max-tokens", type=int, help="completion tokens in training and eval (default from the preset)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="extra trainer override for every arm, e.g. --set harness.sample_k=4 (repeatable)")
    p.add_argument("--stop-after", type=float, default=None, metavar="MIN",
                   help="start no new job after MIN minutes; the report lists what was not run")
    p.add_argument("--render-only", action="store_true", help="rebuild the report from finished runs; train nothing")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one job spec (JSON file)
    return p


def resolve_args(args: argparse.Namespace) -> argparse.Namespace:
    preset = PRESETS[args.preset]
    for name in ("steps", "batch", "group", "evolve_every", "eval_every", "eval_per_domain", "eval_k", "max_tokens",
                 "train_per_domain"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(preset, name))
    problems = []
    for name in ("steps", "batch", "group", "evolve_every", "eval_every", "eval_per_domain", "eval_k", "max_tokens"):
        if getattr(args, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be >= 1")
    if args.batch % args.group:
        problems.append(f"--batch ({args.batch}) must be a multiple of --group ({args.group})")
    if args.jobs < 0:
        problems.append("--jobs must be >= 0")
    if not args.seeds:
        problems.append("--seeds is empty")
    if problems:
        raise SystemExit("compare.py: " + "; ".join(problems))
    args.out = args.out or str(ROOT / "runs" / f"bench-{args.preset}")
    args.report = args.report or str(Path(args.out) / "RESULTS.md")
    return args


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
    code_root = snapshot_code(out) if args.jobs > 0 and not args.render_only else ROOT
    jobs = plan(args, code_root)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    frozen = out / "code" / "git_state.json"
    args.git = json.loads(frozen.read_text()) if frozen.is_file() else git_state()
    t0 = time.monotonic()
    status = {} if args.render_only else execute(jobs, args.jobs, out,
                                                  None if args.stop_after is None else args.stop_after * 60, code_root)
    runtime = time.monotonic() - t0
    if args.render_only:
        prev = out / "results.json"
        if prev.is_file():  # keep the original run's timing and command
            old = json.loads(prev.read_text())
            started, runtime, args.command = old["started"], old["runtime_s"], old["command"]
            args.finished = old["finished"]
            status = {k: v for k, v in old["status"].items()}
    results = build_results(args, jobs, status, started, runtime, report)
    atomic_write_json(out / "results.json", results)
    atomic_write_text(report, render(results, report))
    print(f"[bench] report: {report}  raw: {out / 'results.json'}", flush=True)
    failed = [k for k, v in status.items() if v.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
