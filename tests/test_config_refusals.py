"""Configs that cannot be right are refused at start, naming the fields and the fix.

- an HTTP frozen policy that nothing keeps in sync with the trained weights (the critic would silently
  measure the base model);
- train tasks with text-only criteria and no judge (those criteria would be skipped), unless
  `harness.allow_unjudged_criteria` says so.
"""

from __future__ import annotations

import pytest

from tests.support.tiny_run import REPO, _task, tiny_config, write_suite
from trainer.config import ConfigError
from trainer.config_loader import load_config

TINY = REPO / "configs" / "tiny.yaml"
VLLM = ["train.use_vllm=true", "train.vllm_mode=server", "train.vllm_server_base_url=http://gpu:8000"]


# -- (a) an HTTP frozen policy must follow the trained weights --------------------------------------------
@pytest.mark.parametrize(
    "overrides, expect",
    [
        (
            ["harness.policy_endpoint=http://gpu:8000"],
            [
                "harness.policy_endpoint=http://gpu:8000",
                "model.lora=false",
                "train.use_vllm=false",
                "base model",
                "harness.policy_endpoint=local",
                "model.lora=true",
                "harness.policy_endpoint=train.vllm_server_base_url",
            ],
        ),
        (
            [*VLLM, "harness.policy_endpoint=http://other:8001"],
            [
                "harness.policy_endpoint=http://other:8001",
                "model.lora=false",
                "not the training server train.vllm_server_base_url=http://gpu:8000",
            ],
        ),
        (
            ["train.use_vllm=true", "train.vllm_mode=colocate", "harness.policy_endpoint=http://gpu:8000"],
            ["train.vllm_mode=colocate", "model.lora=false"],
        ),
    ],
    ids=["no-lora-no-vllm", "other-url-than-training-server", "colocate-no-lora"],
)
def test_http_policy_nothing_syncs_is_refused(overrides, expect):
    with pytest.raises(ConfigError) as err:
        load_config(TINY, overrides)
    for piece in expect:
        assert piece in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "overrides, source",
    [
        ([], "local"),
        (["model.lora=true", "harness.policy_endpoint=http://gpu:8000"], "lora_adapter"),
        ([*VLLM, "harness.policy_endpoint=http://gpu:8000"], "training_server"),
        ([*VLLM, "harness.policy_endpoint=http://gpu:8000/v1/"], "training_server"),
        ([*VLLM, "model.lora=true", "harness.policy_endpoint=http://gpu:8000"], "training_server"),
        ([*VLLM, "model.lora=true", "harness.policy_endpoint=http://other:8001"], "lora_adapter"),
        (
            [
                "train.use_vllm=true",
                "train.vllm_mode=colocate",
                "model.lora=true",
                "harness.policy_endpoint=http://a:1",
            ],
            "lora_adapter",
        ),
    ],
    ids=[
        "local",
        "lora-hot-load",
        "training-server",
        "training-server-v1-form",
        "training-server-lora",
        "lora-other-server",
        "lora-colocate",
    ],
)
def test_http_policy_that_follows_the_weights_is_accepted(overrides, source):
    assert load_config(TINY, overrides).frozen_policy_source == source


def test_gpu_presets_sample_the_training_server():
    for name in ("gpu-4b.yaml", "gpu-8b.yaml"):
        assert load_config(REPO / "configs" / name).frozen_policy_source == "training_server"


# -- (b) text-only criteria need a judge or an explicit switch ----------------------------------------------
CHECKED = {
    "id": "c1",
    "text": "Under 100 words",
    "weight": 3,
    "kind": "important",
    "check": {"type": "word_count", "max": 100},
}
TEXT_ONLY = {"id": "c2", "text": "Is kind.", "weight": 1, "kind": "optional"}
TEXT_ONLY_ESSENTIAL = {"id": "c1", "text": "Is accurate.", "weight": 5, "kind": "essential"}
TASKS = [
    _task("checked", "Say hi.", [CHECKED]),
    _task("mixed", "Say hello.", [CHECKED, TEXT_ONLY]),
    _task("blind", "Explain tides.", [TEXT_ONLY_ESSENTIAL, TEXT_ONLY]),
    _task("held-out", "Explain wind.", [TEXT_ONLY_ESSENTIAL], split="test"),  # eval only: not counted
]


