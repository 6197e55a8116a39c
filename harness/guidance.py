"""Rollout guidance: which hints a visit sees at a training step, and how they enter the prompt.

The schedule semantics (reveal fraction, `hinted_share`) live on `harness.types.Schedule`; see also
docs/DESIGN.md, section 3 ("Guidance"). A hinted visit sees the first ceil(fraction * len(hints)) hints, so
the oldest hints are revealed longest.

Hints go into the user turn by default: in the SmolLM2 spike, user-turn hints let 4 of 5 collapsed
tasks escape versus 2 of 5 in the system prompt.

`hint_leaks_reference` is the guard `harness.ops` uses to refuse a hint that gives the answer away.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Literal

from harness.types import Guidance, Hint, Schedule, Task

# Steepness of the sigmoid decay across [start_step, end_step]: at the ends the curve is within
# ~0.7% of its asymptotes, so the schedule's endpoints mean what they say.
SIGMOID_STEEPNESS = 10.0
# A hint that copies this many consecutive words of the reference answer leaks it, even when the
# reference is much longer (copying one full clause is enough to hand over the answer).
LEAK_RUN_WORDS = 8

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def reveal_fraction(schedule: Schedule, step: int) -> float:
    """Fraction of a task's hints that a hinted visit sees at `step` (in [floor, 1])."""
    if schedule.mode == "constant" or step <= schedule.start_step:
        return 1.0
    span = schedule.end_step - schedule.start_step
    x = min(1.0, (step - schedule.start_step) / span)  # progress through the decay, 0..1
    if schedule.mode == "linear":
        decay = 1.0 - x
    else:  # sigmoid, centred at the middle of the span
        decay = 1.0 / (1.0 + math.exp(SIGMOID_STEEPNESS * (x - 0.5)))
        if x >= 1.0:
            decay = 0.0
    return schedule.floor + (1.0 - schedule.floor) * decay


def visible_hints(guidance: Guidance, step: int, rng: random.Random) -> list[Hint]:
    """Hints one visit (one GRPO group) sees at `step`; `rng` decides hinted vs unhinted visits.

    The rng is always advanced exactly once (when there are hints) so a seeded sampler stays
    reproducible whatever the schedule says.
    """
    if not guidance.hints:
        return []
    hinted = rng.random() < guidance.schedule.hinted_share
    if not hinted:
        return []
    frac = reveal_fraction(guidance.schedule, step)
    k = math.ceil(frac * len(guidance.hints) - 1e-9)
    return list(guidance.hints[:k])


def render_prompt(task: Task, hints: list[Hint], placement: Literal["user", "system"] = "user") -> list[dict]:
    """The task's chat messages as plain dicts, with `hints` applied.

    `user`: appended to the last user turn as "\\n\\nHint: ..." lines. `system`: appended to the
    first system message, or inserted as a new leading system message when there is none.
    """
    messages = [{"role": m.role, "content": m.content} for m in task.prompt]
    if not hints:
        return messages
    if placement == "user":
        lines = "\n".join(f"Hint: {h.text}" for h in hints)
        messages[-1]["content"] = f"{messages[-1]['content']}\n\n{lines}"
    elif placement == "system":
        lines = "\n".join(f"- {h.text}" for h in hints)
        block = f"Hints for this task:\n{lines}"
        if messages[0]["role"] == "system":
            messages[0]["content"] = f"{messages[0]['content']}\n\n{block}"
        else:
            messages.insert(0, {"role": "system", "content": block})
    else:
        raise ValueError(f"placement must be 'user' or 'system', got {placement!r}")
    return messages


def prompt_digest(messages: Sequence[Mapping[str, str]]) -> str:
    """A short fingerprint of the chat messages a group was sampled with (role and content of each, in order).

    Training records it with each group (`GroupStats.prompt_digest`) so that a measurement can re-use the cached
    groups of exactly the prompt it would otherwise sample (`tools.probes.prompt_rollouts`), hinted ones included.
    """
    flat = json.dumps([[str(m["role"]), str(m["content"])] for m in messages])
    return hashlib.sha256(flat.encode()).hexdigest()[:16]


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _longest_common_run(a: list[str], b: list[str]) -> int:
    """Length of the longest common contiguous token run (O(len(a)*len(b)); hints are <= 400 chars)."""
    best = 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                if cur[j] > best:
                    best = cur[j]
        prev = cur
    return best


def hint_leaks_reference(hint_text: str, reference: str | None) -> bool:
    """True when the hint contains the reference answer.

    Normalised (NFKC, case-folded, punctuation-insensitive) word-sequence check: the hint leaks when
    it contains the whole reference as a contiguous word run, or any run of LEAK_RUN_WORDS
    consecutive reference words. Short references ("42", "Paris") therefore leak on a whole-word
    match; a one-word reference that is also a common word will refuse hints using that word, which
    is the safe side of the trade-off.
    """
    if not reference:
        return False
    ref = _tokens(reference)
    if not ref:
        return False
    hint = _tokens(hint_text)
    return _longest_common_run(hint, ref) >= min(len(ref), LEAK_RUN_WORDS)
