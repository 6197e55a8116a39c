"""The repair ladder of a dead task (agents/repair_ladder.py): a failed rung leads to the next rung, not off the
interface; the attributor takes the next rung's interface and the proposer skips the failed templates."""

from __future__ import annotations

import pytest

from agents import attributor, proposer
from agents import repair_ladder as ladder
from agents.schemas import Attribution
from harness.types import INTERFACES
from tests.test_agents import STATE, _ev

ALL = list(INTERFACES)


def _proposals(*rows):
    """Proposal evidence rows: (interface, template, outcome[, failure_type])."""
    return {
        "proposals": [
            {
                "id": f"p{i}",
                "interface": r[0],
                "template": r[1],
                "outcome": r[2],
                "failure_type": (r[3:] or ["collapse_low"])[0],
            }
            for i, r in enumerate(rows)
        ]
    }


def test_the_collapse_low_ladder_is_hints_then_criteria_then_sampling():
    got = ladder.rungs("collapse_low", attributor.PREFERENCE["collapse_low"], ALL)
    assert got == [
        ("guidance", "hint"),
        ("guidance", "hint_strong"),
        ("guidance", "hint_all"),
        ("criteria", "split_graded"),
        ("criteria", "split_partial"),
        ("criteria", "loosen_hardest"),
        ("sampling", "downweight"),
        ("sampling", "downweight_more"),
    ]
    assert [i for i, _ in ladder.rungs("collapse_low", attributor.PREFERENCE["collapse_low"], ["criteria"])] == [
        "criteria"
    ] * 3


@pytest.mark.parametrize(
    ("rows", "rung"),
    [
        ((), (0, "guidance", "hint")),
        ((("guidance", "hint", "rejected"),), (1, "guidance", "hint_strong")),
        # a revert by training is a failure; a failure on another dead type counts; so does an accepted repair the
        # task went dead after (a fallback's record does not)
        (
            (("guidance", "hint", "reverted", "flat"), ("guidance", "hint_strong", "accepted")),
            (2, "guidance", "hint_all"),
        ),
        ((("guidance", "hint", "fallback"),), (0, "guidance", "hint")),
        # failures on a failure type whose groups teach are not the ladder's
        ((("guidance", "hint", "rejected", "blind_criterion"),), (0, "guidance", "hint")),
        (
            (
                ("guidance", "hint", "rejected"),
                ("guidance", "hint_strong", "invalid"),
                ("guidance", "hint_all", "rejected"),
            ),
            (3, "criteria", "split_graded"),
        ),
    ],
)
def test_next_rung_is_the_first_that_has_not_failed_on_the_task(rows, rung):
    assert ladder.next_rung("collapse_low", attributor.PREFERENCE["collapse_low"], _proposals(*rows), ALL) == rung


def test_a_repeated_template_slot_fails_once_per_failed_proposal():
    order = attributor.PREFERENCE["collapse_high"]
    ev = _proposals(
        ("sampling", "variant_sized", "rejected", "collapse_high"),
        ("sampling", "variant_resized", "rejected", "collapse_high"),
        ("sampling", "variant:a", "rejected", "collapse_high"),
    )
    assert ladder.next_rung("collapse_high", order, ev, ALL) == (3, "sampling", "variant")


def test_the_attributor_climbs_where_it_used_to_leave_the_interface():
    ev = _proposals(("guidance", "hint", "rejected"), ("guidance", "hint_strong", "reverted"))
    att = attributor.rule_attribution(_ev("collapse_low"), ev, ALL)
    # Two failures on guidance moved a task to criteria for good before; the ladder tries guidance's next rung.
    assert att.interface == "guidance" and any("ladder: rung 3 (guidance/hint_all)" in n for n in att.notes)
    assert att.evidence_ids == ["p0", "p1"]
    assert attributor.rule_attribution(_ev("collapse_low"), ev, ALL, use_memory=False).interface == "guidance"
    # Every rung failed: the ladder starts again from the prior, and says so.
    every = _proposals(
        *[(i, n, "rejected") for i, n in ladder.rungs("collapse_low", attributor.PREFERENCE["collapse_low"], ALL)]
    )
    again = attributor.rule_attribution(_ev("collapse_low"), every, ALL)
    assert any("every rung is spent" in n for n in again.notes)
    assert ladder.skipped_templates("collapse_low", every, again.interface) == []


