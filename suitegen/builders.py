"""Builders for the JSON the suite is made of: `harness.checks` Check dicts, criteria and task specs.

Plain dicts on purpose: a task spec is validated once, as a whole, by `harness.types.Task` when the
generator assembles the suite (`suitegen/generate.py`).
"""

from __future__ import annotations

import re
from typing import Any

from harness.types import DEFAULT_WEIGHTS


# -- checks ------------------------------------------------------------------------------------------
def any_(*phrases: str) -> dict:
    return {"type": "contains_any", "phrases": list(phrases)}


def all_(*phrases: str) -> dict:
    return {"type": "contains_all", "phrases": list(phrases)}


def word_any(*ws: str) -> dict:
    """Whole-word match for short words, where word-start matching would over-match ("sea" in "search")."""
    return {"type": "regex", "pattern": r"\b(?:" + "|".join(re.escape(w) for w in ws) + r")\b"}


def wc(lo: int | None = None, hi: int | None = None) -> dict:
    return {"type": "word_count", **({"min": lo} if lo is not None else {}), **({"max": hi} if hi is not None else {})}


def sc(lo: int | None = None, hi: int | None = None) -> dict:
    return {
        "type": "sentence_count",
        **({"min": lo} if lo is not None else {}),
        **({"max": hi} if hi is not None else {}),
    }


def bullets(lo: int, hi: int | None = None) -> dict:
    return {"type": "bullets", "min": lo, **({"max": hi} if hi is not None else {})}


def starts(text: str) -> dict:
    return {"type": "starts_with", "text": text}


def ends(text: str, min_words: int = 0) -> dict:
    return {"type": "ends_with", "text": text, "min_words": min_words}


def all_of(*checks: dict) -> dict:
    return {"type": "all_of", "checks": list(checks)}


def any_of(*checks: dict) -> dict:
    return {"type": "any_of", "checks": list(checks)}


def not_(check: dict) -> dict:
    return {"type": "not", "check": check}


def lines_exactly(n: int) -> dict:
    """Exactly `n` non-empty lines (surrounding whitespace allowed); quantifiers never nest."""
    body = r"\n\s*".join([r"[^\n]*\S[^\n]*"] * n)
    return {"type": "regex", "pattern": r"^\s*" + body + r"\s*$"}


# -- criteria and tasks ------------------------------------------------------------------------------
def crit(kind: str, text: str, check: dict | None = None, weight: float | None = None) -> dict:
    c: dict[str, Any] = {"text": text, "kind": kind, "weight": weight if weight is not None else DEFAULT_WEIGHTS[kind]}
    if check is not None:
        c["check"] = check
    return c


def audit(terms: list[str], min_words: int, prompt: str, term_desc: str) -> list[dict]:
    """Hidden quality criteria shared by every task: content + length, no stuffing, no restating."""
    lead = " ".join(prompt.split()[:6])
    return [
        crit(
            "essential",
            f"Substantive: {term_desc} and gives at least {min_words} words of real content.",
            all_of(any_(*terms), wc(lo=min_words)),
        ),
        crit(
            "important",
            "No keyword stuffing or looping: no word more than 6 times, no 3-word phrase more than twice.",
            all_of(
                {"type": "max_repeated_ngram", "n": 1, "max_count": 6},
                {"type": "max_repeated_ngram", "n": 3, "max_count": 2},
            ),
        ),
        crit("important", "Does not just restate the prompt back.", not_(starts(lead))),
    ]


def task(
    domain: str,
    template: str,
    difficulty: str,
    prompt: str,
    criteria: list[dict],
    audits: list[dict],
    reference: str | None = None,
    system: str | None = None,
    topic: str = "",
    extra_meta: dict | None = None,
) -> dict:
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return {
        "domain": domain,
        "prompt": msgs,
        "criteria": criteria,
        "audit": audits,
        "reference": reference,
        "meta": {"difficulty": difficulty, "template": template, "topic": topic, **(extra_meta or {})},
    }
