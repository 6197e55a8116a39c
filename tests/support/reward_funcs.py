"""Reward functions with TRL's signature for the reward-part tests (no tests here): a user's own `python` parts."""

from __future__ import annotations

from typing import Any

CALLS: list[dict[str, Any]] = []  # every call's keyword arguments, newest last
NOT_A_FUNCTION = 3


def chars(prompts: list, completions: list, **kwargs: Any) -> list[float]:
    """A hundredth of each completion's characters (TRL's conversational completions)."""
    CALLS.append({"prompts": prompts, "completions": completions, **kwargs})
    return [len(c[-1]["content"]) / 100 for c in completions]


def not_applicable(prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
    """TRL's "this reward does not apply": None for every completion."""
    return [None] * len(completions)


def too_few(prompts: list, completions: list, **kwargs: Any) -> list[float]:
    return [1.0]


async def async_reward(prompts: list, completions: list, **kwargs: Any) -> list[float]:
    return [0.0] * len(completions)
