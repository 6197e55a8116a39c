"""Calling a brain LLM for a pydantic answer, optionally after a bounded loop of tool calls.

`ask_structured` asks through `with_structured_output(<the schema as JSON schema>, include_raw=True)`, the
schema in the form a server's guided decoding compiles (`agents.schemas.guided_schema`: no recursive definition,
no pattern beside length bounds)
(ChatOpenAI sends it as `response_format={"type": "json_schema"}`, which vLLM's OpenAI server decodes
with guided decoding, so even a small model answers a schema-valid object; models that bind tools
answer with a tool call) and validates the decoded dict with pydantic itself. The JSON-schema dict, not
the pydantic class, is passed on purpose: with the class, ChatOpenAI parses inside the client and a bad
answer raises before we can see the raw text. When the model cannot do structured output
(NotImplementedError) or its answer does not decode, the raw text goes through
`agents.schemas.parse_json_output`; when the server still refuses the schema
(`agents.chat_models.guided_schema_refused`, e.g. another backend's unsupported keyword), the answer is asked for in
JSON-object mode and validated here. What the model said
is kept: each answer's raw text goes into `ToolBox.replies` (round, text, whether it was used), and a
`BrainError` quotes the raw answer it rejected (also one cut at the token limit), so the calling
agent's fallback record (and with it the trace) says what the model answered.

`ask_with_tools` first lets the model call the memory/policy tools of its role (`ToolBox`, built from
`tools.agent_tools.make_tools`) for at most `max_rounds` turns:

- each turn the model (with the tools bound) either calls tools or answers; an answer without tool
  calls that parses as the schema is the final answer (no second call for a model that answered);
- tool calls run by name with the tool validating its own arguments; an unknown tool, bad or
  unparseable arguments, or too many calls in one turn become a `ToolMessage` with a readable error
  the model can act on, never an exception; results are cut to `MAX_TOOL_RESULT_CHARS`;
- when the rounds are used up, or the model's free answer does not parse, the final answer is
  forced through the structured path on the whole conversation (guided decoding on vLLM, plain-JSON
  fallback);
- a model that cannot bind tools (NotImplementedError), or a server that says it has no tool calling
  on the first turn (vLLM without `--enable-auto-tool-choice`, `agents.chat_models.tool_calling_unsupported`),
  goes straight to `ask_structured`, and the skip is recorded as a `(tools skipped)` entry in
  `ToolBox.calls` with the reason, so the trace says the agent answered without its tools.

Every call is recorded on the `ToolBox` (round, name, args, truncated result, error flag) so the
graph can put it in the lane state, the trace and Studio. Any failure of the model or of the
infrastructure behind a tool (timeout, transport error, malformed or invalid output) surfaces as
`BrainError`, so the calling agent records it and falls back to its rule brain: an LLM that times
out or answers garbage never reaches the harness.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ValidationError

from agents import prompts
from agents.chat_models import LLM_ERRORS, cut_answer, guided_schema_refused, tool_calling_unsupported
from agents.schemas import guided_schema, parse_json_output, validate_output

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

# Bounds on what tool use adds to a conversation: a few KB per result, a handful of calls per turn.
MAX_TOOL_RESULT_CHARS = 4000
MAX_CALLS_PER_ROUND = 6
MAX_RECORD_CHARS = 600  # per result / args / reply in the recorded trace (state, checkpoints, Studio)
MAX_SAID_CHARS = 300  # of a rejected raw answer quoted in a BrainError (it reaches the fallback's record)
SKIPPED_TOOLS = "(tools skipped)"  # the `ToolBox.calls` entry saying the agent answered without its tools

# Tools each role may call. None measures a candidate (`tools.agent_tools` has no such tool): the graph's
# critique node runs the measurement itself, so no LLM can produce (or fake) the numbers a candidate is accepted on.
ROLE_TOOLS: dict[str, tuple[str, ...]] = {
    "attributor": ("task_history", "similar_cases", "current_harness"),
    "proposer": ("current_harness", "task_history", "similar_cases", "sample_policy", "score_responses"),
    "critic": ("sample_policy", "score_responses"),
}
MEMORY_TOOLS = frozenset({"task_history", "similar_cases"})


class BrainError(RuntimeError):
    """A brain LLM produced no usable answer (timeout, transport error, malformed or invalid output)."""


def _text(message: object) -> str:
    if isinstance(message, AIMessage):
        return message.text
    return str(message)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters cut)"


@dataclass
class ToolBox:
    """The tools one agent may call in one node run, the round limit, and the record of calls made."""

    tools: list[BaseTool]
    max_rounds: int = 3
    calls: list[dict[str, Any]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)  # the model's raw answers: round, text, used
    skipped: str | None = None  # why the tools were not offered (the model or server has no tool calling)

    @classmethod
    def for_role(cls, role: str, tools: Sequence[BaseTool], *, use_memory: bool, max_rounds: int) -> ToolBox:
        """The role's subset of `tools` (from `make_tools`); memory tools only when `use_memory`."""
        if role not in ROLE_TOOLS:
            raise ValueError(f"ToolBox.for_role: unknown role {role!r}; known: {sorted(ROLE_TOOLS)}")
        by_name = {t.name: t for t in tools}
        wanted = [n for n in ROLE_TOOLS[role] if use_memory or n not in MEMORY_TOOLS]
        if missing := [n for n in wanted if n not in by_name]:
            raise ValueError(f"ToolBox.for_role({role!r}): tools {missing} not among {sorted(by_name)}")
        return cls([by_name[n] for n in wanted], max_rounds)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def _execute(self, name: str, args: Any) -> tuple[str, bool]:
        tool = next((t for t in self.tools if t.name == name), None)
        if tool is None:
            return f"error: unknown tool {name!r}; the tools you can call are {self.names}", True
        try:
            out = tool.invoke(args)
        except ValidationError as err:  # the tool's own argument schema said no
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(args)'}: {e['msg']}" for e in err.errors()[:5]
            )
            return f"error: bad arguments for {name}: {problems}", True
        except ToolException as err:
            return f"error: {name} failed: {err}", True
        text = out if isinstance(out, str) else json.dumps(out, default=str)
        return text, text.startswith("error:")

    def run_calls(self, reply: AIMessage, round_no: int) -> list[ToolMessage]:
        """Execute the tool calls of one model turn; one ToolMessage per call id (APIs require it)."""
        answers: list[ToolMessage] = []
        for i, call in enumerate(reply.tool_calls):
            name, args = call["name"], call["args"]
            if i >= MAX_CALLS_PER_ROUND:
                text, error = f"error: not run: at most {MAX_CALLS_PER_ROUND} tool calls per turn", True
            else:
                text, error = self._execute(name, args)
            answers.append(
                ToolMessage(_clip(text, MAX_TOOL_RESULT_CHARS), tool_call_id=call.get("id") or "", name=name)
            )
            self._record(round_no, name, args, text, error)
        for call in reply.invalid_tool_calls:  # arguments that were not even JSON
            name = call.get("name") or "?"
            text = f"error: the arguments of {name} are not a valid JSON object: {str(call.get('args'))[:200]}"
            answers.append(ToolMessage(text, tool_call_id=call.get("id") or "", name=name))
            self._record(round_no, name, call.get("args"), text, True)
        return answers

    def skip_tools(self, why: str) -> None:
        """Answer without tools, and say so in the record (an error entry, so the trace flags it)."""
        self.skipped = why
        log.warning("tools skipped: %s; the agent answers without its tools %s", why, self.names)
        self._record(0, SKIPPED_TOOLS, {"tools": self.names}, f"tools skipped: {why}", True)

    def record_reply(self, round_no: int, text: str, used: bool) -> None:
        self.replies.append({"round": round_no, "text": _clip(text, MAX_RECORD_CHARS), "used": used})

    def _record(self, round_no: int, name: str, args: Any, result: str, error: bool) -> None:
        dumped = json.dumps(args, default=str, ensure_ascii=False)
        self.calls.append(
            {
                "round": round_no,
                "name": name,
                "args": json.loads(dumped) if len(dumped) <= MAX_RECORD_CHARS else _clip(dumped, MAX_RECORD_CHARS),
                "result": _clip(result, MAX_RECORD_CHARS),
                "error": error,
            }
        )


