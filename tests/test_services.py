"""The live-services registry of evolver runs (`graphs/services.py`): registration, building from plain
settings over real HTTP, policy specs, and the sampling numbers the agents' tools share with the critic.

Real components: `HarnessStore` on a tmp folder, `TrainingMemory` (ephemeral Chroma, hash embedding),
`OpenAIEndpoint` against the stdlib OpenAI stub.
"""

from __future__ import annotations

import json

import pytest

from agents.context import EvolverContext
from graphs.services import (
    get_services,
    live_services,
    parse_policy,
    register_services,
    services_from_settings,
    unregister_services,
)
from harness.detector import DetectorConfig
from harness.store import HarnessStore
from tests.support.fakes.fake_chat import FunctionChatModel, ScriptedPolicy
from tests.support.services_factories import mixed_answers as _mixed
from tests.support.services_factories import tool_state as _state
from tests.support.services_factories import tools_by_name as _tools
from tools.judge import Judge

SAMPLING = ("max_tokens", "temperature", "seed")


def test_register_and_get_services(services):
    register_services("run-x", services)
    try:
        assert get_services("run-x") is services
        assert get_services({"services_key": "run-x", "run_dir": "ignored"}) is services
    finally:
        unregister_services("run-x")
    with pytest.raises(KeyError, match="no services registered under 'run-x'"):
        get_services("run-x")


def test_services_from_settings_over_real_http(tmp_path, openai_stub):
    HarnessStore(tmp_path / "harness").init(_state())
    openai_stub.responder = lambda req: "water and rest"
    ctx = {
        "run_dir": str(tmp_path),
        "memory": "none",
        "policy": f"openai:{openai_stub.base_url}#stub",
        "judge_model": "rules",
        "sample_k": 3,
        "max_tokens": 8,
        "seed": 1,
        "critic_model": "rules",
    }
    s = get_services(ctx)
    assert get_services(dict(ctx)) is s  # built once per settings
    assert (s.max_tokens, s.seed, s.memory) == (8, 1, None)
    out = json.loads(_tools(s)["sample_policy"].invoke({"task_id": "a", "n": 2}))
    assert out == ["water and rest", "water and rest"]
    assert openai_stub.requests[-1]["n"] == 2


def test_services_from_settings_judge_model_needs_a_factory(tmp_path):
    HarnessStore(tmp_path / "harness").init(_state())
    kw = {"run_dir": str(tmp_path), "policy": "openai:http://127.0.0.1:9/v1#m", "judge_model": "openai:judge"}
    with pytest.raises(ValueError, match="chat_model_factory"):
        services_from_settings(**kw)
    seen = {}

    def factory(spec, base_url=None, api_key_env=None):
        seen.update(spec=spec, base_url=base_url)
        return FunctionChatModel(respond=lambda m: "yes")

    s = services_from_settings(**kw, base_url="http://judge/v1", chat_model_factory=factory)
    assert seen == {"spec": "openai:judge", "base_url": "http://judge/v1"} and s.judge.llm is not None


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("local", "only available in process"),
        ("local:/no/such/folder", "does not exist"),
        ("openai:http://x/v1", "openai:<base_url>#<model>"),
        ("vllm:foo", "expected openai"),
        ("", "expected openai"),
    ],
)
def test_bad_policy_specs(spec, needle):
    with pytest.raises(ValueError, match=needle):
        parse_policy(spec)


def test_services_need_an_initialised_store_and_required_settings(tmp_path):
    with pytest.raises(FileNotFoundError, match="no harness versions"):
        services_from_settings(run_dir=str(tmp_path), policy="openai:http://127.0.0.1:9/v1#m")
    with pytest.raises(ValueError, match="policy"):
        get_services({"run_dir": str(tmp_path), "policy": ""})


def test_live_services_sample_like_the_context(tmp_path):
    """The agents' tools and the critic draw rollouts with the same numbers (the seed used to be 0 for tools)."""
    store = HarnessStore(tmp_path / "harness")
    store.init(_state())
    ctx = EvolverContext(sample_k=3, max_tokens=9, temperature=0.7, seed=11)
    policy = ScriptedPolicy(_mixed)
    svc = live_services(
        ctx, store=store, endpoint=policy, judge=Judge(None), memory=None, detector_config=DetectorConfig()
    )
    assert {k: getattr(svc, k) for k in SAMPLING} == {k: getattr(ctx, k) for k in SAMPLING}
    _tools(svc)["sample_policy"].invoke({"task_id": "a", "n": 2})
    assert policy.calls[-1]["seed"] == ctx.seed == 11


def test_services_from_context_settings_sample_like_the_context(tmp_path):
    HarnessStore(tmp_path / "harness").init(_state())
    ctx = EvolverContext(
        run_dir=str(tmp_path),
        policy="openai:http://127.0.0.1:9/v1#m",
        sample_k=3,
        max_tokens=9,
        temperature=0.7,
        seed=11,
    )
    svc = get_services(ctx.to_dict())
    assert {k: getattr(svc, k) for k in SAMPLING} == {k: getattr(ctx, k) for k in SAMPLING}


def test_graphs_services_import_is_light():
    import subprocess
    import sys

    code = (
        "import sys, graphs.services; "
        "bad = [m for m in ('torch', 'chromadb', 'transformers', 'trl') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
