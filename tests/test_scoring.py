"""harness.scoring: weighted aggregation with negative pitfalls, clipping, and kept verdicts."""

from __future__ import annotations

import pytest

from harness.scoring import aggregate, programmatic_verdicts, score_programmatic
from tests.support.harness_factories import crit

CRITERIA = [crit("e", 5), crit("i", 3, "important"), crit("o", 2, "optional"), crit("p", -4)]

# met set -> expected score (positive total = 10)
CASES = [
    (set(), 0.0),
    ({"e"}, 0.5),
    ({"e", "i", "o"}, 1.0),
    ({"e", "i"}, 0.8),
    ({"e", "i", "o", "p"}, 0.6),  # a met pitfall subtracts its |weight|
    ({"e", "p"}, 0.1),
    ({"i", "p"}, 0.0),  # clipped at 0, never negative
    ({"p"}, 0.0),
]


@pytest.mark.parametrize("met,expected", CASES)
def test_aggregate(met: set[str], expected: float) -> None:
    assert aggregate(CRITERIA, {c.id: c.id in met for c in CRITERIA}) == pytest.approx(expected)


def test_aggregate_never_exceeds_one() -> None:
    assert aggregate([crit("a", 10)], {"a": True}) == 1.0


@pytest.mark.parametrize(
    "met,msg", [({"e": True}, "missing"), ({**{c.id: True for c in CRITERIA}, "zz": True}, "unknown")]
)
def test_aggregate_refuses_mismatched_verdicts(met: dict[str, bool], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        aggregate(CRITERIA, met)


def test_score_programmatic_keeps_verdicts() -> None:
    criteria = [
        crit("water", 5, check={"type": "contains_any", "phrases": ["water"]}),
        crit("long", 3, "important", check={"type": "word_count", "min": 5}),
        crit("judge", 2, "optional"),  # no check: unmet, reason "no check"
        crit("promise", -3, check={"type": "contains_any", "phrases": ["guaranteed"]}),
    ]
    r = score_programmatic(criteria, "Drink water, guaranteed relief.")
    assert r.score == pytest.approx((5 - 3) / 10)
    assert list(r.verdicts) == ["water", "long", "judge", "promise"]
    assert r.met == {"water": True, "long": False, "judge": False, "promise": True}
    assert r.verdicts["judge"].reason == "no check" and r.verdicts["judge"].source == "none"
    assert r.verdicts["water"].source == "check"
    assert set(programmatic_verdicts(criteria, "x")) == {"water", "long", "promise"}
    assert score_programmatic(criteria, "").score == 0.0


# Polynomial on a long digit-free run: times out within harness.checks.REGEX_TIMEOUT_S on this text.
SLOW = r"[a-z]*[a-z]*[a-z]*[a-z]*[0-9]"
STALLING_TEXT = "water " + "a" * 60_000


@pytest.mark.parametrize("must_match", [True, False])
def test_a_check_timeout_is_an_error_verdict_never_met_or_unmet(must_match: bool) -> None:
    criteria = [
        crit("water", 5, check={"type": "contains_any", "phrases": ["water"]}),
        crit("slow", -5, check={"type": "regex", "pattern": SLOW, "must_match": must_match}),
    ]
    verdicts = programmatic_verdicts(criteria, STALLING_TEXT)
    assert verdicts["slow"].source == "error" and not verdicts["slow"].decided
    assert "timed out" in verdicts["slow"].reason
    assert verdicts["water"].decided
    # Left out of the aggregate: the pitfall neither subtracts (as met) nor is silently passed (as unmet).
    r = score_programmatic(criteria, STALLING_TEXT)
    assert r.score == 1.0 and r.verdicts["slow"].source == "error"


def test_score_programmatic_refuses_when_only_failed_checks_carry_weight() -> None:
    criteria = [
        crit("slow", 5, check={"type": "regex", "pattern": SLOW}),
        crit("p", -1, check={"type": "word_count", "min": 1}),
    ]
    with pytest.raises(ValueError, match="could be decided.*timed out"):
        score_programmatic(criteria, STALLING_TEXT)
