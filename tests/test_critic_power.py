"""Tests with power (issue 19, item 2): the exact hit test of dead-group repairs, the control pooled from memory,
criteria candidates that change no score, and guards that cannot veto the repair they guard.

Every measurement is real (`tools.candidate.measure_candidate` under `agents.critic.stop_rule`, judged by
`agents.critic.judge_measurement`) on a scripted frozen policy; only the policy's texts are made up.
"""

from __future__ import annotations

import pytest

from agents import critic
from agents.context import EvolverContext
from harness.detector import GroupStats, RolloutRecord
from harness.guidance import prompt_digest, render_prompt
from harness.ops import apply
from harness.types import FailureEvent, HarnessState, HarnessUpdate
from memory.store import TrainingMemory
from tests.support.fakes.evolver_fakes import event, suite
from tests.support.fakes.fake_chat import ScriptedPolicy
from tools.candidate import measure_candidate
from tools.judge import Judge
from tools.measure_settings import MeasureSettings
from tools.probes import prompt_rollouts, task_rollouts
from tools.sequential import exact_plan

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
UNSURE = "I am not sure."
HINT = {
    "interface": "guidance",
    "ops": [{"op": "add_hint", "task_id": "med-1", "hint": {"id": "h1", "text": "Think about fluids and rest."}}],
}
LOW = FailureEvent.model_validate(event("e", "collapse_low", "med-1", mean=0.0, std=0.0))


class SeededPolicy(ScriptedPolicy):
    """A scripted policy whose reply also sees the request's seed (the rollouts already held: 0 at the first look)."""

    def __init__(self, reply):
        super().__init__(lambda p, i: "")
        self.seeded = reply

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        self.calls.append({"batch": messages_batch, "n": n, "seed": seed})
        return [[self.seeded(conv[-1]["content"], i, seed or 0) for i in range(n)] for conv in messages_batch]


def _unhinted(task_id: str) -> str:
    """The cache key of a suite task's unhinted prompt (`tools.probes.prompt_rollouts`)."""
    return prompt_digest(render_prompt(HarnessState.from_tasks(suite()).task(task_id), []))


def _judge(policy, update=HINT, ev=LOW, state=None, settings=None, **kw):
    state = state or HarnessState.from_tasks(suite())
    upd = HarnessUpdate.model_validate(update)
    ctx = EvolverContext()
    m = measure_candidate(
        state,
        upd,
        policy,
        Judge(None),
        settings or MeasureSettings(step=10, sample_k=4, sample_k_max=16),
        rule=critic.stop_rule(ev, upd, ctx),
        **kw,
    )
    return m, critic.judge_measurement(ev, upd, m, ctx)


def _late_repair(prompt: str, i: int, seed: int) -> str:
    """A true repair unlucky at first: the first 4 hinted rollouts all miss, later ones hit half of the time."""
    if "Hint:" in prompt and seed > 0:
        return HONEST if i % 2 == 0 else UNSURE
    return UNSURE


def test_a_true_repair_whose_first_four_probes_all_score_zero_still_passes():
    m, crit = _judge(SeededPolicy(_late_repair))
    s = m.sequential
    assert s.test == "exact" and s.hits[0] == 0  # the all-zero first look ...
    assert s.fail_at[0] == -1  # ... cannot fail: 0 of 4 is too likely under a true repair
    assert s.decision == "pass" and s.ks == [4, 8] and s.hits == [0, 2], s
    assert crit.measured_ok, crit.reasons


def test_the_bootstrap_rule_failed_the_same_repair_at_the_first_look():
    """Why the exact test: the bootstrap's p_pass of an all-zero group is 0, a "fail" for good."""
    state = HarnessState.from_tasks(suite())
    upd = HarnessUpdate.model_validate(HINT)
    rule = critic.stop_rule(LOW, upd, EvolverContext())
    bootstrap_only = type(rule)(task_id=rule.task_id, holds=rule.holds)
    m = measure_candidate(
        state,
        upd,
        SeededPolicy(_late_repair),
        Judge(None),
        MeasureSettings(step=10, sample_k=4, sample_k_max=16),
        rule=bootstrap_only,
    )
    assert m.sequential.test == "bootstrap" and m.sequential.decision == "fail" and m.sequential.ks == [4]


