"""harness.scoring: weighted aggregation with negative pitfalls, clipping, and kept verdicts."""

from __future__ import annotations

import pytest

from harness.scoring import aggregate, programmatic_verdicts, score_programmatic
from tests.harness_factories import crit

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


@pytest.mark.parametrize("met,msg", [({"e": True}, "missing"), ({**{c.id: True for c in CRITERIA}, "zz": True}, "unknown")])
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
