"""The proposer's sampling fallback: no task leaves training through it.

Checked on the pure function (`agents.fallback.fallback_decision`) with the real harness ops: it acts
only on confirmed failures, a garbage LLM answer never triggers it on its own, weights are never set
to 0, quarantines expire, and a saturated task is retired only while a harder variant is active.
"""

from __future__ import annotations

import pytest

from agents import critic, fallback, proposer
from agents.schemas import Attribution
from harness.ops import apply
from harness.sampling import TaskSampler
from harness.types import FAILURE_TYPES, FailureEvent, HarnessState, HarnessUpdate
from tests.support.fakes.evolver_fakes import suite
from tests.support.fakes.fake_chat import scripted

STATE = HarnessState.from_tasks(suite())


def _ev(etype: str, *, hits: int = 3, task_id: str = "med-1", step: int = 10) -> FailureEvent:
    return FailureEvent(
        id=f"e-{etype}",
        type=etype,
        task_id=task_id,
        step=step,
        window=list(range(step - hits + 1, step + 1)),
        window_hits=hits,
        confirmed=hits >= 2,
        criterion_id={"stuffing": "water", "blind_criterion": "len"}.get(etype),
    )


def _rejected(source: str = "rules") -> dict:
    """An attempt as the graph records it: a measured candidate the critic rejected."""
    return {
        "revision": 0,
        "template": "t",
        "source": source,
        "update": {"interface": "criteria", "ops": []},
        "error": None,
        "critique": {
            "failure_type": "stuffing",
            "measured_ok": False,
            "measured": True,
            "invalid": False,
            "numbers": {},
            "reasons": ["FAIL: gamed_drop"],
        },
        "measurement": {},
    }


def _garbage(event: FailureEvent, revision: int = 0) -> dict:
    """An attempt whose LLM answer was unusable, recorded as the graph does (invalid critique, no measurement)."""
    prop = proposer.llm_proposal(
        scripted("I would tighten the rubric somehow.", "Sure! Here you go: {not json"),
        event,
        Attribution(interface="criteria", diagnosis="d"),
        STATE,
        [],
    )
    assert prop.update is None and prop.source == "llm"
    crit = critic.invalid_critique(event, [prop.error or ""])
    return {
        "revision": revision,
        "template": prop.template,
        "source": prop.source,
        "update": None,
        "error": prop.error,
        "critique": crit.model_dump(mode="json"),
        "measurement": None,
    }


def _in_training(state: HarnessState, task_id: str) -> bool:
    """Still part of training: active with a positive weight, and drawn again once any quarantine ends."""
    entry = state.sampling[task_id]
    back_at = entry.quarantined_until or state.step
    return task_id in state.active_task_ids() and entry.weight > 0 and task_id in state.drawable_task_ids(back_at)


def test_an_unconfirmed_event_changes_no_sampling():
    for etype in FAILURE_TYPES:
        fb = fallback.fallback_decision(_ev(etype, hits=1), STATE, [_rejected()])
        assert fb.update is None and "not confirmed" in fb.reason and "1 group" in fb.reason


@pytest.mark.parametrize("etype", sorted(set(FAILURE_TYPES) - fallback.TEACHING_FAILURES))
def test_a_confirmed_failure_keeps_the_task_in_training(etype):
    fb = fallback.fallback_decision(_ev(etype), STATE, [_rejected()], step=10)
    assert fb.update is not None and fb.update.interface == "sampling" and fb.update.event_id == f"e-{etype}"
    assert fb.reason == fb.update.rationale and "confirmed in 3 groups" in fb.reason
    after = apply(STATE, fb.update, step=10)
    assert _in_training(after, "med-1")
    (op,) = fb.update.ops
    if etype in ("collapse_low", "collapse_high"):
        assert (op.op, after.sampling["med-1"].weight) == ("reweight", 0.5)
    else:
        assert (op.op, op.until_step) == ("quarantine", 10 + fallback.QUARANTINE_STEPS)
        sampler = TaskSampler(lambda: after, seed=0)
        assert "med-1" not in sampler.draw(200, step=10)
        assert "med-1" in sampler.draw(200, step=op.until_step)  # drawn again with no further update


def test_repeated_fallbacks_never_reach_weight_zero():
    state = STATE
    for i in range(12):
        fb = fallback.fallback_decision(_ev("collapse_low", step=10 + i), state, [_rejected()])
        assert fb.update is not None
        state = apply(state, fb.update, step=10 + i)
        assert state.sampling["med-1"].weight >= fallback.FALLBACK_MIN_WEIGHT
        assert _in_training(state, "med-1")
    # At the minimum weight the task is quarantined for a while instead of being pushed further down.
    assert state.sampling["med-1"].weight == fallback.FALLBACK_MIN_WEIGHT
    assert state.sampling["med-1"].quarantined_until is not None


