"""measure_candidate: control vs candidate on the frozen policy, per interface.

Fast tests use a scripted policy (a fake LLM whose completions depend on the prompt) so expected
numbers are exact; the slow test samples the real tiny model through `LocalEndpoint`.
"""

from __future__ import annotations

import pytest

from harness.detector import DetectorConfig
from harness.ops import UpdateRejected, apply
from harness.types import Criterion, Guidance, HarnessState, HarnessUpdate, Hint, Message, Schedule, Task
from tests.support.fakes.fake_chat import ScriptedPolicy
from tools.candidate import measure_candidate
from tools.judge import Judge
from tools.measure_settings import MeasureSettings
from tools.probes import ProbeCache, latest_rollouts
from tools.sequential import StopRule

HINT = "Mention that drinking water and resting in a dark room often helps"


def _crit(cid, weight=5.0, check=None, kind=None):
    return Criterion(
        id=cid,
        text=f"criterion {cid}",
        weight=weight,
        kind=kind or ("pitfall" if weight < 0 else "essential"),
        check=check,
    )


def _task(tid, prompt="How do I treat a mild headache?", reference=None):
    return Task(
        id=tid,
        domain="medical",
        prompt=[Message(role="user", content=prompt)],
        criteria=[_crit("water", 5, {"type": "contains_any", "phrases": ["water"]})],
        audit_criteria=[_crit("doctor", 5, {"type": "contains_any", "phrases": ["doctor"]})],
        reference_answer=reference,
    )


def _mixed(prompt, i):
    """Half the group drinks water; hinted prompts make everyone parrot the hint."""
    if "Hint:" in prompt:
        return HINT + (" and see a doctor" if i % 2 else "")
    return ["drink water, guaranteed", "rest a while", "water helps", "sleep"][i % 4]


@pytest.fixture
def state():
    return HarnessState.from_tasks([_task("a"), _task("b", prompt="My head hurts after work, what helps?"), _task("c")])


def _measure(state, update, policy, probe_cache=None, **settings):
    return measure_candidate(
        state,
        HarnessUpdate.model_validate(update),
        policy,
        Judge(None),
        MeasureSettings(k=4, seed=7, **settings),
        probe_cache=probe_cache,
    )


def test_criteria_update_rescores_the_same_rollouts(state):
    policy = ScriptedPolicy(_mixed)
    pitfall = {
        "id": "guar",
        "text": "Promises a guaranteed cure.",
        "weight": -3,
        "kind": "pitfall",
        "check": {"type": "contains_any", "phrases": ["guaranteed"]},
    }
    m = _measure(
        state, {"interface": "criteria", "ops": [{"op": "add_pitfall", "task_id": "a", "criterion": pitfall}]}, policy
    )
    assert len(policy.calls) == 1 and policy.calls[0]["seed"] == 7  # one call, candidate reuses control rollouts
    assert m.paired == {"a": True}
    ctrl, cand = m.per_task["a"]["control"], m.per_task["a"]["candidate"]
    assert ctrl.rewards == [1.0, 0.0, 1.0, 0.0]
    assert cand.rewards == [pytest.approx(0.4), 0.0, 1.0, 0.0]  # 5-3 / 5 for the "guaranteed" rollout
    assert m.deltas["mean"] == pytest.approx(-0.15)
    assert cand.pass_rates["guar"] == 0.25 and "guar" not in ctrl.pass_rates
    assert m.candidate_version == state.version + 1


def test_guidance_update_samples_hinted_prompts(state):
    policy = ScriptedPolicy(lambda p, i: HINT if "Hint:" in p else "no idea")
    update = {
        "interface": "guidance",
        "ops": [
            {"op": "add_hint", "task_id": "a", "hint": {"id": "h1", "text": HINT}},
            {"op": "set_schedule", "task_id": "a", "schedule": {"mode": "linear", "start_step": 0, "end_step": 10}},
        ],
    }
    m = _measure(state, update, policy, step=0)
    assert len(policy.calls) == 2 and m.paired == {"a": False}
    assert "Hint:" not in policy.calls[0]["batch"][0][-1]["content"]
    assert f"Hint: {HINT}" in policy.calls[1]["batch"][0][-1]["content"]
    ctrl, cand = m.per_task["a"]["control"], m.per_task["a"]["candidate"]
    assert (ctrl.mean, ctrl.dead, cand.mean, cand.dead) == (0.0, True, 1.0, True)
    assert cand.hinted and cand.leak_hits == 4 and ctrl.leak_hits == 0  # every rollout parrots the hint
    assert m.deltas["leak_hits"] == 4 and m.deltas["mean"] == 1.0


