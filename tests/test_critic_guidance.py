"""Every guidance template of the rule proposer can pass the critic: one case each, measured for real.

Each test builds the template's update with `proposer.rule_proposal` (earlier templates marked as
tried), measures it with `measure_candidate` under the critic's sequential rule (`critic.stop_rule`)
on a scripted frozen policy, and asserts the critic accepts it. Hints are measured at the reveal
fraction and hinted share of the next training step, so schedule-only templates (`leak_fade`) are
measured on what they change: how many visits see the hint.
"""

from __future__ import annotations

import pytest

from agents import critic, proposer
from agents.context import EvolverContext
from agents.schemas import Attribution
from harness.types import FailureEvent, Guidance, HarnessState, Hint
from tests.support.fakes.evolver_fakes import event, suite
from tests.support.fakes.fake_chat import ScriptedPolicy
from tools.candidate import measure_candidate
from tools.judge import Judge
from tools.measure_settings import MeasureSettings

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
UNSURE = "I am not sure."
LEAKY = "Mention that drinking water and resting in a dark room often helps"
STEP = 10


def _decide(state: HarnessState, ev: dict, template: str, tried: list[str], policy: ScriptedPolicy):
    event_ = FailureEvent.model_validate(ev)
    prop = proposer.rule_proposal(
        event_, Attribution(interface="guidance", diagnosis="test"), state, [{"template": t} for t in tried], STEP
    )
    assert prop.template == template and prop.update is not None, prop.error
    ctx = EvolverContext()
    m = measure_candidate(
        state,
        prop.update,
        policy,
        Judge(None),
        MeasureSettings(sample_k=4, sample_k_max=16, step=STEP),
        rule=critic.stop_rule(event_, prop.update, ctx),
    )
    return prop, m, critic.judge_measurement(event_, prop.update, m, ctx)


def _hints_help(prompt: str, i: int) -> str:
    """Hinted visits answer well half of the time; unhinted ones never."""
    return HONEST if "Hint:" in prompt and i % 2 == 0 else UNSURE


@pytest.mark.parametrize(
    ("template", "tried"), [("hint", []), ("hint_strong", ["hint"]), ("hint_all", ["hint", "hint_strong"])]
)
def test_hint_templates_pass_on_a_collapsed_task_that_hints_revive(template, tried):
    state = HarnessState.from_tasks(suite())
    prop, m, crit = _decide(
        state, event("e", "collapse_low", "med-1", mean=0.0, std=0.0), template, tried, ScriptedPolicy(_hints_help)
    )
    assert crit.measured_ok, crit.reasons
    assert crit.numbers["std_gain"] > 0.05 and m.sequential.decision == "pass"
    # Half the hinted rollouts answer well: 2 hits in the first 4 against 0 in the control's 32 is beyond chance
    # (the exact hit test's first bound), so one look decides.
    assert m.sequential.test == "exact" and m.sequential.ks == [4] and m.sequential.hits == [2]
    if template == "hint":  # 75% of visits hinted: the unhinted visits are a second, dead, stratum
        assert m.per_task["med-1"]["candidate"].stratum_weights == [0.75, 0.25]
        # hinted visits: rewards alternate 1 and 1/9 (std 4/9); unhinted visits are dead
        assert m.per_task["med-1"]["candidate"].std == pytest.approx(0.75 * 4 / 9)


def test_hint_template_fails_when_hints_change_nothing():
    state = HarnessState.from_tasks(suite())
    _, m, crit = _decide(
        state, event("e", "collapse_low", "med-1", mean=0.0, std=0.0), "hint", [], ScriptedPolicy(lambda p, i: UNSURE)
    )
    # An all-zero first look is undecided, never a fail: the test looks on and fails at the cap.
    assert not crit.measured_ok and m.sequential.decision == "fail" and m.sequential.ks == [4, 8, 16]
    assert m.sequential.hits == [0, 0, 0] and m.sequential.fail_at[:2] == [-1, -1]


def _leaky_state() -> HarnessState:
    state = HarnessState.from_tasks(suite())
    hint = Hint(id="h-water", text=LEAKY, source="criterion:water")
    return state.model_copy(update={"guidance": {"med-1": Guidance(hints=[hint])}})


def _parrot(prompt: str, i: int) -> str:
    """Copies the leaky hint; an abstract hint gets an honest answer; no hint, an honest answer too."""
    if LEAKY in prompt:
        return LEAKY
    return HONEST


LEAK = event("e", "guidance_leak", "med-1", leak_share=1.0)


def test_leak_fade_passes_by_hinting_fewer_visits():
    """Schedule-only: the fade halves the hinted share, so half the visits no longer see (and copy) the hint."""
    prop, m, crit = _decide(_leaky_state(), LEAK, "leak_fade", [], ScriptedPolicy(_parrot))
    assert [op.op for op in prop.update.ops] == ["set_schedule"]
    ctrl, cand = m.per_task["med-1"]["control"], m.per_task["med-1"]["candidate"]
    assert ctrl.leak_hits == 4 and cand.leak_hits == pytest.approx(2.0) and cand.stratum_weights == [0.5, 0.5]
    assert crit.measured_ok, crit.reasons
    assert m.sequential.decision == "pass" and m.sequential.ks == [4]  # deterministic: decided at the first look
    # The hinted visit prompt is the control's: only the unhinted visits needed fresh rollouts.
    assert m.cost.probe_rollouts == 8 and m.cost.reused_rollouts == 0


