"""The LLM brains' bounded tool loop (agents/llm.py `ask_with_tools`) against real tools.

Only the chat models are scripted; the tools are `tools.agent_tools.make_tools` over a real
`HarnessStore`, an ephemeral Chroma memory (hash embedding), the real judge and a prompt-driven
frozen policy. Checked: tool calls really run and their results are fed back, hallucinated tool
names / bad or unparseable arguments / too many calls come back as readable error ToolMessages,
the number of rounds is bounded, memory tools respect use_memory, the final answer is the one used
and its raw text recorded, transport failures become the rule fallback (quoting a rejected answer),
a model or server without tool calling answers without tools and says so, and the whole path over
real HTTP (ChatOpenAI against the stub server) inside the evolver graph, with the calls recorded in
the report and the trace table.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from pydantic import Field

from agents import attributor, proposer
from agents.llm import (
    MAX_CALLS_PER_ROUND,
    MAX_RECORD_CHARS,
    MAX_TOOL_RESULT_CHARS,
    ROLE_TOOLS,
    SKIPPED_TOOLS,
    BrainError,
    ToolBox,
    ask_with_tools,
)
from agents.schemas import Attribution
from graphs.evolver import graph
from graphs.nodes import ANSWER
from graphs.trace_html import _decisions
from harness.types import INTERFACES, FailureEvent
from memory.records import ProposalRecord
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run
from tests.support.fakes.fake_chat import FunctionChatModel, ScriptedChatModel, tool_reply
from tests.support.fakes.openai_stub import tool_call
from tools.agent_tools import make_tools

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
ATTRIBUTION = json.dumps(
    {"interface": "criteria", "diagnosis": "the water criterion is stuffed", "confidence": 0.7, "evidence_ids": []}
)


def _policy(prompt: str, i: int) -> str:
    return "water water water water water rest dark" if i % 2 == 0 else HONEST


@pytest.fixture
def run(tmp_path):
    """Real store + ephemeral Chroma memory holding one rejected guidance proposal on med-1."""
    _key, svc = make_run(tmp_path, PromptPolicy(_policy))
    svc.memory.add_proposal(
        ProposalRecord(
            proposal_id="p-old",
            event_id="e-old",
            task_id="med-1",
            step=5,
            failure_type="stuffing",
            interface="guidance",
            outcome="rejected",
            reasons=["gamed rollouts kept their reward"],
            domain="medical",
        )
    )
    return svc


def _ev(etype: str = "stuffing") -> FailureEvent:
    return FailureEvent.model_validate(event("e1", etype, "med-1", criterion_id="water"))


class Recording(ScriptedChatModel):
    """Scripted replies in call order; remembers the messages of every call."""

    seen: list = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _tool_messages(messages) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def test_attributor_runs_real_tools_feeds_back_errors_and_uses_the_final_answer(run):
    two_calls = AIMessage(
        content="",
        tool_calls=[
            {"name": "task_history", "args": {"task_id": "med-1", "last_n": 5}, "id": "c-hist"},
            {"name": "current_harness", "args": {"task_id": "med-1"}, "id": "c-harness"},
        ],
    )
    llm = Recording(
        messages=iter(
            [
                two_calls,
                tool_reply("delete_harness", {"task_id": "med-1"}),  # a tool that does not exist
                tool_reply("task_history", {"last_n": "many"}),  # task_id missing, last_n not an int
                ATTRIBUTION,  # after 3 rounds: the final answer (structured path, plain-JSON fallback)
            ]
        )
    )
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=3)
    att = attributor.llm_attribution(llm, _ev(), {}, list(INTERFACES), toolbox=box)

    assert (att.interface, att.source) == ("criteria", "llm")  # the final answer is the one used
    assert len(llm.seen) == 4  # 3 tool rounds + the final ask, no more
    assert [(c["round"], c["name"], c["error"]) for c in box.calls] == [
        (1, "task_history", False),
        (1, "current_harness", False),
        (2, "delete_harness", True),
        (3, "task_history", True),
    ]
    # The tools really ran: the memory record and the store's rubric came back to the model.
    history = json.loads(box.calls[0]["result"])
    assert [(h["kind"], h["step"]) for h in history] == [("proposals", 5)] and "outcome rejected" in history[0][
        "summary"
    ]
    final = llm.seen[-1]
    fed = {m.tool_call_id: m.content for m in _tool_messages(final)}
    assert '"id":"water"' in fed["c-harness"] and "a-doctor" not in fed["c-harness"]  # audit stays hidden
    errors = [m.content for m in _tool_messages(final) if m.content.startswith("error:")]
    assert "unknown tool 'delete_harness'" in errors[0] and "task_history" in errors[0]
    assert "bad arguments for task_history" in errors[1] and "task_id" in errors[1] and "last_n" in errors[1]
    assert "No more tool calls" in final[-1].content  # the nudge before the forced final answer


@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_the_loop_is_bounded_even_when_the_model_never_stops_calling_tools(run, rounds):
    n_calls = MAX_CALLS_PER_ROUND + 2

    def respond(messages):
        if "No more tool calls" in str(messages[-1].content) or not any(
            m.type == "system" and "tools offered" in m.content for m in messages
        ):
            return ATTRIBUTION
        return AIMessage(
            content="",
            tool_calls=[
                {"name": "current_harness", "args": {"task_id": "med-1"}, "id": f"c{i}"} for i in range(n_calls)
            ],
        )

    llm = FunctionChatModel(respond=respond)
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=rounds)
    out = ask_with_tools(llm, Attribution, "system", "user", box)
    assert out.interface == "criteria"
    assert llm.calls == rounds + 1
    assert len(box.calls) == rounds * n_calls
    not_run = [c for c in box.calls if "not run" in c["result"]]
    assert len(not_run) == rounds * 2 and all(c["error"] for c in not_run)


def test_long_tool_results_are_cut_in_the_conversation_and_the_record(run):
    run.endpoint = PromptPolicy(lambda prompt, i: f"{i} " + "word " * 200)  # 16 x ~600 chars: ~10 KB of JSON
    llm = Recording(messages=iter([tool_reply("sample_policy", {"task_id": "med-1", "n": 16}), ATTRIBUTION]))
    box = ToolBox.for_role("critic", make_tools(run), use_memory=True, max_rounds=2)
    ask_with_tools(llm, Attribution, "s", "u", box)
    (fed,) = _tool_messages(llm.seen[-1])
    assert len(fed.content) < MAX_TOOL_RESULT_CHARS + 60 and fed.content.endswith("more characters cut)")
    assert len(box.calls[0]["result"]) < MAX_RECORD_CHARS + 60 and box.calls[0]["args"] == {"task_id": "med-1", "n": 16}


@pytest.mark.parametrize("role", sorted(ROLE_TOOLS))
@pytest.mark.parametrize("use_memory", [True, False])
def test_role_tools_respect_use_memory_and_nobody_measures(run, role, use_memory):
    box = ToolBox.for_role(role, make_tools(run), use_memory=use_memory, max_rounds=3)
    assert "measure_candidate" not in box.names
    assert box.names == [n for n in ROLE_TOOLS[role] if use_memory or n not in ("task_history", "similar_cases")]


def test_unparseable_tool_arguments_and_tool_not_offered_are_errors_not_crashes(run):
    bad_json = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "current_harness",
                "args": "{task_id: med-1",
                "id": "c-bad",
                "error": "not JSON",
                "type": "invalid_tool_call",
            }
        ],
    )
    llm = Recording(messages=iter([bad_json, tool_reply("task_history", {"task_id": "med-1"}), ATTRIBUTION]))
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=False, max_rounds=3)
    att = attributor.llm_attribution(llm, _ev(), {}, list(INTERFACES), use_memory=False, toolbox=box)
    assert att.source == "llm" and len(llm.seen) == 3  # the third reply has no tool call: it is the answer
    assert [c["error"] for c in box.calls] == [True, True]
    assert "not a valid JSON object" in box.calls[0]["result"]
    assert "unknown tool 'task_history'" in box.calls[1]["result"]  # memory tools are not offered


def test_model_without_tool_binding_goes_straight_to_the_final_answer(run):
    class NoTools(FunctionChatModel):
        def bind_tools(self, tools, **kwargs):
            raise NotImplementedError

    llm = NoTools(respond=lambda messages: ATTRIBUTION)
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=3)
    assert ask_with_tools(llm, Attribution, "s", "u", box).interface == "criteria"
    assert llm.calls == 1
    # The skip is in the record (and so in the trace): one error entry naming why, no tool ran.
    (note,) = box.calls
    assert (note["name"], note["error"], note["round"]) == (SKIPPED_TOOLS, True, 0)
    assert "cannot bind tools" in note["result"] and "cannot bind tools" in box.skipped
    assert box.replies == [{"round": 1, "text": ATTRIBUTION, "used": True}]


def test_timeout_and_a_dead_policy_endpoint_fall_back_to_the_rule_brain(run):
    class Hanging(ScriptedChatModel):
        def _generate(self, *a, **k):
            raise TimeoutError("model did not answer in 60 s")

    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=3)
    att = attributor.llm_attribution(Hanging(messages=iter([])), _ev(), {}, list(INTERFACES), toolbox=box)
    assert att.source == "llm_fallback" and "TimeoutError" in att.notes[-1]

    def down(prompt, i):
        raise ConnectionError("policy endpoint refused the connection")

    run.endpoint = PromptPolicy(down)
    box = ToolBox.for_role("proposer", make_tools(run), use_memory=True, max_rounds=3)
    llm = ScriptedChatModel(messages=iter([tool_reply("sample_policy", {"task_id": "med-1", "n": 2})]))
    prop = proposer.llm_proposal(
        llm, _ev(), Attribution(interface="criteria", diagnosis="d"), run.store.latest(), [], toolbox=box
    )
    assert prop.update is None and "ConnectionError" in prop.error
    with pytest.raises(BrainError, match="ConnectionError"):
        ask_with_tools(
            ScriptedChatModel(messages=iter([tool_reply("sample_policy", {"task_id": "med-1"})])),
            Attribution,
            "s",
            "u",
            ToolBox.for_role("critic", make_tools(run), use_memory=True, max_rounds=2),
        )


# -- real HTTP: ChatOpenAI against the stub, inside the evolver graph --------------------------------------
TIGHT = {
    "type": "all_of",
    "checks": [
        {"type": "contains_any", "phrases": ["water"]},
        {"type": "word_count", "min": 8},
        {"type": "max_repeated_ngram", "n": 1, "max_count": 3},
    ],
}


@pytest.mark.parametrize("use_memory", [True, False])
def test_chat_openai_proposer_calls_tools_over_http_in_the_graph(tmp_path, openai_stub, use_memory):
    key, svc = make_run(tmp_path, PromptPolicy(_policy))
    final = {
        "update": {
            "interface": "criteria",
            "rationale": "stuffing",
            "ops": [{"op": "edit_criterion", "task_id": "med-1", "criterion_id": "water", "check": TIGHT}],
        },
        "rationale": "the water criterion now needs real content",
    }
    openai_stub.script(
        [
            {
                "content": None,
                "tool_calls": [
                    tool_call("current_harness", {"task_id": "med-1"}, "c-harness"),
                    tool_call("score_responses", {"task_id": "med-1", "responses": [HONEST]}, "c-score"),
                ],
            },
            json.dumps(final),
        ]
    )
    out = graph.invoke(
        {"events": [event("e1", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": 10},
        {"configurable": {"thread_id": "t"}},
        context={
            "services_key": key,
            "sample_k": 4,
            "proposer_model": "openai:stub",
            "base_url": openai_stub.base_url,
            "llm_timeout_s": 5,
            "memory": use_memory,
        },
    )
    (report,) = out["reports"]
    assert report["decision"] == "accepted" and report["attempts"][0]["source"] == "llm"
    assert svc.store.latest().task("med-1").criteria[0].check.model_dump(exclude_none=True)["type"] == "all_of"

    first, second = openai_stub.requests
    offered = [t["function"]["name"] for t in first["tools"]]
    memory_tools = ["task_history", "similar_cases"] if use_memory else []
    assert sorted(offered) == sorted(["current_harness", "sample_policy", "score_responses", *memory_tools])
    tool_msgs = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert '"id":"water"' in tool_msgs["c-harness"]
    scored = json.loads(tool_msgs["c-score"])  # the real judge scored the response against the real rubric
    assert scored[0]["verdicts"]["water"]["met"] is True and "audit" not in scored[0]  # the audit stays hidden

    calls = [c for c in report["tool_calls"] if c["name"] != ANSWER]
    assert [(c["agent"], c["revision"], c["name"], c["error"]) for c in calls] == [
        ("proposer", 0, "current_harness", False),
        ("proposer", 0, "score_responses", False),
    ]
    # What the model answered is kept beside its tool calls (the trace shows it).
    answers = [c for c in report["tool_calls"] if c["name"] == ANSWER]
    assert answers and answers[-1]["agent"] == "proposer" and answers[-1]["error"] is False and answers[-1]["result"]
    assert "proposer:current_harness, proposer:score_responses" in _decisions(out)


def test_unparseable_free_answer_is_asked_again_with_structured_output_over_http(run, openai_stub):
    from agents.chat_models import load_chat_model

    openai_stub.script(
        [
            {"content": None, "tool_calls": [tool_call("task_history", {"task_id": "med-1", "last_n": 3}, "c-hist")]},
            "Looking at the history, I would change the rubric.",  # prose, not the JSON object
            json.loads(ATTRIBUTION),
        ]
    )
    llm = load_chat_model("openai:stub", base_url=openai_stub.base_url, timeout_s=5)
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=3)
    att = attributor.llm_attribution(llm, _ev(), {}, list(INTERFACES), toolbox=box)
    assert (att.interface, att.source) == ("criteria", "llm")
    first, second, third = openai_stub.requests
    assert "tools" in first and "response_format" not in first and "tools" in second
    history = next(m["content"] for m in second["messages"] if m["role"] == "tool")
    assert "outcome rejected" in history  # the real memory record reached the model over the wire
    assert third["response_format"]["type"] == "json_schema" and "tools" not in third
    assert [m["role"] for m in third["messages"]][-2:] == ["assistant", "user"]


# -- a server without tool calling, and what the model said ----------------------------------------------
NO_TOOL_CALLING = (
    '{"error": {"message": "\\"auto\\" tool choice requires --enable-auto-tool-choice and '
    '--tool-call-parser to be set", "type": "BadRequestError", "code": 400}}'
)


def test_a_server_without_tool_calling_is_answered_without_tools_and_the_skip_recorded(run, openai_stub):
    from agents.chat_models import load_chat_model

    openai_stub.fail_next(status=400, body=NO_TOOL_CALLING)
    openai_stub.script([json.loads(ATTRIBUTION)])
    llm = load_chat_model("openai:stub", base_url=openai_stub.base_url, timeout_s=5)
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=3)
    att = attributor.llm_attribution(llm, _ev(), {}, list(INTERFACES), toolbox=box)
    assert (att.interface, att.source) == ("criteria", "llm")
    (answered,) = openai_stub.requests  # the stub records the requests it answered (not the refused one)
    assert "tools" not in answered and answered["response_format"]["type"] == "json_schema"
    (note,) = box.calls
    assert note["name"] == SKIPPED_TOOLS and note["error"]
    assert (
        note["result"].startswith("tools skipped: server has no tool calling")
        and "enable-auto-tool-choice" in note["result"]
    )
    assert [(r["round"], r["used"]) for r in box.replies] == [(1, True)] and '"criteria"' in box.replies[0]["text"]


def test_other_bad_requests_are_not_mistaken_for_missing_tool_calling(run, openai_stub):
    from agents.chat_models import load_chat_model

    openai_stub.fail_next(status=400, body='{"error": {"message": "maximum context length is 512 tokens"}}')
    llm = load_chat_model("openai:stub", base_url=openai_stub.base_url, timeout_s=5)
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=3)
    att = attributor.llm_attribution(llm, _ev(), {}, list(INTERFACES), toolbox=box)
    assert att.source == "llm_fallback" and "maximum context length" in att.notes[-1]
    assert box.calls == [] and box.skipped is None


def test_every_answer_is_recorded_and_a_rejected_one_is_quoted_in_the_fallback(run):
    prose = "I think the criteria interface, because the water check is stuffed."
    bad = '{"interface": "nowhere", "diagnosis": "d"}'
    llm = Recording(messages=iter([tool_reply("task_history", {"task_id": "med-1"}), prose, bad]))
    box = ToolBox.for_role("attributor", make_tools(run), use_memory=True, max_rounds=3)
    att = attributor.llm_attribution(llm, _ev(), {}, list(INTERFACES), toolbox=box)
    # The free prose (round 2) did not parse; the forced structured answer (round 3) was invalid: rule fallback.
    assert att.source == "llm_fallback"
    assert box.replies == [{"round": 2, "text": prose, "used": False}, {"round": 3, "text": bad, "used": False}]
    assert "the model said: " in att.notes[-1] and "nowhere" in att.notes[-1]  # what it answered reaches the trace


def test_a_schema_the_server_cannot_compile_is_asked_again_as_any_json_object(openai_stub):
    from agents.chat_models import load_chat_model
    from agents.llm import ask_structured

    refused = '{"error": {"message": "Grammar error: circular references with sibling keys are not supported"}}'
    openai_stub.fail_next(status=400, body=refused)
    openai_stub.script([json.loads(ATTRIBUTION)])
    llm = load_chat_model("openai:stub", base_url=openai_stub.base_url, timeout_s=5)
    assert ask_structured(llm, Attribution, "s", "u").interface == "criteria"
    (answered,) = openai_stub.requests
    assert answered["response_format"] == {"type": "json_object"}
