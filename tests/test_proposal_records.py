"""The proposal records' constructors (`memory.records.ProposalRecord.of_*`) build what the evolver writes to memory.

A fallback round through the whole graph: every record memory holds for it equals the constructor's, built from the
round's report; and a generalised target's record carries the batch's verdict and the source's step and domain.
"""

from __future__ import annotations

from graphs.evolver import graph
from harness.types import FailureEvent, HarnessUpdate, Reweight
from memory.records import ProposalRecord
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run


def test_the_records_of_a_fallback_round_are_the_constructors(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    raw = event("e-low2", "collapse_low", "med-1", mean=0.0, std=0.0)
    out = graph.invoke(
        {"events": [raw], "harness_version": 0, "step": 10},
        {"configurable": {"thread_id": "t"}},
        context={"services_key": key, "sample_k": 4, "interfaces": ["guidance", "sampling"]},
    )
    (report,) = out["reports"]
    assert report["decision"] == "fallback" and len(report["attempts"]) == 3
    ev, fb = FailureEvent.model_validate(raw), report["fallback"]
    domain = svc.store.load(0).task("med-1").domain
    expected = [
        ProposalRecord.of_attempt(
            ev,
            revision=a["revision"],
            interface=report["interface"],
            update=HarnessUpdate.model_validate(a["update"]),
            measurements=a["critique"]["numbers"],
            reasons=a["critique"]["reasons"],
            deltas=a["measurement"]["deltas"],
            outcome="rejected",
            harness_version=0,
            domain=domain,
            template=a["template"],
            signature="",
            evidence_used=a["evidence_used"],
        )
        for a in report["attempts"]
    ]
    expected.append(
        ProposalRecord.of_fallback(
            ev,
            HarnessUpdate.model_validate(fb["update"]),
            reason=fb["reason"],
            version=fb["version"],
            revision=3,
            domain=domain,
        )
    )
    stored = sorted(svc.memory.proposals_for("med-1"), key=lambda p: p.revision)
    assert [p.model_dump() for p in stored] == [p.model_dump() for p in expected]
    # A delta the measurement could not compute is not stored (Chroma keeps finite numbers only).
    assert any(v is None for a in report["attempts"] for v in a["measurement"]["deltas"].values())
    assert all(None not in p.deltas.values() for p in stored)


def test_a_generalised_target_record_carries_the_batch_verdict():
    target = FailureEvent(id="e-2", type="collapse_low", task_id="med-2", step=8, window=[7, 8])
    update = HarnessUpdate(interface="sampling", ops=[Reweight(task_id="med-2", weight=0.5)], rationale="halve")
    got = ProposalRecord.of_generalised(
        target,
        update,
        source_id="e-1:r0",
        step=10,
        interface="sampling",
        measurements={"k": 4.0},
        reasons=["PASS"],
        accepted=False,
        harness_version=3,
        domain="medical",
        template="downweight",
        signature="rubric/word_count",
    )
    assert got == ProposalRecord(
        proposal_id="e-1:r0:gen:med-2",
        event_id="e-2",
        task_id="med-2",
        step=10,
        failure_type="collapse_low",
        interface="sampling",
        update=update,
        measurements={"k": 4.0},
        outcome="rejected",
        reasons=["PASS"],
        revision=0,
        harness_version=3,
        domain="medical",
        template="downweight",
        generalised_from="e-1:r0",
        signature="rubric/word_count",
    )
