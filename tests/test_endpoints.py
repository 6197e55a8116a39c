"""Frozen-policy endpoints: OpenAIEndpoint over real HTTP (stub server) and LocalEndpoint on the tiny model."""

from __future__ import annotations

import json
import socket
import sys
import time

import pytest

from tools.endpoint import EndpointError, PolicyEndpoint
from tools.openai_endpoint import OpenAIEndpoint

CONV = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def endpoint(openai_stub):
    ep = OpenAIEndpoint(openai_stub.base_url, model="stub", timeout=2.0, retries=2, backoff=0.05)
    yield ep
    ep.close()


# ------------------------------------------------------------------------------ OpenAIEndpoint


def test_import_measure_does_not_import_torch():
    # `import tools.local_endpoint` must stay light: torch is imported inside the constructor only.
    import subprocess

    code = (
        "import tools, tools.endpoint, tools.openai_endpoint, tools.local_endpoint, sys; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_openai_endpoint_is_a_policy_endpoint(endpoint):
    assert isinstance(endpoint, PolicyEndpoint)
    assert endpoint.name == f"openai:stub@{endpoint.root}"


@pytest.mark.parametrize("base_suffix", ["", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(openai_stub, base_suffix):
    with OpenAIEndpoint(openai_stub.url + base_suffix, model="stub", timeout=2.0) as ep:
        assert ep.models() == ["stub"]


def test_sample_n_per_conversation_in_order(endpoint, openai_stub):
    # Each request gets its n choices from a responder that echoes the prompt, so order is checkable.
    openai_stub.responder = lambda req: f"answer to {req['messages'][-1]['content']}"
    batch = [[{"role": "user", "content": f"q{i}"}] for i in range(5)]
    out = endpoint.sample(batch, n=3, max_tokens=16, temperature=0.7, seed=100)
    assert out == [[f"answer to q{i}"] * 3 for i in range(5)]
    sent = sorted(openai_stub.requests, key=lambda r: r["seed"])
    assert [r["seed"] for r in sent] == [100, 101, 102, 103, 104]
    assert {(r["n"], r["max_tokens"], r["temperature"], r["model"]) for r in sent} == {(3, 16, 0.7, "stub")}


def test_sample_without_seed_sends_none(endpoint, openai_stub):
    openai_stub.script(["a", "b"])
    assert endpoint.sample([CONV], n=2) == [["a", "b"]]
    assert "seed" not in openai_stub.requests[0]


def test_model_override_and_with_model_hit_that_name(endpoint, openai_stub):
    endpoint.sample([CONV], model="step-3")
    adapter = endpoint.with_model("step-4")
    adapter.sample([CONV])
    endpoint.sample([CONV])
    assert [r["model"] for r in openai_stub.requests] == ["step-3", "step-4", "stub"]
    adapter.close()  # a view on the same pool: closing it closes the original too
    with pytest.raises(RuntimeError):
        endpoint.sample([CONV])


def test_retries_on_500_then_succeeds(endpoint, openai_stub):
    openai_stub.fail_next(status=500, times=2)
    openai_stub.script(["finally"])
    assert endpoint.sample([CONV]) == [["finally"]]


def test_gives_up_after_bounded_retries_on_500(endpoint, openai_stub):
    openai_stub.fail_next(status=503, times=3)
    with pytest.raises(EndpointError, match=r"failed after 3 attempts: HTTP 503"):
        endpoint.sample([CONV])
    assert openai_stub.requests == []  # all three attempts were answered by the failure queue


def test_4xx_is_not_retried(endpoint, openai_stub):
    openai_stub.fail_next(status=404, times=1, body='{"error": "The model `x` does not exist."}')
    openai_stub.script(["would succeed on retry"])
    with pytest.raises(EndpointError, match=r"HTTP 404.*does not exist"):
        endpoint.sample([CONV])
    assert openai_stub.pending_replies == 1


def test_malformed_json_raises_endpoint_error(endpoint, openai_stub):
    openai_stub.malformed_next()
    with pytest.raises(EndpointError, match="not valid JSON"):
        endpoint.sample([CONV])


@pytest.mark.parametrize(
    "reply, match",
    [
        ({"choices": "nope"}, "no choices"),
        ({"object": "chat.completion"}, "no choices"),
    ],
)
def test_wrong_shape_raises_endpoint_error(endpoint, openai_stub, reply, match):
    openai_stub.fail_next(status=200, body=json.dumps(reply))
    with pytest.raises(EndpointError, match=match):
        endpoint.sample([CONV])


def test_wrong_number_of_choices(endpoint, openai_stub):
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "only one"}}]}
    openai_stub.fail_next(status=200, body=json.dumps(body))
    with pytest.raises(EndpointError, match="asked for n=2 completions, got 1"):
        endpoint.sample([CONV], n=2)


def test_hanging_server_errors_within_bound(openai_stub):
    openai_stub.delay = 30.0
    ep = OpenAIEndpoint(openai_stub.base_url, model="stub", timeout=0.5, retries=1, backoff=0.1)
    t0 = time.monotonic()
    with pytest.raises(EndpointError, match=r"failed after 2 attempts: no complete reply within 0.5 s"):
        ep.sample([CONV, CONV])
    # Bound: timeout * (retries + 1) + backoff, with generous slack for a loaded CI box; far below the 30 s hang.
    assert time.monotonic() - t0 < 5.0
    ep.close()


def test_connection_refused_is_a_clear_error():
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ep = OpenAIEndpoint(f"http://127.0.0.1:{port}/v1", model="m", timeout=1.0, retries=1, backoff=0.01)
    with pytest.raises(EndpointError, match=r"cannot connect .*is the server running at http://127.0.0.1"):
        ep.sample([CONV])
    with pytest.raises(EndpointError, match="cannot connect"):
        ep.models()


