"""Checkpoints that carry the harness, and resuming a run from one.

`on_save` (in `HarnessCallback`) adds two files to every TRL `checkpoint-N/`:

- `harness_version.json`: the harness version in force, the step, the detector state, the sampler state
  (rng + dynamic-filtering windows; tasks are drawn at step time, so it holds the draws of steps 1..N and
  none of the batch the dataloader has read ahead: a resumed run draws what an uninterrupted one draws),
  the events pending for the next evolver round, and the evolver
  rounds done so far (their LangGraph thread ids in `evolver.sqlite`). It is written *last*, atomically:
  a checkpoint without it (killed mid-save) is incomplete and resume skips it.
- `memory.jsonl`: a snapshot of the training memory (`TrainingMemory.snapshot`).

A checkpoint is complete only with a snapshot that holds every record written before it: the snapshot first writes
out the memory writes queued while a Chroma server was away (`memory/outage.py`). A server that is still away when
the checkpoint is saved (`memory.store.MemoryServerDown`) cannot be read, so neither the snapshot nor the state file
is written: the checkpoint is left incomplete (resume skips it, and a state file beside a snapshot lacking the queued
records would resume a memory without them), a warning says so, and training goes on with its writes queued; the
first checkpoint after the server answers holds them.

Resume makes the run folder match the checkpoint. It first checks what it will need, changing nothing
when something is wrong (`prepare_resume`; a corrupt or missing file is a `ResumeError` naming the file, what
is wrong and the way out):

- the checkpoint's state file parses; its memory snapshot exists and reads back (built into a fresh memory
  folder next to `memory/`), unless `fresh_memory` allows starting with an empty memory (said on the console);
- harness versions 0..V (V = the checkpoint's version) are all there and load; one that does not is rebuilt
  where that is exact (version 0 from the suite, version n from version n-1 plus its logged update, the
  corrupt file moved aside) and said, else refused naming the earlier checkpoints that would work.

Then it rolls the folder back (`prepare_resume`, then `restore` for the live objects):

- every JSON-lines log of the folder has a torn tail cut back to its last complete record
  (`trainer.io.heal_jsonl`; counted in the summary's `torn_lines`);
- harness versions committed after it are moved to `abandoned/<stamp>/versions/` and their
  `updates.jsonl` lines to `abandoned/<stamp>/updates.jsonl` (`HarnessStore.abandon_versions_after`, under the
  store's commit lock);
- the memory folder is moved to `abandoned/<stamp>/memory/` and replaced by the one built from the snapshot.
  The memory is append-only, so "restore" means: records written after the checkpoint are dropped
  from the live store (kept aside, not deleted);
- memory on a Chroma server (`harness.memory_url`), which cannot be moved aside, is made to hold exactly
  the checkpoint's snapshot (`TrainingMemory.restore_exactly`): what the server held is first written to
  `abandoned/<stamp>/memory.jsonl`, then records written after the checkpoint are deleted and records
  changed since get the snapshot's values back; the number deleted per kind is in the summary
  (`memory_dropped`);
- `events.jsonl`, `metrics.jsonl` and `rounds.jsonl` lose their lines after the checkpoint's step (and any line
  that does not parse, counted in `unreadable_lines`);
- evolver threads of abandoned rounds stay in `evolver.sqlite` but are no longer referenced; a
  repeated round gets a fresh thread id, so it never continues an abandoned thread.

Several processes: only the main process writes the state file (after every rank has saved its part of
the checkpoint, e.g. `rng_state_1.pth`) and rolls the folder back on resume; the other ranks, which wait
until it has, take the checkpoint's harness version, detector and sampler state only.

A run whose checkpoint is at `train.max_steps` is finished: `trainer.grpo.train` says so and changes nothing
(`run_reached`); raising `train.max_steps` on `--resume` continues from the last checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from harness.ops import apply
from harness.store import HarnessStore, StoreCorrupt
from harness.types import FailureEvent, HarnessState
from trainer.config import RunConfig
from trainer.harness_run import HarnessRun, RunPaths, load_train_tasks
from trainer.io import atomic_write_json, atomic_write_text, heal_jsonl, truncate_jsonl

log = logging.getLogger(__name__)

STATE_FILE = "harness_version.json"
MEMORY_FILE = "memory.jsonl"
_CKPT = re.compile(r"^checkpoint-(\d+)$")
_STATE_KEYS = ("harness_version", "step", "detector", "pending_events")
# The run folder's logs cut back to the checkpoint's step on resume (their records carry `step`).
STEP_LOGS = ("events", "metrics", "rounds")
_MEMORY_BUILD = ".memory.resume-"  # a memory folder being built from a snapshot, next to memory/


class ResumeError(ValueError):
    """A run folder or checkpoint that cannot be resumed as it is.

    The message names the file, what is wrong and the way out. Raised before the folder is changed.
    """


def write_checkpoint_state(ckpt_dir: Path, run: HarnessRun, step: int) -> bool:
    """Add the harness state (and memory snapshot) to a TRL checkpoint; False: left incomplete (memory server away)."""
    from memory.store import MemoryServerDown

    ckpt_dir = Path(ckpt_dir)
    if run.memory is not None:
        try:
            run.memory.snapshot(ckpt_dir / MEMORY_FILE)
        except MemoryServerDown as e:
            log.warning(
                "%s left incomplete (no %s): its memory snapshot cannot be read while the memory server is away "
                "(%s). Training goes on; resume would use the last complete checkpoint",
                ckpt_dir.name,
                STATE_FILE,
                e,
            )
            return False
    with run.lock:
        pending = [e.model_dump(mode="json") for e in run.pending_events]
    atomic_write_json(
        ckpt_dir / STATE_FILE,
        {
            "harness_version": run.state.version,
            "step": step,
            "detector": run.detector.state_dict(),
            "liveness": run.liveness.state_dict(),
            "sampler": run.sampler.state_dict() if run.sampler is not None else None,
            "pending_events": pending,
            "rounds": run.rounds_done,
            "memory_snapshot": MEMORY_FILE if run.memory is not None else None,
            "written_at": time.time(),
        },
    )
    return True


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    d = Path(run_dir) / "checkpoints"
    if not d.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in d.iterdir() if p.is_dir() and (m := _CKPT.match(p.name)))


def complete_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of the checkpoints whose state file was written (the ones resume can use), oldest first."""
    return [(n, p) for n, p in checkpoints(run_dir) if (p / STATE_FILE).is_file()]