@pytest.mark.parametrize("history_hits", [0, 4])
def test_a_no_op_is_rejected(history_hits):
    """The candidate hits as often as the control does (none, or 1 in 8): rejected, whatever the history says."""
    history = {_unhinted("med-1"): [HONEST] * history_hits + [UNSURE] * (32 - history_hits)}

    def same_rate(prompt: str, i: int, seed: int) -> str:
        return HONEST if history_hits and (seed + i) % 8 == 0 else UNSURE

    m, crit = _judge(SeededPolicy(same_rate), control_history=history)
    assert not crit.measured_ok and m.sequential.decision != "pass"
    assert m.sequential.control_n == 32 and m.sequential.control_hits == history_hits


def test_the_control_comes_from_the_tasks_cached_groups_when_memory_has_enough():
    """32 cached training rollouts: no fresh control is drawn; only the candidate's hinted prompt is sampled."""
    policy = SeededPolicy(lambda p, i, seed: HONEST if "Hint:" in p and i % 2 == 0 else UNSURE)
    m, crit = _judge(policy, control_history={_unhinted("med-1"): [UNSURE] * 32})
    assert all("Hint:" in c["batch"][0][-1]["content"] for c in policy.calls)
    assert m.sequential.control_n == 32 and m.cost.probe_rollouts == 4 and m.cost.reused_rollouts == 32
    assert crit.measured_ok, crit.reasons


def test_a_short_history_is_topped_up_to_twice_the_cap_with_fresh_control_probes():
    policy = SeededPolicy(lambda p, i, seed: UNSURE)
    m, _ = _judge(policy, control_history={_unhinted("med-1"): [UNSURE] * 6})
    assert m.sequential.control_n == 32 and [c["n"] for c in policy.calls][0] == 26


@pytest.mark.parametrize("alpha", [0.5, 0.1])
def test_a_candidate_that_fails_on_the_cached_pool_draws_no_control_top_up(alpha):
    """The screen's one look of 4 (the shipped config's budget) on a dead task with one cached group of 4: the plan
    from 0 hits of 4 is the plan from 0 of 8, a top-up could only raise the bounds, so a candidate that does not pass
    on the cached pool is refused without one."""
    settings = MeasureSettings(step=10, k=4, alpha=alpha)
    history = {_unhinted("med-1"): [UNSURE] * 4}
    policy = SeededPolicy(lambda p, i, seed: UNSURE)
    m, crit = _judge(policy, settings=settings, control_history=history)
    s = m.sequential
    assert s.control_n == 4 and s.control_hits == 0 and (s.control_spared, s.control_late) == (4, 0)
    assert all("Hint:" in c["batch"][0][-1]["content"] for c in policy.calls)  # only the candidate was sampled
    assert m.cost.probe_rollouts == 4 and not crit.measured_ok
    assert crit.numbers["seq_control_spared"] == 4  # in the attempt's record (rounds.jsonl)
    assert any("4 fresh control probes not drawn" in r for r in crit.reasons), crit.reasons


@pytest.mark.parametrize("alpha", [0.5, 0.1])
def test_a_candidate_that_passes_on_the_cached_pool_gets_the_top_up_before_the_point_rule(alpha):
    """The point rule's "std up" must not read a control that is only the group which flagged the task (std 0): a
    candidate passing the hit test on it gets its 4 fresh control probes, and is decided on all 8."""
    settings = MeasureSettings(step=10, k=4, alpha=alpha)
    history = {_unhinted("med-1"): [UNSURE] * 4}
    policy = SeededPolicy(lambda p, i, seed: HONEST if "Hint:" in p and i % 2 == 0 else UNSURE)
    m, crit = _judge(policy, settings=settings, control_history=history)
    s = m.sequential
    assert s.control_n == 8 and (s.control_spared, s.control_late) == (0, 4) and s.decision == "pass"
    assert sorted(c["n"] for c in policy.calls) == [4, 4]  # the candidate's group, then the control's top-up
    assert m.cost.probe_rollouts == 8 and crit.measured_ok, crit.reasons
    assert crit.numbers["seq_control_late"] == 4  # in the attempt's record (rounds.jsonl)