def test_the_proposer_skips_the_failed_rungs_of_its_interface():
    ev = _proposals(("guidance", "hint", "rejected"))
    skipped = ladder.skipped_templates("collapse_low", ev, "guidance")
    assert skipped == ["hint"] and ladder.skipped_templates("stuffing", ev, "guidance") == []
    att = Attribution(interface="guidance", diagnosis="d", confidence=0.8)
    first = proposer.rule_proposal(_ev("collapse_low"), att, STATE, [], step=0)
    climbed = proposer.rule_proposal(_ev("collapse_low"), att, STATE, [], step=0, failed=skipped)
    assert first.template == "hint" and climbed.template == "hint_strong"


def _task(check_type):
    return {"task": {"criteria": [{"id": "fmt", "weight": 2, "check": {"type": check_type}}]}, "unmet": ["fmt"]}


@pytest.mark.parametrize(
    ("failure", "evidence", "first"),
    [
        ("flat", _task("bullets"), "guidance"),  # nobody writes the bullets: re-grading identical answers cannot help
        ("flat", _task("contains_any"), "criteria"),  # a content criterion: the graded criteria edits first
        ("flat", {**_task("bullets"), "unmet": []}, "criteria"),  # the best rollout meets it
        ("collapse_low", _task("bullets"), "guidance"),  # its prior already
    ],
)
def test_a_flat_task_missing_a_format_goes_to_guidance_first(failure, evidence, first):
    order = ladder.order_for(failure, attributor.PREFERENCE[failure], evidence)
    assert order[0] == first and sorted(order) == sorted(attributor.PREFERENCE[failure])
    att = attributor.rule_attribution(_ev(failure), evidence, ALL)
    assert att.interface == first


def test_rung_elsewhere_names_the_next_non_sampling_interfaces_rung():
    order = attributor.PREFERENCE["collapse_low"]
    assert ladder.rung_elsewhere("collapse_low", order, {}, ALL, "guidance") == (0, "criteria", "split_graded")
    assert ladder.rung_elsewhere("collapse_low", order, {}, ["guidance", "sampling"], "guidance") is None
    assert ladder.rung_elsewhere("stuffing", attributor.PREFERENCE["stuffing"], {}, ALL, "criteria") is None
    assert ladder.rung_elsewhere("collapse_high", attributor.PREFERENCE["collapse_high"], {}, ALL, "sampling") is None
    spent = _proposals(
        ("criteria", "split_graded", "rejected"),
        ("criteria", "split_partial", "rejected"),
        ("criteria", "loosen_hardest", "reverted"),
    )
    assert ladder.rung_elsewhere("collapse_low", order, spent, ALL, "guidance") is None


def test_an_accepted_rung_the_task_went_dead_after_and_an_empty_interface_are_spent():
    order = attributor.PREFERENCE["collapse_low"]
    # The hint was accepted and the task is dead again: the next rung, not the hint (already in place) once more.
    ev = _proposals(("guidance", "hint", "accepted"))
    assert ladder.next_rung("collapse_low", order, ev, ALL) == (1, "guidance", "hint_strong")
    assert ladder.skipped_templates("collapse_low", ev, "guidance") == ["hint"]
    # A round found no candidate on guidance at all (template ""): its remaining rungs are spent too.
    empty = _proposals(("guidance", "hint", "accepted"), ("guidance", "", "invalid"))
    assert ladder.exhausted_interfaces(empty) == {"guidance"}
    assert ladder.next_rung("collapse_low", order, empty, ALL) == (3, "criteria", "split_graded")