def find_checkpoint(run_dir: Path, given: str | None = None) -> Path:
    """The checkpoint to resume: `given` (a path or a step number) or the latest *complete* one."""
    if given not in (None, "", "latest"):
        p = Path(given)
        if not p.is_dir() and str(given).isdigit():
            p = Path(run_dir) / "checkpoints" / f"checkpoint-{given}"
        if not (p / STATE_FILE).is_file():
            raise FileNotFoundError(
                f"--resume {given}: {p} is not a complete HarnessRL checkpoint (no {STATE_FILE}); "
                f"complete ones: {[str(c) for _, c in complete_checkpoints(run_dir)]}"
            )
        return p
    complete = [p for _, p in complete_checkpoints(run_dir)]
    if not complete:
        raise FileNotFoundError(
            f"--resume: no complete checkpoint under {Path(run_dir) / 'checkpoints'}; start without --resume"
        )
    return complete[-1]


def _earlier(ckpt_dir: Path, ok: Any = None) -> str:
    """The way out through another checkpoint: the complete ones before `ckpt_dir` (whose state `ok` accepts)."""
    ckpt_dir = Path(ckpt_dir)
    run_dir = ckpt_dir.parent.parent
    m = _CKPT.match(ckpt_dir.name)
    mine = int(m.group(1)) if m else None
    steps = []
    for n, p in complete_checkpoints(run_dir):
        if mine is not None and n >= mine:
            continue
        if ok is not None:
            try:
                if not ok(json.loads((p / STATE_FILE).read_text())):
                    continue
            except (OSError, ValueError):
                continue
        steps.append(n)
    if not steps:
        return "no earlier complete checkpoint would do: start afresh with --overwrite (or another run_dir)"
    return f"resume from an earlier checkpoint: --resume {steps[-1]} (complete ones that would do: steps {steps})"


