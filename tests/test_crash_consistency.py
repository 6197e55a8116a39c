"""Crash consistency of the run folder: what real runs meet (torn writes, a full disk, a second trainer, a resume
of a finished run, corrupt files) and what must hold after each.

Fast tests work on a run folder built in process (a `HarnessRun`, a checkpoint written by
`write_checkpoint_state`, versions committed after it). The slow fault-injection tests train the tiny preset:
a base run is trained once in process, then each fault is injected into a `--resume` subprocess
(`tests/support/crash_driver.py` arms it: a torn write, a kill inside a step, an evolver round, a harness commit or a
checkpoint save), the subprocess is SIGKILLed at that point, and a second `--resume` must finish the run with
every invariant of `check_invariants` holding.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.store import HarnessStore, StoreCorrupt
from harness.types import AddHint, FailureEvent, HarnessUpdate, Hint, Schedule, SetSchedule
from memory.records import EventRecord
from tests.support.tiny_run import REPO, tiny_config
from trainer.checkpoint import ResumeError, prepare_resume, read_state, restore, write_checkpoint_state
from trainer.cli import main
from trainer.harness_run import HarnessRun
from trainer.io import append_jsonl, heal_jsonl, read_jsonl
from trainer.run_lock import LOCK_NAME, RunLock
from trainer.sampler import HarnessSampler


def _update(task_id: str = "t-paris", text: str = "The answer is a city on the Seine.") -> HarnessUpdate:
    return HarnessUpdate(
        interface="guidance",
        ops=[
            AddHint(task_id=task_id, hint=Hint(id="h1", text=text)),
            SetSchedule(task_id=task_id, schedule=Schedule(mode="constant")),
        ],
    )


def _metric(step: int) -> dict:
    return {
        "step": step,
        "reward": 0.1 * step,
        "reward_std": 0.1,
        "dead_share": 0.5,
        "time": 10.0 * step,
        "pause_s": 0.0,
        "judge_warnings": 0,
        "harness_version": 0,
    }


def _memory_event(task_id: str, step: int) -> EventRecord:
    return EventRecord(event=FailureEvent(id=f"m-{task_id}", type="flat", task_id=task_id, step=step), step=step)


def _built_run(tmp_path: Path, *overrides: str):
    """A run folder: v1 and steps 1-2 before checkpoint-2 (with a memory record), v2 and step 3 after it."""
    cfg = tiny_config(tmp_path, *overrides)
    r = HarnessRun(cfg)
    HarnessSampler(r, seed=0)
    r.store.commit(_update(), step=1)
    r.refresh()
    for s in (1, 2):
        append_jsonl(r.paths.metrics, _metric(s))
        append_jsonl(r.paths.events, {"id": f"e{s}", "type": "flat", "task_id": "t-any", "step": s})
    r.memory.add_event(_memory_event("t-paris", 2))
    ckpt = cfg.run_path / "checkpoints" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    write_checkpoint_state(ckpt, r, step=2)
    r.store.commit(_update("t-photo", "Plants use light."), step=3)
    append_jsonl(r.paths.metrics, _metric(3))
    r.memory.add_event(_memory_event("t-photo", 3))
    r.close()
    return cfg, ckpt


def _tree(root: Path) -> dict[str, str]:
    """Every file under `root` (but the lock file) with a hash of its bytes: "nothing changed" is equality."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


def _resume(cfg, ckpt, **kw):
    run = HarnessRun(cfg, open_memory=False)
    HarnessSampler(run, seed=0)
    try:
        return run, restore(run, ckpt, **kw)
    except BaseException:
        run.close()
        raise


# -- failure 1: a torn last line was glued to the next record ----------------------------------------------------
def test_torn_tail_is_cut_on_resume_counted_and_never_glued(tmp_path):
    cfg, ckpt = _built_run(tmp_path)
    metrics = cfg.run_path / "metrics.jsonl"
    with open(metrics, "ab") as f:
        f.write(b'{"step": 4, "reward": 0.')  # killed mid-append
    run, summary = _resume(cfg, ckpt)
    try:
        assert summary["torn_lines"] == {"metrics.jsonl": 1}
        assert summary["dropped_lines"]["metrics"] == 1  # step 3, after the checkpoint
        append_jsonl(metrics, _metric(3))  # the resumed run's next step
        assert [r["step"] for r in read_jsonl(metrics, strict=True)] == [1, 2, 3]
        assert (cfg.run_path / "metrics.jsonl.torn").read_bytes() == b'{"step": 4, "reward": 0.\n'
    finally:
        run.close()


