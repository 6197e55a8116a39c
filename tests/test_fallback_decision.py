"""The fallback decided in one place (`agents.fallback.decide`) and reported as it always was.

`decide` is checked on the paths that need no probe (the probe's are in tests/test_evolver_graph.py, through the
graph); `Decision`'s report entries are checked against the literal shapes `rounds.jsonl` and memory already hold.
"""

from __future__ import annotations

import pytest

from agents.context import EvolverContext
from agents.fallback import Decision, decide, fallback_decision
from agents.schemas import Attribution
from harness.types import FailureEvent, HarnessState, HarnessUpdate, Reweight
from tests.support.fakes.evolver_fakes import suite

STATE = HarnessState.from_tasks(suite())
UPDATE = HarnessUpdate(interface="sampling", ops=[Reweight(task_id="med-1", weight=0.5)], rationale="halve (probed)")
UPDATE_JSON = UPDATE.model_dump(mode="json")


def _ev(*, hits: int = 3) -> FailureEvent:
    return FailureEvent(
        id="e-low",
        type="collapse_low",
        task_id="med-1",
        step=10,
        window=list(range(11 - hits, 11)),
        window_hits=hits,
        confirmed=hits >= 2,
    )


REPORTS = [
    (Decision(verdict="off"), None),
    (Decision(verdict="deferred", reason="deferred: rung"), {"applied": False, "reason": "deferred: rung"}),
    (Decision(verdict="none", reason="nothing", rule_reason="nothing"), {"applied": False, "reason": "nothing"}),
    (
        Decision(verdict="invalid", reason="halve", rule_reason="halve", update=UPDATE, errors=["ops[0]: bad"]),
        {"update": UPDATE_JSON, "applied": False, "errors": ["ops[0]: bad"], "reason": "halve"},
    ),
    (
        Decision(verdict="not_reproduced", reason="not reproduced", rule_reason="halve", update=UPDATE, probe={"k": 4}),
        {"update": UPDATE_JSON, "applied": False, "reason": "not reproduced", "probe": {"k": 4}},
    ),
]


@pytest.mark.parametrize(("decision", "entry"), REPORTS, ids=[d.verdict for d, _ in REPORTS])
def test_a_decision_that_commits_nothing_is_reported_as_before(decision, entry):
    assert not decision.commits
    got = decision.report()
    assert got == entry and (got is None or list(got) == list(entry))  # same keys, same order: same JSON lines


def test_a_committed_or_stale_fallback_is_reported_as_before():
    d = Decision(verdict="commit", reason="halve (probed)", rule_reason="halve", update=UPDATE)
    assert d.commits
    applied = d.applied(3)
    assert applied == {"update": UPDATE_JSON, "applied": True, "version": 3, "reason": "halve (probed)"}
    assert list(applied) == ["update", "applied", "version", "reason"]
    refused = d.refused(["stale"])
    assert refused == {"update": UPDATE_JSON, "applied": False, "errors": ["stale"], "reason": "halve"}
    assert list(refused) == ["update", "applied", "errors", "reason"]
    with pytest.raises(AssertionError):
        d.report()  # a commit is reported by the commit node, never here


def _decide(ev: FailureEvent, attempts: list[dict], *, attribution: Attribution | None = None, **ctx) -> Decision:
    # None of these paths probes, so no endpoint or judge is reached.
    return decide(
        ev,
        STATE,
        attempts,
        EvolverContext(**ctx),
        step=10,
        evidence={},
        attribution=attribution,
        endpoint=None,  # type: ignore[arg-type]
        judge=None,  # type: ignore[arg-type]
        probe_cache=None,
        detector_config=None,
    )


GUIDANCE = Attribution(interface="guidance", diagnosis="dead group", confidence=0.6)


@pytest.mark.parametrize(
    ("ctx", "verdict"),
    [
        ({"apply_fallback": False, "critic": False}, "off"),
        ({"interfaces": ["guidance", "criteria"], "critic": False}, "off"),
        ({"interfaces": ["guidance", "sampling"], "critic": False}, "commit"),
    ],
    ids=["apply_fallback-off", "sampling-disabled", "allowed"],
)
def test_decide_allows_a_fallback_only_where_the_run_does(ctx, verdict):
    assert _decide(_ev(), [], **ctx).verdict == verdict


def test_decide_defers_to_the_ladder_only_with_memory():
    """A dead task with a criteria rung left waits for its next round; without memory the ladder is unknown."""
    deferred = _decide(_ev(), [], attribution=GUIDANCE, critic=False)
    assert deferred.verdict == "deferred" and deferred.report() == {
        "applied": False,
        "reason": "deferred: the repair ladder's next rung is criteria/split_graded (agents/repair_ladder.py)",
    }
    assert _decide(_ev(), [], attribution=GUIDANCE, critic=False, memory=False).verdict == "commit"


def test_decide_keeps_the_rule_answer_and_says_why_nothing_was_probed():
    unconfirmed = _decide(_ev(hits=1), [], interfaces=["guidance", "sampling"])
    assert unconfirmed.verdict == "none" and unconfirmed.reason == fallback_decision(_ev(hits=1), STATE, []).reason
    rule = fallback_decision(_ev(), STATE, [], step=10)
    assert rule.needs_probe  # no candidate was measured
    d = _decide(_ev(), [], interfaces=["guidance", "sampling"], critic=False)
    assert d.verdict == "commit" and d.rule_reason == rule.reason
    assert d.reason == f"{rule.reason} (critic off: not reproduced on the frozen policy first)"
    assert d.update is not None and d.update.rationale == d.reason  # the store's log carries the reported reason
    assert d.update.ops == rule.update.ops  # type: ignore[union-attr]