def read_state(ckpt_dir: Path) -> dict[str, Any]:
    """The checkpoint's state file; a missing, unreadable or incomplete one is a `ResumeError`."""
    path = Path(ckpt_dir) / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResumeError(
            f"{path}: missing, so the checkpoint is incomplete (killed while saving); {_earlier(ckpt_dir)}"
        ) from None
    except (OSError, ValueError) as e:
        raise ResumeError(
            f"{path}: not readable JSON ({e}); {_earlier(ckpt_dir)}, or move {Path(ckpt_dir).name} aside"
        ) from None
    missing = [k for k in _STATE_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ResumeError(
            f"{path}: not a HarnessRL checkpoint state (missing field(s) {missing}); "
            f"{_earlier(ckpt_dir)}, or move {Path(ckpt_dir).name} aside"
        )
    return state


def run_reached(ckpt_dir: Path) -> int:
    """The step of a checkpoint (what a run resumed from it has already trained)."""
    return int(read_state(ckpt_dir)["step"])


# -- checks before anything changes --------------------------------------------------------------------------
def _plan_versions(store: HarnessStore, upto: int, seed: Any, ckpt_dir: Path) -> dict[int, HarnessState]:
    """Versions 0..`upto` that do not load, rebuilt where exact: {version: rebuilt state}.

    Raises `ResumeError` for one that cannot be rebuilt. `seed()` builds version 0 from the run's suite.
    """
    rebuilt: dict[int, HarnessState] = {}
    records: dict[int, Any] | None = None
    prev: HarnessState | None = None
    for v in range(upto + 1):
        try:
            prev = store.load(v)
            continue
        except (StoreCorrupt, FileNotFoundError) as e:
            problem = str(e).split("; ")[0]
        how = ""
        state: HarnessState | None = None
        if v == 0:
            state, how = seed(), "the run's suite"
        elif prev is not None:
            if records is None:
                try:
                    records = {r.version: r for r in store.history()}
                except StoreCorrupt as e:
                    records, how = {}, f" ({str(e).split('; ')[0]})"
            rec = records.get(v)
            if rec is not None and rec.update is not None and rec.parent_version == v - 1:
                state, how = apply(prev, rec.update, step=rec.step), f"version {v - 1} and its logged update"
            elif not how:
                how = f" (updates.jsonl has {'no line' if rec is None else 'no update'} for version {v})"
        if state is None:
            raise ResumeError(
                f"{problem}; it cannot be rebuilt exactly{how}. Put a good copy of {store.path(v).name} "
                f"back, or {_earlier(ckpt_dir, lambda s, v=v: int(s['harness_version']) < v)}"
            )
        if state.version != v:
            raise ResumeError(
                f"{problem}; rebuilding it from {how} gave version {state.version}, not {v}; "
                f"{_earlier(ckpt_dir, lambda s, v=v: int(s['harness_version']) < v)}"
            )
        rebuilt[v] = state
        prev = state
    return rebuilt


def _check_snapshot(snap: Path, ckpt_dir: Path) -> None:
    """A cheap read of a memory snapshot (each line JSON, the format line first): an error before changes."""
    try:
        with open(snap, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if lineno == 1 and (not isinstance(row, dict) or "format" not in row):
                    raise ValueError("the first line is not the snapshot's format line")
                if lineno > 1 and (not isinstance(row, dict) or "kind" not in row or "record" not in row):
                    raise ValueError(f"line {lineno} is not a memory record")
    except (OSError, ValueError) as e:
        raise ResumeError(
            f"{snap}: memory snapshot not readable ({e}); {_earlier(ckpt_dir)}, or pass --fresh-memory "
            f"to resume with an empty training memory"
        ) from None


def _snapshot(state: dict[str, Any], ckpt_dir: Path, fresh_memory: bool) -> Path | None:
    """The checkpoint's memory snapshot, or None when `fresh_memory` allows resuming without one."""
    snap = Path(ckpt_dir) / (state.get("memory_snapshot") or MEMORY_FILE)
    if snap.is_file():
        try:
            _check_snapshot(snap, ckpt_dir)
            return snap
        except ResumeError as e:
            if not fresh_memory:
                raise
            log.warning("%s; --fresh-memory: resuming with an empty training memory", str(e).split("; ")[0])
            return None
    if not fresh_memory:
        raise ResumeError(
            f"{snap}: the checkpoint's memory snapshot is missing, so the training memory cannot be "
            f"restored to step {state['step']}; {_earlier(ckpt_dir)}, or pass --fresh-memory to resume "
            f"with an empty training memory"
        )
    log.warning("%s: no memory snapshot; --fresh-memory: resuming with an empty training memory", snap)
    return None


def _build_memory(cfg: RunConfig, root: Path, snap: Path | None, ckpt_dir: Path) -> tuple[Path, dict[str, int]]:
    """A memory folder next to `memory/` holding the snapshot (or empty): (folder, records per kind)."""
    from memory.store import MemoryStoreError, TrainingMemory

    for stale in root.glob(_MEMORY_BUILD + "*"):  # a resume killed while building one
        shutil.rmtree(stale)
    folder = root / f"{_MEMORY_BUILD}{time.time_ns() % 10**9:09d}"
    mem = TrainingMemory.persistent(folder, embedding=cfg.evolver.memory_embedding)
    try:
        counts = mem.restore(snap) if snap is not None else {}
    except (MemoryStoreError, ValueError, KeyError) as e:
        mem.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise ResumeError(
            f"{snap}: memory snapshot cannot be restored ({e}); {_earlier(ckpt_dir)}, or pass "
            f"--fresh-memory to resume with an empty training memory"
        ) from None
    except BaseException:
        mem.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    mem.close()
    return folder, counts


def _logs(root: Path) -> list[Path]:
    """Every JSON-lines log the run appends to: the folder's `*.jsonl` and the harness store's update log."""
    return sorted(root.glob("*.jsonl")) + [p for p in [root / "harness" / "updates.jsonl"] if p.is_file()]


def _sweep_temp_files(root: Path) -> list[str]:
    """Temp files of atomic writes a kill left behind (`.<name>.<random>.tmp`, never read): removed, named."""
    found = [
        p
        for d in (root, root / "harness", root / "harness" / "versions")
        if d.is_dir()
        for p in d.glob(".*.tmp")
        if p.is_file()
    ]
    for p in found:
        p.unlink()
    return [p.relative_to(root).as_posix() for p in found]


def prepare_resume(cfg: RunConfig, ckpt_dir: Path, *, fresh_memory: bool = False) -> dict[str, Any]:
    """Roll the run folder's files back to the checkpoint, before a `HarnessRun` opens it (main process only).

    Checks first and changes nothing when a check fails (`ResumeError`); then cuts torn log tails, moves later
    harness versions aside, rebuilds unloadable versions where exact, cuts the logs back to the checkpoint's step
    and swaps in the memory built from the snapshot (a local memory folder; a Chroma server is rolled back by
    `restore`). Returns the summary's file part."""
    ckpt_dir = Path(ckpt_dir)
    paths = RunPaths(Path(cfg.run_dir))
    state = read_state(ckpt_dir)
    version, step = int(state["harness_version"]), int(state["step"])
    store = HarnessStore(paths.harness)
    rebuilt = _plan_versions(store, version, lambda: HarnessState.from_tasks(load_train_tasks(cfg)), ckpt_dir)
    snap = _snapshot(state, ckpt_dir, fresh_memory)
    local = cfg.harness.memory_url is None
    built, counts = _build_memory(cfg, paths.root, snap, ckpt_dir) if local else (None, {})

    # -- from here on the folder changes --
    aside = paths.abandoned / f"resume-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}"
    swept = _sweep_temp_files(paths.root)
    torn = {p.relative_to(paths.root).as_posix(): n for p in _logs(paths.root) if (n := heal_jsonl(p))}
    moved = store.abandon_versions_after(version, aside)
    for v, s in rebuilt.items():
        path = store.path(v)
        if path.exists():
            (aside / "versions").mkdir(parents=True, exist_ok=True)
            os.replace(path, aside / "versions" / f"{path.name}.corrupt")
        atomic_write_text(path, s.model_dump_json())
        log.warning(
            "harness version %d (%s) did not load; rebuilt it exactly from %s (the bad file is in %s)",
            v,
            path,
            "the run's suite" if v == 0 else f"version {v - 1} and its logged update",
            aside / "versions",
        )
    unreadable: dict[str, list[int]] = {}
    dropped: dict[str, int] = {}
    for name in STEP_LOGS:
        bad: list[int] = []
        dropped[name] = truncate_jsonl(paths.root / f"{name}.jsonl", lambda r: int(r.get("step", 0)) <= step, bad=bad)
        if bad:
            unreadable[f"{name}.jsonl"] = bad
    if built is not None:
        if paths.memory.exists():
            aside.mkdir(parents=True, exist_ok=True)
            shutil.move(str(paths.memory), str(aside / "memory"))
        os.replace(built, paths.memory)
    return {
        "checkpoint": str(ckpt_dir),
        "step": step,
        "harness_version": version,
        "abandoned_versions": moved,
        "rebuilt_versions": sorted(rebuilt),
        "torn_lines": torn,
        "unreadable_lines": unreadable,
        "dropped_lines": dropped,
        "memory_restored": counts if snap is not None else None,
        "fresh_memory": snap is None,
        "temp_files_removed": swept,
        "aside": str(aside) if aside.exists() else None,
    }


def restore(
    run: HarnessRun, ckpt_dir: Path, *, fresh_memory: bool = False, prepared: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Make `run` (opened with open_memory=False) match the checkpoint. Returns a summary for the log.

    `prepared`: the summary of a `prepare_resume` already run on the folder (else it is run here)."""
    state = read_state(ckpt_dir)
    version, step = int(state["harness_version"]), int(state["step"])
    if not run.main_process:
        # Another process of a multi-process run: the main one rolls the folder back (first, under
        # `main_process_first`); this one takes the checkpoint's harness, detector and sampler state only.
        run.set_state(run.store.load(version))
        _restore_live_state(run, state)
        return {"checkpoint": str(ckpt_dir), "step": step, "harness_version": version, "main_process": False}
    local = run.cfg.harness.memory_url is None
    if local and run.memory is not None:
        run.memory.close()  # its folder is about to be swapped for the snapshot's
        run.memory = None
    summary = dict(prepared) if prepared is not None else prepare_resume(run.cfg, ckpt_dir, fresh_memory=fresh_memory)
    run.set_state(run.store.load(version))

    memory_dropped: dict[str, int] | None = None  # set when a Chroma server's records are deleted
    if local:
        run.memory = run._open_memory()
    else:
        if run.memory is None:
            run.memory = run._open_memory()
        snap = _snapshot(state, ckpt_dir, fresh_memory)
        if snap is not None:
            aside = (
                Path(summary["aside"])
                if summary.get("aside")
                else (run.paths.abandoned / f"resume-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6:06d}")
            )
            aside.mkdir(parents=True, exist_ok=True)
            run.memory.snapshot(aside / MEMORY_FILE)  # what the server held, kept aside as the folder would be
            memory_dropped = run.memory.restore_exactly(snap)
            summary["aside"] = str(aside)

    _restore_live_state(run, state)
    summary["memory_dropped"] = memory_dropped
    return summary


def resume_lines(summary: dict[str, Any]) -> list[str]:
    """The resume summary as console lines: where it resumed from and everything it cut, moved or rebuilt."""
    out = [f"resuming from {summary['checkpoint']} (step {summary['step']}, harness v{summary['harness_version']})"]
    if summary.get("torn_lines"):
        out.append(f"  cut torn last lines (interrupted writes; kept in <log>.torn): {summary['torn_lines']}")
    if summary.get("unreadable_lines"):
        out.append(f"  dropped unreadable lines (file: line numbers): {summary['unreadable_lines']}")
    if any((summary.get("dropped_lines") or {}).values()):
        out.append(f"  dropped log lines after step {summary['step']}: {summary['dropped_lines']}")
    if summary.get("abandoned_versions"):
        out.append(f"  harness versions after the checkpoint moved aside: {summary['abandoned_versions']}")
    if summary.get("temp_files_removed"):
        out.append(f"  removed temp files of interrupted writes: {summary['temp_files_removed']}")
    if summary.get("rebuilt_versions"):
        out.append(f"  harness versions rebuilt exactly (did not load): {summary['rebuilt_versions']}")
    if summary.get("fresh_memory"):
        out.append("  training memory: EMPTY (--fresh-memory; the checkpoint's snapshot was missing or unreadable)")
    elif summary.get("memory_restored") is not None:
        out.append(f"  training memory restored from the snapshot: {summary['memory_restored']}")
    if summary.get("memory_dropped"):
        out.append(f"  records deleted from the memory server: {summary['memory_dropped']}")
    if summary.get("aside"):
        out.append(f"  kept aside in {summary['aside']}")
    return out


def _restore_live_state(run: HarnessRun, state: dict[str, Any]) -> None:
    """The in-process part of a checkpoint, on every process.

    Detector windows and sampler rng (identical on all processes, which observe the same groups and draw the same
    batches), rounds done, and the pending events (the main process's: it runs the rounds).
    """
    from harness.detector import Detector
    from harness.liveness import Liveness

    run.detector = Detector(run.detector.config)
    run.detector.load_state_dict(state["detector"])
    run.liveness = Liveness()
    if "liveness" in state:
        run.liveness.load_state_dict(state["liveness"])
    else:  # a checkpoint written before the estimate existed: it restarts from the prior and says so
        log.warning("checkpoint state has no per-task liveness estimate: it starts again from the prior")
    if run.sampler is not None and state.get("sampler"):
        run.sampler.load_state_dict(state["sampler"])
    with run.lock:
        run.pending_events = (
            [FailureEvent.model_validate(e) for e in state["pending_events"]] if run.main_process else []
        )
    run.rounds_done = list(state.get("rounds", []))
