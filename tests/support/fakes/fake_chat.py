"""Scripted fake chat models for unit tests (the only things we fake are LLMs).

- `ScriptedChatModel`: a `GenericFakeChatModel` whose `bind_tools` returns itself, so agents that bind
  tools or call `with_structured_output` (which goes through `bind_tools` plus a tool-call parser) work.
  It yields pre-baked replies in call order; strings become `AIMessage(content=...)`, and
  `tool_reply(name, args)` builds an `AIMessage` with a tool call (name a pydantic class to satisfy
  `with_structured_output`). Order is call order, so use it where calls are sequential.
- `ScriptedPolicy`: a fake frozen policy behind the `PolicyEndpoint` protocol, completions chosen
  from the prompt, for exact critic/measurement numbers.
- `FunctionChatModel`: the reply is computed from the request messages by a function, with an
  optional `asyncio.sleep` latency on the async path. Replies then do not depend on call order, which
  concurrent callers (the judge) need; the latency makes concurrency measurable (benchmarks).

    ScriptedChatModel(messages=iter(['{"met": true, "reason": "ok"}', tool_reply("Answer", {"x": 1})]))
    FunctionChatModel(respond=lambda msgs: '{"met": false, "reason": "no"}', latency_s=0.05)
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

_ids = itertools.count()


def tool_reply(name: str, args: dict, content: str = "") -> AIMessage:
    """An AIMessage that calls tool `name` with `args` (ids are unique per process)."""
    return AIMessage(content=content, tool_calls=[{"name": name, "args": args, "id": f"call_{next(_ids)}"}])


class ScriptedChatModel(GenericFakeChatModel):
    """Pre-baked replies in call order; `bind_tools` is a no-op so tool-using agents can run."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # noqa: ARG002
        return self


def scripted(*replies: str | AIMessage) -> ScriptedChatModel:
    """`ScriptedChatModel` over `replies` (str -> AIMessage content)."""
    msgs = [r if isinstance(r, AIMessage) else AIMessage(content=r) for r in replies]
    return ScriptedChatModel(messages=iter(msgs))


class FunctionChatModel(BaseChatModel):
    """Reply = `respond(messages)`; the async path sleeps `latency_s` first (a slow remote judge)."""

    respond: Callable[[list[BaseMessage]], str | AIMessage]
    latency_s: float = 0.0
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "function-fake"

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        self.calls += 1
        reply = self.respond(messages)
        msg = reply if isinstance(reply, AIMessage) else AIMessage(content=reply)
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self._result(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._result(messages)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FunctionChatModel:  # noqa: ARG002
        return self


class ScriptedPolicy:
    """Fake frozen policy (`tools.endpoint.PolicyEndpoint`): completion i of a conversation is
    `reply(last user message, i)`; every call is recorded in `calls`."""

    name = "scripted"

    def __init__(self, reply: Callable[[str, int], str]):
        self.reply = reply
        self.calls: list[dict] = []

    def sample(
        self,
        messages_batch: list[list[dict]],
        n: int = 1,
        max_tokens: int = 64,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> list[list[str]]:
        self.calls.append({"batch": messages_batch, "n": n, "seed": seed})
        return [[self.reply(conv[-1]["content"], i) for i in range(n)] for conv in messages_batch]
