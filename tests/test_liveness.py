"""The per-task liveness estimate (harness/liveness.py): subset shares, decay, probes, reset and resume."""

from __future__ import annotations

from math import comb

import pytest

from harness.liveness import MAX_SUBSETS, Liveness, dead_subset_share

EPS = 0.05


@pytest.mark.parametrize(
    ("rewards", "share"),
    [
        ([0.0] * 4, 1.0),  # one dead group of G
        ([0.0, 0.0, 0.0, 1.0], 0.0),  # one live group
        ([0.0] * 7 + [1.0], comb(7, 4) / comb(8, 4)),  # 35 of the 70 groups of 4 miss the one live answer
        ([0.0] * 6 + [1.0, 1.0], comb(6, 4) / comb(8, 4)),
        ([0.0, 0.0, 0.02, 0.03, 1.0, 1.0, 1.0, 1.0], (comb(4, 4) + comb(4, 4)) / comb(8, 4)),  # std below eps
    ],
)
def test_dead_subset_share_counts_the_groups_of_G_without_variance(rewards, share):
    assert dead_subset_share(rewards, 4, EPS) == pytest.approx(share)


def test_dead_subset_share_samples_a_large_pool_deterministically():
    rewards = [0.0] * 30 + [1.0] * 2
    assert comb(32, 4) > MAX_SUBSETS
    got = dead_subset_share(rewards, 4, EPS)
    assert got == dead_subset_share(rewards, 4, EPS)
    assert got == pytest.approx(comb(30, 4) / comb(32, 4), abs=0.03)


@pytest.mark.parametrize(("rewards", "g"), [([0.0, 1.0], 4), ([0.0] * 4, 1)])
def test_dead_subset_share_refuses_too_few_rewards(rewards, g):
    with pytest.raises(ValueError, match="group_size"):
        dead_subset_share(rewards, g, EPS)


def test_the_posterior_starts_at_the_prior_and_follows_decayed_groups():
    lv = Liveness(decay=0.5)
    assert lv.dead_rate("t") == 0.5 and lv.evidence("t") == 0.0
    lv.observe("t", dead=True)  # live 0, dead 1
    assert lv.dead_rate("t") == pytest.approx(2 / 3)
    lv.observe("t", dead=False)  # live 1, dead 0.5
    assert lv.dead_rate("t") == pytest.approx(1.5 / 3.5) and lv.evidence("t") == pytest.approx(1.5)
    lv.observe("u", dead=False)  # another task's group leaves t alone
    assert lv.dead_rate("t") == pytest.approx(1.5 / 3.5)


def test_probe_rollouts_count_as_groups_by_their_dead_subsets():
    lv = Liveness(decay=1.0)
    share = lv.observe_probe("t", [0.0] * 7 + [1.0], 4, EPS)  # 8 rollouts: two groups' worth, half of them dead
    assert share == pytest.approx(0.5) and lv.evidence("t") == pytest.approx(2.0)
    assert lv.dead_rate("t") == pytest.approx((1.0 + 1.0) / (2.0 + 2.0))


def test_reset_forgets_an_edited_task_and_state_round_trips():
    lv = Liveness()
    for _ in range(3):
        lv.observe("t", dead=True)
    lv.observe("u", dead=False)
    again = Liveness()
    again.load_state_dict(lv.state_dict())
    assert again.dead_rate("t") == lv.dead_rate("t") > 0.75 and again.dead_rate("u") == lv.dead_rate("u")
    lv.reset("t")
    assert lv.dead_rate("t") == 0.5


@pytest.mark.parametrize("kwargs", [{"decay": 0.0}, {"decay": 1.5}, {"prior_live": 0.0}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="liveness"):
        Liveness(**kwargs)


# -- the sampler's use (trainer/sampler.py, harness.liveness_weighting) ----------------------------------------
def test_liveness_weighting_draws_a_predicted_dead_task_less_until_an_edit_resets_it(tmp_path):
    from memory.store import TrainingMemory
    from tests.support.tiny_run import tiny_config
    from trainer.config import ConfigError
    from trainer.harness_run import HarnessRun
    from trainer.sampler import HarnessSampler, placeholder_row

    run = HarnessRun(tiny_config(tmp_path, "harness.liveness_weighting=true"), memory=TrainingMemory.ephemeral())
    try:
        sampler = HarnessSampler.from_config(run)
        tasks = run.state.drawable_task_ids(0)
        for _ in range(6):
            run.liveness.observe(tasks[0], dead=True)
        for t in tasks[1:]:
            run.liveness.observe(t, dead=False)
        sampler.fill([placeholder_row()] * 2, num_generations=2, step=0)
        w = sampler.core.weights(0)
        others = [w[t] for t in tasks[1:]]
        assert w[tasks[0]] < 0.5 * min(others)  # dead rate ~0.85 against ~0.33
        assert w[tasks[0]] >= sampler.core.floor / len(tasks)  # the floor keeps it reachable
        run.liveness.reset(tasks[0])  # an update edited it: back at full weight for the next draw
        sampler.fill([placeholder_row()] * 2, num_generations=2, step=1)
        assert sampler.core.weights(1)[tasks[0]] > max(sampler.core.weights(1)[t] for t in tasks[1:])
    finally:
        run.close()
    with pytest.raises(ConfigError, match="choose one"):
        tiny_config(tmp_path, "harness.liveness_weighting=true", "harness.dynamic_filtering=true")
