"""Soak benchmark: how a long run grows, from outside the trainer.

Starts `harnessrl train` as a child process and, while it runs, records every `--every` seconds:

- the resident memory (RSS) of the trainer and its descendants, their open file descriptors and threads
  (read from Linux `/proc`; the trainer is never touched);
- the run folder's size, split into checkpoints, memory (Chroma), logs (`*.jsonl`) and the rest;
- the last finished step (`metrics.jsonl`) and every round's pause (`rounds.jsonl`).

At each checkpoint it also measures the training memory as the run would query it: the checkpoint's memory
snapshot (`memory.jsonl`, written atomically, so it is never read half-written) is restored into an in-memory
Chroma store with the run's embedding, and the records per kind and the latency of the queries the evolver makes
(`task_history`, `similar_cases`) are taken. The run's own store is locked by the trainer and is not opened.

The summary fits each series against the step, per 100 steps, separately on the first and the second half of the
run: a series that grows linearly in what the run stores has equal slopes; one whose second-half slope is well
above the first half's grows faster than linearly. The monitor shares the machine with the trainer: on two cores
its probes slow training a little; absolute times are for comparison within one run.

Usage (Linux only, for `/proc`)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/soak.py --name tiny-300 --config configs/tiny.yaml --steps 300 \
        -- train.save_steps=25 train.save_total_limit=2 harness.evolve_every=10
    .venv/bin/python benchmarks/soak.py --write benchmarks/SOAK.md

The first writes `benchmarks/results/soak/<name>.json`; the second renders every summary there into the section
between the markers of SOAK.md (the rest of the file is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.atomic import atomic_write_text  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "soak"
BEGIN = "<!-- soak:begin -->"
END = "<!-- soak:end -->"
PARTS = ("checkpoints", "memory", "harness", "evolver_db", "logs")  # of the run folder, each also summed in total
QUERIES = 20  # per kind of query at each checkpoint; the median is reported


def _tree(pid: int) -> list[int]:
    """The process and its descendants, from /proc's children lists."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                kids = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                todo.extend(int(k) for k in kids)
        except OSError:  # the process ended between two reads: it has nothing left to count
            continue
    return out


def _proc(pid: int) -> dict[str, float]:
    rss_kb = fds = threads = 0
    for p in _tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text().splitlines()
            fds += len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            continue
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb += int(line.split()[1])
            elif line.startswith("Threads:"):
                threads += int(line.split()[1])
    return {"rss_mb": rss_kb / 1024, "open_fds": fds, "threads": threads}


def _disk(run: Path) -> dict[str, float]:
    parts = {"checkpoints": 0, "memory": 0, "harness": 0, "evolver_db": 0, "logs": 0, "other": 0}
    for root, _dirs, files in os.walk(run):
        top = Path(root).relative_to(run).parts[:1]
        for f in files:
            try:
                size = os.lstat(os.path.join(root, f)).st_size
            except OSError:  # pruned while walking
                continue
            if top and top[0] in ("checkpoints", "memory", "harness"):
                parts[top[0]] += size
            elif f.startswith("evolver.sqlite"):  # the rounds' LangGraph checkpoints (Studio's threads)
                parts["evolver_db"] += size
            elif f.endswith(".jsonl"):
                parts["logs"] += size
            else:
                parts["other"] += size
    mb = {k: v / 2**20 for k, v in parts.items()}
    mb["total"] = sum(mb.values())
    return {f"{k}_mb": v for k, v in mb.items()}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete lines only: the writer appends whole lines, and a line still being written is left for later."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines()[: text.count("\n")] if line.strip()]


def _memory_probe(snapshot: Path, embedding: str) -> dict[str, Any]:
    from memory import TrainingMemory

    store = TrainingMemory.ephemeral(embedding=embedding)
    try:
        t0 = time.perf_counter()
        counts = store.restore(snapshot)
        restore_s = time.perf_counter() - t0
        tasks = sorted({r["record"].get("task_id", "") for r in _jsonl(snapshot)[1:]} - {""})
        lat: dict[str, list[float]] = {"task_history_ms": [], "similar_cases_ms": []}
        for i in range(QUERIES):
            task = tasks[i % len(tasks)] if tasks else "none"
            t0 = time.perf_counter()
            store.task_history(task, last_n=10)
            lat["task_history_ms"].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            store.similar_cases(f"groups of {task} stopped varying after edit {i}", k=5)
            lat["similar_cases_ms"].append((time.perf_counter() - t0) * 1000)
        return {
            "records": sum(counts.values()),
            "per_kind": counts,
            "restore_s": restore_s,
            **{k: statistics.median(v) for k, v in lat.items()},
        }
    finally:
        store.close()