def test_append_heals_a_torn_tail_first(tmp_path, caplog):
    log = tmp_path / "events.jsonl"
    log.write_bytes(b'{"step": 1}\n{"step": 2, "ty')
    with caplog.at_level(logging.WARNING):
        append_jsonl(log, {"step": 3})
    assert read_jsonl(log, strict=True) == [{"step": 1}, {"step": 3}]
    assert "events.jsonl: the last line was torn" in caplog.text
    # A tail that is a whole record whose newline was lost is kept.
    log.write_bytes(b'{"step": 1}\n{"step": 2}')
    assert heal_jsonl(log) == 0 and read_jsonl(log, strict=True) == [{"step": 1}, {"step": 2}]


def test_report_reads_past_a_damaged_line_naming_file_and_line(tmp_path, caplog, capsys):
    cfg, _ = _built_run(tmp_path)
    metrics = cfg.run_path / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    # What the old append produced: a torn record with the next one glued on, in the middle of the log.
    metrics.write_text("\n".join([lines[0], lines[1][:20] + lines[2], *lines[3:]]) + "\n")
    with caplog.at_level(logging.WARNING):
        rc = main(["report", str(cfg.run_path)])
    assert rc == 0, capsys.readouterr().err
    assert f"{metrics}:2: not a JSON record" in caplog.text
    assert (cfg.run_path / "report.html").is_file()
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2: not a JSON record"):
        read_jsonl(metrics, strict=True)


def test_a_resume_killed_while_rolling_back_is_finished_by_the_next_resume(tmp_path, monkeypatch):
    import trainer.checkpoint as checkpoint

    cfg, ckpt = _built_run(tmp_path)
    with open(cfg.run_path / "events.jsonl", "ab") as f:
        f.write(b'{"id": "e3", "ty')
    real, calls = checkpoint.truncate_jsonl, []

    def dies_before_metrics(*a, **k):  # versions moved aside (1: updates.jsonl), events cut back (2), then killed
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt("killed")
        return real(*a, **k)

    monkeypatch.setattr(checkpoint, "truncate_jsonl", dies_before_metrics)
    with pytest.raises(KeyboardInterrupt):
        prepare_resume(cfg, ckpt)
    monkeypatch.undo()
    assert list(cfg.run_path.glob(".memory.resume-*"))  # the half-done resume's memory build is still there
    run, summary = _resume(cfg, ckpt)
    try:
        assert summary["abandoned_versions"] == [] and run.store.versions() == [0, 1]  # done the first time
        assert [r["step"] for r in read_jsonl(cfg.run_path / "metrics.jsonl", strict=True)] == [1, 2]
        assert [r["id"] for r in read_jsonl(cfg.run_path / "events.jsonl", strict=True)] == ["e1", "e2"]
        assert run.memory.get("events", "m-t-paris") is not None and run.memory.get("events", "m-t-photo") is None
        assert not list(cfg.run_path.glob(".memory.resume-*"))
    finally:
        run.close()


