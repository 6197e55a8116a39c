"""The rule brains read cross-task evidence from memory (agents/proposer.py `rule_proposal`, agents/attributor.py).

A template accepted on a similar case (another task, same failure type and interface, same domain or same
criterion signature) is tried first; one rejected there twice without a success is skipped; the proposal
records which records changed the choice. With the memory ablation the default order stands, so the
no-memory arm differs from the full one.
"""

from __future__ import annotations

import pytest

from agents import attributor, proposer
from agents.schemas import Attribution
from graphs.evolver import graph
from harness.types import INTERFACES, FailureEvent, HarnessState, HarnessUpdate
from memory.records import ProposalRecord
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run, suite

STATE = HarnessState.from_tasks(suite())
LOW = FailureEvent.model_validate(event("e-low", "collapse_low", "med-1", mean=0.0, std=0.0))
GUIDANCE = Attribution(interface="guidance", diagnosis="d")


def _rec(
    i: int,
    template: str,
    outcome: str,
    *,
    task: str = "med-2",
    domain: str = "medical",
    interface: str = "guidance",
    failure_type: str = "collapse_low",
    signature: str = "",
) -> dict:
    return {
        "id": f"p{i}:r0",
        "event_id": f"p{i}",
        "task_id": task,
        "failure_type": failure_type,
        "interface": interface,
        "template": template,
        "outcome": outcome,
        "domain": domain,
        "signature": signature,
    }


def _order(similar: list[dict], n: int = 3) -> list[str]:
    """Templates of n successive attempts on LOW, each rejected (as the graph's revisions would see them)."""
    attempts: list[dict] = []
    for _ in range(n):
        prop = proposer.rule_proposal(LOW, GUIDANCE, STATE, attempts, step=10, similar=similar)
        if prop.update is None:
            break
        attempts.append({"template": prop.template, "critique": {"numbers": {}, "reasons": []}})
    return [a["template"] for a in attempts]


ORDER_CASES = [
    # (cross-task records, expected attempt order)
    ([], ["hint", "hint_strong", "hint_all"]),
    ([_rec(1, "hint_strong", "accepted")], ["hint_strong", "hint", "hint_all"]),
    (
        [_rec(1, "hint_all", "accepted"), _rec(2, "hint_strong", "accepted"), _rec(3, "hint_all", "accepted")],
        ["hint_all", "hint_strong", "hint"],
    ),
    ([_rec(1, "hint", "rejected"), _rec(2, "hint", "invalid")], ["hint_strong", "hint_all"]),  # failed twice: skipped
    ([_rec(1, "hint", "rejected")], ["hint", "hint_strong", "hint_all"]),  # once is not "repeatedly"
    (
        [_rec(1, "hint", "rejected"), _rec(2, "hint", "rejected"), _rec(3, "hint", "accepted")],
        ["hint", "hint_strong", "hint_all"],
    ),  # a success outweighs failures
    (
        [_rec(1, "hint_strong", "accepted", domain="science")],
        ["hint", "hint_strong", "hint_all"],
    ),  # not similar: domain
    (
        [_rec(1, "hint_strong", "accepted", domain="science", signature="essential/contains_any")],
        ["hint", "hint_strong", "hint_all"],
    ),  # the event names no criterion: no signature to share
    ([_rec(1, "hint_strong", "accepted", interface="criteria")], ["hint", "hint_strong", "hint_all"]),
    ([_rec(1, "hint_strong", "accepted", failure_type="flat")], ["hint", "hint_strong", "hint_all"]),
    (
        [_rec(1, "hint_strong", "accepted", task="med-1")],
        ["hint", "hint_strong", "hint_all"],
    ),  # own task: not cross-task
    # training confirmed it: still a success (the verdict record itself is not counted twice)
    ([_rec(1, "hint_strong", "accepted"), _rec(1, "hint_strong", "confirmed")], ["hint_strong", "hint", "hint_all"]),
    # training reverted both accepted updates: two failures of the template, which is then skipped
    (
        [
            _rec(1, "hint", "accepted"),
            _rec(1, "hint", "reverted"),
            _rec(2, "hint", "accepted"),
            _rec(2, "hint", "reverted"),
        ],
        ["hint_strong", "hint_all"],
    ),
]


@pytest.mark.parametrize(("similar", "order"), ORDER_CASES)
def test_template_order_follows_similar_cases(similar, order):
    assert _order(similar) == order


def test_evidence_that_changed_the_choice_is_recorded():
    promoted = proposer.rule_proposal(LOW, GUIDANCE, STATE, [], step=10, similar=[_rec(7, "hint_strong", "accepted")])
    assert promoted.template == "hint_strong"
    assert promoted.evidence_used == ["proposal p7:r0 accepted on med-2: template hint_strong"]
    skipped = proposer.rule_proposal(
        LOW, GUIDANCE, STATE, [], step=10, similar=[_rec(1, "hint", "rejected"), _rec(2, "hint", "rejected")]
    )
    assert skipped.template == "hint_strong" and skipped.evidence_used == [
        "skipped hint: proposal p1:r0 rejected on med-2: template hint",
        "skipped hint: proposal p2:r0 rejected on med-2: template hint",
    ]
    # Evidence that agrees with the default order changed nothing, so nothing is recorded.
    same = proposer.rule_proposal(LOW, GUIDANCE, STATE, [], step=10, similar=[_rec(1, "hint", "accepted")])
    assert same.template == "hint" and same.evidence_used == []