def test_leak_fade_fails_when_no_visit_sees_the_hint():
    """With hinted_share 0 no visit copies the hint now: the fade changes nothing the next steps see."""
    state = _leaky_state()
    unhinted = state.model_copy(
        update={
            "guidance": {
                "med-1": state.guidance["med-1"].model_copy(
                    update={"schedule": state.guidance["med-1"].schedule.model_copy(update={"hinted_share": 0.0})}
                )
            }
        }
    )
    _, m, crit = _decide(unhinted, LEAK, "leak_fade", [], ScriptedPolicy(_parrot))
    assert not crit.measured_ok and m.per_task["med-1"]["control"].leak_hits == 0


def test_leak_abstract_passes_when_the_reworded_hint_is_not_copied():
    prop, m, crit = _decide(_leaky_state(), LEAK, "leak_abstract", ["leak_fade"], ScriptedPolicy(_parrot))
    assert [op.op for op in prop.update.ops] == ["edit_hint"]
    assert m.per_task["med-1"]["candidate"].leak_hits == 0 and crit.measured_ok, crit.reasons


def test_leak_remove_passes_when_removing_the_hint_stops_the_copying():
    prop, m, crit = _decide(
        _leaky_state(), LEAK, "leak_remove", ["leak_fade", "leak_abstract"], ScriptedPolicy(_parrot)
    )
    assert [op.op for op in prop.update.ops] == ["remove_hint"]
    assert not m.per_task["med-1"]["candidate"].hinted and crit.measured_ok, crit.reasons


DOCTOR = "See a doctor."  # passes the hidden audit, meets no rubric criterion but the length


def _hints_cost_audit(pays_the_gamed: bool):
    """Plain visits answer DOCTOR (a dead group); hinted visits often drop the doctor the audit wants.

    When `pays_the_gamed`, the hinted answers that the rubric pays are exactly those the audit fails; otherwise the
    rubric pays audit-passing and audit-failing hinted answers alike.
    """
    good = [f"Drink water. {DOCTOR}", "Drink water.", DOCTOR, "I am not sure."]
    gamed = ["Drink water.", "Drink water.", DOCTOR, DOCTOR]
    answers = gamed if pays_the_gamed else good
    return ScriptedPolicy(lambda prompt, i: answers[i % 4] if "Hint:" in prompt else DOCTOR)


@pytest.mark.parametrize("pays_the_gamed", [False, True])
def test_a_hint_on_a_dead_task_is_vetoed_by_its_signal_not_by_its_audit_level(pays_the_gamed):
    """A hint's answers may fail the audit more often than the plain task's (the hint's words cost something);
    what the critic refuses is a revived signal that pays the audit-failing answers."""
    state = HarnessState.from_tasks(suite())
    _, m, crit = _decide(
        state,
        event("e", "collapse_low", "med-1", mean=0.1, std=0.0),
        "hint",
        [],
        _hints_cost_audit(pays_the_gamed),
    )
    assert crit.numbers["audit_mean_change"] < -0.2  # the old level guard (max drop 0.05) would veto both
    assert "audit_drop_bound" not in crit.numbers
    assert crit.numbers["std_gain"] > 0.05
    assert crit.measured_ok is not pays_the_gamed, crit.reasons
    if pays_the_gamed:
        assert crit.numbers["revived_gap_bound"] > 0
        assert any("audit-failing rollouts minus audit-passing" in r for r in crit.reasons)


LEAKY_DOC = "Mention that water, rest in a dark room and a doctor all help"  # copying it passes the audit


def _doc_leaky_state() -> HarnessState:
    state = HarnessState.from_tasks(suite())
    hint = Hint(id="h-doc", text=LEAKY_DOC, source="criterion:water")
    return state.model_copy(update={"guidance": {"med-1": Guidance(hints=[hint])}})


@pytest.mark.parametrize("own_answers_worse", [False, True])
def test_a_leak_repair_is_guarded_on_the_answers_that_do_not_copy_the_hint(own_answers_worse):
    """Copying a leaking hint earns its audit credit from the hint: removing the hint lowers the audit mean of
    every rollout, and the whole-mean guard (max drop 0.05) would veto the repair that stops the copying. The guard
    compares the policy's own answers instead: it passes when they keep their audit and vetoes when they lose it."""
    own_hinted = HONEST if own_answers_worse else "Drink water and rest."  # HONEST names the doctor (audit 1)

    def policy(prompt: str, i: int) -> str:
        if LEAKY_DOC in prompt:
            return LEAKY_DOC if i % 2 == 0 else own_hinted
        return "Drink water and rest."  # no hint: no doctor, audit 0

    prop, m, crit = _decide(
        _doc_leaky_state(), LEAK, "leak_remove", ["leak_fade", "leak_abstract"], ScriptedPolicy(policy)
    )
    ctrl, cand = m.per_task["med-1"]["control"], m.per_task["med-1"]["candidate"]
    assert sum(ctrl.leaks) == len(ctrl.leaks) // 2 and cand.leak_hits == 0
    assert ctrl.audit_mean - cand.audit_mean >= 0.5  # the whole means drop either way
    assert crit.numbers["audit_drop_bound"] == pytest.approx(1.0 if own_answers_worse else 0.0)
    assert crit.measured_ok is not own_answers_worse, crit.reasons
    vetoes = [r for r in crit.reasons if r.startswith("guard failed") and "do not copy the hint" in r]
    assert len(vetoes) == int(own_answers_worse), crit.reasons