# -- a full disk -------------------------------------------------------------------------------------------------
def test_enospc_mid_append_leaves_the_log_as_it_was(tmp_path, monkeypatch):
    log = tmp_path / "metrics.jsonl"
    append_jsonl(log, _metric(1))
    before = log.read_bytes()
    real_write = os.write

    def full_disk(fd, data):  # the disk fills half-way through the record
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("trainer.io.os.write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        append_jsonl(log, _metric(2))
    monkeypatch.undo()
    assert log.read_bytes() == before
    append_jsonl(log, _metric(2))
    assert [r["step"] for r in read_jsonl(log, strict=True)] == [1, 2]


def test_enospc_in_an_atomic_write_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    from trainer.io import atomic_write_json

    path = tmp_path / "eval.json"
    atomic_write_json(path, {"a": 1})

    def full_disk(fd):  # the data does not fit when it is flushed
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("harness.atomic.os.fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_json(path, {"a": 2})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["eval.json"]


# -- failure 2: two trainers on one run folder -------------------------------------------------------------------
_HOLDER = (
    "import sys, time; from trainer.run_lock import RunLock; RunLock.acquire(sys.argv[1]); "
    "print('held', flush=True); time.sleep(120)"
)


def _holder(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout.readline().strip() == b"held"
    return proc


def test_a_second_trainer_is_refused_before_it_touches_the_folder(tmp_path, capsys):
    cfg, ckpt = _built_run(tmp_path)
    before = _tree(cfg.run_path)
    proc = _holder(cfg.run_path)
    try:
        rc = main(
            [
                "train",
                "--config",
                str(REPO / "configs" / "tiny.yaml"),
                f"run_dir={cfg.run_path}",
                f"data.suite={cfg.data.suite}",
                "--resume",
                "--no-progress",
            ]
        )
        err = capsys.readouterr().err
        assert rc == 1 and f"pid {proc.pid}" in err and "in use by another trainer" in err, err
        assert "Traceback" not in err
        rc = main(
            [
                "train",
                "--config",
                str(REPO / "configs" / "tiny.yaml"),
                f"run_dir={cfg.run_path}",
                f"data.suite={cfg.data.suite}",
                "--overwrite",
                "--no-progress",
            ]
        )
        assert rc == 1 and f"pid {proc.pid}" in capsys.readouterr().err
        assert _tree(cfg.run_path) == before  # nothing rolled back, nothing deleted
    finally:
        proc.kill()
        proc.wait()


def test_a_stale_lock_of_a_killed_trainer_is_taken_over(tmp_path, caplog):
    proc = _holder(tmp_path / "run")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert str(proc.pid) in (tmp_path / "run" / LOCK_NAME).read_text()  # died holding it
    with caplog.at_level(logging.WARNING):
        lock = RunLock.acquire(tmp_path / "run")
    try:
        assert f"stale lock left by pid {proc.pid}" in caplog.text
        again = RunLock.acquire(tmp_path / "run")  # re-entrant within a process
        again.release()
        assert lock.held and str(os.getpid()) in (tmp_path / "run" / LOCK_NAME).read_text()
    finally:
        lock.release()
    assert (tmp_path / "run" / LOCK_NAME).read_text() == ""  # a clean release leaves no pid


def test_overwrite_keeps_the_held_lock_file(tmp_path):
    from trainer.grpo import clear_run_folder

    root = tmp_path / "run"
    (root / "harness").mkdir(parents=True)
    (root / "metrics.jsonl").write_text("{}\n")
    (root / "metrics.jsonl.torn").write_text("{\n")
    with RunLock.acquire(root):
        clear_run_folder(root, keep=(LOCK_NAME,))
        assert [p.name for p in root.iterdir()] == [LOCK_NAME]
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from trainer.run_lock import RunLock; RunLock.acquire(sys.argv[1])",
                str(root),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert child.returncode != 0 and "RunFolderLocked" in child.stderr and f"pid {os.getpid()}" in child.stderr


# -- failure 3: a finished run resumed trained past its budget ---------------------------------------------------
def test_resume_of_a_finished_run_changes_nothing(tmp_path, capsys, caplog):
    cfg, ckpt = _built_run(tmp_path, "train.max_steps=2")
    (ckpt / "model.safetensors").write_bytes(b"weights")
    (ckpt / "optimizer.pt").write_bytes(b"optimizer")
    final = cfg.run_path / "final"
    final.mkdir()
    (final / "model.safetensors").write_bytes(b"weights")
    before = _tree(cfg.run_path)
    args = [
        "train",
        "--config",
        str(REPO / "configs" / "tiny.yaml"),
        f"run_dir={cfg.run_path}",
        f"data.suite={cfg.data.suite}",
        "train.max_steps=2",
        "--resume",
        "--no-progress",
    ]
    with caplog.at_level(logging.WARNING):
        assert main(args) == 0
    assert "already finished" in caplog.text and "raise train.max_steps" in caplog.text
    assert '"already_finished": true' in capsys.readouterr().out
    assert _tree(cfg.run_path) == before
    # Killed after the last checkpoint but before final/: final/ is rebuilt from the checkpoint's model files.
    for p in final.iterdir():
        p.unlink()
    final.rmdir()
    assert main(args) == 0
    assert sorted(p.name for p in final.iterdir()) == ["model.safetensors"]


# -- failure 4: corrupt files are a traceback --------------------------------------------------------------------
def test_a_corrupt_version_is_rebuilt_exactly_from_its_parent_and_logged_update(tmp_path, caplog):
    cfg, ckpt = _built_run(tmp_path)
    store = HarnessStore(cfg.run_path / "harness")
    good = store.path(1).read_bytes()
    store.path(1).write_bytes(good[: len(good) // 2])
    with pytest.raises(StoreCorrupt) as err:
        store.load(1)
    assert "errors.pydantic.dev" not in str(err.value) and "--resume" in str(err.value)
    with caplog.at_level(logging.WARNING):
        run, summary = _resume(cfg, ckpt)
    run.close()
    assert summary["rebuilt_versions"] == [1] and "rebuilt it exactly" in caplog.text
    assert json.loads(store.path(1).read_bytes()) == json.loads(good)


def test_a_corrupt_version_after_the_checkpoint_is_moved_aside_not_read(tmp_path):
    cfg, ckpt = _built_run(tmp_path)
    store = HarnessStore(cfg.run_path / "harness")
    store.path(2).write_text("{")  # a version the resume abandons anyway
    with pytest.raises(StoreCorrupt):
        HarnessRun(cfg, open_memory=False)  # why build_trainer rolls the files back before it opens the run
    summary = prepare_resume(cfg, ckpt)  # as build_trainer does
    assert summary["abandoned_versions"] == [2] and summary["rebuilt_versions"] == [] and store.versions() == [0, 1]
    run = HarnessRun(cfg, open_memory=False)
    try:
        assert restore(run, ckpt, prepared=summary)["abandoned_versions"] == [2] and run.state.version == 1
    finally:
        run.close()


def test_version_zero_is_rebuilt_from_the_suite(tmp_path):
    cfg, ckpt = _built_run(tmp_path)
    store = HarnessStore(cfg.run_path / "harness")
    good = json.loads(store.path(0).read_bytes())
    store.path(0).unlink()
    run, summary = _resume(cfg, ckpt)
    run.close()
    assert summary["rebuilt_versions"] == [0] and json.loads(store.path(0).read_bytes()) == good


def test_an_unrebuildable_version_is_one_clear_error_and_nothing_changes(tmp_path, capsys):
    cfg, ckpt = _built_run(tmp_path)
    store = HarnessStore(cfg.run_path / "harness")
    store.path(1).write_text('{"version": 1, "tasks": 7}')
    # its update line is gone too: nothing to rebuild it from
    lines = store.updates_path.read_text().splitlines()
    store.updates_path.write_text("".join(ln + "\n" for ln in lines if json.loads(ln)["version"] != 1))
    before = _tree(cfg.run_path)
    with pytest.raises(ResumeError, match=r"v000001\.json: not a valid harness state .*cannot be rebuilt exactly"):
        prepare_resume(cfg, ckpt)
    assert _tree(cfg.run_path) == before
    rc = main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            f"run_dir={cfg.run_path}",
            f"data.suite={cfg.data.suite}",
            "--resume",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "v000001.json" in err and "no earlier complete checkpoint" in err, err
    assert "Traceback" not in err and "errors.pydantic.dev" not in err
    assert _tree(cfg.run_path) == before


@pytest.mark.parametrize(
    "damage,message",
    [
        ("state_missing", r"harness_version\.json: missing"),
        ("state_garbage", r"harness_version\.json: not readable JSON"),
        ("snapshot_missing", r"memory\.jsonl: the checkpoint's memory snapshot is missing.*--fresh-memory"),
        ("snapshot_garbage", r"memory\.jsonl: memory snapshot not readable.*--fresh-memory"),
    ],
)
def test_a_corrupt_checkpoint_is_one_clear_error_and_nothing_changes(tmp_path, damage, message):
    cfg, ckpt = _built_run(tmp_path)
    {
        "state_missing": lambda: (ckpt / "harness_version.json").unlink(),
        "state_garbage": lambda: (ckpt / "harness_version.json").write_text('{"step": 2, "harn'),
        "snapshot_missing": lambda: (ckpt / "memory.jsonl").unlink(),
        "snapshot_garbage": lambda: (ckpt / "memory.jsonl").write_text('{"format": 1}\n{"kind": "pro'),
    }[damage]()
    before = _tree(cfg.run_path)
    with pytest.raises(ResumeError, match=message):
        prepare_resume(cfg, ckpt)
    assert _tree(cfg.run_path) == before


def test_fresh_memory_resumes_without_a_snapshot_and_says_so(tmp_path, caplog):
    cfg, ckpt = _built_run(tmp_path)
    (ckpt / "memory.jsonl").unlink()
    with caplog.at_level(logging.WARNING):
        run, summary = _resume(cfg, ckpt, fresh_memory=True)
    try:
        assert summary["fresh_memory"] is True and "empty training memory" in caplog.text
        assert sum(run.memory.count().values()) == 0 and run.state.version == 1
    finally:
        run.close()


def test_resume_restores_the_memory_of_the_checkpoint(tmp_path):
    cfg, ckpt = _built_run(tmp_path)
    run, summary = _resume(cfg, ckpt)
    try:
        assert run.memory.get("events", "m-t-paris") is not None and run.memory.get("events", "m-t-photo") is None
        assert summary["memory_restored"]["events"] == 1 and summary["abandoned_versions"] == [2]
        assert not list(cfg.run_path.glob(".memory.resume-*"))
    finally:
        run.close()


# -- fault injection on the tiny preset (slow) -------------------------------------------------------------------
BASE_STEPS, STEPS = 2, 6  # the base run trains 2 steps; each fault hits a resume that raises max_steps to 6
FAULTS = [
    ("reward", 3),
    ("torn", 3),
    ("enospc", 3),
    ("round", 4),
    ("commit", 4),
    ("save", 4),
]  # (point, first step it fires at)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A finished 2-step tiny run (checkpoint-2), copied per fault."""
    from trainer.grpo import train

    cfg = tiny_config(tmp_path_factory.mktemp("crash-base"), f"train.max_steps={BASE_STEPS}")
    train(cfg, progress=False)
    return cfg


def _train_args(run_dir: Path, suite: str, steps: int) -> list[str]:
    return [
        "--config",
        str(REPO / "configs" / "tiny.yaml"),
        f"run_dir={run_dir}",
        f"data.suite={suite}",
        f"train.max_steps={steps}",
        "--no-progress",
    ]


def check_invariants(run_dir: Path, steps: int, scratch: Path) -> None:
    """What a run folder must satisfy after any crash and resume."""
    from memory.store import TrainingMemory
    from trainer.checkpoint import find_checkpoint
    from trainer.report import build_report

    for log in [*sorted(run_dir.glob("*.jsonl")), run_dir / "harness" / "updates.jsonl"]:
        data = log.read_bytes() if log.is_file() else b""
        assert not data or data.endswith(b"\n"), f"{log}: torn tail"
        read_jsonl(log, strict=True)  # every record parses
    assert [m["step"] for m in read_jsonl(run_dir / "metrics.jsonl")] == list(range(1, steps + 1))  # once, in order
    rounds = [r["step"] for r in read_jsonl(run_dir / "rounds.jsonl")]
    assert rounds == sorted(set(rounds)), rounds
    events = read_jsonl(run_dir / "events.jsonl")
    assert [e["step"] for e in events] == sorted(e["step"] for e in events)
    assert len({e["id"] for e in events}) == len(events)
    store = HarnessStore(run_dir / "harness")
    versions = store.versions()
    assert versions == list(range(len(versions)))  # contiguous ...
    for v in versions:
        store.load(v)  # ... and each loads
    assert [r.version for r in store.history()] == versions[1:]  # each committed version logged once
    ckpt = find_checkpoint(run_dir)
    state = read_state(ckpt)
    assert state["step"] == steps and state["harness_version"] == versions[-1]
    with TrainingMemory.persistent(run_dir / "memory", embedding="hash") as mem:  # memory = the checkpoint's
        mem.snapshot(scratch / "memory-now.jsonl")
    assert sorted((scratch / "memory-now.jsonl").read_text().splitlines()) == sorted(
        (ckpt / "memory.jsonl").read_text().splitlines()
    )
    assert not [p for p in run_dir.rglob("*.tmp")], "temp files left"
    assert (run_dir / LOCK_NAME).read_text() == ""  # released
    assert "Harness updates" in build_report(run_dir).read_text()


@pytest.mark.slow
@pytest.mark.parametrize("point,at_step", FAULTS, ids=[p for p, _ in FAULTS])
def test_a_fault_then_resume_keeps_every_invariant(base_run, tmp_path, point, at_step, capsys, caplog):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(base_run.run_path, run_dir)
    marker, stderr = tmp_path / "reached", tmp_path / "stderr.txt"
    args = _train_args(run_dir, base_run.data.suite, STEPS)
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "tests" / "support" / "crash_driver.py"),
                point,
                str(marker),
                str(at_step),
                "--",
                "--resume",
                *args,
            ],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if point == "enospc":  # the trainer stops on its own, with one clear message
            assert proc.wait(timeout=120) == 1
            text = stderr.read_text()
            assert "the disk is full" in text and "Traceback" not in text, text[-3000:]
            read_jsonl(run_dir / "metrics.jsonl", strict=True)
            assert (run_dir / "metrics.jsonl").read_bytes().endswith(b"\n")  # the half line was undone
        else:
            assert marker.exists(), stderr.read_text()[-3000:]
            if point == "save":  # two trainers at once: the second is refused and changes nothing
                before = _tree(run_dir)
                assert main(["train", "--resume", *args]) == 1
                assert f"pid {proc.pid}" in capsys.readouterr().err
                assert _tree(run_dir) == before
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # The fault left what it should: the damage the resume must repair.
    store = HarnessStore(run_dir / "harness")
    if point == "torn":
        assert not (run_dir / "metrics.jsonl").read_bytes().endswith(b"\n")
    if point == "commit":
        assert store.versions()[-1] not in {r.version for r in store.history()}  # a version without its log line
    if point == "save":
        ckpt = run_dir / "checkpoints" / f"checkpoint-{at_step}"
        assert (ckpt / "memory.jsonl").is_file() and not (ckpt / "harness_version.json").exists()
    if point in ("round", "commit"):
        assert at_step not in [r["step"] for r in read_jsonl(run_dir / "rounds.jsonl")]
    if point == "reward":
        from memory.store import TrainingMemory

        assert [m["step"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2]  # killed inside step 3 ...
        snap = run_dir / "checkpoints" / f"checkpoint-{BASE_STEPS}" / "memory.jsonl"
        at_ckpt = sum('"kind": "groups"' in line for line in snap.read_text().splitlines())
        with TrainingMemory.persistent(run_dir / "memory", embedding="hash") as mem:
            assert mem.count()["groups"] == at_ckpt + 2  # ... after two of its groups reached the memory
    with caplog.at_level(logging.WARNING):
        assert main(["train", "--resume", *args]) == 0, capsys.readouterr().err
    assert f"resuming from {run_dir / 'checkpoints' / f'checkpoint-{BASE_STEPS}'}" in caplog.text
    if point == "torn":
        assert "cut torn last lines" in caplog.text and (run_dir / "metrics.jsonl.torn").is_file()
    if point == "commit":
        assert "harness versions after the checkpoint moved aside" in caplog.text
    assert [r["step"] for r in read_jsonl(run_dir / "rounds.jsonl")] == [4]  # the round ran again, once
    check_invariants(run_dir, STEPS, tmp_path)


@pytest.mark.slow
def test_finished_tiny_run_stays_finished_and_raising_max_steps_continues(base_run, tmp_path, caplog):
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(base_run.run_path, run_dir)
    args = _train_args(run_dir, base_run.data.suite, BASE_STEPS)
    before = _tree(run_dir)
    with caplog.at_level(logging.WARNING):
        assert main(["train", "--resume", *args]) == 0
    assert "already finished" in caplog.text and _tree(run_dir) == before
    assert not (run_dir / "checkpoints" / f"checkpoint-{BASE_STEPS + 1}").exists()
    assert main(["train", "--resume", *_train_args(run_dir, base_run.data.suite, BASE_STEPS + 2)]) == 0
    check_invariants(run_dir, BASE_STEPS + 2, tmp_path)
