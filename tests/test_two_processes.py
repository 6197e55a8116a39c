"""Two training processes under `accelerate launch` (torchrun, gloo on the CPU), as users run several GPUs.

One run of the tiny preset on two processes: rank 0 runs the evolver round while rank 1 waits in the
broadcast, both ranks train the next step on the round's new harness version, and each rank's draws are its
slice of one global draw (checked by replaying the sampler from the checkpoint). The launcher and both
workers are then SIGKILLed mid-run after a checkpoint, and `--resume` of the pair restores the checkpoint's
harness version on both ranks and repeats exactly the draws the killed run made after that checkpoint.
Per-rank evidence comes from `metrics.jsonl`'s `ranks` field: each rank's own tasks and harness versions,
gathered from that rank by the reward (trainer.reward.all_ranks).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from memory.store import TrainingMemory
from tests.support.tiny_run import REPO, tiny_config, write_suite
from trainer import reward as reward_module
from trainer.checkpoint import restore, write_checkpoint_state
from trainer.harness_run import HarnessRun
from trainer.io import read_jsonl
from trainer.reward import RubricReward
from trainer.sampler import HarnessSampler

ACCELERATE = Path(sys.executable).parent / "accelerate"
NUM_GENERATIONS = 4
BATCH = 8  # per process: 2 groups per rank, 4 per step
# As in test_trainer_e2e: the round at step 2 accepts a loosened t-long criterion (a new harness version).
# Dynamic filtering on: its per-task multipliers change the draws, so they must be the same on both ranks.
OVERRIDES = (
    "train.use_cpu=true",
    "data.tasks=[t-long,t-any]",
    "evolver.interfaces=[sampling,criteria]",
    "evolver.sample_k=8",
    "harness.dynamic_filtering=true",
    f"train.batch_size={BATCH}",
    f"train.num_generations={NUM_GENERATIONS}",
    "train.save_steps=2",
    "harness.evolve_every=2",
)


# -- one process plays each rank (fast): who writes, who observes what ------------------------------------------
def _score(reward, run, task_id, texts, step=0):
    n = len(texts)
    return asyncio.run(
        reward(
            prompts=[[{"role": "user", "content": "x"}]] * n,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            task_id=[task_id] * n,
            harness_version=[run.state.version] * n,
            hinted=[False] * n,
            hint_text=[""] * n,
            trainer_state=SimpleNamespace(global_step=step),
        )
    )


@pytest.fixture
def ranks(tmp_path):
    """(main, other): the same run folder opened as rank 0 and as rank 1 (after rank 0 created it)."""
    cfg = tiny_config(tmp_path)
    main = HarnessRun(cfg, memory=TrainingMemory.ephemeral(), main_process=True)
    other = HarnessRun(cfg, main_process=False)
    for r in (main, other):
        HarnessSampler(r, seed=0)
    yield main, other
    other.close()
    main.close()


def test_every_rank_observes_every_group_and_only_the_main_one_writes(ranks, monkeypatch):
    main, other = ranks
    assert other.memory is None  # Chroma's folder admits one writer
    captured = []
    monkeypatch.setattr(reward_module, "all_ranks", lambda part: captured.append(part) or [part])
    _score(RubricReward(other, num_generations=4), other, "t-any", ["ok"] * 4)  # rank 1's slice: a dead group
    assert not main.paths.events.exists() and not other.pending_events  # rank 1 logged and queued nothing

    monkeypatch.setattr(reward_module, "all_ranks", lambda part: [part, captured[0]])
    _score(RubricReward(main, num_generations=4), main, "t-paris", ["Paris."] * 2 + ["no"] * 2)
    record = main.pop_step(1)
    assert record["tasks"] == ["t-paris", "t-any"] and record["n_groups"] == 2
    assert record["ranks"] == [
        {"tasks": ["t-paris"], "harness_versions": [0]},
        {"tasks": ["t-any"], "harness_versions": [0]},
    ]
    assert main.detector.window("t-any"), "rank 1's group must reach rank 0's detector"
    assert [e.task_id for e in main.pending_events] == ["t-any"]  # its collapse_high event, for rank 0's round
    assert {r["task_id"] for r in read_jsonl(main.paths.events)} == {"t-any"}
    for tid in ("t-paris", "t-any"):
        assert main.memory.task_history(tid, kinds=("groups",)), f"no memory record of {tid}'s group"


def test_ranks_that_drew_from_different_sampler_states_stop_the_step(ranks, monkeypatch):
    main, _ = ranks
    monkeypatch.setattr(reward_module, "all_ranks", lambda part: [part, dataclasses.replace(part, sampler="0" * 16)])
    with pytest.raises(RuntimeError, match="different sampler states"):
        _score(RubricReward(main, num_generations=4), main, "t-paris", ["Paris."] * 4)


def test_other_ranks_resume_without_touching_the_run_folder(ranks, tmp_path):
    from harness.types import HarnessUpdate, Reweight

    main, other = ranks
    ckpt = main.paths.checkpoints / "checkpoint-2"
    ckpt.mkdir(parents=True)
    write_checkpoint_state(ckpt, main, step=2)
    main.store.commit(HarnessUpdate(interface="sampling", ops=[Reweight(task_id="t-any", weight=0.5)]))
    summary = restore(other, ckpt)
    assert other.state.version == 0 and summary["main_process"] is False
    assert main.store.versions() == [0, 1] and not main.paths.abandoned.exists()  # rank 0 rolls back, not rank 1
    with pytest.raises(RuntimeError, match="only the main process creates it"):
        HarnessRun(tiny_config(tmp_path / "fresh"), main_process=False)


# -- the real launch (slow) ----------------------------------------------------------------------------------------
def _launch(args: list[str], log: Path) -> subprocess.Popen:
    cmd = [
        str(ACCELERATE),
        "launch",
        "--config_file",
        str(REPO / "configs" / "accelerate-cpu.yaml"),
        "-m",
        "trainer.cli",
        "train",
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _children(pid: int) -> list[int]:
    """Direct children of `pid` (torchrun starts each worker in a session of its own, outside our group)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _kill_launch(proc: subprocess.Popen) -> None:
    """SIGKILL the launcher's process group and each worker's (a crash: no cleanup, no signal forwarding)."""
    workers = _children(proc.pid)
    for pgid in [proc.pid, *workers]:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers), f"workers {workers} survived SIGKILL"


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def _by_step(path: Path) -> dict[int, dict]:
    return {r["step"]: r for r in read_jsonl(path)}


