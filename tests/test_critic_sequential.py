"""The critic's sequential test and cost numbers: `stop_rule` drives `measure_candidate`'s adaptive budget,
`judge_measurement` accepts only a "pass" and records what the measurement cost."""

from __future__ import annotations

from agents import critic
from agents.context import EvolverContext
from harness.detector import DetectorConfig
from harness.types import FailureEvent, HarnessState, HarnessUpdate
from tests.support.fakes.evolver_fakes import event, suite
from tests.support.fakes.fake_chat import ScriptedPolicy
from tools.candidate import measure_candidate
from tools.group_metrics import Row, group_metrics
from tools.judge import Judge
from tools.measure_settings import MeasureSettings

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
HINT = {
    "interface": "guidance",
    "ops": [{"op": "add_hint", "task_id": "med-1", "hint": {"id": "h1", "text": "Think about fluids and rest."}}],
}
LOW = FailureEvent.model_validate(event("e", "collapse_low", "med-1", mean=0.0, std=0.0))


def _one_in_four(prompt: str, i: int) -> str:
    """A hinted visit answers well once in four rollouts: a real but noisy gain."""
    return HONEST if "Hint:" in prompt and i % 4 == 0 else "I am not sure."


def _judge(policy, **budget):
    state = HarnessState.from_tasks(suite())
    update = HarnessUpdate.model_validate(HINT)
    ctx = EvolverContext()
    m = measure_candidate(
        state, update, policy, Judge(None), MeasureSettings(step=10, **budget), rule=critic.stop_rule(LOW, update, ctx)
    )
    return m, critic.judge_measurement(LOW, update, m, ctx)


def test_a_gain_within_noise_is_rejected_at_the_cap():
    """Point estimate passes (std 0 -> 0.38), but 1 hit in 4 is what a control of 0 in 4 gives by chance 30% of
    the time: the exact hit test stays undecided at the cap, which rejects."""
    m, crit = _judge(ScriptedPolicy(_one_in_four), sample_k=4, sample_k_max=4)
    assert crit.numbers["std_gain"] > 0.3 and m.sequential.decision == "undecided"
    assert m.sequential.test == "exact" and m.sequential.hits == [1] and m.sequential.control_hits == 0
    assert not crit.measured_ok and any("exact hit test undecided" in r for r in crit.reasons)
    assert crit.numbers["seq_looks"] == 1 and crit.numbers["seq_p_pass"] > 0.1  # the null tail P(X >= 1)


def test_the_same_gain_is_accepted_once_more_rollouts_make_it_clear():
    m, crit = _judge(ScriptedPolicy(_one_in_four), sample_k=4, sample_k_max=16)
    assert crit.measured_ok, crit.reasons
    # The control pool is fixed first (twice the cap: 32 fresh rollouts, 0 hits): 2 hits in 8 then clear the bound.
    assert m.sequential.ks == [4, 8] and m.sequential.decision == "pass"
    assert m.sequential.hits == [1, 2] and m.sequential.pass_at == [2, 2] and m.sequential.control_n == 32
    assert crit.numbers["k"] == 8 and crit.numbers["seq_looks"] == 2


def test_critique_numbers_carry_the_cost():
    m, crit = _judge(ScriptedPolicy(_one_in_four), sample_k=4, sample_k_max=16)
    n = crit.numbers
    assert n["cost_probe_rollouts"] == m.cost.probe_rollouts == 40  # 32 control at once + 8 hinted, drawn 4 + 4
    assert n["cost_sample_calls"] == 3 and n["cost_judge_calls"] == 0 and n["cost_probe_tokens"] > 0
    assert n["cost_seconds"] is not None and n["cost_scored_rollouts"] == 40


def test_stop_rule_reads_the_new_variant_of_an_add_variant():
    update = HarnessUpdate.model_validate(
        {
            "interface": "sampling",
            "ops": [
                {
                    "op": "add_variant",
                    "task_id": "med-1",
                    "variant_id": "med-1.v1",
                    "weight": 1.0,
                    "prompt": [
                        {"role": "user", "content": "What helps a mild headache? Answer in three bullet points."}
                    ],
                }
            ],
        }
    )
    high = FailureEvent.model_validate(event("h", "collapse_high", "med-1", mean=1.0, std=0.0))
    assert critic.stop_rule(high, update, EvolverContext()).task_id == "med-1.v1"


def _flat_side(rewards: list[float]):
    rows = [Row(text="x", reward=r, length=10, audit=None, verdicts={}, leak=False, repeat=1) for r in rewards]
    return group_metrics("med-1", 0, [(1.0, False, rows)], DetectorConfig())


def test_a_revived_group_needs_to_vary_not_a_fixed_std_gain_while_a_criteria_edit_does():
    """Control nearly flat (std 0.041), candidate group varies (std 0.0625 >= eps): a hint's point rule holds, since
    training scales each group by its own std; a criteria edit with the same numbers needs the 0.05 gain and fails.
    A hint whose group is still dead (std below eps) fails either way."""
    flat = FailureEvent.model_validate(event("e", "flat", "med-1", mean=0.5, std=0.0))
    control = _flat_side([0.5] * 7 + [0.625])
    varied = _flat_side([0.5, 0.5, 0.625, 0.625])
    still_flat = _flat_side([0.5, 0.5, 0.5, 0.5])
    hint = HarnessUpdate.model_validate({**HINT})
    edit = HarnessUpdate.model_validate(
        {
            "interface": "criteria",
            "ops": [{"op": "reweight_criterion", "task_id": "med-1", "criterion_id": "c1", "weight": 2.0}],
        }
    )
    ctx = EvolverContext()
    assert 0.0 < varied.std - control.std < ctx.min_std_gain and not varied.dead
    assert critic.stop_rule(flat, hint, ctx).holds(control, varied, False)
    assert not critic.stop_rule(flat, edit, ctx).holds(control, varied, False)
    assert not critic.stop_rule(flat, hint, ctx).holds(control, still_flat, False)