def _embedding(run_dir: Path) -> str:
    """The run's own `evolver.memory_embedding`, from the config the trainer wrote into its folder."""
    import yaml

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
    return str((cfg.get("evolver") or {}).get("memory_embedding", "minilm"))


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope per 100 steps; None with fewer than 3 points or no spread in steps."""
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return 100 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def growth(series: list[tuple[float, float]], steps: int) -> dict[str, float | None]:
    """Per-100-step slopes of a series over the first and the second half of the run's steps."""
    half = steps / 2
    return {
        "first_half": _slope([p for p in series if 0 < p[0] <= half]),
        "second_half": _slope([p for p in series if p[0] > half]),
        "whole": _slope([p for p in series if p[0] > 0]),
    }


def summarise(samples: list[dict[str, Any]], rounds: list[dict[str, Any]], probes: list[dict[str, Any]], steps: int):
    def by_step(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
        last: dict[int, float] = {}
        for r in rows:  # the last sample of each step: the value the step ended with
            if r.get(key) is not None:
                last[int(r["step"])] = float(r[key])
        return sorted(last.items())

    out: dict[str, Any] = {}
    for key in ("rss_mb", "open_fds", "threads", "total_mb", *(f"{p}_mb" for p in PARTS)):
        pts = by_step(samples, key)
        out[key] = {"start": pts[0][1] if pts else None, "end": pts[-1][1] if pts else None, **growth(pts, steps)}
    out["round_pause_s"] = {**growth([(r["step"], r["pause_s"]) for r in rounds], steps), "n": len(rounds)}
    for key in ("records", "task_history_ms", "similar_cases_ms"):
        pts = [(p["step"], p[key]) for p in probes if key in p]
        out[key] = {"start": pts[0][1] if pts else None, "end": pts[-1][1] if pts else None, **growth(pts, steps)}
    return out


def _probe_new_checkpoints(
    run_dir: Path, probed: set[str], probes: list[dict[str, Any]], sample: dict[str, Any]
) -> None:
    """Measure the memory of every checkpoint not probed yet (`_memory_probe`) and print one line each."""
    for snap in sorted((run_dir / "checkpoints").glob("checkpoint-*/memory.jsonl")):
        if snap.parent.name in probed:
            continue
        probed.add(snap.parent.name)
        ck_step = int(snap.parent.name.split("-")[1])
        try:
            probes.append({"step": ck_step, **_memory_probe(snap, _embedding(run_dir))})
        except (OSError, ValueError) as e:  # pruned or replaced while read: say so, go on
            print(f"soak: memory probe of {snap.parent.name} skipped ({type(e).__name__}: {e})")
            continue
        p = probes[-1]
        print(
            f"soak: step {ck_step}: rss {sample['rss_mb']:.0f} MB, run folder {sample['total_mb']:.0f} MB, memory "
            f"{p['records']} records, similar_cases {p['similar_cases_ms']:.1f} ms, task_history "
            f"{p['task_history_ms']:.1f} ms",
            flush=True,
        )


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_dir = Path(args.run_dir or REPO / "runs" / f"soak-{args.name}")
    overrides = [f"train.max_steps={args.steps}", f"run_dir={run_dir}", *args.overrides]
    cmd = [sys.executable, "-m", "trainer.cli", "train", "--config", args.config, "--no-progress", "--overwrite"]
    cmd += overrides
    log = run_dir.with_suffix(".log")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    print(f"soak: {shlex.join(cmd)}\n      trainer log: {log}", flush=True)
    load0 = os.getloadavg()
    t0 = time.time()
    samples: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    probed: set[str] = set()
    with open(log, "w") as fh:
        child = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ})
        try:
            while child.poll() is None:
                time.sleep(args.every)
                metrics = _jsonl(run_dir / "metrics.jsonl")
                step = int(metrics[-1]["step"]) if metrics else 0
                proc = _proc(child.pid)
                if not proc["rss_mb"]:  # exited between poll() and the read: nothing left to measure
                    continue
                samples.append({"t": time.time() - t0, "step": step, **proc, **_disk(run_dir)})
                _probe_new_checkpoints(run_dir, probed, probes, samples[-1])
        except KeyboardInterrupt:
            child.terminate()
            raise
    if child.returncode != 0:
        raise SystemExit(f"soak: the training exited with {child.returncode}; see {log}")
    if samples:  # the last checkpoint is written as the trainer exits, after the loop's last look
        _probe_new_checkpoints(run_dir, probed, probes, samples[-1])
    rounds = [
        {"step": int(r["step"]), "pause_s": float(r.get("pause_s", 0.0))} for r in _jsonl(run_dir / "rounds.jsonl")
    ]
    return {
        "name": args.name,
        # Without --run-dir: where the run folder lived on this machine is not part of the result.
        "command": shlex.join(
            ["benchmarks/soak.py", "--name", args.name, "--config", args.config, "--steps", str(args.steps)]
            + (["--", *args.overrides] if args.overrides else [])
        ),
        "config": args.config,
        "steps": args.steps,
        "overrides": args.overrides,
        "wall_s": time.time() - t0,
        "load_before": load0,
        "load_after": os.getloadavg(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "summary": summarise(samples, rounds, probes, args.steps),
        "rounds": rounds,
        "probes": probes,
        "samples": samples[:: max(1, len(samples) // 400)],  # at most ~400 kept: the shape, not the bulk
    }


def _fmt(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def render(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        s = r["summary"]
        lines += [
            f"### {r['name']}: {r['steps']} steps of `{r['config']}`",
            "",
            f"`{r['command']}`; {r['wall_s'] / 60:.1f} min, {r['machine']}, load "
            f"{r['load_before'][0]:.1f} before and {r['load_after'][0]:.1f} after, {s['round_pause_s']['n']} rounds.",
            "",
            "| series | at start | at end | per 100 steps, 1st half | per 100 steps, 2nd half |",
            "|---|---|---|---|---|",
        ]
        for key, label in [
            ("rss_mb", "RSS (MB)"),
            ("open_fds", "open files"),
            ("threads", "threads"),
            ("total_mb", "run folder (MB)"),
            ("checkpoints_mb", "  checkpoints (MB)"),
            ("memory_mb", "  memory folder (MB)"),
            ("harness_mb", "  harness versions (MB)"),
            ("evolver_db_mb", "  evolver.sqlite (MB)"),
            ("logs_mb", "  logs (MB)"),
            ("records", "memory records"),
            ("task_history_ms", "task_history (ms)"),
            ("similar_cases_ms", "similar_cases (ms)"),
        ]:
            g = s.get(key)
            if g is None:  # a summary written before this series was recorded
                continue
            lines.append(
                f"| {label} | {_fmt(g['start'])} | {_fmt(g['end'])} | {_fmt(g['first_half'], 2)} | "
                f"{_fmt(g['second_half'], 2)} |"
            )
        g = s["round_pause_s"]
        lines += [f"| round pause (s) | - | - | {_fmt(g['first_half'], 2)} | {_fmt(g['second_half'], 2)} |", ""]
    return "\n".join(lines)


def write(doc: Path) -> None:
    results = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]
    text = doc.read_text() if doc.exists() else f"# Soak\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: the markers {BEGIN} and {END} are missing; add them where the results go")
    head, rest = text.split(BEGIN, 1)
    atomic_write_text(doc, f"{head}{BEGIN}\n{render(results)}\n{END}{rest.split(END, 1)[1]}")
    print(f"wrote {len(results)} soak summaries into {doc}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Overrides after `--` go to train.")
    ap.add_argument("--name", help="the summary's name: benchmarks/results/soak/<name>.json")
    ap.add_argument("--config", default="configs/tiny.yaml")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", type=float, default=2.0, help="seconds between samples (default 2)")
    ap.add_argument("--run-dir", help="default runs/soak-<name>")
    ap.add_argument("--write", type=Path, help="render every summary into this markdown file and exit")
    ap.add_argument("overrides", nargs="*", help="config overrides for the training (after --)")
    args = ap.parse_args(argv)
    if args.write:
        write(args.write)
        return
    if not args.name:
        ap.error("--name is required to run a soak")
    result = run(args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{args.name}.json"
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