@pytest.mark.parametrize(("candidate_hits", "verdict"), [(2, "pass"), (1, "fail")])
def test_a_deferred_top_up_decides_as_the_same_top_up_drawn_up_front(candidate_hits, verdict):
    """Deferring the top-up changes what is drawn, never the verdict: the same 8 control rollouts held in memory up
    front give the same hits, bounds, decision and point estimates. One hit in 4 passes against the cached group
    alone (bound 1) but not once the top-up's two hits raise the bound to 2."""

    def policy(prompt: str, i: int, seed: int) -> str:  # fresh unhinted probes hit twice in 4
        return HONEST if (i % 2 == 0 and i < 2 * candidate_hits if "Hint:" in prompt else i < 2) else UNSURE

    settings = MeasureSettings(step=10, k=4, alpha=0.5)
    cached = {_unhinted("med-1"): [UNSURE] * 4}
    deferred, crit_d = _judge(SeededPolicy(policy), settings=settings, control_history=cached)
    held = {_unhinted("med-1"): [UNSURE] * 4 + [HONEST, HONEST, UNSURE, UNSURE]}  # the top-up, already in memory
    upfront, crit_u = _judge(SeededPolicy(policy), settings=settings, control_history=held)
    d, u = deferred.sequential, upfront.sequential
    assert d.control_late == 4 and u.control_late == 0 and d.control_hits == u.control_hits == 2
    assert (d.hits, d.pass_at, d.fail_at, d.decision) == (u.hits, u.pass_at, u.fail_at, u.decision)
    assert d.hits == [candidate_hits] and d.decision == verdict
    assert deferred.deltas == upfront.deltas and crit_d.measured_ok == crit_u.measured_ok == (verdict == "pass")
    if verdict == "fail":
        assert any("drawn once the candidate passed without them" in r for r in crit_d.reasons), crit_d.reasons


def _late_hits(prompt: str, i: int, seed: int) -> str:
    """Hinted: no hit at the first look, then every other rollout. Unhinted (the control's fresh probes): one hit."""
    if "Hint:" in prompt:
        return HONEST if seed > 0 and i % 2 == 0 else UNSURE
    return HONEST if i == 0 else UNSURE


@pytest.mark.parametrize(("fresh_control_hits", "verdict"), [(0, "pass"), (1, "fail")])
def test_a_deferred_top_up_over_two_looks_decides_as_the_top_up_drawn_up_front(fresh_control_hits, verdict):
    """Two looks (4, then 8) against 12 cached control rollouts, a top-up of 4 deferred. The candidate has no hit at
    look 1 and two at look 2, which passes on the cached pool; the top-up is drawn then and both looks are decided
    again on the full pool, each on the candidate rollouts it had. With no control hit in the top-up that is a pass
    at look 2, as up front. With one, the bounds rise and look 1's zero hits already fail, as up front: the deferred
    test drew a look the up-front one would not have (a cost, recorded in `ks` and `hits`), never another verdict."""

    def policy(prompt: str, i: int, seed: int) -> str:
        return _late_hits(prompt, i, seed) if fresh_control_hits or "Hint:" in prompt else UNSURE

    settings = MeasureSettings(step=10, sample_k=4, sample_k_max=8, alpha=0.5)
    deferred, crit_d = _judge(
        SeededPolicy(policy), settings=settings, control_history={_unhinted("med-1"): [UNSURE] * 12}
    )
    top_up = [HONEST if fresh_control_hits and i == 0 else UNSURE for i in range(4)]  # what the late draw returns
    held = {_unhinted("med-1"): [UNSURE] * 12 + top_up}
    upfront, crit_u = _judge(SeededPolicy(policy), settings=settings, control_history=held)
    d, u = deferred.sequential, upfront.sequential
    assert (d.control_late, d.control_spared, u.control_late) == (4, 0, 0)
    assert d.control_n == u.control_n == 16 and d.control_hits == u.control_hits == fresh_control_hits
    assert d.decision == u.decision == verdict and crit_d.measured_ok == crit_u.measured_ok == (verdict == "pass")
    looked = len(u.hits)  # the up-front test's looks: the deferred replay decides at the same one
    assert (d.hits[:looked], d.pass_at[:looked], d.fail_at[:looked]) == (u.hits, u.pass_at, u.fail_at)
    assert d.ks == [4, 8] and u.ks == ([4, 8] if verdict == "pass" else [4])


