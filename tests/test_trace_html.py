"""`graphs/trace_html.py` decisions table: each attempt row shows that attempt's own outcome (rejected →
revised, rejected → fallback vN, accepted vN, ...), and the event's final decision is shown once per event."""

from __future__ import annotations

import re

import pytest

from graphs.trace_html import _decisions, attempt_outcome, final_decision


def _attempt(revision: int, ok: bool, *, invalid: bool = False, veto: bool = False) -> dict:
    return {
        "revision": revision,
        "template": f"tpl{revision}",
        "critique": {
            "measured_ok": ok,
            "invalid": invalid,
            "veto": veto,
            "reasons": [f"reason {revision}"],
            "numbers": {"control_std": 0.0, "candidate_std": 0.1 * revision},
        },
    }


def _report(
    event_id: str, decision: str, attempts: list[dict], version: int | None = None, fallback: dict | None = None
):
    return {
        "event_id": event_id,
        "task_id": "t1",
        "failure_type": "flat",
        "interface": "criteria",
        "decision": decision,
        "committed_version": version,
        "attempts": attempts,
        "fallback": fallback,
        "tool_calls": [],
        "note": None,
    }


FALLBACK = {
    "update": {"interface": "sampling", "rationale": "quarantine", "ops": [{"op": "reweight", "task_id": "t1"}]},
    "applied": True,
    "version": 5,
}

CASES = [  # (report, per-attempt outcomes, final decision)
    (
        _report("acc-after-revise", "accepted", [_attempt(0, False), _attempt(1, True)], 3),
        ["rejected → revised", "accepted v3"],
        "accepted v3",
    ),
    (_report("first-try", "accepted", [_attempt(0, True)], 2), ["accepted v2"], "accepted v2"),
    (
        _report(
            "fell-back",
            "fallback",
            [_attempt(0, False), _attempt(1, False, invalid=True), _attempt(2, False)],
            5,
            FALLBACK,
        ),
        ["rejected → revised", "invalid → revised", "rejected → fallback v5"],
        "fallback v5",
    ),
    (_report("no-change", "rejected", [_attempt(0, False)]), ["rejected → no change"], "rejected"),
    (
        _report("fb-invalid", "rejected", [_attempt(0, False)], None, {**FALLBACK, "applied": False, "errors": ["e"]}),
        ["rejected → fallback not applied"],
        "rejected",
    ),
    (_report("stale", "rejected_stale", [_attempt(0, True)]), ["passed → stale at commit"], "rejected_stale"),
    (_report("human", "rejected_by_human", [_attempt(0, True)]), ["passed → rejected by human"], "rejected_by_human"),
    (
        _report("vetoed", "rejected", [_attempt(0, True, veto=True), _attempt(1, False)]),
        ["vetoed → revised", "rejected → no change"],
        "rejected",
    ),
]


@pytest.mark.parametrize("rep,outcomes,final", CASES, ids=[c[0]["event_id"] for c in CASES])
def test_attempt_outcome_is_per_attempt(rep, outcomes, final):
    assert [attempt_outcome(rep, i) for i in range(len(rep["attempts"]))] == outcomes
    assert final_decision(rep) == final


def _rows(table: str) -> list[str]:
    return re.findall(r"<tr>(.*?)</tr>", table)


def test_decisions_table_rows_show_attempt_outcome_and_final_decision_once():
    reports = [c[0] for c in CASES]
    table = _decisions({"reports": [*reports, _report("skipped", "skipped", [])]})
    rows = _rows(table)
    assert "attempt outcome" in rows[0] and "final decision" in rows[0]
    body = rows[1:]
    n_fallback_rows = sum(1 for r in reports if r["fallback"])
    assert len(body) == sum(len(r["attempts"]) for r in reports) + n_fallback_rows + 1
    # the revision-0 attempt that failed the rule says so; it is not labelled with the later acceptance
    first, second = body[0], body[1]
    assert "rejected → revised" in first and 'rowspan="2"' in first and "<b>accepted v3</b>" in first
    assert "accepted v3</td>" in second and "<b>" not in second and "acc-after-revise" not in second
    # each event's final decision is printed exactly once, in bold, spanning its rows
    for _rep, _outcomes, final in CASES:
        assert table.count(f"<b>{final}</b>") == sum(1 for r, _o, f in CASES if f == final)
    # the fallback event: three attempts + the committed fallback row
    fb = next(i for i, r in enumerate(body) if "fell-back" in r)
    assert 'rowspan="4"' in body[fb] and "rejected → fallback v5" in body[fb + 2]
    assert "reweight(t1)" in body[fb + 3] and "committed v5" in body[fb + 3]
    assert "not applied: e" in table
    assert "<b>skipped</b>" in body[-1]