def test_guidance_is_measured_at_the_next_draws_reveal_fraction(state):
    """A schedule that has faded out by step 500 shows nothing there: the candidate is the control.

    After a pause at step s, training draws the next prompts at global_step s: the critic renders them so.
    """
    policy = ScriptedPolicy(lambda p, i: HINT if "Hint:" in p else "no idea")
    update = {
        "interface": "guidance",
        "ops": [
            {"op": "add_hint", "task_id": "a", "hint": {"id": "h1", "text": HINT}},
            {"op": "set_schedule", "task_id": "a", "schedule": {"mode": "linear", "start_step": 0, "end_step": 10}},
        ],
    }
    m = _measure(state, update, policy, step=500)
    assert len(policy.calls) == 1 and m.paired == {"a": True}
    assert "Hint:" not in policy.calls[0]["batch"][0][-1]["content"]
    assert m.deltas["mean"] == 0.0 and m.per_task["a"]["candidate"].leak_hits == 0

    # Halfway through a linear fade (a pause at step 5: the next draw, at step 5, sees half of the hints).
    two = {
        "interface": "guidance",
        "ops": [
            {"op": "add_hint", "task_id": "a", "hint": {"id": "h1", "text": "First hint."}},
            {"op": "add_hint", "task_id": "a", "hint": {"id": "h2", "text": "Second hint."}},
            {"op": "set_schedule", "task_id": "a", "schedule": {"mode": "linear", "start_step": 0, "end_step": 10}},
        ],
    }
    policy = ScriptedPolicy(lambda p, i: "no idea")
    _measure(state, two, policy, step=5)
    shown = policy.calls[1]["batch"][0][-1]["content"]
    assert "Hint: First hint." in shown and "Second hint." not in shown


def test_hinted_share_mixes_hinted_and_unhinted_visits(state):
    """hinted_share 0.5: half the visits see the hint; the side's numbers weigh the two visit prompts."""
    policy = ScriptedPolicy(lambda p, i: ("water" if i % 2 else "rest") if "Hint:" in p else "no idea")
    update = {
        "interface": "guidance",
        "ops": [
            {"op": "add_hint", "task_id": "a", "hint": {"id": "h1", "text": "Consider fluids."}},
            {
                "op": "set_schedule",
                "task_id": "a",
                "schedule": {"mode": "constant", "end_step": 10, "hinted_share": 0.5},
            },
        ],
    }
    m = _measure(state, update, policy)
    cand = m.per_task["a"]["candidate"]
    assert cand.stratum_weights == [0.5, 0.5] and cand.n == 8 and cand.strata == [0] * 4 + [1] * 4
    # hinted visits: std 0.5, mean 0.5; unhinted visits: dead at 0 -> expected within-visit std 0.25
    assert cand.mean == pytest.approx(0.25) and cand.std == pytest.approx(0.25) and not cand.dead
    assert len(policy.calls) == 2 and len(policy.calls[1]["batch"]) == 1  # the unhinted prompt is the control's
    assert m.cost.probe_rollouts == 8 and m.cost.reused_rollouts == 0


def test_guidance_update_that_helps_without_leaking(state):
    policy = ScriptedPolicy(lambda p, i: ("water" if i % 2 else "rest") if "Hint:" in p else "no idea")
    update = {"interface": "guidance", "ops": [{"op": "add_hint", "task_id": "a", "hint": {"id": "h1", "text": HINT}}]}
    m = _measure(state, update, policy)
    assert m.control.dead_share == 1.0 and m.candidate.dead_share == 0.0 and m.candidate.band_share == 1.0
    assert m.deltas["dead_share"] == -1.0 and m.candidate.leak_hits == 0


def test_hinted_rollout_that_reproduces_the_reference_is_a_leak():
    ref = "Drink two glasses of water and lie down"
    st = HarnessState.from_tasks([_task("r", reference=ref)])
    policy = ScriptedPolicy(lambda p, i: ref if "Hint:" in p else ref)
    update = {
        "interface": "guidance",
        "ops": [{"op": "add_hint", "task_id": "r", "hint": {"id": "h", "text": "Think about fluids."}}],
    }
    m = _measure(st, update, policy)
    # Same text on both sides: only the hinted side counts it as a leak.
    assert m.per_task["r"]["control"].leak_hits == 0 and m.per_task["r"]["candidate"].leak_hits == 4


