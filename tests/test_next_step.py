"""Harness updates reach the very next training step, and a resumed run draws what an uninterrupted one draws.

The slow tests train the tiny preset through real TRL GRPO with a stub evolver round that commits a sampling
update at every round (deterministic, independent of the events), then read `metrics.jsonl`: every step after
a committing round must train on the version that round committed, and a run resumed from a checkpoint must
draw the same task ids, step by step, as the uninterrupted run. The fast tests cover the lazy draw itself.
"""

from __future__ import annotations

import shutil

import pytest

from harness.store import HarnessStore
from harness.types import HarnessUpdate, Reweight
from memory.store import TrainingMemory
from tests.support.tiny_run import tiny_config
from trainer.harness_run import HarnessRun
from trainer.io import read_jsonl
from trainer.sampler import HarnessSampler, make_dataset

STEPS = 6  # rounds after steps 2 and 4 (evolve_every=2), none after the last step
# Each round makes one task dominate the draws, so a draw made under the old version differs from one made
# under the new version (and the task ids after a round depend on the harness, not only on the rng).
ROUND_WEIGHTS = {2: ("t-any", 100.0), 4: ("t-photo", 100.0)}
OVERRIDES = (f"train.max_steps={STEPS}", "evolver.critic=false")


def stub_round(cfg, events, version, step, context, thread_id):
    """A round that commits a reweight, whatever the events say (the real graph is not under test here)."""
    task_id, weight = ROUND_WEIGHTS[step]
    store = HarnessStore(cfg.run_path / "harness")
    state = store.commit(HarnessUpdate(interface="sampling", ops=[Reweight(task_id=task_id, weight=weight)]), step=step)
    return {
        "thread_id": thread_id,
        "accepted": [{"event_id": events[0].id}],
        "reports": [
            {
                "event_id": events[0].id,
                "task_id": task_id,
                "failure_type": events[0].type,
                "decision": "accepted",
                "interface": "sampling",
                "committed_version": state.version,
                "attempts": [],
            }
        ],
    }


def _draws(metrics: list[dict]) -> dict[int, list[str]]:
    return {m["step"]: m["tasks"] for m in metrics}


# -- fast: the lazy draw ------------------------------------------------------------------------------------
@pytest.fixture
def run(tmp_path):
    r = HarnessRun(tiny_config(tmp_path), memory=TrainingMemory.ephemeral())
    HarnessSampler(r, seed=0)
    yield r
    r.close()


def _placeholders(run, n_groups: int, g: int) -> list[dict]:
    from trl.trainer.utils import repeat_iterable_dataset

    ds = repeat_iterable_dataset(make_dataset(run.sampler), mini_repeat_count=g, batch_size=n_groups)
    return [r for _, r in zip(range(n_groups * g), ds)]


def test_dataset_rows_hold_no_task_decision(run):
    before = run.sampler.state_dict()
    rows = _placeholders(run, 4, 2)
    assert all(r["task_id"] == "" and r["harness_version"] == -1 for r in rows)
    assert run.sampler.state_dict() == before  # reading the stream (what the prefetch does) draws nothing


def test_fill_draws_at_step_time_under_the_current_version(run):
    rows = _placeholders(run, 2, 4)  # fetched before the update, like the prefetched batch
    run.store.commit(HarnessUpdate(interface="sampling", ops=[Reweight(task_id="t-any", weight=100.0)]))
    run.refresh()
    filled = run.sampler.fill(rows, num_generations=4, step=3)
    assert len(filled) == 8 and {r["harness_version"] for r in filled} == {run.state.version}
    assert {r["sample_step"] for r in filled} == {3} and run.sampler.step == 3
    for g in range(2):
        group = filled[4 * g : 4 * g + 4]
        assert len({r["task_id"] for r in group}) == 1 and group[0] is not group[1]  # independent copies


