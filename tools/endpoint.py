"""The frozen-policy endpoint contract: sample n completions per conversation from a fixed policy.

The critic measures candidate harness updates on the policy as it was at the pause. Two real
implementations exist: `tools.openai_endpoint.OpenAIEndpoint` (a vLLM or other OpenAI-compatible
server) and `tools.local_endpoint.LocalEndpoint` (in-process transformers generation, the CPU default).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class EndpointError(RuntimeError):
    """The policy endpoint could not produce completions (down, hanging, bad reply); the message says why."""


@runtime_checkable
class PolicyEndpoint(Protocol):
    """A frozen policy that samples chat completions."""

    name: str

    def sample(
        self,
        messages_batch: list[list[dict]],
        n: int = 1,
        max_tokens: int = 64,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> list[list[str]]:
        """Return one list of ``n`` completion texts per conversation, in input order.

        ``temperature == 0`` means greedy. With a ``seed`` the same call gives the same samples (per
        backend; vLLM and transformers do not agree with each other).
        """
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """An endpoint that can say how many tokens its completions took (the critic's cost accounting)."""

    def count_tokens(self, texts: list[str]) -> int | None:
        """Total tokens of `texts` re-encoded by the policy's tokenizer (no special tokens).

        Close to, not always equal to, the number generated (decoding and re-encoding need not round-trip).
        None: a wrapper whose inner endpoint cannot count (the cost then counts words).
        """
        ...


def validate_request(messages_batch: list[list[dict]], n: int, max_tokens: int, temperature: float) -> None:
    """Reject malformed sampling requests before they reach a backend, naming the offending item."""
    if not isinstance(messages_batch, list):
        raise ValueError(f"messages_batch must be a list of conversations, got {type(messages_batch).__name__}")
    for i, conv in enumerate(messages_batch):
        if not isinstance(conv, list) or not conv:
            raise ValueError(f"messages_batch[{i}] must be a non-empty list of messages")
        for j, msg in enumerate(conv):
            if (
                not isinstance(msg, dict)
                or not isinstance(msg.get("role"), str)
                or not isinstance(msg.get("content"), str)
            ):
                raise ValueError(
                    f"messages_batch[{i}][{j}] must be a dict with string 'role' and 'content', got {msg!r}"
                )
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