def _structured_reply(
    llm: BaseChatModel, schema: type[BaseModel], messages: list[BaseMessage], guided: dict[str, Any] | None = None
) -> tuple[str, dict | None]:
    """(the raw answer as text, the decoded object or None when it did not decode).

    `guided`: the JSON schema the server decodes with (default `guided_schema(schema)`; a caller may narrow it,
    never widen it).
    """
    try:
        structured = llm.with_structured_output(guided or guided_schema(schema), include_raw=True)
    except NotImplementedError:
        # Models without structured output (plain fakes, some servers): ask for plain text.
        return _text(llm.invoke(messages)), None
    try:
        out = structured.invoke(messages)
    except LLM_ERRORS as err:
        why = guided_schema_refused(err)
        if why is None:
            raise
        # Still guided (any valid JSON object); pydantic then checks the shape the grammar could not.
        log.warning(
            "the server cannot decode with the %s schema (%s); asking for any JSON object", schema.__name__, why
        )
        out = llm.with_structured_output(None, method="json_mode", include_raw=True).invoke(messages)
    parsed = out.get("parsed")
    text = _text(out.get("raw"))
    if isinstance(parsed, dict):
        # A tool-call answer has no text content: its arguments are what the model said.
        return text or json.dumps(parsed, ensure_ascii=False), parsed
    log.warning("structured output did not parse (%s); trying the plain-JSON parser", out.get("parsing_error"))
    return text, None