def test_a_control_top_up_is_drawn_when_it_could_lower_the_pass_bound():
    """One cached hit in 4 puts the pass bound at 2 hits; a top-up without a hit would lower it to 1, so it is drawn."""
    policy = SeededPolicy(lambda p, i, seed: UNSURE)
    settings = MeasureSettings(step=10, k=4, alpha=0.5)
    m, _ = _judge(policy, settings=settings, control_history={_unhinted("med-1"): [HONEST] + [UNSURE] * 3})
    assert m.sequential.control_n == 8 and m.sequential.control_spared == 0
    assert sorted(c["n"] for c in policy.calls) == [4, 4]  # the control's top-up and the candidate's group


def test_task_rollouts_pool_the_newest_groups():
    mem = TrainingMemory.ephemeral(embedding="hash")
    for step in (1, 2, 3, 4):
        recs = [RolloutRecord(text=f"s{step}-{j}", reward=0.0) for j in range(4)]
        mem.add_group(GroupStats.from_rollouts("a", step, recs), harness_version=0, texts=[r.text for r in recs])
    everything = task_rollouts(mem, ["a", "b"], max_rollouts=12)["a"]
    assert everything == [f"s{s}-{j}" for s in (2, 3, 4) for j in range(4)]  # oldest first, newest groups kept
    assert task_rollouts(mem, ["a"], max_rollouts=0) == {}


def test_prompt_rollouts_key_each_group_by_its_prompt_and_read_old_unhinted_groups_as_the_plain_prompt():
    state = HarnessState.from_tasks(suite())
    plain = _unhinted("med-1")
    mem = TrainingMemory.ephemeral(embedding="hash")
    # (step, digest recorded, hinted): steps 1-2 predate digests (one hinted: its prompt is unknown, so it is left
    # out), steps 3-5 carry theirs.
    for step, digest, hinted in ((1, None, False), (2, None, True), (3, plain, False), (4, "h", True), (5, "h", True)):
        recs = [RolloutRecord(text=f"s{step}-{j}", reward=0.0, hinted=hinted) for j in range(4)]
        stats = GroupStats.from_rollouts("med-1", step, recs, prompt_digest=digest)
        mem.add_group(stats, harness_version=0, texts=[r.text for r in recs])
    pools = prompt_rollouts(mem, state, ["med-1", "nope"], max_rollouts=64)
    assert set(pools) == {plain, "h"}
    assert pools[plain] == [f"s{s}-{j}" for s in (1, 3) for j in range(4)]
    assert pools["h"] == [f"s{s}-{j}" for s in (4, 5) for j in range(4)]
    assert prompt_rollouts(mem, state, ["med-1"], max_rollouts=4)["h"] == [f"s5-{j}" for j in range(4)]
    assert prompt_rollouts(mem, state, ["med-1"], max_rollouts=0) == {}


def test_a_hinted_control_comes_from_the_cached_groups_of_its_own_hinted_prompt():
    """The task already trains with a hint (hinted share 1): a second hint's control is that hinted prompt, and its
    32 cached training rollouts are the whole control pool. Before, a hinted control was always sampled fresh."""
    base = HarnessState.from_tasks(suite())
    first = HarnessUpdate.model_validate(
        {
            "interface": "guidance",
            "ops": [{"op": "add_hint", "task_id": "med-1", "hint": {"id": "h0", "text": "Answer in full sentences."}}],
        }
    )
    state = apply(base, first, step=1)
    hinted = render_prompt(state.task("med-1"), list(state.guidance_for("med-1").hints))
    assert "Hint:" in hinted[-1]["content"]
    policy = SeededPolicy(lambda p, i, seed: HONEST if "fluids" in p and i % 2 == 0 else UNSURE)
    m, crit = _judge(policy, state=state, control_history={prompt_digest(hinted): [UNSURE] * 32})
    assert all("fluids" in c["batch"][0][-1]["content"] for c in policy.calls)  # no control prompt was sampled
    assert m.sequential.control_n == 32 and m.cost.reused_rollouts == 32
    assert crit.measured_ok, crit.reasons


