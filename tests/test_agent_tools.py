"""Agent tools: closed-over infrastructure, readable errors, real store/memory/HTTP.

Real components: `HarnessStore` on a tmp folder, `TrainingMemory` (ephemeral Chroma, hash embedding),
`OpenAIEndpoint` against the stdlib OpenAI stub, LangGraph's `ToolNode`. The policy in most tests is a
scripted fake LLM (the `services` fixture: tests/services_factories.py).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from harness.types import FailureEvent, HarnessUpdate
from memory.records import EventRecord, ProposalRecord
from tests.support.fakes.fake_chat import FunctionChatModel
from tests.support.services_factories import tools_by_name as _tools
from tools.agent_tools import make_tools
from tools.judge import Judge

INFRA = {"store", "endpoint", "judge", "memory", "services", "step", "state", "detector_config"}
EXPECTED_ARGS = {
    "task_history": {"task_id", "last_n"},
    "similar_cases": {"query", "failure_type", "interface", "k"},
    "current_harness": {"task_id"},
    "sample_policy": {"task_id", "n"},
    "score_responses": {"task_id", "responses"},
}


def test_tool_schemas_hide_infrastructure(services):
    tools = _tools(services)
    assert set(tools) == set(EXPECTED_ARGS)
    for name, tool in tools.items():
        props = set(tool.tool_call_schema.model_json_schema()["properties"])
        assert props == EXPECTED_ARGS[name], name
        assert not props & INFRA
        assert len(tool.description) > 80  # written for an LLM: says what it returns and when to use it


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("task_history", {"task_id": "nope"}),
        ("current_harness", {"task_id": "nope"}),
        ("sample_policy", {"task_id": "nope"}),
        ("score_responses", {"task_id": "nope", "responses": ["x"]}),
    ],
)
def test_unknown_task_id_is_a_readable_error(services, name, args):
    out = _tools(services)[name].invoke(args)
    assert out.startswith("error: unknown task id 'nope'") and "a, b" in out


def test_current_harness_shows_training_view_not_hidden_parts(services):
    view = json.loads(_tools(services)["current_harness"].invoke({"task_id": "a"}))
    assert [c["id"] for c in view["criteria"]] == ["water", "txt"]
    assert (
        view["sampling"] == {"weight": 1.0, "status": "active", "quarantined_until": None}
        and view["harness_version"] == 0
    )
    text = json.dumps(view)
    assert "doctor" not in text and "two glasses" not in text  # audit criteria and reference stay hidden
    assert view["has_reference_answer"] is True


def test_sample_policy_uses_current_hints_and_clamps_n(services):
    services.store.commit(
        HarnessUpdate.model_validate(
            {
                "interface": "guidance",
                "ops": [{"op": "add_hint", "task_id": "a", "hint": {"id": "h", "text": "Think."}}],
            }
        )
    )
    out = json.loads(_tools(services)["sample_policy"].invoke({"task_id": "a", "n": 100}))
    assert len(out) == 16
    call = services.endpoint.calls[-1]
    assert call["n"] == 16 and call["seed"] == 5 and "Hint: Think." in call["batch"][0][-1]["content"]


def test_score_responses_sync_and_async(services):
    tool = _tools(services)["score_responses"]
    out = json.loads(tool.invoke({"task_id": "a", "responses": ["water, see a doctor", "nothing"]}))
    assert [r["score"] for r in out] == [1.0, 0.0] and all(set(r) == {"response", "score", "verdicts"} for r in out)
    assert out[0]["verdicts"]["txt"]["source"] == "skipped"
    aout = json.loads(asyncio.run(tool.ainvoke({"task_id": "a", "responses": ["water"]})))
    assert aout[0]["score"] == 1.0
    assert tool.invoke({"task_id": "a", "responses": []}).startswith("error:")


def test_score_responses_with_llm_judge(services):
    services.judge = Judge(FunctionChatModel(respond=lambda m: '{"met": true, "reason": "fine"}'))
    out = json.loads(_tools(services)["score_responses"].invoke({"task_id": "a", "responses": ["nothing"]}))
    assert out[0]["verdicts"]["txt"] == {"met": True, "source": "llm", "reason": "fine"}
    assert out[0]["score"] == pytest.approx(2 / 7, abs=1e-4)


def test_memory_tools(services):
    ev = FailureEvent(id="e1", type="collapse_low", task_id="a", step=2, stats={"mean": 0.0})
    services.memory.add_event(EventRecord(event=ev, domain="medical"))
    services.memory.add_proposal(
        ProposalRecord(
            proposal_id="p1",
            event_id="e0",
            task_id="b",
            failure_type="collapse_low",
            interface="guidance",
            update=HarnessUpdate.model_validate(
                {
                    "interface": "guidance",
                    "ops": [{"op": "add_hint", "task_id": "b", "hint": {"id": "h", "text": "Mention hydration."}}],
                }
            ),
            outcome="accepted",
            deltas={"std": 0.3},
            step=1,
        )
    )
    tools = _tools(services)
    hist = json.loads(tools["task_history"].invoke({"task_id": "a", "last_n": 5}))
    assert (
        hist == [{"kind": "events", "step": 2, "summary": hist[0]["summary"]}] and "collapse_low" in hist[0]["summary"]
    )
    cases = json.loads(
        tools["similar_cases"].invoke({"query": "collapse_low all zero", "failure_type": "collapse_low"})
    )
    assert cases[0]["task_id"] == "b" and cases[0]["outcome"] == "accepted" and cases[0]["deltas"] == {"std": 0.3}
    assert json.loads(tools["similar_cases"].invoke({"query": "x", "interface": "criteria"})) == []


def test_memory_disabled_is_a_readable_error(services):
    services.memory = None
    tools = _tools(services)
    assert tools["task_history"].invoke({"task_id": "a"}).startswith("error: training memory is disabled")
    assert tools["similar_cases"].invoke({"query": "x"}).startswith("error: training memory is disabled")


def test_tools_run_in_a_langgraph_tool_node(services):
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(make_tools(services)))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    call = AIMessage(
        content="",
        tool_calls=[
            {"name": "current_harness", "args": {"task_id": "b"}, "id": "c1"},
            {"name": "score_responses", "args": {"task_id": "a", "responses": ["water"]}, "id": "c2"},
        ],
    )
    out = asyncio.run(graph.ainvoke({"messages": [call]}))["messages"][1:]
    assert json.loads(out[0].content)["task_id"] == "b"
    assert json.loads(out[1].content)[0]["score"] == 1.0  # the async path of a tool with a coroutine


def test_measure_package_import_is_light():
    import subprocess
    import sys

    code = (
        "import sys, tools, tools.judge, tools.candidate, tools.agent_tools; "
        "bad = [m for m in ('torch', 'chromadb', 'transformers', 'trl') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
