"""Rubric scoring: per-criterion verdicts aggregated into one reward in [0, 1].

HealthBench/RaR convention:

    score = clip(Σ_{met} w_j / Σ_{w_j > 0} w_j, 0, 1)

Pitfalls carry negative weights, so a met pitfall subtracts its |weight|. Every verdict is kept
(`ScoreResult.verdicts`) because the detector and memory need per-criterion pass rates, not just
the total. Only programmatic checks are evaluated here; `tools/` adds the LLM judge for criteria
without a check and then calls `aggregate`.

A verdict that is not `decided` (source "skipped": no LLM judge; "error": the check could not decide,
e.g. a regex timeout) is neither met nor unmet: it is left out of the aggregate and of pass rates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.checks import CheckTimeout
from harness.types import Criterion

# "none": no check and scored as unmet here; "skipped": left out of the aggregate by the judge (no LLM configured);
# "error": the check could not decide (`CheckTimeout`), left out of the aggregate and reported as a judge failure.
VerdictSource = Literal["check", "llm", "none", "skipped", "error"]
UNDECIDED_SOURCES: frozenset[str] = frozenset({"skipped", "error"})


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    criterion_id: str
    met: bool  # False when not `decided`; read it only together with `decided`
    reason: str = ""
    source: VerdictSource = "check"

    @property
    def decided(self) -> bool:
        """Whether the verdict counts as met/unmet (in scores and pass rates)."""
        return self.source not in UNDECIDED_SOURCES


class ScoreResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: float
    verdicts: dict[str, Verdict]  # criterion id -> verdict, in criteria order

    @property
    def met(self) -> dict[str, bool]:
        return {cid: v.met for cid, v in self.verdicts.items()}


def aggregate(criteria: Sequence[Criterion], met: Mapping[str, bool]) -> float:
    """Weighted score in [0, 1]. `met` must hold a verdict for exactly the given criteria.

    A missing or extra id is a bug in the caller (a judge that skipped a criterion would silently
    inflate or deflate rewards), so it raises instead of guessing.
    """
    ids = [c.id for c in criteria]
    missing = [i for i in ids if i not in met]
    extra = [i for i in met if i not in set(ids)]
    if missing or extra:
        raise ValueError(f"verdicts do not match criteria: missing {missing}, unknown {extra}")
    positive = sum(c.weight for c in criteria if c.weight > 0)
    if positive <= 0:
        raise ValueError("criteria have no positive weight; the score is undefined")
    gained = sum(c.weight for c in criteria if met[c.id])
    return min(1.0, max(0.0, gained / positive))


def programmatic_verdicts(criteria: Sequence[Criterion], text: str) -> dict[str, Verdict]:
    """Verdicts for the criteria that have a `check` (others are left out).

    A check that cannot decide (`CheckTimeout`) gets an "error" verdict naming why, never met or unmet.
    """
    out: dict[str, Verdict] = {}
    for c in criteria:
        if c.check is None:
            continue
        try:
            met = c.check.evaluate(text)
        except CheckTimeout as err:
            out[c.id] = Verdict(criterion_id=c.id, met=False, reason=f"check failed: {err}", source="error")
            continue
        out[c.id] = Verdict(
            criterion_id=c.id, met=met, reason=f"{c.check.type} {'met' if met else 'not met'}", source="check"
        )
    return out


def score_programmatic(criteria: Sequence[Criterion], text: str) -> ScoreResult:
    """Score with checks only; a criterion without a check counts as unmet (reason "no check").

    A criterion whose check could not decide is left out of the aggregate; when that leaves no
    positive-weight criterion, the score is undefined and this raises ValueError naming the failures.
    """
    found = programmatic_verdicts(criteria, text)
    verdicts = {
        c.id: found.get(c.id) or Verdict(criterion_id=c.id, met=False, reason="no check", source="none")
        for c in criteria
    }
    decided = [c for c in criteria if verdicts[c.id].decided]
    if len(decided) < len(criteria) and not any(c.weight > 0 for c in decided):
        failed = {cid: v.reason for cid, v in verdicts.items() if not v.decided}
        raise ValueError(f"no positive-weight criterion could be decided; check failures: {failed}")
    return ScoreResult(score=aggregate(decided, {c.id: verdicts[c.id].met for c in decided}), verdicts=verdicts)
