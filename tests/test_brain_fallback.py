"""LLM brains fall back to rules, visibly (issue 20 item 3): an LLM attributor, proposer or critic that cannot answer
validly after its retries hands that decision to its rule brain; the graph's report (the trace's state),
rounds.jsonl (`graphs.round_record.summarize`), the console (`trainer.progress.round_lines`) and the report
(`trainer.report.summary`) say which brain made each decision.

Real graph, store, memory, judge and HTTP (the OpenAI stub answers every LLM call with text that is no JSON); the
frozen policy is the scripted `PromptPolicy`.
"""

from __future__ import annotations

import json

import pytest

from agents.context import EvolverContext
from agents.proposer import llm_proposal
from agents.schemas import Attribution, Proposal
from graphs.round_record import RoundRecord, summarize
from graphs.runner import run_in_process
from harness.types import FailureEvent
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run
from trainer.progress import brain_line, round_lines
from trainer.report import summary, summary_sentences

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."


def _stuffing(prompt, i):
    return "water water water water water rest dark" if i % 2 == 0 else HONEST


def _round(tmp_path, stub, **models):
    key, svc = make_run(tmp_path, PromptPolicy(_stuffing))
    ctx = EvolverContext(
        services_key=key,
        sample_k=4,
        base_url=stub.base_url,
        max_tool_rounds=0,
        max_revisions=0,
        llm_timeout_s=10,
        **models,
    )
    inp = {"events": [event("e1", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": 10}
    return run_in_process(inp, ctx, tmp_path / "evolver.sqlite", "fallback"), svc


def test_failing_llm_brains_hand_each_decision_to_the_rules(tmp_path, openai_stub):
    openai_stub.responder = lambda request: "I would rather not answer in JSON."
    llm = "openai:stub"
    out, svc = _round(tmp_path, openai_stub, attributor_model=llm, proposer_model=llm, critic_model=llm)
    (report,) = out["reports"]
    att, (attempt,) = report["attribution"], report["attempts"]
    # Every role asked the LLM, got nothing valid, and the rule brain decided instead.
    assert att["source"] == "llm_fallback"
    assert attempt["source"] == "llm_fallback" and attempt["template"] != "llm" and attempt["update"] is not None
    assert "LLM proposer failed" in attempt["llm_error"]
    assert attempt["critic_source"] == "llm_fallback" and attempt["critique"]["review"].startswith("LLM review failed")
    # So the round still repairs the harness as the rule brains would (the measured verdict decides).
    assert report["decision"] == "accepted" and svc.store.latest().version == 1
    assert sum("response_format" in r for r in openai_stub.requests) >= 3  # the three brains did ask

    record = RoundRecord(step=10, **summarize(out))
    slim = record.reports[0]
    assert slim.brains.attributor == "llm_fallback"
    assert slim.brains.proposer == ["llm_fallback"] and slim.brains.critic == ["llm_fallback"]
    assert any("LLM proposer failed" in e for e in slim.brains.llm_errors)
    lines = round_lines(10, record, 0, 1, 1.0, 1)
    assert any(
        line.strip().startswith(
            "brains: attributor rules (LLM failed), proposer rules (LLM failed), critic rules (LLM failed)"
        )
        for line in lines
    ), lines

    s = summary({"rounds": [record], "updates": [], "events": [], "metrics": []})
    assert s["brains"] == {
        "attributor": {"llm_fallback": 1},
        "proposer": {"llm_fallback": 1},
        "critic": {"llm_fallback": 1},
    }
    assert any(
        line.startswith("Decisions by brain: attributor 1 by rules after the LLM failed")
        for line in summary_sentences(s)
    )


def test_rule_brains_are_named_as_such_and_the_console_stays_quiet(tmp_path, openai_stub):
    out, _ = _round(tmp_path, openai_stub)
    record = RoundRecord(step=10, **summarize(out))
    assert record.dump()["reports"][0]["brains"] == {
        "attributor": "rules",
        "proposer": ["rules"],
        "critic": ["rules"],
        "llm_errors": [],
    }
    assert not any("brains:" in line for line in round_lines(10, record, 0, 1, 1.0, 1))
    assert summary({"rounds": [record], "updates": [], "events": [], "metrics": []})["brains"] == {
        "attributor": {"rules": 1},
        "proposer": {"rules": 1},
        "critic": {"rules": 1},
    }


def test_a_working_llm_is_named_llm(tmp_path, openai_stub):
    tight = {
        "type": "all_of",
        "checks": [
            {"type": "contains_any", "phrases": ["water"]},
            {"type": "word_count", "min": 8},
            {"type": "max_repeated_ngram", "n": 1, "max_count": 3},
        ],
    }
    openai_stub.responder = lambda request: json.dumps(
        {
            "update": {
                "interface": "criteria",
                "ops": [{"op": "edit_criterion", "task_id": "med-1", "criterion_id": "water", "check": tight}],
            },
            "rationale": "x",
        }
    )
    out, _ = _round(tmp_path, openai_stub, proposer_model="openai:stub")
    slim = summarize(out)["reports"][0]
    assert slim.brains.proposer == ["llm"] and slim.brains.llm_errors == []
    assert brain_line(slim.brains) == "attributor rules, proposer LLM, critic rules"


class _Broken:
    """A chat model stand-in whose every call fails like a server that is down."""

    def bind_tools(self, *a, **k):
        return self

    def with_structured_output(self, *a, **k):
        return self

    def invoke(self, *a, **k):
        raise ConnectionError("server down")


@pytest.mark.parametrize("with_fallback", [True, False])
def test_llm_proposal_uses_the_fallback_only_when_given(with_fallback):
    from harness.types import HarnessState
    from tests.support.fakes.evolver_fakes import suite

    ev = FailureEvent.model_validate(event("e1", "stuffing", "med-1", criterion_id="water"))
    att = Attribution(interface="criteria", diagnosis="d")
    rules = Proposal(update=None, template="rules-template", error="no template left")
    got = llm_proposal(
        _Broken(), ev, att, HarnessState.from_tasks(suite()), [], fallback=(lambda: rules) if with_fallback else None
    )
    if with_fallback:
        assert (got.source, got.template) == ("llm_fallback", "rules-template") and "server down" in got.llm_error
    else:
        assert (got.source, got.update, got.llm_error) == ("llm", None, None) and "server down" in got.error