def test_all_affected_tasks_are_batched_into_one_call_per_side(state):
    policy = ScriptedPolicy(_mixed)
    update = {
        "interface": "guidance",
        "ops": [
            {"op": "add_hint", "task_id": t, "hint": {"id": "h1", "text": "Consider hydration."}}
            for t in ("a", "b", "c")
        ],
    }
    m = _measure(state, update, policy)
    assert [len(c["batch"]) for c in policy.calls] == [2, 2]  # a and c share one prompt on each side
    assert set(m.per_task) == {"a", "b", "c"}


def test_add_variant_compares_the_variant_with_its_parent(state):
    policy = ScriptedPolicy(lambda p, i: "water" if "simpler" in p else "nothing")
    update = {
        "interface": "sampling",
        "ops": [
            {
                "op": "add_variant",
                "task_id": "a",
                "variant_id": "a-easy",
                "weight": 2.0,
                "prompt": [{"role": "user", "content": "A simpler question: what liquid helps a headache?"}],
            }
        ],
    }
    m = _measure(state, update, policy)
    assert m.per_task["a-easy"]["control"].task_id == "a"  # parent is the baseline
    assert m.per_task["a-easy"]["candidate"].mean == 1.0 and m.per_task["a-easy"]["control"].mean == 0.0
    assert m.weights == {"a": {"control": 1.0, "candidate": 1.0}, "a-easy": {"control": 0.0, "candidate": 2.0}}
    assert m.control.dead_weight == 1.0 and m.candidate.dead_weight == 3.0  # variant saturated, parent dead
    assert m.candidate.mean == pytest.approx(2 / 3)
    assert len(policy.calls) == 2 and len(policy.calls[1]["batch"]) == 1  # parent prompt not resampled


@pytest.mark.parametrize(
    ("ops", "control_w", "candidate_w", "dead_delta"),
    [
        ([{"op": "retire", "task_id": "a"}], 1.0, 0.0, -1.0),
        ([{"op": "reweight", "task_id": "a", "weight": 0.25}], 1.0, 0.25, -0.75),
        ([{"op": "reweight", "task_id": "a", "weight": 3.0}], 1.0, 3.0, 2.0),
    ],
)
def test_sampling_updates_weight_the_same_groups(state, ops, control_w, candidate_w, dead_delta):
    policy = ScriptedPolicy(lambda p, i: "water")  # saturated: every group dead at 1.0
    m = _measure(state, {"interface": "sampling", "ops": ops}, policy)
    assert len(policy.calls) == 1 and m.paired == {"a": True}
    assert m.weights["a"] == {"control": control_w, "candidate": candidate_w}
    assert m.deltas["dead_weight"] == dead_delta
    if candidate_w == 0:
        assert m.candidate.dead_share is None and m.deltas["dead_share"] is None


def test_revive_counts_the_revived_task(state):
    st = apply(
        state, HarnessUpdate.model_validate({"interface": "sampling", "ops": [{"op": "retire", "task_id": "b"}]})
    )
    m = _measure(st, {"interface": "sampling", "ops": [{"op": "revive", "task_id": "b"}]}, ScriptedPolicy(_mixed))
    assert m.weights["b"] == {"control": 0.0, "candidate": 1.0}
    assert m.control.n_groups == 0 and m.candidate.n_groups == 1 and m.candidate.band_share == 1.0


def test_audit_delta_and_length_correlation(state):
    def reply(p, i):
        if "Hint:" in p:
            return "water " * (i + 1)  # longer = no better, but rewarded equally
        return ["see a doctor, drink water", "water", "see a doctor", "rest"][i]

    update = {
        "interface": "guidance",
        "ops": [{"op": "add_hint", "task_id": "a", "hint": {"id": "h", "text": "Say water."}}],
    }
    m = _measure(state, update, ScriptedPolicy(reply))
    assert m.per_task["a"]["control"].audit_mean == 0.5 and m.per_task["a"]["candidate"].audit_mean == 0.0
    assert m.deltas["audit_mean"] == -0.5
    assert m.per_task["a"]["control"].audits == [1.0, 0.0, 1.0, 0.0]


def test_invalid_update_is_rejected_before_sampling(state):
    policy = ScriptedPolicy(_mixed)
    with pytest.raises(UpdateRejected, match="remove_criterion"):
        _measure(
            state,
            {"interface": "criteria", "ops": [{"op": "remove_criterion", "task_id": "a", "criterion_id": "nope"}]},
            policy,
        )
    with pytest.raises(UpdateRejected):
        _measure(state, {"interface": "sampling", "ops": [{"op": "reweight", "task_id": "zzz", "weight": 2}]}, policy)
    assert policy.calls == []