def _ask_structured_messages(
    llm: BaseChatModel,
    schema: type[T],
    messages: list[BaseMessage],
    box: ToolBox | None = None,
    round_no: int = 1,
    guided: dict[str, Any] | None = None,
) -> T:
    said = ""
    try:
        said, parsed = _structured_reply(llm, schema, messages, guided)
        answer = validate_output(parsed, schema) if parsed is not None else parse_json_output(said, schema)
    except LLM_ERRORS as err:
        said = said or cut_answer(err)
        if box is not None and said:
            box.record_reply(round_no, said, used=False)
        quoted = f"; the model said: {_clip(said, MAX_SAID_CHARS)!r}" if said else ""
        raise BrainError(f"{type(err).__name__}: {err}{quoted}") from err
    if box is not None:
        box.record_reply(round_no, said, used=True)
    return answer


def ask_structured(
    llm: BaseChatModel,
    schema: type[T],
    system: str,
    user: str,
    box: ToolBox | None = None,
    guided: dict[str, Any] | None = None,
) -> T:
    """One structured answer (no tools); recorded in `box.replies` when a box is given."""
    return _ask_structured_messages(llm, schema, [SystemMessage(system), HumanMessage(user)], box, guided=guided)


def ask_with_tools(
    llm: BaseChatModel,
    schema: type[T],
    system: str,
    user: str,
    toolbox: ToolBox | None,
    guided: dict[str, Any] | None = None,
) -> T:
    """`ask_structured` after at most `toolbox.max_rounds` turns of tool calls (see the module docstring).

    `guided` narrows the schema the final structured answer is decoded with (`_structured_reply`).
    """
    if toolbox is None or not toolbox.tools or toolbox.max_rounds <= 0:
        return ask_structured(llm, schema, system, user, toolbox, guided)
    try:
        bound = llm.bind_tools(toolbox.tools)
    except NotImplementedError:
        toolbox.skip_tools(f"the model ({type(llm).__name__}) cannot bind tools")
        return ask_structured(llm, schema, system, user, toolbox, guided)
    note = prompts.render(prompts.TOOLS_NOTE, tools=", ".join(toolbox.names), rounds=toolbox.max_rounds)
    messages: list[BaseMessage] = [SystemMessage(f"{system}\n\n{note}"), HumanMessage(user)]
    round_no = 0
    try:
        for round_no in range(1, toolbox.max_rounds + 1):
            try:
                reply = bound.invoke(messages)
            except LLM_ERRORS as err:
                why = tool_calling_unsupported(err) if round_no == 1 else None
                if why is None:
                    raise
                toolbox.skip_tools(f"server has no tool calling: {why}")
                return ask_structured(llm, schema, system, user, toolbox, guided)
            messages.append(reply)
            if not isinstance(reply, AIMessage) or not (reply.tool_calls or reply.invalid_tool_calls):
                try:
                    answer = parse_json_output(_text(reply), schema)
                except ValueError as err:
                    toolbox.record_reply(round_no, _text(reply), used=False)
                    log.info(
                        "free answer did not parse (%s); asking for the %s with structured output", err, schema.__name__
                    )
                    break
                toolbox.record_reply(round_no, _text(reply), used=True)
                return answer
            messages += toolbox.run_calls(reply, round_no)
        else:
            log.info("tool rounds used up (%d); asking for the final %s", toolbox.max_rounds, schema.__name__)
    except LLM_ERRORS as err:
        raise BrainError(f"{type(err).__name__}: {err}") from err
    messages.append(HumanMessage(prompts.render(prompts.TOOLS_DONE)))
    return _ask_structured_messages(llm, schema, messages, toolbox, round_no + 1, guided=guided)
