"""harness.checks: every Check type on ordinary and adversarial inputs, and refusal of unsafe specs."""

from __future__ import annotations

import re

import pytest
import regex as safe_regex
from pydantic import ValidationError

from harness.checks import (
    CHECK_TYPES,
    MAX_SCAN_CHARS,
    REGEX_TIMEOUT_S,
    CheckTimeout,
    max_ngram_repeats,
    parse_check,
    words,
)
from harness.regex_syntax import validate_safe_pattern
from harness.types import Criterion

MB = 1_000_000
EMOJI = "🙂🚀🔥 🙂🙂"
CAFE_DECOMPOSED = "Cafe\u0301 au lait"  # "Café" with a combining accent: NFC makes it match "café"

# (check spec, text, expected)
CASES: list[tuple[dict, str, bool]] = [
    # contains_any: word-start match, case-insensitive, stems allowed, no mid-word matches
    ({"type": "contains_any", "phrases": ["water", "rest"]}, "Drink WATER now", True),
    ({"type": "contains_any", "phrases": ["water", "rest"]}, "keep watering", True),
    ({"type": "contains_any", "phrases": ["water", "rest"]}, "underwater", False),
    ({"type": "contains_any", "phrases": ["water", "rest"]}, "", False),
    ({"type": "contains_any", "phrases": ["water"]}, EMOJI, False),
    ({"type": "contains_any", "phrases": ["café"]}, CAFE_DECOMPOSED, True),
    ({"type": "contains_any", "phrases": ["🔥"], "whole_word": False}, EMOJI, True),
    ({"type": "contains_any", "phrases": ["Water"], "case_sensitive": True}, "water", False),
    ({"type": "contains_any", "phrases": ["water"]}, "water " + "x" * MB, True),
    ({"type": "contains_any", "phrases": ["water"]}, "x" * MB + " water", False),  # beyond MAX_SCAN_CHARS
    # contains_all
    ({"type": "contains_all", "phrases": ["water", "rest"]}, "rest and water", True),
    ({"type": "contains_all", "phrases": ["water", "rest"]}, "water only", False),
    ({"type": "contains_all", "phrases": ["naïve", "日本"]}, "A naïve view of 日本", True),
    ({"type": "contains_all", "phrases": ["a"]}, "", False),
    # forbids
    ({"type": "forbids", "phrases": ["guaranteed"]}, "Results are GUARANTEED.", False),
    ({"type": "forbids", "phrases": ["guaranteed"]}, "", True),
    ({"type": "forbids", "phrases": ["guaranteed"]}, "a " * (MB // 2), True),
    # word_count: emoji and symbols are not words
    ({"type": "word_count", "min": 3, "max": 5}, "one two three", True),
    ({"type": "word_count", "min": 3, "max": 5}, "one two three four five six", False),
    ({"type": "word_count", "min": 1}, "", False),
    ({"type": "word_count", "min": 1}, EMOJI, False),
    ({"type": "word_count", "max": 5}, EMOJI * 1000, True),
    ({"type": "word_count", "max": 100}, "a " * (MB // 2), False),
    ({"type": "word_count", "min": 2, "max": 2}, "don't stop", True),  # inner apostrophe stays one word
    ({"type": "word_count", "min": 3}, "Ça va très bien", True),
    # sentence_count
    ({"type": "sentence_count", "min": 2}, "One. Two!", True),
    ({"type": "sentence_count", "min": 2}, "Just one sentence", False),
    ({"type": "sentence_count", "max": 1}, "", True),
    ({"type": "sentence_count", "min": 1}, EMOJI, False),
    ({"type": "sentence_count", "min": 3}, "First. Second? Third without a stop", True),
    # bullets
    ({"type": "bullets", "min": 2}, "- a\n- b", True),
    ({"type": "bullets", "min": 2}, "• a\n* b", True),
    ({"type": "bullets", "min": 2}, "-a\n-b", False),
    ({"type": "bullets", "max": 0}, "", True),
    ({"type": "bullets", "min": 1}, "- " + "x" * MB, True),
    # numbered
    ({"type": "numbered", "min": 2}, "1. a\n2) b", True),
    ({"type": "numbered", "min": 1}, "1.a", False),
    ({"type": "numbered", "min": 1}, "", False),
    ({"type": "numbered", "max": 1}, "1. a\n2. b", False),
    # starts_with
    ({"type": "starts_with", "text": "Dear"}, "  dear John", True),
    ({"type": "starts_with", "text": "Dear", "case_sensitive": True}, "dear John", False),
    ({"type": "starts_with", "text": "Dear"}, "", False),
    ({"type": "starts_with", "text": "🙂"}, EMOJI, True),
    # ends_with: the word floor blocks credit without content ("What?")
    ({"type": "ends_with", "text": "?", "min_words": 3}, "What?", False),
    ({"type": "ends_with", "text": "?", "min_words": 3}, "What should I do?  \n", True),
    ({"type": "ends_with", "text": "?"}, "", False),
    ({"type": "ends_with", "text": "?"}, "x" * MB + "?", False),  # the end is beyond MAX_SCAN_CHARS
    ({"type": "ends_with", "text": "Fin"}, "C'est la fin", True),
    # max_repeated_ngram
    ({"type": "max_repeated_ngram", "n": 1, "max_count": 3}, "a a a", True),
    ({"type": "max_repeated_ngram", "n": 1, "max_count": 3}, "a A a a", False),
    ({"type": "max_repeated_ngram", "n": 2, "max_count": 1}, "drink water drink water", False),
    ({"type": "max_repeated_ngram", "n": 3, "max_count": 1}, "", True),
    ({"type": "max_repeated_ngram", "n": 1, "max_count": 1}, EMOJI, True),
    ({"type": "max_repeated_ngram", "n": 1, "max_count": 5}, "spam " * (MB // 5), False),
    # char_class
    ({"type": "char_class", "mode": "all_lowercase"}, "hello world 42", True),
    ({"type": "char_class", "mode": "all_lowercase"}, "Hello", False),
    ({"type": "char_class", "mode": "all_lowercase"}, "123", False),  # needs a letter
    ({"type": "char_class", "mode": "all_lowercase"}, EMOJI, False),
    ({"type": "char_class", "mode": "all_uppercase"}, "STOP NOW", True),
    ({"type": "char_class", "mode": "all_uppercase"}, "", False),
    ({"type": "char_class", "mode": "ascii_only"}, "héllo", False),
    ({"type": "char_class", "mode": "ascii_only"}, "", True),
    ({"type": "char_class", "mode": "has_digit"}, "route 66", True),
    ({"type": "char_class", "mode": "has_digit"}, "٣ Arabic-Indic three", True),
    ({"type": "char_class", "mode": "no_digits"}, "no numbers here", True),
    ({"type": "char_class", "mode": "latin_letters_only"}, "Hello, world!", True),
    ({"type": "char_class", "mode": "latin_letters_only"}, "Привет", False),
    ({"type": "char_class", "mode": "latin_letters_only"}, EMOJI, False),
    ({"type": "char_class", "mode": "all_lowercase"}, "a" * MB, True),
    # forbid_chars (lipograms)
    ({"type": "forbid_chars", "chars": "e"}, "A plain clash of words", True),
    ({"type": "forbid_chars", "chars": "e"}, "Eel", False),
    ({"type": "forbid_chars", "chars": "e", "case_sensitive": True}, "Eel", False),
    ({"type": "forbid_chars", "chars": "E", "case_sensitive": True}, "eel", True),
    ({"type": "forbid_chars", "chars": "e", "min_words": 3}, "", False),
    ({"type": "forbid_chars", "chars": "e", "min_words": 3}, EMOJI, False),  # emoji dodge the letter, not the floor
    # regex
    ({"type": "regex", "pattern": r"\b\d{2,3} ?mg\b"}, "Take 500 mg twice", True),
    ({"type": "regex", "pattern": r"\b\d{2,3} ?mg\b"}, "Take 5000mg", False),
    ({"type": "regex", "pattern": r"^dear\b"}, "Dear Sam", True),
    ({"type": "regex", "pattern": r"^dear\b", "case_sensitive": True}, "Dear Sam", False),
    ({"type": "regex", "pattern": r"(cat|dog)s?"}, "two dogs", True),
    ({"type": "regex", "pattern": r"guarantee", "must_match": False}, "No promises", True),
    ({"type": "regex", "pattern": r"x"}, "", False),
    ({"type": "regex", "pattern": r"🙂{2}"}, EMOJI, True),
    ({"type": "regex", "pattern": r"b$"}, "a" * MB + "b", False),  # scanned up to MAX_SCAN_CHARS only
    # combinators
    (
        {
            "type": "all_of",
            "checks": [{"type": "contains_any", "phrases": ["water"]}, {"type": "word_count", "min": 4}],
        },
        "drink water every hour",
        True,
    ),
    (
        {
            "type": "all_of",
            "checks": [{"type": "contains_any", "phrases": ["water"]}, {"type": "word_count", "min": 4}],
        },
        "water",
        False,
    ),
    (
        {"type": "any_of", "checks": [{"type": "contains_any", "phrases": ["water"]}, {"type": "bullets", "min": 1}]},
        "- rest",
        True,
    ),
    (
        {"type": "any_of", "checks": [{"type": "contains_any", "phrases": ["water"]}, {"type": "bullets", "min": 1}]},
        "",
        False,
    ),
    ({"type": "not", "check": {"type": "contains_any", "phrases": ["sorry"]}}, "Sorry!", False),
    ({"type": "not", "check": {"type": "contains_any", "phrases": ["sorry"]}}, EMOJI, True),
]


@pytest.mark.parametrize("spec,text,expected", CASES, ids=[f"{s['type']}-{i}" for i, (s, _, _) in enumerate(CASES)])
def test_check_evaluates(spec: dict, text: str, expected: bool) -> None:
    assert parse_check(spec).evaluate(text) is expected


def test_every_check_type_is_covered() -> None:
    assert {spec["type"] for spec, _, _ in CASES} == set(CHECK_TYPES)


# (spec, substring of the error)
INVALID: list[tuple[dict | str, str]] = [
    ({"type": "contains_any", "phrases": []}, "at least 1 item"),
    ({"type": "contains_any", "phrases": ["  "]}, "must not be empty"),
    ({"type": "contains_all", "phrases": ["x" * 201]}, "longer than 200"),
    ({"type": "forbids", "phrases": ["a"] * 33}, "at most 32 items"),
    ({"type": "word_count"}, "at least one of min/max"),
    ({"type": "sentence_count", "min": 5, "max": 2}, "greater than max"),
    ({"type": "bullets", "min": -1}, "greater than or equal to 0"),
    ({"type": "max_repeated_ngram", "n": 9, "max_count": 1}, "less than or equal to 8"),
    ({"type": "char_class", "mode": "klingon"}, "mode"),
    ({"type": "starts_with", "text": ""}, "at least 1 character"),
    ({"type": "regex", "pattern": "(a+)+$"}, "nested quantifier"),
    ({"type": "regex", "pattern": "(a|aa)*b"}, "repeated alternation"),
    ({"type": "regex", "pattern": "(?:\\w+\\s?)+$"}, "nested quantifier"),
    ({"type": "regex", "pattern": "((a|aa))+b"}, "repeated alternation"),
    ({"type": "regex", "pattern": "(a*)*"}, "nested quantifier"),
    ({"type": "regex", "pattern": "x(?=y)"}, "lookahead"),
    ({"type": "regex", "pattern": "(?<=y)x"}, "lookbehind"),
    ({"type": "regex", "pattern": "(a)\\1"}, "backreference"),
    ({"type": "regex", "pattern": "(?i)x"}, "inline flag"),
    ({"type": "regex", "pattern": "("}, "invalid regex"),
    ({"type": "regex", "pattern": "a" * 201}, "longer than 200"),
    ({"type": "regex", "pattern": ""}, "at least 1 character"),
    (
        {
            "type": "not",
            "check": {
                "type": "not",
                "check": {"type": "not", "check": {"type": "not", "check": {"type": "word_count", "min": 1}}},
            },
        },
        "nested deeper",
    ),
    ({"type": "exec", "code": "import os"}, "does not match any of the expected tags"),
    ({"type": "word_count", "min": 1, "eval": "x"}, "Extra inputs are not permitted"),
    ('{"type": "word_count", "min": ', "EOF while parsing"),
]


@pytest.mark.parametrize("spec,message", INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_invalid_spec_refused(spec: dict | str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_check(spec)
    assert message in str(info.value)


def test_deep_check_refused_inside_criterion() -> None:
    deep = {
        "type": "not",
        "check": {
            "type": "not",
            "check": {"type": "not", "check": {"type": "not", "check": {"type": "word_count", "min": 1}}},
        },
    }
    with pytest.raises(ValidationError):
        Criterion(id="c", text="t", weight=1, kind="optional", check=deep)


def test_json_round_trip() -> None:
    spec = {
        "type": "all_of",
        "checks": [
            {"type": "regex", "pattern": r"\d+"},
            {"type": "not", "check": {"type": "forbids", "phrases": ["x"]}},
        ],
    }
    c = parse_check(spec)
    assert parse_check(c.model_dump_json()) == c


SLOW = r"[a-z]*[a-z]*[a-z]*[a-z]*[0-9]"  # allowed (no nesting) but polynomial: slow on a long digit-free run


@pytest.mark.parametrize("must_match", [True, False])
def test_slow_allowed_pattern_is_bounded_by_the_timeout(must_match: bool) -> None:
    text = "a" * MB
    # The capped input really does exceed the timeout in the engine itself ...
    with pytest.raises(TimeoutError):
        safe_regex.search(SLOW, text[:MAX_SCAN_CHARS], safe_regex.IGNORECASE, timeout=REGEX_TIMEOUT_S)
    # ... and the check stops instead of stalling, without deciding: a timeout is neither a match nor a miss
    # (as "no match" it made a must_match=False check "met"); the judge reports it as a failure.
    check = parse_check({"type": "regex", "pattern": SLOW, "must_match": must_match})
    with pytest.raises(CheckTimeout, match="timed out"):
        check.evaluate(text)
    with pytest.raises(CheckTimeout):
        parse_check({"type": "not", "check": check.model_dump()}).evaluate(text)
    assert parse_check({"type": "regex", "pattern": SLOW}).evaluate("abc1") is True


# Engine-specific syntax the `regex` engine accepts (often with a meaning `re` does not have): refused.
ENGINE_SPECIFIC: list[tuple[str, str]] = [
    (r"(?:abc){e<=2}", "fuzzy matching"),  # passed `re` validation; a fuzzy match at run time
    (r"abc{i<=1,d<=1}", "fuzzy matching"),
    (r"x{e}", "fuzzy matching"),
    (r"a{1, 2}", "repeat count"),
    (r"{abc}", "repeat count"),
    (r"(?r)abc", "inline flag"),  # reverse search
    (r"(?V1)[a-z]", "inline flag"),
    (r"(?V1)[[a-z]--[aeiou]]", "inline flag"),
    (r"[[a-z]--[aeiou]]", "nested set"),
    (r"[a-z--aeiou]", "set operation"),
    (r"[a&&b]", "set operation"),
    (r"[[:alpha:]]", "POSIX class"),
    (r"\Gabc", "\\G"),
    (r"\p{L}+", "Unicode property"),
    (r"[\P{L}]", "Unicode property"),
    (r"\X", "escape \\X"),
    (r"\K", "\\K"),
    (r"\mword\M", "escape \\m"),
    (r"\L<words>", "named list"),
    (r"\N{BULLET}", "named character"),
    (r"\kx", "backreference"),
    (r"a++", "possessive"),
    (r"a*+b", "possessive"),
    (r"a{2}+", "possessive"),
    (r"a**", "repeated quantifier"),
    (r"(?>ab)", "atomic group"),
    (r"(?|(a)|(b))", "branch reset"),
    (r"(?#note)a", "comment group"),
    (r"(?a)\w", "inline flag"),
    (r"(?-i:x)", "inline flag"),
    (r"(?<name>a)", "named group"),
    (r"(?P<name>a)", "named group"),
    (r"(?R)", "recursion"),
    (r"(?1)", "recursion"),
    (r"(*FAIL)", "backtracking verb"),
    (r"(?(1)a|b)", "conditional"),
    (r"^{2}a", "quantified anchor"),
    (r"\b*a", "quantified anchor"),
    (r"a$?", "quantified anchor"),
]


@pytest.mark.parametrize(("pattern", "message"), ENGINE_SPECIFIC)
def test_engine_specific_syntax_refused(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match="regex feature not allowed") as info:
        parse_check({"type": "regex", "pattern": pattern})
    assert message in str(info.value)


# Accepted patterns mean the same in both engines: validation and matching agree whichever one reads them.
SAME_MEANING: list[tuple[str, list[str]]] = [
    (r"\b(?:tea|teas)\b", ["tea time", "steam", "TEAS"]),
    (r"(^|\n)\s*P\.S\.", ["x\n  P.S. bye", "PS"]),
    (r"<<[^<>\n]+>>", ["<<Title>>", "<<>>"]),
    (r'^\s*"[^"]+"\s*$', ['  "quoted" ', 'a "b"']),
    (r"\d{2,3} ?mg", ["500 mg", "5mg"]),
    (r"a{,2}b", ["aaab", "b"]),
    (r"x\{e<=2\}", ["x{e<=2}", "xyz"]),  # escaped braces stay literal
    (r"[]a-]+z", ["]-az", "z"]),
    (r"\bmy\ lord\b", ["My lord!", "mylord"]),
    (r"\x41\u00e9\w*?", ["Aé", "ae"]),
    (r"(ab)?c|d+?", ["abc", "ddd"]),
]


@pytest.mark.parametrize(("pattern", "texts"), SAME_MEANING)
def test_accepted_patterns_match_alike_in_both_engines(pattern: str, texts: list[str]) -> None:
    validate_safe_pattern(pattern)
    for text in texts:
        expected = re.search(pattern, text, re.IGNORECASE)
        found = safe_regex.search(pattern, text, safe_regex.IGNORECASE | safe_regex.VERSION0)
        assert (found and found.span()) == (expected and expected.span()), (pattern, text)
        assert parse_check({"type": "regex", "pattern": pattern}).evaluate(text) is (expected is not None)


def test_helpers() -> None:
    assert words("Hi, it's 5 o'clock 🙂!") == ["Hi", "it's", "5", "o'clock"]
    assert max_ngram_repeats("a b a b a", 2) == 2
    assert max_ngram_repeats("a", 2) == 0