def test_deterministic_and_bad_k(state):
    update = {"interface": "sampling", "ops": [{"op": "reweight", "task_id": "b", "weight": 2}]}
    a = _measure(state, update, ScriptedPolicy(_mixed))
    b = _measure(state, update, ScriptedPolicy(_mixed))
    assert a.model_dump(exclude={"cost": {"seconds"}}) == b.model_dump(
        exclude={"cost": {"seconds"}}
    )  # wall time varies
    with pytest.raises(ValueError, match="k must be"):
        measure_candidate(
            state, HarnessUpdate.model_validate(update), ScriptedPolicy(_mixed), Judge(None), MeasureSettings(k=1)
        )


def test_endpoint_returning_the_wrong_shape_is_an_error(state):
    class Short(ScriptedPolicy):
        def sample(self, messages_batch, n=1, **kw):
            return [["only one"] for _ in messages_batch]

    with pytest.raises(RuntimeError, match="completions"):
        _measure(state, {"interface": "sampling", "ops": [{"op": "retire", "task_id": "a"}]}, Short(_mixed))


def test_detector_config_thresholds_are_used(state):
    policy = ScriptedPolicy(lambda p, i: "water" if i else "no")  # rewards 0,1,1,1: std 0.43
    upd = {"interface": "sampling", "ops": [{"op": "retire", "task_id": "a"}]}
    assert not _measure(state, upd, policy).per_task["a"]["control"].dead
    assert _measure(state, upd, policy, detector_config=DetectorConfig(eps=0.5)).per_task["a"]["control"].dead


def test_compact_view_is_small_and_json_ready(state):
    import json

    m = _measure(
        state,
        {
            "interface": "criteria",
            "ops": [
                {
                    "op": "add_criterion",
                    "task_id": "a",
                    "criterion": {
                        "id": "short",
                        "text": "Under 5 words.",
                        "weight": 2,
                        "kind": "important",
                        "check": {"type": "word_count", "max": 5},
                    },
                }
            ],
        },
        ScriptedPolicy(_mixed),
    )
    view = m.compact()
    text = json.dumps(view)
    assert "examples" not in text and view["deltas"]["mean"] is not None
    assert set(view["per_task"]["a"]) == {"control", "candidate"}


def test_schedule_placement_system_is_respected(state):
    policy = ScriptedPolicy(_mixed)
    st = state.model_copy(
        update={
            "guidance": {"a": Guidance(hints=[Hint(id="h0", text="Old hint.")], schedule=Schedule(placement="system"))}
        }
    )
    _measure(st, {"interface": "guidance", "ops": [{"op": "remove_hint", "task_id": "a", "hint_id": "h0"}]}, policy)
    assert policy.calls[0]["batch"][0][0] == {"role": "system", "content": "Hints for this task:\n- Old hint."}
    assert policy.calls[1]["batch"][0][0]["role"] == "user"


