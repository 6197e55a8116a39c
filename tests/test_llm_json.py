"""tools.llm_json: the one JSON extractor for LLM text, and the two parsers built on it (agents, judge)."""

from __future__ import annotations

import pytest

from agents.schemas import Attribution, parse_json_output
from tools.judge import parse_verdict
from tools.llm_json import MAX_DECODE_ATTEMPTS, MAX_TEXT_CHARS, fenced_blocks, first_json_object, json_objects

# (text, every object json_objects yields, in order)
OBJECTS: list[tuple[str, list[dict]]] = [
    ('{"a": 1}', [{"a": 1}]),
    ('Sure! {"a": 1} hope it helps', [{"a": 1}]),
    ('```json\n{"a": 1}\n```', [{"a": 1}, {"a": 1}]),  # the fenced body, then the whole text
    ('```JSON\n{"a": 1}\n```', [{"a": 1}, {"a": 1}]),
    ('```python3\n{"a": 1}', [{"a": 1}, {"a": 1}]),  # an unclosed fence runs to the end
    ('```{"a": 1}```', [{"a": 1}, {"a": 1}]),  # inline fence without a language tag
    ('prose {"b": 2} then ```\n{"a": 1}\n```', [{"a": 1}, {"b": 2}, {"a": 1}]),  # fenced blocks first
    ('{"other": 1} then {"met": false}', [{"other": 1}, {"met": False}]),
    ('{"outer": {"met": true}}', [{"outer": {"met": True}}, {"met": True}]),  # looks inside decoded objects
    (
        '{"reason": "a } brace and a { in a string", "met": true}',
        [{"reason": "a } brace and a { in a string", "met": True}],
    ),
    ('{"x": {"met": true}', [{"met": True}]),  # unbalanced outer object: the inner one still decodes
    ('{"a": 1} trailing garbage }}}', [{"a": 1}]),
    ("[1, 2] and 3", []),  # only objects count
    ("{not json", []),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), OBJECTS)
def test_json_objects(text: str, expected: list[dict]) -> None:
    assert list(json_objects(text)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no fence", []),
        ("```json\nA\n```", ["\nA\n"]),
        ("```\nA\n``` and ```\nB\n```", ["\nA\n", "\nB\n"]),
        ("```\nA", ["\nA"]),
        ("```A```", ["A"]),  # "A" is a body, not a language tag: no newline after it
    ],
)
def test_fenced_blocks(text: str, expected: list[str]) -> None:
    assert fenced_blocks(text) == expected


def test_decode_attempts_are_bounded() -> None:
    # Each failed attempt may scan to the end of the text: the number of attempts is capped, not just the size.
    good = '{"a": 1}'
    assert list(json_objects("{ " * (MAX_DECODE_ATTEMPTS - 1) + good)) == [{"a": 1}]
    assert list(json_objects("{ " * MAX_DECODE_ATTEMPTS + good)) == []
    assert list(json_objects("{" * (MAX_TEXT_CHARS - 1))) == []  # a flood of openers costs at most the cap


def test_too_long_text_is_refused() -> None:
    with pytest.raises(ValueError, match=f"more than {MAX_TEXT_CHARS}"):
        first_json_object('{"a": 1}' + " " * MAX_TEXT_CHARS)


def test_first_json_object_without_one_raises() -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        first_json_object("I think it is fine")


# The agents and the judge read LLM text through the same extractor: what one tolerates, the other does too.
SHARED = ["OBJ", "Sure! OBJ hope it helps", "```json\nOBJ\n```", "```\nOBJ", "Here: ```OBJ```", '{"x": OBJ']
ATTRIBUTION = '{"interface": "criteria", "diagnosis": "x"}'
VERDICT = '{"met": true, "reason": "r"}'


@pytest.mark.parametrize("shape", SHARED)
def test_agents_and_judge_accept_the_same_shapes(shape: str) -> None:
    assert parse_json_output(shape.replace("OBJ", ATTRIBUTION), Attribution).interface == "criteria"
    assert parse_verdict(shape.replace("OBJ", VERDICT)) == (True, "r")


def test_over_long_answers_are_refused_or_cut() -> None:
    pad = " " * MAX_TEXT_CHARS
    with pytest.raises(ValueError, match="characters, more than"):
        parse_json_output(pad + ATTRIBUTION, Attribution)
    assert parse_verdict(pad + VERDICT) is None  # the judge reads only the head of a reply
