"""Bounded extraction of JSON objects from an LLM's free text: the one parser the judge and the agents share.

Models wrap their JSON in prose ("Sure! Here it is: {...} hope it helps"), in ``` code fences with or
without a language tag, or answer with several objects. `json_objects` yields every JSON object it can
decode, in this order: the bodies of the fenced blocks first (an unclosed fence runs to the end of the
text), then the whole text. At each `{` it tries `json.JSONDecoder.raw_decode`, which ignores whatever
follows the object, and it keeps looking inside a decoded object too, so `{"outer": {"met": true}}`
yields the outer object and then the inner one. Callers pick what they need: the agents take the first
object (`first_json_object`), the judge the first one that holds a verdict.

Bounds, because the text is untrusted: a text longer than `MAX_TEXT_CHARS` is refused (a caller that
prefers to read a prefix truncates first), and at most `MAX_DECODE_ATTEMPTS` `{` positions are tried in
all, since each failed attempt may scan to the end of the text. Only `str.find` and the JSON decoder run
over the text (no regex); nothing in it is ever evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# Real answers are a few KB; a longer one is not an object we want (and could be an attack on parse time).
MAX_TEXT_CHARS = 64_000
MAX_DECODE_ATTEMPTS = 32

_FENCE = "```"
# A fence's language tag ("json", "JSON", "python3", "c++") is letters, digits and a few marks, up to a newline.
_TAG_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-.")


def fenced_blocks(text: str) -> list[str]:
    """Bodies of the ``` fenced blocks in `text`, language tags dropped; an unclosed fence runs to the end."""
    blocks: list[str] = []
    pos = text.find(_FENCE)
    while pos >= 0:
        body = pos + len(_FENCE)
        tag_end = body
        while tag_end < len(text) and text[tag_end] in _TAG_CHARS:
            tag_end += 1
        # A tag only counts when the fence line ends after it; "```{...}```" has no tag, its body starts at once.
        if tag_end == len(text) or text[tag_end] in "\r\n":
            body = tag_end
        end = text.find(_FENCE, body)
        blocks.append(text[body : end if end >= 0 else len(text)])
        if end < 0:
            break
        pos = text.find(_FENCE, end + len(_FENCE))
    return blocks


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every decodable JSON object in `text`, fenced blocks first (see the module docstring for the bounds)."""
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"model output is {len(text)} characters, more than {MAX_TEXT_CHARS}")
    decoder = json.JSONDecoder()
    attempts = 0
    for chunk in [*fenced_blocks(text), text]:
        start = chunk.find("{")
        while start >= 0:
            if attempts == MAX_DECODE_ATTEMPTS:
                return
            attempts += 1
            try:
                obj, _end = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError:
                obj = None
            if isinstance(obj, dict):
                yield obj
            start = chunk.find("{", start + 1)


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`; raises ValueError when there is none (or the text is too long)."""
    for obj in json_objects(text):
        return obj
    raise ValueError("no JSON object found in the model output")
