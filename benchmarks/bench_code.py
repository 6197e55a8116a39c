"""The code a benchmark job runs: which paths it is (`SNAPSHOT_PATHS`), its identity (a hash over the paths that
decide results; report-only modules are left out), the git state beside it, and the frozen copy the workers run.

Summaries of different code never share a table (`bench_collect.select_code`), and a job is done for a given
code when its summary carries that code's hash (`bench_run.summary_done`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench_spec import ROOT

from trainer.io import atomic_write_json

# The code a job runs: copied into the snapshot and hashed into the job's code identity. Report-only modules
# (compare.py's CLI, bench_render.py, bench_tables.py, bench_stats.py, bench_power.py) are copied but not hashed:
# rendering does not change results.
SNAPSHOT_PATHS = (
    "agents",
    "graphs",
    "harness",
    "memory",
    "tools",
    "trainer",
    "suitegen",
    "configs",
    "data/rubric-mix-lite",
    "data/ifeval-heldout",
    "benchmarks/compare.py",
    "benchmarks/bench_spec.py",
    "benchmarks/bench_run.py",
    "benchmarks/bench_eval.py",
    "benchmarks/bench_code.py",
    "benchmarks/bench_collect.py",
    "benchmarks/bench_render.py",
    "benchmarks/bench_tables.py",
    "benchmarks/bench_plain.py",
    "benchmarks/bench_power.py",
    "benchmarks/bench_stats.py",
)
NOT_HASHED = (
    "benchmarks/compare.py",
    "benchmarks/bench_render.py",
    "benchmarks/bench_tables.py",
    "benchmarks/bench_power.py",
    "benchmarks/bench_stats.py",
)


def code_hash(root: Path) -> str:
    """sha256 over the hashed snapshot paths under `root` (relative names and contents, sorted)."""
    h = hashlib.sha256()
    for rel in SNAPSHOT_PATHS:
        if rel in NOT_HASHED:
            continue
        src = root / rel
        files = (
            [src]
            if src.is_file()
            else sorted(
                f for f in src.rglob("*") if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"
            )
        )
        for f in files:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def code_state(root: Path = ROOT) -> dict[str, Any]:
    """The code a job runs: `git rev-parse HEAD`, whether the snapshot paths had uncommitted changes (a job run
    on a dirty tree says so), and the hash of the code itself (what decides whether summaries may share a table)."""

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    changed = git("status", "--porcelain", "--", *SNAPSHOT_PATHS).splitlines()
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(changed),
        "changed_files": len(changed),
        "code_hash": code_hash(root),
        "taken": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def git_state() -> dict[str, Any]:
    """Back-compatible short form for the report's setup line."""
    c = code_state()
    return {"head": c["commit"][:7], "changed_files": c["changed_files"], "taken": c["taken"]}


def snapshot_code(out: Path) -> tuple[Path, dict[str, Any]]:
    """Copy the code the workers run into OUT/code/<hash>: the repository keeps changing while a benchmark runs
    (hours on a shared checkout), and every job must run the same code. Workers put the snapshot first on
    sys.path, ahead of the editable install (whose finder comes after the path finder). A snapshot of the same
    code is reused (a later sitting resumes its jobs); changed code gets its own snapshot and run folders."""
    import shutil

    tmp = out / f".code-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    state = code_state()
    for rel in SNAPSHOT_PATHS:
        src, dst = ROOT / rel, tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dst)
    state["code_hash"] = code_hash(tmp)  # of the copy itself: the tree may change while it is copied
    dest = out / "code" / state["code_hash"][:12]
    if dest.exists():
        shutil.rmtree(tmp)
        state = json.loads((dest / "code_state.json").read_text())
    else:
        atomic_write_json(tmp / "code_state.json", state)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(dest)
    return dest, state
