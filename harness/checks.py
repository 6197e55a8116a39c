"""Declarative response verifiers (`Check`s) for rubric criteria.

A `Check` is data: a small pydantic spec that a proposer (rule or LLM) may write and that we
evaluate with fixed Python code. Nothing in a spec is ever executed. The regex check is validated and
run by the same engine (`regex`, VERSION0) with a hard timeout, a pattern-length cap and a structural
whitelist (no backreferences, no lookarounds, no nested quantifiers, no fuzzy matching or other
engine-specific syntax), so a hostile pattern cannot stall training; a search that times out raises
`CheckTimeout` instead of deciding the criterion.

Usage::

    check = parse_check({"type": "word_count", "max": 50})
    check.evaluate("A short answer.")  # True
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Annotated, Literal, Union

import regex as safe_regex
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from harness.regex_syntax import validate_safe_pattern

# Responses are scored on at most this many characters: a 1 MB completion must not cost 1 MB of
# scanning per criterion. Real rollouts are a few KB; the cap only bounds adversarial inputs.
MAX_SCAN_CHARS = 50_000
MAX_PHRASES = 32
MAX_PHRASE_CHARS = 200
REGEX_TIMEOUT_S = 0.05
MAX_NESTING = 3

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")
_BULLET = re.compile(r"^\s*[-*•+]\s+\S")
_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+\S")


def words(text: str) -> list[str]:
    """Word tokens of `text` (letters/digits with inner apostrophes); emoji and symbols are not words."""
    return _WORD.findall(text[:MAX_SCAN_CHARS])


def count_sentences(text: str) -> int:
    body = text[:MAX_SCAN_CHARS].strip()
    if not words(body):
        return 0
    ends = len(_SENTENCE_END.findall(body))
    # A trailing fragment without final punctuation still counts as a sentence.
    return ends + (0 if body[-1] in ".!?" else 1)


def max_ngram_repeats(text: str, n: int) -> int:
    """Highest count of any word n-gram (case-folded); 0 when the text has fewer than n words."""
    toks = [w.casefold() for w in words(text)]
    grams = Counter(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))
    return max(grams.values(), default=0)


def _norm(s: str, case_sensitive: bool) -> str:
    s = unicodedata.normalize("NFC", s)
    return s if case_sensitive else s.casefold()


def _has_phrase(text: str, phrase: str, case_sensitive: bool, whole_word: bool) -> bool:
    t, p = _norm(text, case_sensitive), _norm(phrase, case_sensitive)
    if not whole_word:
        return p in t
    # Word-start boundary only, so "photosynthes" matches "photosynthesis" (stems are a feature).
    return re.search(r"(?<!\w)" + re.escape(p), t) is not None


class _CheckBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def evaluate(self, text: str) -> bool:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


class _PhraseCheck(_CheckBase):
    phrases: list[str] = Field(min_length=1, max_length=MAX_PHRASES)
    case_sensitive: bool = False
    whole_word: bool = True

    @field_validator("phrases")
    @classmethod
    def _phrases_ok(cls, v: list[str]) -> list[str]:
        for p in v:
            if not p.strip():
                raise ValueError("phrases must not be empty strings")
            if len(p) > MAX_PHRASE_CHARS:
                raise ValueError(f"phrase longer than {MAX_PHRASE_CHARS} characters")
        return v

    def _hits(self, text: str) -> list[bool]:
        t = text[:MAX_SCAN_CHARS]
        return [_has_phrase(t, p, self.case_sensitive, self.whole_word) for p in self.phrases]


class ContainsAny(_PhraseCheck):
    """Met when at least one phrase occurs (word-start match, case-insensitive by default)."""

    type: Literal["contains_any"] = "contains_any"

    def evaluate(self, text: str) -> bool:
        return any(self._hits(text))


class ContainsAll(_PhraseCheck):
    """Met when every phrase occurs."""

    type: Literal["contains_all"] = "contains_all"

    def evaluate(self, text: str) -> bool:
        return all(self._hits(text))


class Forbids(_PhraseCheck):
    """Met when none of the phrases occurs."""

    type: Literal["forbids"] = "forbids"

    def evaluate(self, text: str) -> bool:
        return not any(self._hits(text))


class _Bounds(_CheckBase):
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds_ok(self) -> _Bounds:
        if self.min is None and self.max is None:
            raise ValueError("set at least one of min/max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    def _within(self, n: int) -> bool:
        return (self.min is None or n >= self.min) and (self.max is None or n <= self.max)


class WordCount(_Bounds):
    """Word count within [min, max]. An empty or symbol-only answer has 0 words."""

    type: Literal["word_count"] = "word_count"

    def evaluate(self, text: str) -> bool:
        return self._within(len(words(text)))


class SentenceCount(_Bounds):
    type: Literal["sentence_count"] = "sentence_count"

    def evaluate(self, text: str) -> bool:
        return self._within(count_sentences(text))


class BulletCount(_Bounds):
    """Number of lines formatted as bullets (`-`, `*`, `•`, `+`) with content after the marker."""

    type: Literal["bullets"] = "bullets"

    def evaluate(self, text: str) -> bool:
        return self._within(sum(bool(_BULLET.match(line)) for line in text[:MAX_SCAN_CHARS].splitlines()))


class NumberedCount(_Bounds):
    """Number of lines formatted as a numbered list (`1.` or `1)`)."""

    type: Literal["numbered"] = "numbered"

    def evaluate(self, text: str) -> bool:
        return self._within(sum(bool(_NUMBERED.match(line)) for line in text[:MAX_SCAN_CHARS].splitlines()))


class StartsWith(_CheckBase):
    type: Literal["starts_with"] = "starts_with"
    text: str = Field(min_length=1, max_length=MAX_PHRASE_CHARS)
    case_sensitive: bool = False

    def evaluate(self, text: str) -> bool:
        return _norm(text.lstrip(), self.case_sensitive).startswith(_norm(self.text, self.case_sensitive))


class EndsWith(_CheckBase):
    """Ends with `text` after trailing whitespace, and has at least `min_words` words before it.

    The word floor exists because "What?" alone met "ends with a question" in the SmolLM2 spike:
    credit without content.
    """

    type: Literal["ends_with"] = "ends_with"
    text: str = Field(min_length=1, max_length=MAX_PHRASE_CHARS)
    case_sensitive: bool = False
    min_words: int = Field(default=0, ge=0)

    def evaluate(self, text: str) -> bool:
        body = text[:MAX_SCAN_CHARS].rstrip()
        ok = _norm(body, self.case_sensitive).endswith(_norm(self.text, self.case_sensitive))
        return ok and len(words(body)) >= self.min_words


class MaxRepeatedNgram(_CheckBase):
    """Met when no word n-gram occurs more than `max_count` times (catches keyword stuffing)."""

    type: Literal["max_repeated_ngram"] = "max_repeated_ngram"
    n: int = Field(default=1, ge=1, le=8)
    max_count: int = Field(ge=1)

    def evaluate(self, text: str) -> bool:
        return max_ngram_repeats(text, self.n) <= self.max_count


CharClassMode = Literal["all_lowercase", "all_uppercase", "ascii_only", "has_digit", "no_digits", "latin_letters_only"]


class CharClass(_CheckBase):
    """Character-class / script constraint. Cased modes need at least one letter to be met."""

    type: Literal["char_class"] = "char_class"
    mode: CharClassMode

    def evaluate(self, text: str) -> bool:
        t = text[:MAX_SCAN_CHARS]
        letters = [c for c in t if c.isalpha()]
        match self.mode:
            case "all_lowercase":
                return bool(letters) and not any(c.isupper() for c in letters)
            case "all_uppercase":
                return bool(letters) and not any(c.islower() for c in letters)
            case "ascii_only":
                return t.isascii()
            case "has_digit":
                return any(c.isdigit() for c in t)
            case "no_digits":
                return not any(c.isdigit() for c in t)
            case "latin_letters_only":
                return bool(letters) and all("LATIN" in unicodedata.name(c, "") for c in letters)


class ForbidChars(_CheckBase):
    """Met when none of `chars` occurs (lipograms); with `min_words` it also needs some content."""

    type: Literal["forbid_chars"] = "forbid_chars"
    chars: str = Field(min_length=1, max_length=64)
    case_sensitive: bool = False
    min_words: int = Field(default=0, ge=0)

    def evaluate(self, text: str) -> bool:
        t = _norm(text[:MAX_SCAN_CHARS], self.case_sensitive)
        bad = set(_norm(self.chars, self.case_sensitive))
        return not any(c in bad for c in t) and len(words(t)) >= self.min_words


class CheckTimeout(RuntimeError):
    """A check could not decide within its time bound (a regex search timed out): neither met nor unmet.

    `harness.scoring.programmatic_verdicts` turns it into an "error" verdict, which the judge counts as a
    failure and leaves out of the scores of the whole group (`tools.judge`).
    """


class Regex(_CheckBase):
    """Bounded regex search (`must_match=False` inverts) on the `regex` engine, VERSION0.

    Patterns are vetted by `harness.regex_syntax.validate_safe_pattern` with the same engine, on the syntax
    subset that means the same as in Python's `re`. Refused besides backreferences, lookarounds and nested
    quantifiers: fuzzy matching (`(?:abc){e<=2}`; a literal `{` must be escaped), inline flags and version
    switches (`(?i)`, `(?r)`, `(?V1)`), Unicode properties (`\\p{L}`), `\\G`, `\\K`, `\\X` and other
    letter escapes, possessive quantifiers and atomic groups, nested sets and set operations in classes.
    The search scans at most MAX_SCAN_CHARS characters and stops after REGEX_TIMEOUT_S: a timeout raises
    `CheckTimeout`, never a verdict, because "no match" would turn a `must_match=False` check into "met".
    """

    type: Literal["regex"] = "regex"
    pattern: str = Field(min_length=1)
    case_sensitive: bool = False
    must_match: bool = True

    @field_validator("pattern")
    @classmethod
    def _safe(cls, v: str) -> str:
        validate_safe_pattern(v)
        return v

    def evaluate(self, text: str) -> bool:
        flags = safe_regex.VERSION0 | (0 if self.case_sensitive else safe_regex.IGNORECASE)
        try:
            found = safe_regex.search(self.pattern, text[:MAX_SCAN_CHARS], flags, timeout=REGEX_TIMEOUT_S) is not None
        except TimeoutError:
            raise CheckTimeout(f"regex {self.pattern!r} timed out after {REGEX_TIMEOUT_S}s") from None
        return found == self.must_match


class AllOf(_CheckBase):
    """Met when every sub-check is met. Used to tighten a criterion ("mentions X *and* >= 10 words")."""

    type: Literal["all_of"] = "all_of"
    checks: list[Check] = Field(min_length=1, max_length=8)

    def evaluate(self, text: str) -> bool:
        return all(c.evaluate(text) for c in self.checks)


class AnyOf(_CheckBase):
    type: Literal["any_of"] = "any_of"
    checks: list[Check] = Field(min_length=1, max_length=8)

    def evaluate(self, text: str) -> bool:
        return any(c.evaluate(text) for c in self.checks)


class Not(_CheckBase):
    type: Literal["not"] = "not"
    check: Check

    def evaluate(self, text: str) -> bool:
        return not self.check.evaluate(text)


Check = Annotated[
    Union[
        ContainsAny,
        ContainsAll,
        Forbids,
        WordCount,
        SentenceCount,
        BulletCount,
        NumberedCount,
        StartsWith,
        EndsWith,
        MaxRepeatedNgram,
        CharClass,
        ForbidChars,
        Regex,
        AllOf,
        AnyOf,
        Not,
    ],
    Field(discriminator="type"),
]
for _m in (AllOf, AnyOf, Not):
    _m.model_rebuild()

CHECK_TYPES: tuple[str, ...] = (
    "contains_any",
    "contains_all",
    "forbids",
    "word_count",
    "sentence_count",
    "bullets",
    "numbered",
    "starts_with",
    "ends_with",
    "max_repeated_ngram",
    "char_class",
    "forbid_chars",
    "regex",
    "all_of",
    "any_of",
    "not",
)

_ADAPTER: TypeAdapter[Check] = TypeAdapter(Check)


def check_depth(check: _CheckBase) -> int:
    if isinstance(check, (AllOf, AnyOf)):
        return 1 + max(check_depth(c) for c in check.checks)
    if isinstance(check, Not):
        return 1 + check_depth(check.check)
    return 1


def parse_check(data: object) -> Check:
    """Validate a check spec (dict or JSON string); raises `ValueError` naming the bad field."""
    check = _ADAPTER.validate_json(data) if isinstance(data, (str, bytes)) else _ADAPTER.validate_python(data)
    if check_depth(check) > MAX_NESTING + 1:
        raise ValueError(f"check nested deeper than {MAX_NESTING} levels")
    return check
