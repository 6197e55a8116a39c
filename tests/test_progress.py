"""The training console: one readable line per step, a round as sentences, library noise filtered."""

from __future__ import annotations

import logging
import warnings

from graphs.round_record import RoundRecord
from trainer.progress import quiet_library_warnings, round_lines, step_line
from trainer.step_metrics import StepMetrics


def test_step_line_has_the_four_numbers_and_no_raw_keys():
    line = step_line(5, 10, StepMetrics(reward=0.41234, dead_share=0.5, **{"pass_rate/t1/c1": 1.0}), 3, 31.24)
    assert line == "step 5/10  reward 0.412  dead 0.50  harness v3  31.2 s"
    assert "pass_rate" not in line
    assert "judge warnings 2" in step_line(1, 2, StepMetrics(reward=0.0, dead_share=1.0, judge_warnings=2), 0, 1.0)
    assert step_line(1, 2, StepMetrics(), 0, 1.0).startswith("step 1/2  reward -  dead -")


def test_round_lines_say_what_was_accepted_on_which_task_and_why():
    summary = {
        "step": 4,
        "reports": [
            {
                "task_id": "wri-0015",
                "failure_type": "collapse_high",
                "decision": "accepted",
                "interface": "sampling",
                "attempts": [
                    {"template": "variant: 3 bullets", "reasons": ["fail std_gain"]},
                    {"template": "variant: numbered list of 2", "reasons": ["std 0.000 -> 0.197"]},
                ],
            },
            {"task_id": "med-0036", "failure_type": "flat", "decision": "rejected", "interface": None, "attempts": []},
            {
                "event_id": "flat:med-0036:3:hop1",
                "task_id": "med-0036",
                "failure_type": "flat",
                "decision": "accepted",
                "interface": "guidance",
                "attempts": [{"template": "hint", "reasons": ["std 0.000 -> 0.2"]}],
            },
        ],
    }
    lines = round_lines(4, RoundRecord.model_validate(summary), 0, 3, 61.04, 2)
    assert lines[0] == "evolver round after step 4: 2 event(s), harness v0 -> v3, pause 61.0 s"
    assert (
        lines[1]
        == "  wri-0015: collapse_high -> accepted on sampling: variant: numbered list of 2 (std 0.000 -> 0.197)"
    )
    assert lines[2] == "  med-0036: flat -> rejected on -: no candidate"
    assert lines[3] == (
        "  med-0036: flat (climbed from the interface above) -> accepted on guidance: hint (std 0.000 -> 0.2)"
    )


def test_round_lines_read_without_none_and_show_provisional_verdicts_and_batches():
    summary = {
        "step": 8,
        "provisional": {
            "window": 2,
            "waiting": 1,
            "verdicts": [
                {
                    "version": 2,
                    "line": "med-1 v2 (collapse_low): revert: collapse_low persists: 2 of 2 groups dead "
                    "(std 0.00, 0.00) -> revert v4",
                }
            ],
        },
        "reports": [
            {
                "task_id": "med-2",
                "failure_type": "spurious_length",
                "decision": "rejected",
                "interface": "criteria",
                "attempts": [
                    {"template": "pitfall_padding", "reasons": ["corr(reward, length) None -> None (drop None)"]}
                ],
            },
            {
                "task_id": "med-3",
                "failure_type": "stuffing",
                "decision": "accepted",
                "interface": "criteria",
                "committed_version": 5,
                "attempts": [
                    {
                        "template": "tighten_repeat",
                        "reasons": ["raw"],
                        "decision": {"verdict": "accept", "reasons": ["gamed drop 0.50"]},
                    }
                ],
                "generalised": {
                    "decision": "accepted",
                    "targets": ["med-4"],
                    "version": 6,
                    "verdict": {"verdict": "accept", "reasons": ["1 of 1 targets held"]},
                },
            },
        ],
        "error": None,
    }
    lines = round_lines(8, RoundRecord.model_validate(summary), 3, 6, 2.0, 2)
    assert lines[1] == (
        "  provisional med-1 v2 (collapse_low): revert: collapse_low persists: 2 of 2 groups dead "
        "(std 0.00, 0.00) -> revert v4"
    )
    assert lines[2] == "  provisional: 1 accepted update target(s) wait for 2 training groups"
    assert (
        lines[3] == "  med-2: spurious_length -> rejected on criteria: pitfall_padding "
        "(corr(reward, length) n/a -> n/a (drop n/a))"
    )
    assert lines[4] == "  med-3: stuffing -> accepted v5 on criteria: tighten_repeat (gamed drop 0.50)"
    assert lines[5] == "    batched to med-4: accepted v6 (1 of 1 targets held)"
    assert not any("None" in line for line in lines)
    failed = round_lines(8, RoundRecord(step=8, error="ConnectionError: down"), 3, 3, 1.0, 1)
    assert failed[-1] == "  round failed, harness left at v3: ConnectionError: down"


def test_library_deprecations_are_hidden_and_ours_are_not():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_library_warnings()
        warnings.warn_explicit("old api", FutureWarning, "x.py", 1, module="transformers.trainer")
        warnings.warn_explicit("ours", FutureWarning, "y.py", 1, module="harness.ops")
    assert [str(w.message) for w in caught] == ["ours"]
    assert logging.getLogger("trl").level == logging.ERROR