def test_fill_shards_one_global_draw_by_rank(tmp_path):
    """Every rank draws the whole global batch (same seed, same state) and keeps its own contiguous slice,
    as accelerate's IterableDatasetShard slices the stream: together the ranks see one draw, no duplicates."""

    def ranks(world: int) -> list[list[str]]:
        out = []
        for rank in range(world):
            r = HarnessRun(tiny_config(tmp_path / f"w{world}r{rank}"), memory=TrainingMemory.ephemeral())
            s = HarnessSampler(r, seed=0)
            rows = s.fill(_placeholders(r, 2, 4), num_generations=4, step=0, process_index=rank, num_processes=world)
            out.append([row["task_id"] for row in rows[::4]])
            r.close()
        return out

    single = ranks(1)[0]
    r = HarnessRun(tiny_config(tmp_path / "w1big"), memory=TrainingMemory.ephemeral())
    s = HarnessSampler(r, seed=0)
    whole = [row["task_id"] for row in s.fill(_placeholders(r, 6, 4), num_generations=4, step=0)[::4]]
    r.close()
    three = ranks(3)
    assert [t for part in three for t in part] == whole and single == whole[:2]


def test_fill_refuses_rows_that_are_not_placeholder_groups(run):
    rows = _placeholders(run, 2, 4)
    with pytest.raises(ValueError, match="num_generations"):
        run.sampler.fill(rows[:6], num_generations=4, step=0)
    drawn = run.sampler.fill(rows, num_generations=4, step=0)
    with pytest.raises(ValueError, match="placeholder"):
        run.sampler.fill(drawn, num_generations=4, step=0)


def test_generation_buffering_that_spans_steps_is_refused():
    from trl import GRPOConfig

    from trainer.grpo import check_one_generation_per_step

    ok = GRPOConfig(
        output_dir="/tmp/unused", per_device_train_batch_size=8, num_generations=4, use_cpu=True, report_to="none"
    )
    check_one_generation_per_step(ok)
    for kwargs in ({"steps_per_generation": 2}, {"num_iterations": 2}, {"gradient_accumulation_steps": 2}):
        args = GRPOConfig(
            output_dir="/tmp/unused",
            per_device_train_batch_size=8,
            num_generations=4,
            use_cpu=True,
            report_to="none",
            **kwargs,
        )
        with pytest.raises(ValueError, match="next step"):
            check_one_generation_per_step(args)


# -- slow: real TRL runs ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    from trainer.grpo import train

    tmp = tmp_path_factory.mktemp("next-step")
    cfg = tiny_config(tmp, *OVERRIDES)
    train(cfg, progress=False, run_graph=stub_round)
    return tmp, cfg


@pytest.mark.slow
def test_every_step_after_a_committing_round_trains_on_the_new_version(uninterrupted):
    _, cfg = uninterrupted
    rounds = read_jsonl(cfg.run_path / "rounds.jsonl")
    metrics = read_jsonl(cfg.run_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(1, STEPS + 1))
    committed = {r["step"]: r["version_after"] for r in rounds if r["version_after"] != r["version_before"]}
    assert sorted(committed) == sorted(ROUND_WEIGHTS), rounds  # both rounds committed
    version = 0
    for m in metrics:
        assert m["harness_versions"] == [version], (m["step"], m["harness_versions"], version)
        version = committed.get(m["step"], version)
    # the update reached the prompts too: the reweighted task dominates the very next step's draws
    for step, (task_id, _) in ROUND_WEIGHTS.items():
        assert _draws(metrics)[step + 1].count(task_id) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("ckpt_step", [2, 4])
def test_resume_draws_the_same_tasks_as_the_uninterrupted_run(uninterrupted, tmp_path, ckpt_step):
    from trainer.grpo import train

    _, cfg = uninterrupted
    copy = tmp_path / "run"
    shutil.copytree(cfg.run_path, copy)
    rcfg = tiny_config(tmp_path / "cfg", *OVERRIDES, f"run_dir={copy}")
    train(rcfg, resume=str(ckpt_step), progress=False, run_graph=stub_round)
    want = read_jsonl(cfg.run_path / "metrics.jsonl")
    got = read_jsonl(copy / "metrics.jsonl")
    assert [m["step"] for m in got] == list(range(1, STEPS + 1))
    assert _draws(got) == _draws(want)
    assert [m["harness_versions"] for m in got] == [m["harness_versions"] for m in want]