def test_a_saturated_task_is_retired_only_while_a_harder_variant_is_active():
    fb = fallback.fallback_decision(_ev("collapse_high"), STATE, [_rejected()])
    assert fb.update.ops[0].op == "reweight"  # no variant: stays in training at half weight
    with_variant = apply(
        STATE,
        HarnessUpdate(
            interface="sampling",
            ops=[
                {
                    "op": "add_variant",
                    "task_id": "med-1",
                    "variant_id": "med-1.v1",
                    "prompt": [
                        {"role": "user", "content": "What helps a mild headache? Answer in three bullet points."}
                    ],
                }
            ],
        ),
    )
    fb = fallback.fallback_decision(_ev("collapse_high"), with_variant, [_rejected()])
    assert fb.update.ops[0].op == "retire" and "'med-1.v1'" in fb.reason
    variant_retired = apply(
        with_variant, HarnessUpdate(interface="sampling", ops=[{"op": "retire", "task_id": "med-1.v1"}])
    )
    assert (
        fallback.fallback_decision(_ev("collapse_high"), variant_retired, [_rejected()]).update.ops[0].op == "reweight"
    )


def test_garbage_llm_answers_cost_revisions_never_a_sampling_change():
    ev = _ev("stuffing")
    attempts = [_garbage(ev, r) for r in range(3)]
    fb = fallback.fallback_decision(ev, STATE, attempts)
    assert fb.update is None and "garbage answer is never a sampling change" in fb.reason
    # One measured, rejected candidate among them is a failed repair: the fallback may act (confirmed).
    fb = fallback.fallback_decision(ev, STATE, [attempts[0], _rejected("llm")])
    assert fb.update is not None and fb.update.ops[0].op == "quarantine"
    # A rule brain that ran out of templates is not an LLM answer: a confirmed failure still falls back.
    no_template = {**_rejected(), "update": None, "critique": critic.invalid_critique(ev, ["no template"]).model_dump()}
    assert fallback.fallback_decision(ev, STATE, [no_template]).update is not None


def test_held_out_retired_and_unknown_tasks_are_left_alone():
    retired = apply(STATE, HarnessUpdate(interface="sampling", ops=[{"op": "retire", "task_id": "med-2"}]))
    fb = fallback.fallback_decision(_ev("stuffing", task_id="med-2"), retired, [_rejected()])
    assert fb.update is None and "retired" in fb.reason
    fb = fallback.fallback_decision(_ev("stuffing", task_id="ghost"), STATE, [_rejected()])
    assert fb.update is None and "no sampling entry" in fb.reason


def test_the_quarantine_starts_at_the_latest_known_step():
    late = STATE.model_copy(update={"step": 30})
    fb = fallback.fallback_decision(_ev("flat", step=10), late, [_rejected()])
    assert fb.update.ops[0].until_step == 30 + fallback.QUARANTINE_STEPS
    fb = fallback.fallback_decision(_ev("flat", step=10), late, [_rejected()], step=40, quarantine_steps=7)
    assert fb.update.ops[0].until_step == 47


def _measured_control(reproduced: float) -> dict:
    """A measured, rejected candidate whose control group did (1.0) or did not (0.0) show the failure."""
    a = _rejected()
    return {**a, "critique": {**a["critique"], "numbers": {"control_reproduced": reproduced}}}


@pytest.mark.parametrize("etype", ["collapse_low", "stuffing", "spurious_audit"])
def test_a_failure_the_frozen_policy_does_not_reproduce_changes_no_sampling(etype):
    ev = _ev(etype)
    fb = fallback.fallback_decision(ev, STATE, [_measured_control(0.0), _measured_control(0.0)])
    assert fb.update is None and "not reproduced on the frozen policy" in fb.reason
    # One control group that showed it is enough; no number at all asks the graph to probe first.
    fb = fallback.fallback_decision(ev, STATE, [_measured_control(0.0), _measured_control(1.0)])
    assert fb.update is not None and not fb.needs_probe
    fb = fallback.fallback_decision(ev, STATE, [_rejected()])
    assert fb.update is not None and fb.needs_probe


def test_a_blind_criterion_changes_no_sampling():
    """Its group is not dead (the detector's rule): the other criteria still teach, so no quarantine or down-weight."""
    fb = fallback.fallback_decision(_ev("blind_criterion"), STATE, [_measured_control(1.0)], step=10)
    assert fb.update is None and "still teach" in fb.reason
