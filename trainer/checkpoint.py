"""Checkpoints that carry the harness, and resuming a run from one.

`on_save` (in `HarnessCallback`) adds two files to every TRL `checkpoint-N/`:

- `harness_version.json`: the harness version in force, the step, the detector state, the sampler state
  (rng + dynamic-filtering windows; tasks are drawn at step time, so it holds the draws of steps 1..N and
  none of the batch the dataloader has read ahead: a resumed run draws what an uninterrupted one draws),
  the events pending for the next evolver round, and the evolver
  rounds done so far (their LangGraph thread ids in `evolver.sqlite`). It is written *last*, atomically:
  a checkpoint without it (killed mid-save) is incomplete and resume skips it.
- `memory.jsonl`: a snapshot of the training memory (`TrainingMemory.snapshot`).

Resume (`restore`) makes the run folder match the checkpoint:

- harness versions committed after it are moved to `abandoned/<stamp>/versions/` and their
  `updates.jsonl` lines to `abandoned/<stamp>/updates.jsonl` (the store keeps no API for this, so it is
  done here under the store's own lock file; tell the harness owner if the layout changes);
- the memory folder is moved to `abandoned/<stamp>/memory/` and rebuilt from the checkpoint's snapshot.
  The memory is append-only, so "restore" means: records written after the checkpoint are dropped
  from the live store (kept aside, not deleted);
- memory on a Chroma server (`harness.memory_url`), which cannot be moved aside, is made to hold exactly
  the checkpoint's snapshot (`TrainingMemory.restore_exactly`): what the server held is first written to
  `abandoned/<stamp>/memory.jsonl`, then records written after the checkpoint are deleted and records
  changed since get the snapshot's values back; the number deleted per kind is in the summary
  (`memory_dropped`);
- `events.jsonl`, `metrics.jsonl` and `rounds.jsonl` lose their lines after the checkpoint's step;
- evolver threads of abandoned rounds stay in `evolver.sqlite` but are no longer referenced; a
  repeated round gets a fresh thread id, so it never continues an abandoned thread.

Several processes: only the main process writes the state file (after every rank has saved its part of
the checkpoint, e.g. `rng_state_1.pth`) and rolls the folder back on resume; the other ranks, which wait
until it has, take the checkpoint's harness version, detector and sampler state only.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.types import FailureEvent
from trainer.io import atomic_write_json, read_jsonl, truncate_jsonl

STATE_FILE = "harness_version.json"
MEMORY_FILE = "memory.jsonl"
_CKPT = re.compile(r"^checkpoint-(\d+)$")


def write_checkpoint_state(ckpt_dir: Path, run: Any, step: int) -> None:
    ckpt_dir = Path(ckpt_dir)
    if run.memory is not None:
        run.memory.snapshot(ckpt_dir / MEMORY_FILE)
    with run.lock:
        pending = [e.model_dump(mode="json") for e in run.pending_events]
    atomic_write_json(ckpt_dir / STATE_FILE, {
        "harness_version": run.state.version,
        "step": step,
        "detector": run.detector.state_dict(),
        "sampler": run.sampler.state_dict() if run.sampler is not None else None,
        "pending_events": pending,
        "rounds": run.rounds_done,
        "memory_snapshot": MEMORY_FILE if run.memory is not None else None,
        "written_at": time.time(),
    })


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    d = Path(run_dir) / "checkpoints"
    if not d.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in d.iterdir() if p.is_dir() and (m := _CKPT.match(p.name)))


def find_checkpoint(run_dir: Path, given: str | None = None) -> Path:
    """The checkpoint to resume: `given` (a path or a step number) or the latest *complete* one."""
    if given not in (None, "", "latest"):
        p = Path(given)
        if not p.is_dir() and str(given).isdigit():
            p = Path(run_dir) / "checkpoints" / f"checkpoint-{given}"
        if not (p / STATE_FILE).is_file():
            raise FileNotFoundError(f"--resume {given}: {p} is not a complete HarnessRL checkpoint (no {STATE_FILE}); "
                                    f"complete ones: {[str(c) for _, c in checkpoints(run_dir) if (c / STATE_FILE).is_file()]}")
        return p
    complete = [p for _, p in checkpoints(run_dir) if (p / STATE_FILE).is_file()]
    if not complete:
        raise FileNotFoundError(f"--resume: no complete checkpoint under {Path(run_dir) / 'checkpoints'}; "
                                f"start without --resume")
    return complete[-1]


def read_state(ckpt_dir: Path) -> dict[str, Any]:
    return json.loads((Path(ckpt_dir) / STATE_FILE).read_text())


@contextmanager
def _store_lock(root: Path):
    # Same lock file as harness.store.HarnessStore.commit: no commit can interleave with the move.
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def abandon_versions_after(store: Any, version: int, aside: Path) -> list[int]:
    """Move harness versions > `version` (files and log lines) into `aside`; returns the moved versions.

    Not in harness/store.py (owned elsewhere); kept here with the store's lock and file layout.
    """
    with _store_lock(store.root):
        later = [v for v in store.versions() if v > version]
        if not later:
            return []
        (aside / "versions").mkdir(parents=True, exist_ok=True)
        for v in later:
            os.replace(store.path(v), aside / "versions" / store.path(v).name)
        if store.updates_path.is_file():
            moved = [r for r in read_jsonl(store.updates_path) if int(r.get("version", -1)) > version]
            with open(aside / "updates.jsonl", "a", encoding="utf-8") as f:
                for r in moved:
                    f.write(json.dumps(r, sort_keys=True) + "\n")
            truncate_jsonl(store.updates_path, lambda r: int(r.get("version", -1)) <= version)
    return later


def restore(run: Any, ckpt_dir: Path) -> dict[str, Any]:
    """Make `run` (opened with open_memory=False) match the checkpoint. Returns a summary for the log."""
    state = read_state(ckpt_dir)
    version, step = int(state["harness_version"]), int(state["step"])
    if not run.main_process:
        # Another process of a multi-process run: the main one rolls the folder back (first, under
        # `main_process_first`); this one takes the checkpoint's harness, detector and sampler state only.
        run.set_state(run.store.load(version))
        _restore_live_state(run, state)
        return {"checkpoint": str(ckpt_dir), "step": step, "harness_version": version, "main_process": False}
    aside = run.paths.abandoned / f"resume-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}"
    moved = abandon_versions_after(run.store, version, aside)
    run.set_state(run.store.load(version))

    memory_dropped: dict[str, int] | None = None  # set when a Chroma server's records are deleted
    dropped = {name: truncate_jsonl(path, lambda r: int(r.get("step", 0)) <= step)
               for name, path in (("events", run.paths.events), ("metrics", run.paths.metrics),
                                  ("rounds", run.paths.rounds))}

    if run.cfg.harness.memory_url is None:
        if run.memory is not None:
            run.memory.close()
        if run.paths.memory.exists():
            aside.mkdir(parents=True, exist_ok=True)
            shutil.move(str(run.paths.memory), str(aside / "memory"))
        run.memory = run._open_memory()
        snap = Path(ckpt_dir) / MEMORY_FILE
        if state.get("memory_snapshot") and snap.is_file():
            run.memory.restore(snap)
    else:
        if run.memory is None:
            run.memory = run._open_memory()
        snap = Path(ckpt_dir) / MEMORY_FILE
        if state.get("memory_snapshot") and snap.is_file():
            aside.mkdir(parents=True, exist_ok=True)
            run.memory.snapshot(aside / MEMORY_FILE)  # what the server held, kept aside as the folder would be
            memory_dropped = run.memory.restore_exactly(snap)

    _restore_live_state(run, state)
    return {"checkpoint": str(ckpt_dir), "step": step, "harness_version": version, "abandoned_versions": moved,
            "dropped_lines": dropped, "memory_dropped": memory_dropped, "aside": str(aside) if aside.exists() else None}


def _restore_live_state(run: Any, state: dict[str, Any]) -> None:
    """The in-process part of a checkpoint, on every process: detector windows and sampler rng (identical on
    all processes, which observe the same groups and draw the same batches), rounds done, and the pending
    events (the main process's: it runs the rounds)."""
    from harness.detector import Detector

    run.detector = Detector(run.detector.config)
    run.detector.load_state_dict(state["detector"])
    if run.sampler is not None and state.get("sampler"):
        run.sampler.load_state_dict(state["sampler"])
    with run.lock:
        run.pending_events = ([FailureEvent.model_validate(e) for e in state["pending_events"]]
                              if run.main_process else [])
    run.rounds_done = list(state.get("rounds", []))