def _replayed_draws(cfg, ckpt: Path, groups_after: list[list[float]], steps: list[int]) -> dict[int, list[list[str]]]:
    """Each rank's tasks at `steps`, replayed in this process from the checkpoint's sampler state and harness
    version; `groups_after[i]`: the group stds of step steps[i] in global order (dynamic filtering reads them)."""
    from trainer.checkpoint import read_state
    from trainer.harness_run import HarnessRun
    from trainer.sampler import HarnessSampler, placeholder_row

    state = read_state(ckpt)
    run = HarnessRun(cfg, open_memory=False, main_process=False)  # reads the run folder, writes nothing
    try:
        h = cfg.harness
        sampler = HarnessSampler(
            run,
            seed=cfg.train.seed,
            floor=h.sampler_floor,
            dynamic_filtering=True,
            df_window=h.df_window,
            df_multiplier=h.df_multiplier,
        )
        run.set_state(run.store.load(int(state["harness_version"])))
        sampler.load_state_dict(state["sampler"])
        out: dict[int, list[list[str]]] = {}
        for step, stds in zip(steps, groups_after):
            saved = sampler.state_dict()
            ranks = []
            for rank in (0, 1):
                sampler.load_state_dict(saved)  # every rank draws the same global batch from the same state
                rows = sampler.fill(
                    [placeholder_row() for _ in range(BATCH)],
                    num_generations=NUM_GENERATIONS,
                    step=step - 1,
                    process_index=rank,
                    num_processes=2,
                )
                ranks.append([r["task_id"] for r in rows[::NUM_GENERATIONS]])
            out[step] = ranks
            for tid, std in zip([t for r in ranks for t in r], stds):
                sampler.observe_group(tid, std < run.detector.config.eps)
        return out
    finally:
        run.close()