# -- the real tiny model through LocalEndpoint ------------------------------------------------------
@pytest.mark.slow
def test_real_tiny_model_criteria_and_guidance(tiny_model_dir, state):
    from tools.local_endpoint import LocalEndpoint

    real = LocalEndpoint.from_path(tiny_model_dir)

    class Spy:
        name = "spy"

        def __init__(self):
            self.batches = []

        def sample(self, messages_batch, **kw):
            self.batches.append(messages_batch)
            return real.sample(messages_batch, **kw)

    always = {
        "id": "any",
        "text": "Says anything at all.",
        "weight": -3,
        "kind": "pitfall",
        "check": {"type": "word_count", "min": 0},
    }
    base = state.model_copy(update={"criteria_overrides": {"a": [_crit("some", 5, {"type": "word_count", "min": 0})]}})
    spy = Spy()
    m = measure_candidate(
        base,
        HarnessUpdate.model_validate(
            {"interface": "criteria", "ops": [{"op": "add_pitfall", "task_id": "a", "criterion": always}]}
        ),
        spy,
        Judge(None),
        MeasureSettings(k=4, max_tokens=16, seed=3),
    )
    assert len(spy.batches) == 1
    assert m.per_task["a"]["control"].rewards == [1.0] * 4
    assert m.per_task["a"]["candidate"].rewards == [pytest.approx(0.4)] * 4  # same rollouts, new rubric
    assert m.deltas["mean"] == pytest.approx(-0.6)

    spy = Spy()
    g = measure_candidate(
        base,
        HarnessUpdate.model_validate(
            {"interface": "guidance", "ops": [{"op": "add_hint", "task_id": "a", "hint": {"id": "h", "text": HINT}}]}
        ),
        spy,
        Judge(None),
        MeasureSettings(k=4, max_tokens=16, seed=3),
    )
    assert len(spy.batches) == 2 and g.paired == {"a": False}
    assert HINT in spy.batches[1][0][-1]["content"]
    assert all(n <= 16 for n in g.per_task["a"]["candidate"].lengths)  # words <= tokens for this tokenizer

    # The local endpoint counts its completions' tokens with the policy's tokenizer (re-encoding the decoded
    # text: the random tiny model's byte soup re-encodes to somewhat more tokens than it generated).
    t = measure_candidate(
        base,
        HarnessUpdate.model_validate(
            {"interface": "guidance", "ops": [{"op": "add_hint", "task_id": "a", "hint": {"id": "h", "text": HINT}}]}
        ),
        real,
        Judge(None),
        MeasureSettings(k=4, max_tokens=16, seed=3),
    )
    assert t.cost.tokens_by == "tokenizer" and 0 < t.cost.probe_tokens <= 2 * 8 * 16 and t.cost.probe_rollouts == 8


# -- adaptive budget, shared probes, re-scoring, cost ------------------------------------------------
HINTED_UPDATE = {
    "interface": "guidance",
    "ops": [{"op": "add_hint", "task_id": "a", "hint": {"id": "h1", "text": "Consider fluids."}}],
}


def _higher_mean(c, d, paired):
    return d.mean > c.mean


def test_sequential_test_stops_at_the_first_look_when_the_decision_is_clear(state):
    policy = ScriptedPolicy(lambda p, i: "water" if "Hint:" in p else "rest")
    m = measure_candidate(
        state,
        HarnessUpdate.model_validate(HINTED_UPDATE),
        policy,
        Judge(None),
        MeasureSettings(sample_k=4, sample_k_max=16, alpha=0.1),
        rule=StopRule("a", _higher_mean),
    )
    s = m.sequential
    assert (s.decision, s.ks, s.p_pass, s.max_looks) == ("pass", [4], [1.0], 3)
    assert s.alpha_per_look == pytest.approx(0.1 / 3)
    assert m.cost.probe_rollouts == 8 and m.cost.sample_calls == 2 and m.k == 4


def test_undecided_rule_grows_the_groups_up_to_the_cap(state):
    """Same reward distribution on both sides: never decided, so the budget doubles to the cap and stops."""
    policy = ScriptedPolicy(lambda p, i: ["water", "rest"][(i + ("Hint:" in p)) % 2])
    m = measure_candidate(
        state,
        HarnessUpdate.model_validate(HINTED_UPDATE),
        policy,
        Judge(None),
        MeasureSettings(sample_k=4, sample_k_max=16),
        rule=StopRule("a", _higher_mean),
    )
    s = m.sequential
    assert s.decision == "undecided" and s.ks == [4, 8, 16] and all(0.05 < p < 0.95 for p in s.p_pass)
    # each side's prompt is extended, never resampled: 16 rollouts each, drawn 4 + 4 + 8
    assert m.cost.probe_rollouts == 32 and [c["n"] for c in policy.calls] == [4, 4, 4, 4, 8, 8]
    assert [c["seed"] for c in policy.calls] == [0, 0, 4, 4, 8, 8]  # seed + rollouts already held
    assert m.per_task["a"]["control"].n == 16 and m.k == 16


def test_rule_must_name_an_affected_task_and_budgets_are_checked(state):
    upd = HarnessUpdate.model_validate(HINTED_UPDATE)
    with pytest.raises(ValueError, match="rule.task_id 'b'"):
        measure_candidate(state, upd, ScriptedPolicy(_mixed), Judge(None), rule=StopRule("b", _higher_mean))
    with pytest.raises(ValueError, match="sample_k_max"):
        measure_candidate(state, upd, ScriptedPolicy(_mixed), Judge(None), MeasureSettings(sample_k=8, sample_k_max=4))
    with pytest.raises(ValueError, match="alpha"):
        measure_candidate(state, upd, ScriptedPolicy(_mixed), Judge(None), MeasureSettings(alpha=1.0))