@pytest.mark.parametrize(
    "batch, kwargs, match",
    [
        ([], {"n": 0}, "n must be"),
        ([[]], {}, r"messages_batch\[0\] must be a non-empty list"),
        ([[{"role": "user"}]], {}, r"messages_batch\[0\]\[0\]"),
        ([CONV], {"max_tokens": 0}, "max_tokens"),
        ([CONV], {"temperature": -1.0}, "temperature"),
    ],
)
def test_bad_requests_are_rejected_before_sending(endpoint, openai_stub, batch, kwargs, match):
    with pytest.raises(ValueError, match=match):
        endpoint.sample(batch, **kwargs)
    assert openai_stub.requests == []


def test_lora_adapter_load_sample_unload(endpoint, openai_stub, tmp_path):
    adapter = tmp_path / "step-10"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    endpoint.load_lora_adapter("step-10", adapter)
    assert openai_stub.lora_adapters == {"step-10": str(adapter.resolve())}
    assert endpoint.models() == ["stub", "step-10"]
    with pytest.raises(EndpointError, match="HTTP 400.*already been loaded"):
        endpoint.load_lora_adapter("step-10", adapter)
    endpoint.load_lora_adapter("step-10", adapter, load_inplace=True)
    endpoint.unload_lora_adapter("step-10")
    assert endpoint.models() == ["stub"]


def test_lora_adapter_folder_must_exist(endpoint, tmp_path):
    with pytest.raises(EndpointError, match="no adapter_config.json"):
        endpoint.load_lora_adapter("step-1", tmp_path / "missing")


def test_stub_works_with_chat_openai_structured_output_and_tools(openai_stub):
    # The judge and the LLM brains talk to the stub through ChatOpenAI; check the paths they use.
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    from tests.support.fakes.openai_stub import tool_call

    class Verdict(BaseModel):
        met: bool
        reason: str

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    llm = ChatOpenAI(base_url=openai_stub.base_url, api_key="x", model="stub", max_retries=0, timeout=5)
    openai_stub.script(
        [
            "plain",
            {"met": True, "reason": "cites the dose"},
            {"content": None, "tool_calls": [tool_call("add", {"a": 2, "b": 3})]},
        ]
    )
    assert llm.invoke("hi").content == "plain"
    assert llm.with_structured_output(Verdict).invoke("judge") == Verdict(met=True, reason="cites the dose")
    assert openai_stub.requests[1]["response_format"]["type"] == "json_schema"
    msg = llm.bind_tools([add]).invoke("add 2 and 3")
    assert msg.tool_calls[0]["name"] == "add" and msg.tool_calls[0]["args"] == {"a": 2, "b": 3}
    openai_stub.script(["streamed text"])
    assert "".join(c.content for c in llm.stream("s")) == "streamed text"


# ------------------------------------------------------------------------------ LocalEndpoint


@pytest.fixture(scope="module")
def local(tiny_model_dir):
    import torch

    torch.set_num_threads(1)
    from tools.local_endpoint import LocalEndpoint

    return LocalEndpoint.from_path(tiny_model_dir)


def test_local_endpoint_shapes(local):
    assert isinstance(local, PolicyEndpoint)
    batch = [CONV, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}], CONV]
    out = local.sample(batch, n=4, max_tokens=8, temperature=1.0, seed=0)
    assert len(out) == 3 and all(len(group) == 4 for group in out)
    assert all(isinstance(t, str) for group in out for t in group)
    # Random weights + 8 sampled tokens: the 4 samples of one prompt are not all the same.
    assert len(set(out[0])) > 1


def test_local_endpoint_seeded_determinism(local):
    import torch

    batch = [CONV, [{"role": "user", "content": "Another prompt"}]]
    a = local.sample(batch, n=3, max_tokens=8, temperature=1.0, seed=7)
    state = torch.random.get_rng_state()
    b = local.sample(batch, n=3, max_tokens=8, temperature=1.0, seed=7)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG stream is untouched
    c = local.sample(batch, n=3, max_tokens=8, temperature=1.0, seed=8)
    assert a == b
    assert a != c


def test_local_endpoint_greedy_is_stable(local):
    batch = [CONV, [{"role": "user", "content": "Greedy please"}]]
    a = local.sample(batch, n=2, max_tokens=10, temperature=0.0, seed=1)
    b = local.sample(batch, n=2, max_tokens=10, temperature=0.0, seed=99)
    assert a == b
    assert all(group[0] == group[1] for group in a)


def test_local_endpoint_batching_matches_one_by_one(local, tiny_model_dir):
    # Left padding must not change greedy outputs: a batch equals prompts sampled alone.
    batch = [CONV, [{"role": "user", "content": "A much longer prompt with many more words in it than the first"}]]
    together = local.sample(batch, n=1, max_tokens=8, temperature=0.0)
    alone = [local.sample([conv], n=1, max_tokens=8, temperature=0.0)[0] for conv in batch]
    assert together == alone


def test_local_endpoint_peft_model_restores_train_mode(tiny_model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tools.local_endpoint import LocalEndpoint

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    model.train()
    ep = LocalEndpoint(model, tok)
    out = ep.sample([CONV], n=2, max_tokens=6, temperature=1.0, seed=3)
    assert len(out) == 1 and len(out[0]) == 2
    assert model.training  # the trainer's mode is restored
    assert all(p.grad is None for p in model.parameters())  # no_grad: nothing accumulated