def test_criterion_signature_makes_another_domain_similar():
    stuff = FailureEvent.model_validate(event("e-s", "stuffing", "med-1", "water"))
    crit = Attribution(interface="criteria", diagnosis="d")
    other = _rec(
        1,
        "pitfall_repeat",
        "accepted",
        domain="science",
        interface="criteria",
        failure_type="stuffing",
        signature="essential/contains_any",
    )
    assert (
        proposer.rule_proposal(stuff, crit, STATE, [], 10, similar=[other], signature="essential/contains_any").template
        == "pitfall_repeat"
    )
    assert (
        proposer.rule_proposal(stuff, crit, STATE, [], 10, similar=[other], signature="important/contains_all").template
        == "tighten_repeat"
    )


@pytest.mark.parametrize(
    ("records", "use_memory", "interface"),
    [
        ([_rec(1, "split_graded", "accepted", interface="criteria")], True, "criteria"),
        ([_rec(1, "split_graded", "accepted", interface="criteria")], False, "guidance"),
        ([_rec(1, "split_graded", "accepted", interface="criteria"), _rec(2, "hint", "accepted")], True, "guidance"),
        ([_rec(1, "split_graded", "accepted", interface="criteria", domain="science")], True, "guidance"),
    ],
)
def test_attributor_prefers_the_interface_that_repaired_similar_cases(records, use_memory, interface):
    evidence = {"task": {"domain": "medical"}, "cross_task": records}
    att = attributor.rule_attribution(LOW, evidence, list(INTERFACES), use_memory=use_memory)
    assert att.interface == interface
    assert att.evidence_used == (
        ["proposal p1:r0 accepted on med-2: interface criteria"] if interface == "criteria" else []
    )


def _seed(memory) -> None:
    update = HarnessUpdate.model_validate(
        {
            "interface": "guidance",
            "ops": [{"op": "add_hint", "task_id": "med-2", "hint": {"id": "h1", "text": "Say to cool the burn."}}],
        }
    )
    memory.add_proposal(
        ProposalRecord(
            proposal_id="old:r1",
            event_id="old",
            task_id="med-2",
            step=4,
            failure_type="collapse_low",
            interface="guidance",
            update=update,
            outcome="accepted",
            domain="medical",
            template="hint_strong",
        )
    )


@pytest.mark.parametrize(
    ("memory", "first", "evidence"),
    [
        (True, "hint_strong", ["proposal old:r1 accepted on med-2: template hint_strong"]),
        (False, "hint", []),  # the ablation reads no evidence: the default order, as before
    ],
)
def test_graph_round_reads_evidence_only_with_memory(tmp_path, memory, first, evidence):
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    _seed(svc.memory)
    out = graph.invoke(
        {"events": [event("e1", "collapse_low", "med-1")], "harness_version": 0, "step": 10},
        context={"services_key": key, "sample_k": 4, "memory": memory},
    )
    report, *climbs = out["reports"]  # a dead task may climb its repair ladder after its first part
    assert [r["event_id"] for r in climbs] in ([], ["e1:hop1"])
    assert report["attempts"][0]["template"] == first and report["attempts"][0]["evidence_used"] == evidence
    stored = [p for p in svc.memory.proposals_for("med-1") if p.revision == 0 and p.event_id == "e1"]
    assert stored[0].template == first and stored[0].evidence_used == evidence


def test_a_refusal_a_later_attempt_built_on_is_no_failure_of_its_template():
    """A word budget every probe kept to is refused, then re-sized from those probes and accepted (one event, two
    attempts): on similar cases that is a success of the pair, so the sized rung is still tried first, while two
    refusals nothing was built on still skip it."""
    high = FailureEvent.model_validate(event("e-high", "collapse_high", "med-1", mean=1.0, std=0.0))

    def rec(i, template, outcome):
        return {
            **_rec(i, template, outcome, interface="sampling", failure_type="collapse_high"),
            "id": f"p{i}:{template}",
        }

    stepped = [
        rec(i, t, o) for i in (1, 2) for t, o in (("variant_sized", "rejected"), ("variant_resized", "accepted"))
    ]
    ev = proposer.template_evidence(stepped, high, "sampling", "medical", "")
    assert not ev.skipped("variant_sized") and ev.promoted("variant_resized")
    refused = [rec(i, "variant_sized", "rejected") for i in (1, 2)]
    assert proposer.template_evidence(refused, high, "sampling", "medical", "").skipped("variant_sized")