PITFALL = {
    "interface": "criteria",
    "ops": [
        {
            "op": "add_pitfall",
            "task_id": "a",
            "criterion": {
                "id": "guar",
                "text": "Promises a guaranteed cure.",
                "weight": -3,
                "kind": "pitfall",
                "check": {"type": "contains_any", "phrases": ["guaranteed"]},
            },
        }
    ],
}


def test_criteria_candidates_rescore_training_rollouts_without_generating(state):
    policy = ScriptedPolicy(_mixed)
    prior = {"a": ["drink water, guaranteed", "water", "rest", "water, guaranteed"] * 2}  # the latest training group
    m = measure_candidate(
        state,
        HarnessUpdate.model_validate(PITFALL),
        policy,
        Judge(None),
        MeasureSettings(sample_k=4, sample_k_max=16),
        prior_rollouts=prior,
        rule=StopRule("a", lambda c, d, paired: d.mean < c.mean),
    )
    assert policy.calls == [] and m.cost.probe_rollouts == 0 and m.cost.reused_rollouts == 8
    assert m.paired == {"a": True} and m.sequential.decision == "pass" and m.sequential.ks == [4]
    assert m.per_task["a"]["candidate"].rewards == [pytest.approx(0.4), 1.0, 0.0, pytest.approx(0.4)] * 2


def test_criteria_candidates_add_control_probes_only_while_undecided(state):
    policy = ScriptedPolicy(_mixed)
    prior = {"a": ["water", "rest"]}  # too few to judge: two probes more at the first look, then doubling
    m = measure_candidate(
        state,
        HarnessUpdate.model_validate(PITFALL),
        policy,
        Judge(None),
        MeasureSettings(sample_k=4, sample_k_max=8),
        prior_rollouts=prior,
        rule=StopRule("a", lambda c, d, paired: d.mean < c.mean),
    )
    assert [c["n"] for c in policy.calls][0] == 2 and m.per_task["a"]["control"].n in (4, 8)
    assert m.cost.reused_rollouts == 2 and m.cost.probe_rollouts == m.per_task["a"]["control"].n - 2


def test_control_probes_are_drawn_once_per_round_and_shared(state):
    cache = ProbeCache()
    policy = ScriptedPolicy(_mixed)
    first = _measure(state, HINTED_UPDATE, policy, probe_cache=cache, step=3)
    other = {
        "interface": "guidance",
        "ops": [{"op": "add_hint", "task_id": "a", "hint": {"id": "h1", "text": "Rest."}}],
    }
    second = _measure(state, other, policy, probe_cache=cache, step=3)
    assert first.cost.probe_rollouts == 8 and second.cost.probe_rollouts == 4 and second.cost.reused_rollouts == 4
    assert len(policy.calls) == 3  # the second candidate sampled only its own hinted prompt
    assert second.per_task["a"]["control"].rewards == first.per_task["a"]["control"].rewards
    third = _measure(state, other, policy, probe_cache=cache, step=4)  # a new round: a new frozen policy
    assert third.cost.probe_rollouts == 8


class _Counting(ScriptedPolicy):
    def count_tokens(self, texts):
        return 3 * len(texts)


def test_cost_counts_probes_tokens_and_seconds(state):
    m = _measure(state, HINTED_UPDATE, ScriptedPolicy(lambda p, i: "drink some water"))
    assert (m.cost.probe_rollouts, m.cost.probe_tokens, m.cost.tokens_by) == (8, 24, "words")
    assert m.cost.scored_rollouts == 8 and m.cost.judge_calls == 0 and m.cost.seconds >= 0
    t = _measure(state, HINTED_UPDATE, _Counting(lambda p, i: "drink some water"))
    assert (t.cost.probe_tokens, t.cost.tokens_by) == (24, "tokenizer")
    assert m.compact()["cost"]["probe_rollouts"] == 8


def test_latest_rollouts_reads_the_newest_group_of_each_task():
    from harness.detector import GroupStats, RolloutRecord
    from memory.store import TrainingMemory

    mem = TrainingMemory.ephemeral(embedding="hash")
    for step, texts in ((1, ["old one", "old two"]), (2, ["new one", "new two"])):
        stats = GroupStats.from_rollouts("a", step, [RolloutRecord(text=t, reward=0.5) for t in texts])
        mem.add_group(stats, harness_version=0, texts=texts)
    assert latest_rollouts(mem, ["a", "b"]) == {"a": ["new one", "new two"]}