def test_exact_plan_spends_at_most_alpha_and_never_fails_an_underpowered_look():
    for x0, n0 in ((0, 4), (0, 16), (1, 16), (3, 64)):
        plan = exact_plan(x0, n0, [4, 8, 16], 0.1, 0.1, 0.25)
        assert plan.spent[-1] <= 0.1 and plan.spent == sorted(plan.spent)
        assert plan.fail_at[0] == -1 and all(b < a for a, b in zip(plan.pass_at, plan.fail_at))
    with pytest.raises(ValueError, match="x0=5 of n0=4"):
        exact_plan(5, 4, [4], 0.1, 0.1, 0.25)


# -- criteria candidates that change no score ------------------------------------------------------------------
NO_OP_EDIT = {
    "interface": "criteria",
    "ops": [
        {
            "op": "edit_criterion",
            "task_id": "med-1",
            "criterion_id": "water",
            "check": {"type": "contains_any", "phrases": ["water", "hydrate", "zzz"]},
        }
    ],
}
BLIND = FailureEvent.model_validate(event("b", "blind_criterion", "med-1", criterion_id="water", pass_rate=1.0))


def test_a_criteria_candidate_that_changes_no_score_is_refused_for_free():
    prior = {"med-1": [HONEST, UNSURE, "water please", HONEST] * 3}
    m, crit = _judge(ScriptedPolicy(lambda p, i: HONEST), update=NO_OP_EDIT, ev=BLIND, prior_rollouts=prior)
    assert m.per_task["med-1"]["control"].n == 12  # every cached rollout re-scored, paired
    assert crit.no_effect and not crit.measured_ok
    assert any("NO EFFECT" in r and "12 cached rollouts" in r for r in crit.reasons)


def test_a_criteria_candidate_that_changes_a_score_is_not_marked_no_effect():
    edit = {
        "interface": "criteria",
        "ops": [
            {
                "op": "edit_criterion",
                "task_id": "med-1",
                "criterion_id": "water",
                "check": {"type": "contains_any", "phrases": ["hydrate"]},
            }
        ],
    }
    prior = {"med-1": [HONEST, UNSURE, "water please", HONEST] * 3}
    _, crit = _judge(ScriptedPolicy(lambda p, i: HONEST), update=edit, ev=BLIND, prior_rollouts=prior)
    assert not crit.no_effect


def _halve_len(prior):
    update = {
        "interface": "criteria",
        "ops": [{"op": "reweight_criterion", "task_id": "med-1", "criterion_id": "len", "weight": 0.5}],
    }
    ev = FailureEvent.model_validate(event("b", "blind_criterion", "med-1", criterion_id="len", pass_rate=1.0))
    return _judge(ScriptedPolicy(lambda p, i: HONEST), update=update, ev=ev, prior_rollouts={"med-1": prior})


def test_reweighting_a_criterion_every_rollout_meets_is_no_effect_on_training():
    """Every cached rollout meets `len`: halving its weight rescales every reward alike (an increasing affine map), so
    each group's std-scaled advantages are what they were. Its std changes, which the std rule alone would read as a
    repair; it is refused for free instead. The same reweight where `len` discriminates changes the advantages."""
    m, crit = _halve_len([HONEST, UNSURE] * 6)
    c, d = m.per_task["med-1"]["control"], m.per_task["med-1"]["candidate"]
    assert c.rewards != d.rewards and c.std != d.std  # not the same scores ...
    assert critic.same_advantages(c.rewards, d.rewards)  # ... but the same advantages
    assert crit.no_effect and not crit.measured_ok
    assert any("NO EFFECT" in r and "affine" in r for r in crit.reasons)
    m, crit = _halve_len([HONEST, UNSURE, "water please", HONEST] * 3)  # "water please" misses len: 3 levels move
    assert not critic.same_advantages(m.per_task["med-1"]["control"].rewards, m.per_task["med-1"]["candidate"].rewards)
    assert not crit.no_effect


