"""Training with the evolver served by `langgraph dev` (README "Watching the evolver in LangGraph Studio"), offline.

The CPU default (`harness.policy_endpoint: local`) on a server: at each pause the trainer saves the frozen
policy to `run_dir/frozen/step-N-<id>/` and the server loads `local:<that folder>`; memory is shared through
a `chroma run` server (`harness.memory_url`) because the trainer would otherwise hold the memory folder's
lock. These tests check the pieces (save/load/prune, the server-side cache, the context);
`tests/test_studio.py::test_training_with_the_evolver_on_langgraph_dev` runs the tiny preset against real
`langgraph dev` and `chroma run` processes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.tiny_run import tiny_config

REPO = Path(__file__).resolve().parents[1]
PROMPT = [[{"role": "user", "content": "Say anything you like."}]]


@pytest.fixture(scope="module")
def tiny_policy():
    import torch

    from trainer.config_loader import load_config
    from trainer.grpo import load_policy

    torch.set_num_threads(1)
    return load_policy(load_config(REPO / "configs" / "tiny.yaml"))


def _sample(endpoint) -> list[list[str]]:
    return endpoint.sample(PROMPT, n=3, max_tokens=8, temperature=1.0, seed=7)


@pytest.mark.parametrize("lora", [False, True], ids=["full-model", "lora-adapter"])
def test_saved_frozen_policy_samples_like_the_live_one(tiny_policy, tmp_path, lora):
    from peft import LoraConfig, get_peft_model

    from graphs.services import parse_policy
    from tools.local_endpoint import LocalEndpoint
    from trainer.frozen import save_frozen_policy

    model, tok, folder = tiny_policy
    if lora:
        model = get_peft_model(
            model,
            LoraConfig(
                r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM", init_lora_weights=False
            ),
        )
    try:
        saved = save_frozen_policy(model, tok, tmp_path / "frozen", step=2)
        assert saved.is_absolute() and saved.name.startswith("step-2-")
        assert (saved / "adapter_config.json").is_file() == lora
        assert not (saved / "model.safetensors").exists() if lora else (saved / "model.safetensors").is_file()
        live = _sample(LocalEndpoint(model, tok))
        loaded = parse_policy(f"local:{saved}")
        assert _sample(loaded) == live  # same weights (LoRA merged at load), same seed -> same samples
    finally:
        if lora:
            model.unload()  # the module-scoped base model must come back without LoRA layers


def test_frozen_folders_are_pruned_to_the_last_two(tiny_policy, tmp_path):
    from trainer.frozen import save_frozen_policy

    model, tok, _ = tiny_policy
    root = tmp_path / "frozen"
    (root / ".step-9-000000001.tmp").mkdir(parents=True)  # left by a save killed before its rename
    saved = []
    for step in (2, 4, 6):
        saved.append(save_frozen_policy(model, tok, root, step=step))
        time.sleep(0.01)  # distinct mtimes
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in saved[1:])


def test_adapter_without_its_base_model_is_a_clear_error(tmp_path):
    from tools.endpoint import EndpointError
    from tools.local_endpoint import LocalEndpoint

    (tmp_path / "adapter_config.json").write_text('{"base_model_name_or_path": "/no/such/base"}')
    with pytest.raises(EndpointError, match=r"adapter_config.json: base_model_name_or_path '/no/such/base'"):
        LocalEndpoint.from_path(tmp_path)


def test_server_side_cache_loads_each_folder_once_and_keeps_two(tiny_policy, tmp_path, monkeypatch):
    from graphs import services
    from harness.data import load_suite
    from harness.store import HarnessStore
    from harness.types import HarnessState
    from tests.support.tiny_run import write_suite

    tasks = load_suite(write_suite(tmp_path / "suite"))
    HarnessStore(tmp_path / "run" / "harness").init(HarnessState.from_tasks([t for t in tasks if t.split == "train"]))
    loads: list[str] = []

    class FakeEndpoint:
        def __init__(self, spec):
            self.name = spec

    monkeypatch.setattr(services, "parse_policy", lambda spec: loads.append(spec) or FakeEndpoint(spec))
    monkeypatch.setattr(services, "_BUILT", type(services._BUILT)())
    monkeypatch.setattr(services, "_ENDPOINTS", type(services._ENDPOINTS)())
    settings = {"run_dir": str(tmp_path / "run"), "memory_location": "none"}
    first = services.get_services({**settings, "policy": "local:/f/step-2"})
    for _ in range(3):  # every node of a round asks again
        assert services.get_services({**settings, "policy": "local:/f/step-2"}) is first
    services.get_services({**settings, "policy": "local:/f/step-4"})
    services.get_services({**settings, "policy": "local:/f/step-6"})
    assert loads == ["local:/f/step-2", "local:/f/step-4", "local:/f/step-6"]
    assert list(services._ENDPOINTS) == ["local:/f/step-4", "local:/f/step-6"]  # step-2's model is released
    assert all(s.endpoint.name != "local:/f/step-2" for s in services._BUILT.values())


def test_server_rounds_get_plain_settings_not_the_in_process_key(tmp_path):
    from trainer.evolver_round import evolver_context

    cfg = tiny_config(tmp_path, "harness.langgraph_url=http://127.0.0.1:1", "evolver.memory=false")
    ctx = evolver_context(cfg, services_key=None, policy_spec="local:/x")
    assert ctx.services_key is None and Path(ctx.run_dir).is_absolute() and ctx.memory_location == "none"


def test_a_server_round_sends_only_the_run_specific_context(tmp_path):
    """What a server run sends (and so overrides in its assistant) is the run's own data; the brains, limits and
    thresholds stay with the assistant. A key moved between the two lists changes what Studio can choose."""
    from dataclasses import fields

    from agents.context import EvolverContext
    from graphs.runner import RUN_CONTEXT_KEYS, split_context
    from trainer.evolver_round import evolver_context

    cfg = tiny_config(
        tmp_path,
        "harness.langgraph_url=http://127.0.0.1:1",
        "evolver.memory=false",
        "evolver.proposer_model=openai:m",
        "evolver.sample_k=6",
        "evolver.sample_k_max=6",
    )
    sent, kept = split_context(evolver_context(cfg, services_key=None, policy_spec="local:/x"))
    assert set(RUN_CONTEXT_KEYS) <= {f.name for f in fields(EvolverContext)}
    assert set(sent) == {
        "run_dir",
        "memory_location",
        "memory_embedding",
        "policy",
        "services_key",
        "require_approval",
        "probe_budget",
    }
    assert sent["policy"] == "local:/x" and sent["run_dir"] == str(cfg.run_path.resolve())
    assert kept["proposer_model"] == "openai:m" and kept["sample_k"] == 6 and not set(sent) & set(kept)
    assert {
        "attributor_model",
        "critic_model",
        "judge_model",
        "base_url",
        "max_tokens",
        "min_std_gain",
        "max_revisions",
        "interfaces",
    } <= set(kept)