def _cfg(tmp_path, *overrides):
    suite = write_suite(tmp_path / "suite-text", TASKS)
    return tiny_config(tmp_path, f"data.suite={suite}", "harness.allow_unjudged_criteria=false", *overrides)


@pytest.mark.parametrize(
    "overrides, expect, absent",
    [
        (
            [],
            [
                "evolver.judge_model is not set",
                "3 criteria in 2 of 3 train tasks",
                "1 tasks would score 0",
                "blind, mixed",
                "evolver.judge_model",
                "harness.allow_unjudged_criteria=true",
            ],
            ["held-out"],
        ),
        (["evolver.judge_model=rules"], ["3 criteria in 2 of 3 train tasks"], []),
        (["data.tasks=[checked,mixed]"], ["1 criteria in 1 of 2 train tasks", "(e.g. mixed)"], ["would score 0"]),
    ],
    ids=["no-judge", "rules-judge", "filtered"],
)
def test_unjudged_criteria_are_refused_with_counts(tmp_path, overrides, expect, absent):
    from trainer.harness_run import check_criteria_are_judged, load_train_tasks

    cfg = _cfg(tmp_path, *overrides)
    with pytest.raises(ConfigError) as err:
        check_criteria_are_judged(cfg, load_train_tasks(cfg))
    for piece in expect:
        assert piece in str(err.value), str(err.value)
    for piece in absent:
        assert piece not in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["harness.allow_unjudged_criteria=true"],
        ["evolver.judge_model=openai:some-model", "evolver.base_url=http://127.0.0.1:1/v1"],
        ["data.tasks=[checked]"],
    ],
    ids=["switch", "llm-judge", "only-checked-tasks"],
)
def test_unjudged_criteria_pass_with_a_judge_or_the_switch(tmp_path, overrides):
    from trainer.harness_run import check_criteria_are_judged, load_train_tasks

    cfg = _cfg(tmp_path, *overrides)
    check_criteria_are_judged(cfg, load_train_tasks(cfg))


def test_bundled_suite_needs_the_switch_without_a_judge():
    from trainer.harness_run import check_criteria_are_judged, load_train_tasks

    cfg = load_config(TINY, ["harness.allow_unjudged_criteria=false"])
    with pytest.raises(ConfigError, match=r"\d+ criteria in \d+ of \d+ train tasks of data/rubric-mix-lite"):
        check_criteria_are_judged(cfg, load_train_tasks(cfg))
    check_criteria_are_judged(load_config(TINY), load_train_tasks(cfg))  # the preset sets it


def test_train_refuses_before_the_model_loads_and_before_overwrite_deletes(tmp_path, monkeypatch):
    import trainer.grpo as grpo

    cfg = _cfg(tmp_path)
    cfg.run_path.mkdir(parents=True)
    (cfg.run_path / "metrics.jsonl").write_text("{}\n")  # a previous run that --overwrite would delete

    def no_model(*a, **k):
        raise AssertionError("the model must not load for a refused config")

    monkeypatch.setattr(grpo, "build_trainer", no_model)
    with pytest.raises(ConfigError, match="3 criteria in 2 of 3 train tasks"):
        grpo.train(cfg, progress=False, overwrite=True)
    assert (cfg.run_path / "metrics.jsonl").is_file()


def test_a_fresh_harness_run_refuses_too(tmp_path):
    """`harness_parts` (own TRL scripts) starts runs through `HarnessRun`: the check is there as well."""
    from memory.store import TrainingMemory
    from trainer.harness_run import HarnessRun

    with pytest.raises(ConfigError, match="3 criteria in 2 of 3 train tasks"):
        HarnessRun(_cfg(tmp_path), memory=TrainingMemory.ephemeral())
