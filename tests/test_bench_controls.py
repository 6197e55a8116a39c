"""The benchmark's two controls and DAPO's common random numbers (issue 32): `fixed-norm` (`harness.live_token_norm`:
the zero-variance groups' rows out of the loss normaliser, no over-sampling), `skip` (`harness.skip_dead`: a zero-LLM
predictive sampler, harness/skip.py), each refused with what makes it meaningless; and an over-sampled step whose
first batch/G draws are the fixed arm's draws at the same seed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.skip import EXPLORE_START, EXPLORE_STEP, DeadRunSkip
from memory.store import TrainingMemory
from tests.support.tiny_run import tiny_config
from trainer.config import ConfigError
from trainer.config_loader import load_config
from trainer.harness_run import HarnessRun
from trainer.sampler import HarnessSampler, placeholder_row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_spec  # noqa: E402

TINY = ROOT / "configs" / "tiny.yaml"


# -- refusals ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, words",
    [
        (["harness.live_token_norm=true", "train.beta=0.04"], ("harness.live_token_norm", "train.beta=0")),
        (["harness.live_token_norm=true", "train.loss_type=grpo"], ("harness.live_token_norm", "train.loss_type")),
        (["harness.live_token_norm=true", "harness.dynamic_sampling=2"], ("already normalises", "set one")),
        (["harness.skip_dead=true"], ("harness.evolver=false",)),  # the tiny config runs the evolver
        (
            ["harness.skip_dead=true", "harness.evolver=false", "harness.liveness_weighting=true"],
            ("liveness_weighting", "choose one"),
        ),
        (
            ["harness.skip_dead=true", "harness.evolver=false", "harness.dynamic_filtering=true"],
            ("dynamic_filtering", "choose one"),
        ),
        (["harness.skip_target=1.5"], ("harness.skip_target must be in [0, 1]",)),
        (["harness.skip_floor=0"], ("harness.skip_floor must be in (0, 1]",)),
    ],
)
def test_controls_refuse_what_makes_them_meaningless(overrides, words):
    with pytest.raises(ConfigError) as exc:
        load_config(TINY, overrides)
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_the_arms_load_and_set_their_knobs():
    norm = load_config(TINY, list(bench_spec.ARMS["fixed-norm"].overrides))
    skip = load_config(TINY, list(bench_spec.ARMS["skip"].overrides))
    assert norm.harness.live_token_norm and not norm.harness.evolver and norm.harness.dynamic_sampling == 0
    assert skip.harness.skip_dead and not skip.harness.evolver and not skip.harness.liveness_weighting
    assert not skip.harness.live_token_norm and not norm.harness.skip_dead


def test_live_norm_refuses_several_processes_before_the_model_loads(monkeypatch):
    from trainer.dynamic_sampling import check_one_process

    cfg = load_config(TINY, list(bench_spec.ARMS["fixed-norm"].overrides))
    monkeypatch.setenv("WORLD_SIZE", "1")
    check_one_process(cfg)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="harness.live_token_norm runs on one process only, but WORLD_SIZE=2"):
        check_one_process(cfg)


# -- fixed-norm: the normaliser alone ----------------------------------------------------------------------
def test_live_norm_keeps_every_reward_and_counts_the_live_groups_tokens():
    from trainer.dynamic_sampling import LiveNormReward

    rewards = [0.5, 0.5] + [0.0, 1.0] + [1.0, 1.0] + [0.2, 0.4]  # groups of 2: dead, live, dead, live
    recorded: dict = {}

    class Inner:
        run = SimpleNamespace(record_step=lambda step, v: recorded.update(step=step, **v), sampler=None)

        async def __call__(self, **kw):
            return list(rewards)

    w = LiveNormReward(Inner(), num_generations=2)
    ids = [[1] * (i + 1) for i in range(8)]  # row i has i+1 completion tokens
    out = asyncio.run(w(completions=["x"] * 8, completion_ids=ids, trainer_state=SimpleNamespace(global_step=2)))
    assert out == rewards  # nothing dropped: a zero-variance group's advantage is 0 anyway
    assert w.kept_tokens == 3 + 4 + 7 + 8  # only the live groups' rows in the normaliser
    assert recorded == {"step": 3, "ln_groups_live": 2, "ln_tokens_live": 22, "ln_tokens_all": 36}


# -- skip: the predictive sampler --------------------------------------------------------------------------
def test_skip_probability_grows_with_the_dead_run_down_to_the_floor():
    s = DeadRunSkip(target=0.25, floor=0.1)
    assert s.keep("t") == 1.0  # never seen
    keeps = []
    for _ in range(5):
        s.observe("t", True)
        keeps.append(s.keep("t"))
    assert keeps[:3] == pytest.approx([EXPLORE_START, EXPLORE_START**2, EXPLORE_START**3])
    assert keeps[-1] == 0.1 and s.dead_run("t") == 5  # 0.5^5 < floor: the floor keeps it explored
    s.observe("t", False)
    assert s.keep("t") == 1.0 and s.dead_run("t") == 0  # one live group ends the run


def test_exploration_adapts_to_the_dead_share_target():
    s = DeadRunSkip(target=0.25, floor=0.1)
    assert s.end_step() is None and s.explore == EXPLORE_START  # nothing seen: nothing moves
    for dead in (True, True, False, False):
        s.observe("a", dead)
    assert s.end_step() == 0.5 and s.explore == pytest.approx(EXPLORE_START - EXPLORE_STEP)  # too dead: skip harder
    s.observe("b", False)
    assert s.end_step() == 0.0 and s.explore == pytest.approx(EXPLORE_START)
    back = DeadRunSkip(target=0.25, floor=0.1)
    back.load_state_dict(s.state_dict())
    assert back.state_dict() == s.state_dict() and back.keep("a") == s.keep("a")


def test_sampler_draws_a_dead_run_task_less_and_records_the_exploration(tmp_path):
    run = HarnessRun(
        tiny_config(tmp_path, *bench_spec.ARMS["skip"].overrides, "harness.sampler_floor=0"),
        memory=TrainingMemory.ephemeral(),
    )
    try:
        sampler = HarnessSampler.from_config(run)
        assert sampler.skip is not None
        ids = run.state.drawable_task_ids(0)
        before = sampler.core.weights(0)
        for _ in range(3):
            sampler.observe_group(ids[0], True)
        sampler.observe_group(ids[1], False)
        sampler.fill([placeholder_row() for _ in range(8)], num_generations=4, step=0)
        after = sampler.core.weights(0)
        # 3 of 4 groups dead (> target 0.25): p fell before the keep probabilities were set.
        p = EXPLORE_START - EXPLORE_STEP
        ratio = (after[ids[0]] / after[ids[1]]) / (before[ids[0]] / before[ids[1]])
        assert ratio == pytest.approx(p**3)
        assert run.pop_step(1)["skip_explore"] == pytest.approx(p)
        # The skip state rides in the checkpoint's sampler state.
        other = HarnessSampler.from_config(run)
        other.load_state_dict(sampler.state_dict())
        assert other.skip is not None and other.skip.dead_run(ids[0]) == 3
    finally:
        run.close()


# -- DAPO: common random numbers with the fixed arm --------------------------------------------------------
def _draws(tmp_path: Path, name: str, overrides: tuple[str, ...], steps: int, crn: bool = True) -> list[list[str]]:
    cfg = tiny_config(tmp_path / name, *overrides)
    run = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    try:
        sampler = HarnessSampler.from_config(run)
        if not crn:
            sampler.crn_groups = 0  # every draw from the main stream, as before issue 32
        g = cfg.train.num_generations
        groups = cfg.train.batch_size // g * max(1, cfg.harness.dynamic_sampling)
        out = []
        for step in range(steps):
            rows = sampler.fill([placeholder_row() for _ in range(groups * g)], num_generations=g, step=step)
            out.append([r["task_id"] for r in rows[::g]])
        return out
    finally:
        run.close()


def test_dapo_first_batch_draws_are_the_fixed_arms_at_every_step(tmp_path):
    steps, per_step = 6, 8 // 4
    fixed = _draws(tmp_path, "fixed", bench_spec.ARMS["fixed"].overrides, steps)
    dapo = _draws(tmp_path, "dapo", bench_spec.ARMS["dapo"].overrides, steps)
    assert all(len(d) == bench_spec.DAPO_OVERSAMPLE * per_step for d in dapo)
    assert [d[:per_step] for d in dapo] == fixed  # step after step, not only the first
    # The over-sampled rest is a stream of its own, not a copy of the shared draws.
    assert [d[per_step:] for d in dapo] != fixed
    # Without the second stream the shared draws end after step 1 (the measured paired-sd problem).
    old = _draws(tmp_path, "dapo-old", bench_spec.ARMS["dapo"].overrides, steps, crn=False)
    assert old[0][:per_step] == fixed[0] and [d[:per_step] for d in old] != fixed


def test_the_second_stream_resumes_where_it_stopped(tmp_path):
    cfg = tiny_config(tmp_path, *bench_spec.ARMS["dapo"].overrides)
    run = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    try:
        s = HarnessSampler.from_config(run)
        rows = lambda: [placeholder_row() for _ in range(16)]  # noqa: E731
        s.fill(rows(), num_generations=4, step=0)
        saved = s.state_dict()
        nxt = [r["task_id"] for r in s.fill(rows(), num_generations=4, step=1)[::4]]
        back = HarnessSampler.from_config(run)
        back.load_state_dict(saved)
        assert [r["task_id"] for r in back.fill(rows(), num_generations=4, step=1)[::4]] == nxt
    finally:
        run.close()


# -- per-step numbers in every summary ---------------------------------------------------------------------
def test_job_summaries_carry_each_steps_tasks_group_stats_and_the_controls_numbers(tmp_path):
    import json

    import bench_collect

    lines = [
        {
            "step": 1,
            "n_groups": 2,
            "dead_share": 0.5,
            "tasks": ["a", "b"],
            "group_means": [0.0, 0.5],
            "group_stds": [0.0, 0.2],
            "ln_tokens_live": 30,
            "ln_tokens_all": 120,
        },
        {
            "step": 2,
            "n_groups": 2,
            "dead_share": 0.0,
            "tasks": ["b", "b"],
            "group_means": [0.4, 0.6],
            "group_stds": [0.1, 0.3],
            "skip_explore": 0.45,
        },
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    steps = bench_collect.collect_run(tmp_path)["steps"]
    assert [s["tasks"] for s in steps] == [["a", "b"], ["b", "b"]]
    assert steps[0]["group_means"] == [0.0, 0.5] and steps[1]["group_stds"] == [0.1, 0.3]
    assert steps[0]["ln_token_share"] == pytest.approx(0.25) and steps[1]["ln_token_share"] is None
    assert steps[0]["skip_explore"] is None and steps[1]["skip_explore"] == 0.45


def test_older_checkpoint_states_resume_with_a_line_or_a_clear_refusal(tmp_path, caplog):
    dapo = HarnessRun(
        tiny_config(tmp_path / "d", *bench_spec.ARMS["dapo"].overrides), memory=TrainingMemory.ephemeral()
    )
    skip = HarnessRun(
        tiny_config(tmp_path / "s", *bench_spec.ARMS["skip"].overrides), memory=TrainingMemory.ephemeral()
    )
    try:
        s = HarnessSampler.from_config(dapo)
        old = {k: v for k, v in s.state_dict().items() if k not in ("extra", "extra_guidance_rng", "skip")}
        with caplog.at_level("WARNING", logger="trainer.sampler"):
            HarnessSampler.from_config(dapo).load_state_dict(old)
        assert "no second stream" in caplog.text  # a DAPO run from before: its surplus draws start afresh, said
        with pytest.raises(ValueError, match="harness.skip_dead=false"):
            HarnessSampler.from_config(skip).load_state_dict(old)
    finally:
        dapo.close()
        skip.close()


def test_own_trl_script_gets_the_live_normaliser_too(tmp_path):
    from types import SimpleNamespace

    from tests.support.tiny_run import write_suite
    from trainer.api import generation_mismatches, harness_parts
    from trainer.dynamic_sampling import LiveNormReward

    suite = write_suite(tmp_path / "suite")
    overrides = [*bench_spec.ARMS["fixed-norm"].overrides, f"data.suite={suite}", f"run_dir={tmp_path / 'run'}"]
    parts = harness_parts(TINY, overrides=overrides)
    try:
        assert isinstance(parts.reward, LiveNormReward) and parts.dynamic_sampling is parts.reward
        args = SimpleNamespace(
            temperature=parts.cfg.train.temperature,
            max_completion_length=parts.cfg.train.max_completion_length,
            top_p=1.0,
            top_k=0,
            min_p=None,
            per_device_train_batch_size=parts.cfg.train.batch_size,
            beta=0.04,
        )
        assert any("harness.live_token_norm needs beta=0" in p for p in generation_mismatches(args, parts.cfg))
    finally:
        parts.run.close()
