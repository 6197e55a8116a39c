"""The one place that turns a `provider:model` string into a LangChain chat model.

No other module imports a provider class. `rules` is not a model: callers check `is_rules` first
and run the agent's rule brain instead. For OpenAI-compatible servers (vLLM, the test stub) pass
`base_url`; the API key is read from the environment variable named in the context (vLLM accepts
any string, so a missing key becomes "EMPTY" instead of an error). Each role's URL and key variable are its
own or the shared ones (`role_endpoint`: the one place that fallback is decided). `use_responses_api=False` is
pinned for the openai provider because ChatOpenAI silently switches to the Responses API for some
options, which vLLM does not serve.

Structured answers (`agents/llm.py`, the judge) go through `with_structured_output(<JSON schema dict>)`,
which ChatOpenAI sends as `response_format={"type": "json_schema", ...}`: vLLM's OpenAI server turns
that into guided decoding, so the answer is a schema-valid object even from a small model. Tool calls
need the server's tool-calling support (vLLM: `--enable-auto-tool-choice --tool-call-parser <name>`);
`tool_calling_unsupported` recognises the server saying it has none, and the brains then answer without
tools. The brains send their schemas in the form vLLM's xgrammar backend compiles (`agents.schemas.guided_schema`:
the check union unrolled, id patterns carrying their length bounds, which that backend refuses beside a
`pattern`); a schema a server still refuses is recognised by `guided_schema_refused`; the brain then asks for
any JSON object (`json_object` mode, still guided to valid JSON) and validates it itself.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import openai
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel

from agents.context import LLM_ROLES, RULES, EvolverContext

# What a brain LLM call may raise that means "no usable answer" rather than a bug in our code:
# timeouts, transport errors, provider API errors, an answer cut at its token limit (the openai client's
# parse raises on it in JSON mode), and ValueError from parsing/validating its output.
LLM_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    TimeoutError,
    OSError,
    httpx.HTTPError,
    openai.APIError,
    openai.LengthFinishReasonError,
    openai.ContentFilterFinishReasonError,
)


# How an OpenAI-compatible server says it serves no tool calling (vLLM started without
# --enable-auto-tool-choice / --tool-call-parser answers any request with tools with HTTP 400 naming them).
_NO_TOOL_CALLING_HINTS = ("enable-auto-tool-choice", "tool-call-parser")


def tool_calling_unsupported(err: BaseException) -> str | None:
    """The server's message when `err` says it has no tool calling, else None."""
    if isinstance(err, openai.BadRequestError):
        text = str(err)
        if any(hint in text for hint in _NO_TOOL_CALLING_HINTS):
            return text[:300]
    return None


def guided_schema_refused(err: BaseException) -> str | None:
    """The server's message when `err` says it cannot decode with the requested JSON schema, else None."""
    if isinstance(err, openai.BadRequestError):
        text = str(err)
        if any(hint in text.casefold() for hint in ("grammar", "json schema", "json_schema")):
            return text[:300]
    return None


def cut_answer(err: BaseException) -> str:
    """The text of an answer the client refused because it hit the token limit ("" for other errors)."""
    if isinstance(err, openai.LengthFinishReasonError):
        choices = err.completion.choices
        return (choices[0].message.content or "") if choices else ""
    return ""


def is_rules(model: str) -> bool:
    return model == RULES


def load_chat_model(
    model: str,
    *,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout_s: float = 60.0,
    max_tokens: int | None = None,
    temperature: float = 0.0,
) -> BaseChatModel:
    """Resolve `provider:model` (e.g. `openai:Qwen/Qwen3-8B`) with `init_chat_model`."""
    if is_rules(model):
        raise ValueError("'rules' selects the rule brain; it is not a chat model")
    provider, sep, name = model.partition(":")
    if not sep or not provider or not name:
        raise ValueError(f"model must be 'provider:model', got {model!r}")
    kwargs: dict[str, Any] = {"temperature": temperature, "timeout": timeout_s, "max_retries": 1}
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    if provider == "openai":
        kwargs["use_responses_api"] = False
        kwargs["api_key"] = os.environ.get(api_key_env) or "EMPTY"
        if base_url:
            kwargs["base_url"] = base_url
    elif base_url:
        kwargs["base_url"] = base_url
    return init_chat_model(name, model_provider=provider, **kwargs)


def role_endpoint(ctx: EvolverContext, role: str) -> tuple[str | None, str]:
    """(base URL, API-key variable) of one LLM role.

    Its own `<role>_base_url` / `<role>_api_key_env`, each falling back to the shared `base_url` / `api_key_env`.
    """
    if role not in LLM_ROLES:
        raise ValueError(f"unknown LLM role {role!r}; roles: {list(LLM_ROLES)}")
    return (getattr(ctx, f"{role}_base_url") or ctx.base_url, getattr(ctx, f"{role}_api_key_env") or ctx.api_key_env)


def judge_settings(ctx: EvolverContext) -> dict[str, Any]:
    """The judge's model and endpoint as `graphs.services` settings (`judge_model`, `base_url`, `api_key_env`)."""
    base_url, api_key_env = role_endpoint(ctx, "judge")
    return {"judge_model": ctx.judge_model, "base_url": base_url, "api_key_env": api_key_env}


def brain_model(ctx: EvolverContext, role: str) -> BaseChatModel | None:
    """The chat model of one role (`attributor`, `proposer`, `critic`), or None for its rule brain."""
    model = getattr(ctx, f"{role}_model")
    if is_rules(model):
        return None
    base_url, api_key_env = role_endpoint(ctx, role)
    return load_chat_model(
        model,
        base_url=base_url,
        api_key_env=api_key_env,
        timeout_s=ctx.llm_timeout_s,
        max_tokens=ctx.llm_max_tokens,
        temperature=ctx.llm_temperature,
    )