def test_same_advantages_is_an_increasing_affine_map_rollout_by_rollout():
    assert critic.same_advantages([0.0, 0.5, 1.0], [0.2, 0.4, 0.6])
    assert not critic.same_advantages([0.0, 0.5, 1.0], [0.6, 0.4, 0.2])  # reversed: every advantage flips
    assert not critic.same_advantages([0.0, 0.5, 1.0], [0.0, 0.1, 1.0])  # the middle answer moved
    assert critic.same_advantages([0.3, 0.3], [0.7, 0.7])  # a dead group stays dead
    assert not critic.same_advantages([0.3, 0.3], [0.3, 0.4])  # ... or is revived
    assert not critic.same_advantages([], []) and not critic.same_advantages([0.1], [0.1, 0.2])


# -- guards that cannot veto their own repair ------------------------------------------------------------------
HARDER = {
    "interface": "criteria",
    "ops": [
        {
            "op": "add_criterion",
            "task_id": "med-1",
            "criterion": {
                "id": "cause",
                "text": "Names a likely cause.",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "contains_any", "phrases": ["persists"]},
            },
        }
    ],
}


def test_the_honest_reward_guard_does_not_veto_a_dead_group_repair():
    """A saturated group: every rollout is honest (meets the audit), so any harder rubric lowers 'honest' reward.
    For collapse_high that drop is the repair; for a blind criterion the same drop is vetoed."""
    prior = {"med-1": [HONEST] * 4 + ["Drink water and rest in a dark room; a doctor helps."] * 12}
    high = FailureEvent.model_validate(event("h", "collapse_high", "med-1", mean=1.0, std=0.0))
    _, crit = _judge(ScriptedPolicy(lambda p, i: HONEST), update=HARDER, ev=high, prior_rollouts=prior)
    assert not any("honest rollouts" in r for r in crit.reasons if r.startswith("guard failed")), crit.reasons
    assert crit.measured_ok, crit.reasons
    _, blind = _judge(ScriptedPolicy(lambda p, i: HONEST), update=HARDER, ev=BLIND, prior_rollouts=prior)
    assert any(r.startswith("guard failed: honest rollouts") for r in blind.reasons), blind.reasons


def test_guards_veto_on_a_bound_not_on_noise():
    """One honest rollout of 16 loses reward: the point drop is small and the bound says noise, no veto."""
    ctx = EvolverContext()
    stuff = FailureEvent.model_validate(event("s", "stuffing", "med-1", criterion_id="water"))
    pitfall = {
        "interface": "criteria",
        "ops": [
            {
                "op": "add_pitfall",
                "task_id": "med-1",
                "criterion": {
                    "id": "rep",
                    "text": "Repeats a word.",
                    "weight": -3,
                    "kind": "pitfall",
                    "check": {"type": "contains_any", "phrases": ["water water"]},
                },
            }
        ],
    }
    prior = {"med-1": ["water water water water rest dark"] * 8 + [HONEST] * 15 + [HONEST + " water water"]}
    state = HarnessState.from_tasks(suite())
    upd = HarnessUpdate.model_validate(pitfall)
    m = measure_candidate(
        state,
        upd,
        ScriptedPolicy(lambda p, i: HONEST),
        Judge(None),
        MeasureSettings(step=10, sample_k=4, sample_k_max=16),
        prior_rollouts=prior,
        rule=critic.stop_rule(stuff, upd, ctx),
    )
    crit = critic.judge_measurement(stuff, upd, m, ctx)
    assert crit.numbers["honest_drop"] > 0 and crit.numbers["honest_drop_bound"] <= ctx.max_mean_drop
    assert not any(r.startswith("guard failed: honest") for r in crit.reasons), crit.reasons


def test_a_spurious_audit_repair_that_lowers_the_gamed_reward_passes_its_guards():
    gamed = "water water water rest dark"  # meets the rubric's checks, fails the audit (no doctor)
    prior = {"med-1": [gamed] * 8 + [HONEST] * 8}
    spur = FailureEvent.model_validate(event("sa", "spurious_audit", "med-1"))
    pitfall = {
        "interface": "criteria",
        "ops": [
            {
                "op": "add_pitfall",
                "task_id": "med-1",
                "criterion": {
                    "id": "rep",
                    "text": "Repeats a word.",
                    "weight": -3,
                    "kind": "pitfall",
                    "check": {"type": "contains_any", "phrases": ["water water"]},
                },
            }
        ],
    }
    _, crit = _judge(ScriptedPolicy(lambda p, i: HONEST), update=pitfall, ev=spur, prior_rollouts=prior)
    assert crit.numbers["gamed_drop"] > 0.1
    assert not any(r.startswith("guard failed") for r in crit.reasons), crit.reasons
    assert crit.measured_ok, crit.reasons


