"""Calling a brain LLM for a pydantic answer: structured output first, plain JSON as the fallback.

`ask_structured` asks through `with_structured_output(<the schema as JSON schema>, include_raw=True)`
(guided json_schema decoding on OpenAI-compatible servers such as vLLM; a tool call on models that
bind tools) and validates the decoded dict with pydantic itself. The JSON-schema dict, not the
pydantic class, is passed on purpose: with the class, ChatOpenAI parses inside the client and a bad
answer raises before we can see the raw text. When the model cannot do structured output
(NotImplementedError) or its answer does not decode, the raw text goes through
`agents.schemas.parse_json_output`. Any
failure surfaces as `BrainError` with the reason, so the calling agent can record it and fall back
to a safe behaviour: an LLM that times out or answers garbage never reaches the harness.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from agents.models import LLM_ERRORS
from agents.schemas import parse_json_output, validate_output

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)


class BrainError(RuntimeError):
    """A brain LLM produced no usable answer (timeout, transport error, malformed or invalid output)."""


def _text(message: object) -> str:
    if isinstance(message, AIMessage):
        return message.text
    return str(message)


def ask_structured(llm: BaseChatModel, schema: type[T], system: str, user: str) -> T:
    messages = [SystemMessage(system), HumanMessage(user)]
    try:
        try:
            structured = llm.with_structured_output(schema.model_json_schema(), include_raw=True)
        except NotImplementedError:
            # Models without structured output (plain fakes, some servers): ask and parse the text.
            return parse_json_output(_text(llm.invoke(messages)), schema)
        out = structured.invoke(messages)
        if isinstance(out.get("parsed"), dict):
            return validate_output(out["parsed"], schema)
        raw = out.get("raw")
        log.warning("structured output did not parse (%s); trying the plain-JSON parser", out.get("parsing_error"))
        return parse_json_output(_text(raw), schema)
    except LLM_ERRORS as err:
        raise BrainError(f"{type(err).__name__}: {err}") from err