@pytest.mark.slow
def test_two_processes_round_broadcast_kill_and_resume(tmp_path, tiny_model_dir):
    from trainer.checkpoint import find_checkpoint, read_state
    from trainer.config_loader import load_config

    suite = write_suite(tmp_path / "suite")
    run_dir = tmp_path / "run"
    base = ["--config", str(REPO / "configs" / "tiny.yaml"), f"run_dir={run_dir}", f"data.suite={suite}", *OVERRIDES]
    log = tmp_path / "launch.log"

    # -- run until step 5 is trained (a round at 2 and 4, checkpoints 2 and 4), then kill the pair --------------
    proc = _launch([*base, "train.max_steps=8", "--no-progress"], log)
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if metrics.is_file() and any(r["step"] >= 5 for r in read_jsonl(metrics)):
                break
            time.sleep(0.1)
        assert proc.poll() is None, f"the launch ended before step 5 (rc {proc.returncode}):\n{_tail(log)}"
        assert time.monotonic() < deadline, f"no step 5 within 300 s:\n{_tail(log)}"
    finally:
        _kill_launch(proc)
    before_kill = _by_step(metrics)
    shutil.copy(metrics, tmp_path / "metrics-before-kill.jsonl")  # kept for a failing test's reader

    # Rank 0 ran the round at step 2 and it committed a new version; rank 1 got it by broadcast: both ranks
    # drew and trained step 3 under that version (each rank's versions come from that rank's own rows).
    rounds = read_jsonl(run_dir / "rounds.jsonl")
    assert [r["step"] for r in rounds] == [2, 4], rounds
    first = rounds[0]
    assert "error" not in first and first["version_after"] > first["version_before"] == 0, first
    for step in (1, 2):
        assert [r["harness_versions"] for r in before_kill[step]["ranks"]] == [[0], [0]], before_kill[step]
    assert [r["harness_versions"] for r in before_kill[3]["ranks"]] == [[first["version_after"]]] * 2, before_kill[3]
    assert all(len(r["tasks"]) == BATCH // NUM_GENERATIONS for r in before_kill[3]["ranks"])

    # -- the killed pair resumes from checkpoint 4 --------------------------------------------------------------
    ckpt = find_checkpoint(run_dir)
    assert ckpt.name == "checkpoint-4", f"expected the kill after checkpoint 4 and before 6, got {ckpt}"
    ckpt_version = read_state(ckpt)["harness_version"]
    assert ckpt_version == rounds[1]["version_after"]
    resumed = _launch(["--resume", *base, "train.max_steps=6", "--no-progress"], log)
    try:
        rc = resumed.wait(timeout=300)
    finally:
        if resumed.poll() is None:
            _kill_launch(resumed)
    assert rc == 0, _tail(log)

    after = _by_step(metrics)
    assert sorted(after) == list(range(1, 7)), sorted(after)  # steps after the checkpoint replayed once
    assert [r["step"] for r in read_jsonl(run_dir / "rounds.jsonl")] == [2, 4]  # none at the last step
    for step in (5, 6):
        assert [r["harness_versions"] for r in after[step]["ranks"]] == [[ckpt_version]] * 2, after[step]
    # The same draws, rank by rank, as the killed run made in the step after the checkpoint ...
    assert after[5]["ranks"] == before_kill[5]["ranks"], (before_kill[5], after[5])
    # ... and they are the two slices of one global draw from the checkpoint's sampler state on both ranks.
    cfg = load_config(REPO / "configs" / "tiny.yaml", [f"run_dir={run_dir}", f"data.suite={suite}", *OVERRIDES])
    replay = _replayed_draws(cfg, ckpt, [after[5]["group_stds"], after[6]["group_stds"]], [5, 6])
    for step in (5, 6):
        assert [r["tasks"] for r in after[step]["ranks"]] == replay[step], (step, after[step]["ranks"], replay[step])
    assert (run_dir / "final" / "model.safetensors").is_file()