def test_a_criterion_that_pays_the_gamed_rollouts_more_is_refused_however_the_correlation_moves():
    """A stuffing repair that credits "not sure" as well as "doctor": it lifts the short honest answers and the unsure
    non-answers (gamed: no doctor) alike, 0.11 -> 0.56, and halves the stuffed one, so the reward tracks the audit
    better (the correlation rises by about 0.34) while the gamed rollouts earn 0.33 -> 0.54 on average. The
    correlation path must not accept that, on the shipped screen either (one look of 4 at alpha 0.5, where the
    bootstrap holds the correlation rule in about 9 of 10 resamples)."""
    full, unsure, short_honest = "water water water rest dark", "I am not sure.", "See a doctor."
    prior = {"med-1": [full] * 2 + [unsure] * 6 + [short_honest] * 4 + [HONEST] * 4}
    stuff = FailureEvent.model_validate(event("st", "stuffing", "med-1", criterion_id="water"))
    credit = {
        "interface": "criteria",
        "ops": [
            {
                "op": "add_criterion",
                "task_id": "med-1",
                "criterion": {
                    "id": "doc",
                    "text": "Points to a doctor or admits doubt.",
                    "weight": 9,
                    "kind": "important",
                    "check": {"type": "contains_any", "phrases": ["doctor", "sure"]},
                },
            }
        ],
    }
    shipped = MeasureSettings(step=10, k=4, alpha=0.5)
    _, crit = _judge(
        ScriptedPolicy(lambda p, i: HONEST), update=credit, ev=stuff, prior_rollouts=prior, settings=shipped
    )
    assert crit.numbers["gamed_drop"] < -0.1 and crit.numbers["audit_corr_gain"] >= 0.05, crit.numbers
    assert not crit.measured_ok and any("with no rise in the gamed reward" in r for r in crit.reasons), crit.reasons


# -- a batched update pools its targets ------------------------------------------------------------------------
BURN_GOOD = "Cool the burn under cold running water. Is it blistering?"
BATCH = {
    "interface": "guidance",
    "ops": [
        {"op": "add_hint", "task_id": "med-1", "hint": {"id": "h1", "text": "Think about fluids and rest."}},
        {"op": "add_hint", "task_id": "med-2", "hint": {"id": "h1", "text": "Think about temperature."}},
    ],
}


def _one_in_four_each(prompt: str, i: int) -> str:
    if "Hint:" not in prompt or i % 4:
        return UNSURE
    return BURN_GOOD if "burn" in prompt else HONEST


def test_a_batched_update_pools_its_targets_hits_in_one_exact_test():
    """One hit in 4 per target: undecided for the lead alone, a pass once the two targets' hits are pooled."""
    state = HarnessState.from_tasks(suite())
    upd = HarnessUpdate.model_validate(BATCH)
    ctx = EvolverContext()
    events = {
        "med-1": LOW,
        "med-2": FailureEvent.model_validate(event("e2", "collapse_low", "med-2", mean=0.0, std=0.0)),
    }
    rule = critic.batch_stop_rule(events, upd, ctx)
    assert rule.pooled == ("med-2",)
    alone = type(rule)(task_id=rule.task_id, holds=rule.holds, hits=rule.hits)
    for r, decision in ((alone, "undecided"), (rule, "pass")):
        m = measure_candidate(
            state, upd, ScriptedPolicy(_one_in_four_each), Judge(None), MeasureSettings(step=10, k=4), rule=r
        )
        assert m.sequential.decision == decision, m.sequential
    assert m.sequential.pooled == ["med-2"] and m.sequential.hits == [2] and m.sequential.control_n == 16
    assert critic.judge_batch(events, upd, m, ctx).measured_ok
