"""Every config in configs/ loads and resolves; bad configs name the field (and file) and say how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainer.config import ConfigError, RunConfig, describe
from trainer.config_loader import config_from_dict, load_config

REPO = Path(__file__).resolve().parents[1]
RUN_CONFIGS = sorted(p for p in (REPO / "configs").glob("*.yaml") if not p.name.startswith("accelerate"))


def test_there_are_presets():
    names = {p.name for p in RUN_CONFIGS}
    assert {"cpu-demo.yaml", "tiny.yaml", "gpu-4b.yaml", "gpu-8b.yaml"} <= names


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: p.name)
def test_run_config_loads_and_round_trips(path):
    cfg = load_config(path)
    assert isinstance(cfg, RunConfig)
    assert config_from_dict(cfg.to_dict()) == cfg
    if cfg.harness.evolver:
        assert cfg.harness.evolve_every % cfg.train.save_steps == 0
    assert cfg.train.batch_size % cfg.train.num_generations == 0


def test_gpu_presets_use_vllm_server_and_llm_brains():
    for name in ("gpu-4b.yaml", "gpu-8b.yaml"):
        cfg = load_config(REPO / "configs" / name)
        assert cfg.train.use_vllm and cfg.train.vllm_mode == "server" and cfg.train.vllm_server_base_url
        assert cfg.evolver.judge_model and cfg.evolver.judge_model.startswith("openai:")
        e = cfg.evolver
        assert all(getattr(e, f"{r}_model").startswith("openai:") for r in ("attributor", "proposer", "critic"))
        assert cfg.train.ddp_timeout > cfg.harness.max_pause_s


def test_accelerate_config_is_deepspeed_zero():
    data = yaml.safe_load((REPO / "configs" / "accelerate-zero2.yaml").read_text())
    assert data["distributed_type"] == "DEEPSPEED"
    assert data["deepspeed_config"]["zero_stage"] in (2, 3)


@pytest.mark.parametrize(
    "overrides, expect",
    [
        (["train.max_stpes=3"], ["unknown key 'train.max_stpes'", "max_steps"]),
        (["harness.evolve_every=3"], ["evolve_every", "set train.save_steps=1"]),
        (["train.batch_size=6"], ["multiple of train.num_generations", "set train.batch_size=8"]),
        (["train.max_steps=abc"], ["train.max_steps", "expected int"]),
        (["evolver.interfaces=[sampling,rubric]"], ["unknown ['rubric']"]),
        (["evolver.interfaces=[]"], ["evolver.interfaces is empty", "harness.evolver=false"]),
        (["harness.langgraph_url=http://localhost:2124"], ["harness.memory_url", "chroma run", "evolver.memory=false"]),
        (["train.ddp_timeout=60"], ["ddp_timeout", "max_pause_s"]),
        (["harness.detector={tau_lo: 2}"], ["harness.detector", "tau_lo"]),
        (["modle.name=tiny"], ["unknown key 'modle'", "model"]),
        (["train.max_steps"], ["section.key=value"]),
    ],
)
def test_bad_config_names_field_and_fix(overrides, expect):
    with pytest.raises(ConfigError) as err:
        load_config(REPO / "configs" / "tiny.yaml", overrides)
    for piece in expect:
        assert piece in str(err.value)


def test_bad_key_in_file_names_the_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("train:\n  num_generatons: 4\n")
    with pytest.raises(
        ConfigError, match=r"bad\.yaml: unknown key 'train.num_generatons'; did you mean 'num_generations'"
    ):
        load_config(p)


def test_overrides_parse_yaml_values():
    cfg = load_config(
        REPO / "configs" / "tiny.yaml",
        ["train.max_steps=3", "evolver.critic=false", "evolver.interfaces=[criteria]", "train.learning_rate=1e-3"],
    )
    assert cfg.train.max_steps == 3 and cfg.evolver.critic is False
    assert cfg.evolver.interfaces == ["criteria"] and cfg.train.learning_rate == pytest.approx(1e-3)


def test_describe_lists_every_section():
    text = describe()
    for key in ("model.name", "train.max_steps", "harness.evolve_every", "data.suite"):
        assert key in text
