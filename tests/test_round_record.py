"""The round's record as a type (graphs/round_record.py): rounds.jsonl lines already written still read, a line
is written back with exactly the keys it had, and a bad line is named by file, line and field
(trainer/run_logs.py)."""

from __future__ import annotations

import json

import pytest

from graphs.round_record import EventReport, RoundRecord
from trainer.progress import round_lines
from trainer.run_logs import read_rounds

# A line as the trainer wrote it before the round recorded its input (`event_ids`), the slot values, the live
# drops, the brains and the batched repair: reports held only the event's essentials and each attempt's numbers.
OLD_LINE = {
    "step": 4,
    "version_before": 0,
    "n_events": 1,
    "event_types": ["collapse_low"],
    "n_stale": 0,
    "n_superseded": 0,
    "n_waiting": 2,
    "thread_id": "run-step000004-1",
    "n_accepted": 1,
    "accepted_interfaces": ["sampling"],
    "outcomes": {"accepted": 1},
    "version_after": 1,
    "pause_s": 3.5,
    "reports": [
        {
            "event_id": "collapse_low:med-1:4",
            "task_id": "med-1",
            "failure_type": "collapse_low",
            "decision": "accepted",
            "interface": "sampling",
            "revisions": 0,
            "committed_version": 1,
            "note": None,
            "attempts": [{"template": "variant_easier", "numbers": {"std_gain": 0.3}, "reasons": ["PASS: std_gain"]}],
        }
    ],
}

# A line as written now (trimmed to one event): every key the pause records, a batched repair and a provisional
# verdict on an earlier update.
NEW_LINE = {
    "step": 8,
    "version_before": 1,
    "n_events": 1,
    "event_ids": ["stuffing:med-2:8"],
    "event_types": ["stuffing"],
    "event_values": {"stuffing:med-2:8": {"dead_rate": 0.1, "draw_p": 0.25, "groups_left": 3.0, "value": 0.3}},
    "n_stale": 0,
    "n_superseded": 1,
    "n_live": 1,
    "live_dropped": ["collapse_low:med-3:7"],
    "n_waiting": 0,
    "provisional": {
        "window": 2,
        "verdicts": [
            {
                "version": 1,
                "task_id": "med-1",
                "graded_on": "med-1",
                "failure_type": "collapse_low",
                "interface": "sampling",
                "template": "variant_easier",
                "source": "rules",
                "verdict": "confirm",
                "reasons": ["2 of 2 groups live"],
                "numbers": {"dead": 0.0},
                "revert_version": None,
                "line": "med-1 v1 (collapse_low): confirm: 2 of 2 groups live",
            }
        ],
        "revert_versions": [],
        "n_confirmed": 1,
        "n_reverted": 0,
        "n_superseded": 0,
        "waiting": 0,
    },
    "thread_id": "run-step000008-2",
    "policy": "local:/frozen",
    "publish_s": 0.5,
    "policy_requests": 4,
    "policy_memo_hits": 1,
    "n_accepted": 2,
    "accepted_interfaces": ["criteria", "criteria"],
    "outcomes": {"accepted": 1},
    "version_after": 3,
    "pause_s": 12.25,
    "reports": [
        {
            "event_id": "stuffing:med-2:8",
            "task_id": "med-2",
            "failure_type": "stuffing",
            "decision": "accepted",
            "interface": "criteria",
            "revisions": 0,
            "committed_version": 2,
            "note": None,
            "generalised": {
                "decision": "accepted",
                "targets": ["med-4"],
                "skipped": [],
                "signature": "essential/contains_any",
                "version": 3,
                "note": None,
                "verdict": {"verdict": "accept", "reasons": ["1 of 1 targets held"], "numbers": {}},
                "numbers": {"gamed_drop": 0.5},
            },
            "brains": {"attributor": "rules", "proposer": ["llm"], "critic": ["rules"], "llm_errors": []},
            "attempts": [
                {
                    "template": "llm",
                    "numbers": {"gamed_drop": 0.5, "cost_probe_rollouts": 8.0},
                    "reasons": ["PASS: gamed_drop"],
                    "evidence_used": [],
                    "decision": {"verdict": "accept", "reasons": ["gamed drop 0.50"], "numbers": {"gamed_drop": 0.5}},
                }
            ],
        }
    ],
}


@pytest.mark.parametrize("line", [OLD_LINE, NEW_LINE], ids=["old", "new"])
def test_a_written_line_reads_and_is_written_back_with_the_same_keys(line):
    record = RoundRecord.model_validate(json.loads(json.dumps(line)))
    assert record.dump() == line
    assert (
        record.reports[0].attempts[0].reasons is not None
        and record.reports[0].attempts[0].reasons[0] == (line["reports"][0]["attempts"][0]["reasons"][0])
    )
    assert any(" -> accepted v" in s for s in round_lines(record.step, record, 0, 1, 1.0, record.n_events))


def test_an_old_line_reads_what_it_lacks_as_absent():
    record = RoundRecord.model_validate(OLD_LINE)
    assert record.event_ids is None and record.provisional is None and record.preflight is None
    (report,) = record.reports
    assert report.generalised is None and report.brains.attributor is None and report.attempts[0].decision is None


def test_the_new_line_is_read_by_attribute():
    record = RoundRecord.model_validate(NEW_LINE)
    assert record.event_values["stuffing:med-2:8"].value == 0.3
    assert record.provisional is not None and record.provisional.verdicts[0].verdict == "confirm"
    (report,) = record.reports
    assert report.generalised is not None and report.generalised.targets == ["med-4"]
    assert report.brains.proposer == ["llm"]


def test_a_bad_line_is_named_by_file_line_and_field(tmp_path):
    path = tmp_path / "rounds.jsonl"
    path.write_text(json.dumps(OLD_LINE) + "\n\n" + json.dumps({**NEW_LINE, "n_events": "many"}) + "\n")
    with pytest.raises(ValueError, match=r"rounds\.jsonl:3: field n_events: "):
        read_rounds(path)
    path.write_text(json.dumps(OLD_LINE) + "\n" + "{torn")  # a torn tail is skipped with a warning, as before
    assert [r.step for r in read_rounds(path)] == [4]


def test_an_event_report_keeps_its_keys_and_says_which_brain_decided():
    report = {
        "event_id": "e1",
        "task_id": "med-1",
        "failure_type": "stuffing",
        "decision": "rejected",
        "interface": "criteria",
        "attribution": {
            "interface": "criteria",
            "diagnosis": "x",
            "source": "llm_fallback",
            "notes": ["LLM failed: timeout"],
        },
        "revisions": 1,
        "committed_version": None,
        "attempts": [
            {
                "revision": 0,
                "template": "tighten_repeat",
                "source": "llm_fallback",
                "llm_error": "no JSON",
                "critic_source": "rules",
                "critique": {"failure_type": "stuffing", "measured_ok": False, "numbers": {"k": 8.0}},
            }
        ],
        "fallback": None,
        "note": None,
        "tool_calls": [],
        "generalised": None,
    }
    parsed = EventReport.model_validate(report)
    assert parsed.model_dump(mode="json", exclude_unset=True) == report
    assert parsed.brains().model_dump() == {
        "attributor": "llm_fallback",
        "proposer": ["llm_fallback"],
        "critic": ["rules"],
        "llm_errors": ["timeout", "no JSON"],
    }
    line = parsed.line()
    assert line.attempts[0].numbers == {"k": 8.0} and line.attempts[0].reasons == [] and line.generalised is None
