"""The own-TRL-script path says what it does (issue 20 item 7): `HarnessParts.attach` refuses generation settings
that differ from what the critic measures with, naming both values; `harness.dynamic_sampling` is applied (the
reward wrapped, handed to the trainer class) and its batch size and beta are checked. No model is loaded: `attach`
reads only the trainer's `args` (a real `GRPOConfig`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support.tiny_run import grpo_args, tiny_config
from trainer.config import ConfigError


@pytest.fixture
def make_parts(tmp_path):
    from trainer.api import harness_parts

    made = []

    def make(*overrides):
        parts = harness_parts(tiny_config(tmp_path / f"r{len(made)}", *overrides))
        made.append(parts)
        return parts

    yield make
    for p in made:
        p.close()


def test_matching_args_attach(tmp_path, make_parts):
    parts = make_parts()
    trainer = SimpleNamespace(args=grpo_args(tmp_path, parts))
    parts.attach(trainer)
    assert parts.callback.trainer is trainer


@pytest.mark.parametrize(
    "kw, expect",
    [
        ({"temperature": 0.7}, "temperature=0.7 but the critic samples the frozen policy at train.temperature=1.0"),
        (
            {"max_completion_length": 256},
            "max_completion_length=256 but the critic's rollouts are train.max_completion_length=16 tokens",
        ),
        ({"top_p": 0.9}, "top_p=0.9 but the critic samples untruncated"),
        ({"top_k": 50}, "top_k=50 but the critic samples untruncated"),
        ({"min_p": 0.1}, "min_p=0.1 but the critic samples untruncated"),
    ],
)
def test_generation_settings_the_critic_does_not_use_are_refused(tmp_path, make_parts, kw, expect):
    parts = make_parts()
    with pytest.raises(ConfigError, match="GRPOConfig does not fit") as err:
        parts.attach(SimpleNamespace(args=grpo_args(tmp_path, parts, **kw)))
    assert expect in str(err.value) and parts.callback.trainer is None


def test_dynamic_sampling_is_applied_and_checked(tmp_path, make_parts):
    from trainer.dynamic_sampling import DynamicSamplingReward

    parts = make_parts("harness.dynamic_sampling=2")
    assert (
        isinstance(parts.reward, DynamicSamplingReward) and parts.trainer_kwargs()["dynamic_sampling"] is parts.reward
    )
    assert parts.trainer_kwargs()["reward_funcs"] == [parts.reward]
    with pytest.raises(ConfigError) as err:
        parts.attach(SimpleNamespace(args=grpo_args(tmp_path, parts, beta=0.04)))  # batch_size 8, not 8 x 2
    msg = str(err.value)
    assert "per_device_train_batch_size=8 but harness.dynamic_sampling=2 generates train.batch_size x 2 = 16" in msg
    assert "beta=0.04 but harness.dynamic_sampling needs beta=0" in msg
    parts.attach(SimpleNamespace(args=grpo_args(tmp_path, parts, per_device_train_batch_size=16)))


def test_without_dynamic_sampling_the_plain_reward_is_used(tmp_path, make_parts):
    from trainer.reward import RubricReward

    parts = make_parts()
    assert isinstance(parts.reward, RubricReward) and parts.trainer_kwargs()["dynamic_sampling"] is None
