"""Screen, then confirm in training: every accepted update is provisional and the next training groups on its task
grade it (agents/decisions.py, trainer/provisional.py). A repair whose failure persists is reverted by a new harness
version restoring the parent's part of the task and recorded in memory as a negative case; one that holds is
confirmed; the verdicts survive a resume, reach rounds.jsonl and the console; the lane's and the batch's accepts go
through the same decision code."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace

import pytest

from agents import decisions
from agents.context import EvolverContext
from agents.schemas import Critique, Proposal
from harness.detector import DetectorConfig, GroupStats, RolloutRecord
from harness.store import HarnessStore
from harness.types import AddHint, AddVariant, FailureEvent, HarnessUpdate, Hint, Message, Schedule, SetSchedule
from memory.store import TrainingMemory
from tests.support.harness_factories import crit, state
from trainer.provisional import graded_id, pending, review

CFG = DetectorConfig()
CTX = EvolverContext()


def _ev(kind="collapse_low", task="med-001", step=4, cid=None) -> FailureEvent:
    return FailureEvent(id=f"{kind}:{task}:{step}", type=kind, task_id=task, step=step, criterion_id=cid)


def _group(task, step, version, rewards, *, audits=None, hinted=True, texts=None, verdicts=None) -> GroupStats:
    rolls = [
        RolloutRecord(
            text=(texts[i] if texts else f"reply number {i}"),
            reward=r,
            audit=None if audits is None else audits[i],
            hinted=hinted,
            hint_texts=["Mention water."] if hinted else [],
            verdicts=(verdicts[i] if verdicts else {}),
        )
        for i, r in enumerate(rewards)
    ]
    return GroupStats.from_rollouts(task, step, rolls, harness_version=version)


def _hint(task="med-001") -> HarnessUpdate:
    return HarnessUpdate(
        interface="guidance",
        ops=[
            AddHint(task_id=task, hint=Hint(id="h1", text="Mention water.")),
            SetSchedule(task_id=task, schedule=Schedule(mode="constant")),
        ],
    )


def _world(tmp_path, update=None, event=None, step=4):
    """A store with one provisional update committed at `step` (v1) and a memory with three dead groups before it."""
    store = HarnessStore(tmp_path / "harness")
    store.init(state())
    mem = TrainingMemory.ephemeral(embedding="hash")
    event = event or _ev(step=step)
    update = update or _hint(event.task_id)
    store.commit(
        update,
        step=step,
        meta={
            "event_id": event.id,
            "template": "hint_strong",
            "source": "rules",
            **decisions.provisional_meta([event], update, f"{event.id}:r0"),
        },
    )
    for s in (1, 2, 3):
        mem.add_group(_group(event.task_id, s, 0, [0.0] * 4, hinted=False), harness_version=0)
    return store, mem


def _review(store, mem, step=8, window=2):
    return review(store, mem, step, window=window, ctx=CTX, detector=CFG)


# -- the rule -------------------------------------------------------------------------------------------------
MIXED = [0.0, 1.0, 0.0, 1.0]
DEAD = [0.0] * 4


@pytest.mark.parametrize(
    ("kind", "cid", "post", "verdict", "why"),
    [
        ("collapse_low", None, [dict(rewards=DEAD), dict(rewards=DEAD)], "revert", "2 of 2 groups dead"),
        ("collapse_low", None, [dict(rewards=DEAD), dict(rewards=MIXED)], "confirm", "1 of 2 groups dead"),
        ("collapse_low", None, [dict(rewards=DEAD)], "wait", "1 of 2 groups"),
        # a guidance repair is graded on the visits that see the hint: unhinted visits of a fade plan do not count
        (
            "collapse_low",
            None,
            [dict(rewards=MIXED, hinted=False), dict(rewards=DEAD), dict(rewards=DEAD)],
            "revert",
            "2 of 2",
        ),
        ("collapse_high", None, [dict(rewards=[1.0] * 4), dict(rewards=[1.0] * 4)], "revert", "dead"),
        ("flat", None, [dict(rewards=[0.5, 0.5, 0.5, 1.0]), dict(rewards=[0.5] * 4)], "confirm", "1 of 2"),
        # the gamed signal: rollouts the audit fails still earn as much as the ones it passes
        (
            "spurious_audit",
            None,
            [dict(rewards=[1.0, 1.0, 1.0, 0.0], audits=[0.0, 0.0, 1.0, 1.0])] * 2,
            "revert",
            "persists",
        ),
        (
            "spurious_audit",
            None,
            [dict(rewards=[0.0, 0.0, 1.0, 1.0], audits=[0.0, 0.0, 1.0, 1.0])] * 2,
            "confirm",
            "held off",
        ),
        (
            "spurious_length",
            None,
            [dict(rewards=[0.0, 0.3, 0.6, 1.0], texts=["a", "a b c", "a b c d e f", "a " * 12])] * 2,
            "revert",
            "corr(length, reward) 1.00",
        ),
        (
            "stuffing",
            None,
            [dict(rewards=[1.0, 1.0, 0.0, 0.0], texts=["water " * 8] * 2 + ["no"] * 2)] * 2,
            "revert",
            "4 of 8 rollouts stuff, reward 1.00 vs the others 0.00",
        ),
        (
            "stuffing",
            None,
            [dict(rewards=[1.0, 1.0, 0.0, 0.0], texts=["water and rest"] * 2 + ["water " * 8] * 2)] * 2,
            "confirm",
            "reward 0.00 vs the others 1.00",
        ),
        # still stuffing as often, but the repaired reward pays it less than the honest rollouts: held off
        (
            "stuffing",
            None,
            [dict(rewards=[0.5, 0.5, 1.0, 1.0], texts=["water " * 8] * 2 + ["water and rest"] * 2)] * 2,
            "confirm",
            "4 of 8 rollouts stuff, reward 0.50 vs the others 1.00",
        ),
        # every rollout stuffs and still earns: persists
        (
            "stuffing",
            None,
            [dict(rewards=[0.5, 0.5, 1.0, 1.0], texts=["water " * 8] * 4)] * 2,
            "revert",
            "vs the others -",
        ),
        ("blind_criterion", "c1", [dict(rewards=MIXED, verdicts=[{"c1": True}] * 4)] * 2, "revert", "1 of 1 watched"),
        (
            "blind_criterion",
            "c1",
            [dict(rewards=MIXED, verdicts=[{"c1": i % 2 == 0} for i in range(4)])] * 2,
            "confirm",
            "0 of 1",
        ),
    ],
)
def test_target_failure_persisting_over_the_window_reverts(kind, cid, post, verdict, why):
    t = decisions.Target(
        task_id="med-001",
        graded_on="med-001",
        failure_type=kind,
        event_id="e",
        criterion_id=cid,
        watch=[cid] if cid else [],
        restore=["med-001"],
    )
    groups = [_group("med-001", 5 + i, 1, **g) for i, g in enumerate(post)]
    d = decisions.grade(t, "guidance", [], groups, window=2, ctx=CTX, detector=CFG)
    assert d.verdict == verdict and why in " ".join(d.reasons), d


def test_guard_reverts_a_repair_whose_honest_rollouts_lose_reward_beyond_noise():
    t = decisions.Target(
        task_id="med-001", graded_on="med-001", failure_type="spurious_audit", event_id="e", restore=["med-001"]
    )
    pre = [_group("med-001", s, 0, [1.0, 1.0, 0.9, 1.0], audits=[1.0] * 4) for s in (1, 2)]
    fell = [_group("med-001", s, 1, [0.0, 0.1, 0.0, 0.1], audits=[1.0] * 4) for s in (5, 6)]
    d = decisions.grade(t, "criteria", pre, fell, window=2, ctx=CTX, detector=CFG)
    assert d.verdict == "revert" and "honest reward fell" in d.reasons[0] and d.numbers["honest_reward_drop"] > 0.8
    noisy = [_group("med-001", s, 1, [1.0, 0.7, 1.0, 1.0], audits=[1.0] * 4) for s in (5, 6)]  # within noise: kept
    assert decisions.grade(t, "criteria", pre, noisy, window=2, ctx=CTX, detector=CFG).verdict == "confirm"


@pytest.mark.parametrize(("kind", "guarded"), [("flat", False), ("collapse_low", False), ("spurious_audit", True)])
def test_a_criteria_repair_of_a_dead_task_is_not_graded_on_the_old_rubrics_reward(kind, guarded):
    """A graded split pays other rewards than the rubric it replaced: only the audit guards it after training."""
    t = decisions.Target(task_id="med-001", graded_on="med-001", failure_type=kind, event_id="e", restore=["med-001"])
    pre = [_group("med-001", s, 0, [0.6] * 4, audits=[1.0] * 4) for s in (1, 2)]  # flat at 0.6 under the old rubric
    post = [_group("med-001", s, 1, [0.0, 0.2, 0.1, 0.3], audits=[1.0] * 4) for s in (5, 6)]  # varies, new rubric
    d = decisions.grade(t, "criteria", pre, post, window=2, ctx=CTX, detector=CFG)
    assert ("honest reward fell" in " ".join(d.reasons)) is guarded
    assert (decisions.RUBRIC_CHANGED in d.reasons) is not guarded
    if not guarded:
        assert d.verdict == "confirm" and "honest_reward_drop" not in d.numbers


@pytest.mark.parametrize(
    ("rewards", "audits", "verdict", "why"),
    [
        # hinted answers the audit fails more often than the plain ones did, but they are not paid more: kept
        ([0.0, 0.3, 0.0, 0.3], [1.0, 1.0, 0.0, 0.0], "confirm", "collapse_low held off"),
        # the hint's signal pays exactly the answers the audit fails: reverted although the task varies now
        ([0.6, 0.6, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], "revert", "audit fails earn 0.60 more"),
        # every hinted answer fails the audit where the plain ones passed
        ([0.0, 0.3, 0.0, 0.3], [0.0, 0.0, 0.0, 0.0], "revert", "no hinted rollout passes the audit"),
    ],
)
def test_a_hint_on_a_dead_task_is_guarded_on_its_signal_not_its_audit_level(rewards, audits, verdict, why):
    """The groups before the hint taught nothing: what the hint may not do is pay the answers the audit fails."""
    t = decisions.Target(
        task_id="med-001", graded_on="med-001", failure_type="collapse_low", event_id="e", restore=["med-001"]
    )
    pre = [_group("med-001", s, 0, [0.0] * 4, audits=[1.0] * 4, hinted=False) for s in (1, 2)]
    post = [_group("med-001", s, 1, rewards, audits=audits) for s in (5, 6)]
    d = decisions.grade(t, "guidance", pre, post, window=2, ctx=CTX, detector=CFG)
    assert d.verdict == verdict and why in " ".join(d.reasons), d
    assert "audit_drop" not in d.numbers  # the level of hinted against plain answers is no guard here


LEAKY = "Mention water, rest and a doctor."


@pytest.mark.parametrize(("own_audit", "verdict"), [(0.0, "confirm"), (1.0, "revert")])
def test_a_leak_repair_is_guarded_on_the_answers_that_did_not_copy_the_hint(own_audit, verdict):
    """Before the repair half the hinted answers copied the hint and scored its audit credit (1.0); after it no
    answer copies. The audit guard compares the policy's own answers: unchanged at 0 is kept, though the whole mean
    fell by half; own answers that fell from 1.0 to 0 are reverted."""
    t = decisions.Target(
        task_id="med-001", graded_on="med-001", failure_type="guidance_leak", event_id="e", restore=["med-001"]
    )

    def group(step, version, texts, audits):
        rolls = [
            RolloutRecord(text=x, reward=0.5, audit=a, hinted=True, hint_texts=[LEAKY]) for x, a in zip(texts, audits)
        ]
        return GroupStats.from_rollouts("med-001", step, rolls, harness_version=version)

    own = ["I would rest for a while.", "Sleep helps a lot here.", "Try a nap first.", "Lie down and rest."]
    pre = [group(s, 0, [LEAKY, own[0], LEAKY, own[1]], [1.0, own_audit, 1.0, own_audit]) for s in (1, 2)]
    post = [group(s, 1, own, [0.0] * 4) for s in (5, 6)]
    d = decisions.grade(t, "guidance", pre, post, window=2, ctx=CTX, detector=CFG)
    assert d.verdict == verdict, d
    assert d.numbers["audit_drop"] == pytest.approx(own_audit)


def test_false_revert_rate_in_the_docstring_is_the_formula():
    """((1-p)^G + p^G)^W for a true dead-group repair, as agents/decisions.py states it."""
    for p, g, w, stated in ((0.33, 4, 2, 0.046), (0.33, 8, 2, 0.0017), (0.25, 4, 2, 0.10), (0.06, 4, 2, 0.61)):
        assert ((1 - p) ** g + p**g) ** w == pytest.approx(stated, rel=0.05)
        assert f"{stated}" in decisions.__doc__


# -- the review: revert, confirm, wait, superseded --------------------------------------------------------------
def test_failure_that_persists_is_reverted_by_a_new_version_and_remembered(tmp_path):
    store, mem = _world(tmp_path)
    for s in (5, 6):
        mem.add_group(_group("med-001", s, 1, DEAD), harness_version=1)
    out = _review(store, mem)
    assert out["n_reverted"] == 1 and out["revert_versions"] == [2] and out["waiting"] == 0
    v2 = store.latest()
    assert v2.version == 2 and v2.guidance_for("med-001") == store.load(0).guidance_for("med-001")
    rec = store.history()[-1]
    assert rec.meta["revert_of"] == 1 and rec.meta["source"] == "revert" and rec.update.ops[0].op == "restore_guidance"
    assert rec.update.ops[0].from_version == 0
    neg = mem.get("proposals", graded_id(1, "med-001"))
    assert neg.outcome == "reverted" and neg.template == "hint_strong" and neg.measurements["dead_groups"] == 2
    assert any("persists" in r for r in neg.reasons) and any("reverted by v2" in r for r in neg.reasons)
    (verdict,) = out["verdicts"]
    assert verdict["line"].startswith("med-001 v1 (collapse_low): revert: collapse_low persists: 2 of 2 groups dead")
    assert verdict["line"].endswith("-> revert v2")
    # decided once: the next pause has nothing left to grade, and the revert itself is not provisional
    assert pending(store, mem) == [] and _review(store, mem)["verdicts"] == []


def test_update_that_holds_is_confirmed_and_left_in_place(tmp_path):
    store, mem = _world(tmp_path)
    mem.add_group(_group("med-001", 5, 1, MIXED), harness_version=1)
    mem.add_group(_group("med-001", 6, 0, DEAD), harness_version=0)  # a row drawn before the commit: not its group
    assert _review(store, mem)["waiting"] == 1 and mem.get("proposals", graded_id(1, "med-001")) is None
    mem.add_group(_group("med-001", 7, 1, DEAD), harness_version=1)
    out = _review(store, mem)
    assert out["n_confirmed"] == 1 and out["revert_versions"] == [] and store.latest().version == 1
    assert mem.get("proposals", graded_id(1, "med-001")).outcome == "confirmed"


def test_a_later_update_on_the_task_supersedes_the_grading(tmp_path):
    store, mem = _world(tmp_path)
    mem.add_group(_group("med-001", 5, 1, DEAD), harness_version=1)
    store.commit(
        HarnessUpdate(interface="guidance", ops=[AddHint(task_id="med-001", hint=Hint(id="h2", text="Rest."))]), step=6
    )
    mem.add_group(_group("med-001", 7, 2, DEAD), harness_version=2)
    out = _review(store, mem)
    assert out["n_superseded"] == 1 and out["revert_versions"] == [] and store.latest().version == 2
    assert mem.get("proposals", graded_id(1, "med-001")).outcome == "superseded"


def test_harder_variant_still_saturated_is_retired_and_the_parent_weight_restored(tmp_path):
    ev = _ev("collapse_high", "med-002")
    upd = HarnessUpdate(
        interface="sampling",
        ops=[
            AddVariant(
                task_id="med-002",
                variant_id="med-002-v1",
                prompt=[Message(role="user", content="Answer in 3 bullets.")],
                extra_criteria=[crit("b3", 2, "important")],
                parent_weight=0.5,
            )
        ],
    )
    store, mem = _world(tmp_path, update=upd, event=ev)
    for s in (5, 6):
        mem.add_group(_group("med-002-v1", s, 1, [1.0] * 4, hinted=False), harness_version=1)
    out = _review(store, mem)
    assert [v["graded_on"] for v in out["verdicts"]] == ["med-002-v1"] and out["revert_versions"] == [2]
    v2 = store.latest()
    assert v2.sampling["med-002-v1"].status == "retired" and "med-002-v1" in v2.variants
    assert v2.sampling["med-002"] == store.load(0).sampling["med-002"]


def test_reweights_and_fallbacks_are_not_provisional():
    from harness.types import Reweight

    assert (
        decisions.provisional_meta(
            [_ev()], HarnessUpdate(interface="sampling", ops=[Reweight(task_id="med-001", weight=0.5)]), "p"
        )
        == {}
    )


# -- one decision room: the lane's route and the batch's accept -------------------------------------------------
def _crit(ok=False, **kw) -> Critique:
    return Critique(
        failure_type="collapse_low",
        measured_ok=ok,
        primary="std_gain",
        numbers={"std_gain": 0.2},
        reasons=["std 0.00 -> 0.20"],
        **kw,
    )


@pytest.mark.parametrize(
    ("crit_kw", "attempts", "verdict"),
    [
        (dict(ok=True), [{}], "accept"),
        (dict(ok=True, veto=True), [{}], "revise"),
        (dict(), [{}, {}], "revise"),
        (dict(), [{}, {}, {}], "fallback"),  # R = 2 revisions charged: the third rejection falls back
        # no-effect candidates are refused for free: not charged, so the lane may try again
        (dict(), [{}, {}, {"critique": {"no_effect": True}}], "revise"),
        (dict(), [{"critique": {"no_effect": True}}] * (decisions.FREE_RETRIES + 1), "fallback"),
    ],
)
def test_after_critique_counts_charged_revisions(crit_kw, attempts, verdict):
    prop = Proposal(update=_hint(), template="hint_strong")
    d = decisions.after_critique(_crit(**crit_kw), prop, attempts, CTX)
    assert d.verdict == verdict and d.numbers["max_revisions"] == 2 and d.numbers["std_gain"] == 0.2


def test_a_refusal_names_what_refused_it_first():
    crit = Critique(
        failure_type="collapse_high",
        measured_ok=False,
        primary="std_gain",
        numbers={"std_gain": 0.24},
        reasons=[
            "focus group t-any (paired=True)",
            "std 0.000 -> 0.242 (gain +0.242, need >= 0.05)",
            "PASS: std_gain",
            "guard failed: sequential test undecided at k=8",
            "corr None -> None",
        ],
    )
    d = decisions.after_critique(crit, Proposal(update=_hint()), [{}, {}, {}], CTX)
    assert d.verdict == "fallback"
    assert d.reasons[:2] == (
        "guard failed: sequential test undecided at k=8",
        "std 0.000 -> 0.242 (gain +0.242, need >= 0.05)",
    )
    ok = decisions.after_critique(
        crit.model_copy(update={"measured_ok": True, "reasons": ["corr None -> None", "PASS: x"]}),
        Proposal(update=_hint()),
        [{}],
        CTX,
    )
    assert ok.verdict == "accept" and ok.reasons == ("corr n/a -> n/a",)


def test_rules_out_of_templates_falls_back():
    assert (
        decisions.after_critique(_crit(), Proposal(update=None, error="no template left"), [{}], CTX).verdict
        == "fallback"
    )


def test_route_after_critique_asks_the_decision_room(monkeypatch):
    from graphs import evolver

    seen = []

    def fake(crit, prop, attempts, ctx):
        seen.append(len(attempts))
        return decisions.Decision("revise")

    monkeypatch.setattr(decisions, "after_critique", fake)
    st = {
        "critique": _crit(ok=True).model_dump(mode="json"),
        "proposal": Proposal(update=_hint()).model_dump(mode="json"),
        "attempts": [{}],
        "revision": 0,
    }
    assert evolver.route_after_critique(st, SimpleNamespace(context=EvolverContext())) == "revise" and seen == [1]


@pytest.mark.parametrize(
    "verdict, batch, route",
    [
        ("accept", {"decision": "pending"}, "commit"),
        ("reject", {"decision": "rejected"}, "record"),
        ("accept", None, "record"),  # generalise did nothing (the lane's commit went stale, or it is off)
        ("accept", {"decision": "none", "note": "no similar task qualified", "critique": None}, "record"),
    ],
)
def test_route_after_generalise_asks_the_decision_room(monkeypatch, verdict, batch, route):
    """The batch's accept is a route, like the lane's: it asks `batch_accept` and sends an accepted batch to the one
    commit node."""
    from graphs import evolver

    seen = []

    def fake(crit):
        seen.append(crit.measured_ok)
        return decisions.Decision(verdict)

    monkeypatch.setattr(decisions, "batch_accept", fake)
    if batch is not None and "critique" not in batch:
        batch = {**batch, "critique": _crit(ok=True).model_dump(mode="json")}
    assert evolver.route_after_generalise({"generalised": batch}) == route
    assert seen == ([True] if batch is not None and batch["critique"] is not None else [])


def test_generalise_batch_accept_goes_through_the_decision_room(tmp_path, monkeypatch):
    """The batch the critic accepted (test_generalise's world) is not committed when the decision room says no,
    and when it says yes its commit is provisional, with a target per batched task."""
    from tests.test_generalise import _policy, _run, _setup

    key, svc = _setup(tmp_path / "yes", _policy(stuff_targets=True))
    out = _run(key)
    gen = out["reports"][0]["generalised"]
    assert gen["decision"] == "accepted" and gen["verdict"]["verdict"] == "accept"
    meta = svc.store.history()[-1].meta
    assert [t["task_id"] for t in meta["provisional"]["targets"]] == gen["targets"]
    assert svc.store.history()[0].meta["provisional"]["targets"][0]["task_id"] == "med-a"  # the lane's commit too

    monkeypatch.setattr(decisions, "batch_accept", lambda crit: decisions.Decision("reject", ("refused by the room",)))
    key, svc = _setup(tmp_path / "no", _policy(stuff_targets=True))
    gen = _run(key)["reports"][0]["generalised"]
    assert gen["critique"]["measured_ok"] and gen["decision"] == "rejected" and svc.store.latest().version == 1


# -- the trainer: a pause grades, reverts before the round, survives a resume ----------------------------------
def _score(reward, run, task, texts, version, step):
    n = len(texts)
    return asyncio.run(
        reward(
            prompts=[[{"role": "user", "content": "x"}]] * n,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            task_id=[task] * n,
            harness_version=[version] * n,
            hinted=[True] * n,
            hint_text=["The answer is a city."] * n,
            trainer_state=SimpleNamespace(global_step=step),
            log_extra=lambda *a: None,
            log_metric=lambda k, v: None,
        )
    )


def test_pause_reverts_a_repair_whose_groups_stay_dead_before_the_round(tmp_path, caplog):
    from tests.support.tiny_run import tiny_config
    from trainer.callback import HarnessCallback
    from trainer.harness_run import HarnessRun
    from trainer.reward import RubricReward
    from trainer.sampler import HarnessSampler

    run = HarnessRun(tiny_config(tmp_path), memory=TrainingMemory.ephemeral())
    HarnessSampler(run, seed=0)
    event = _ev("collapse_low", "t-paris", step=2)
    calls = []

    def graph(cfg, events, version, step, context, thread_id):
        calls.append((step, version, [e.id for e in events]))
        if step == 2:
            upd = _hint("t-paris")
            run.store.commit(
                upd,
                step=step,
                meta={"event_id": event.id, "template": "hint_strong", **decisions.provisional_meta([event], upd, "p")},
            )
        return {"accepted": [], "reports": []}

    cb = HarnessCallback(run, run_graph=graph)
    cb.pause.publish_policy = lambda step: (object(), "local")
    cb.pause._register_services = lambda key, endpoint, context: None
    run.add_events([event], harness_version=0)
    cb.pause.evolve(2)
    assert run.state.version == 1
    reward = RubricReward(run, num_generations=4)
    for step in (3, 4):  # the hint did not help: every rollout still misses
        _score(reward, run, "t-paris", ["No idea."] * 4, 1, step)
    with caplog.at_level(logging.INFO, logger="trainer.evolver_round"):
        cb.pause.evolve(4)
    assert run.state.version == 2 and not run.state.guidance_for("t-paris").hints
    rounds = [json.loads(x) for x in run.paths.rounds.read_text().splitlines()]
    prov = rounds[1]["provisional"]
    assert prov["n_reverted"] == 1 and prov["revert_versions"] == [2] and rounds[1]["version_before"] == 2
    # the detector's new collapse event on t-paris is about the reverted harness: stale, the revert answered it
    assert rounds[1]["n_stale"] >= 1 and all(c[1] == 2 for c in calls[1:])
    text = caplog.text
    assert "provisional t-paris v1 (collapse_low): revert" in text and "None -> None" not in text
    assert run.memory.get("proposals", graded_id(1, "t-paris")).outcome == "reverted"
    run.close()


def test_provisional_updates_survive_a_resume(tmp_path):
    from tests.support.tiny_run import tiny_config
    from trainer.checkpoint import restore, write_checkpoint_state
    from trainer.harness_run import HarnessRun
    from trainer.sampler import HarnessSampler

    cfg = tiny_config(tmp_path)
    r = HarnessRun(cfg)  # persistent memory in the run folder
    HarnessSampler(r, seed=0)
    upd, ev = _hint("t-paris"), _ev("collapse_low", "t-paris", step=2)
    r.store.commit(upd, step=2, meta=decisions.provisional_meta([ev], upd, "p"))
    r.refresh()
    ckpt = cfg.run_path / "checkpoints" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    write_checkpoint_state(ckpt, r, step=2)
    for s in (3, 4):
        r.memory.add_group(_group("t-paris", s, 1, DEAD), harness_version=1)
    assert review(r.store, r.memory, 4, window=2, ctx=CTX, detector=CFG)["revert_versions"] == [2]
    assert pending(r.store, r.memory) == []
    r.close()

    r2 = HarnessRun(cfg, open_memory=False)
    HarnessSampler(r2, seed=0)
    restore(r2, ckpt)  # the revert and its verdict were after the checkpoint: the update is provisional again
    assert [(rec.version, t.task_id) for rec, t in pending(r2.store, r2.memory)] == [(1, "t-paris")]
    r2.close()


def test_report_counts_confirmed_reverted_and_provisional_updates():
    from graphs.round_record import RoundRecord
    from harness.store import UpdateRecord
    from trainer.outcomes import update_effect_rows
    from trainer.report import summary, summary_sentences

    def upd(version, meta, op=None):
        op = op or {"op": "add_hint", "task_id": f"t{version}", "hint": {"id": "h1", "text": "Be brief."}}
        update = {"interface": "guidance", "ops": [op]}
        return UpdateRecord(
            version=version, parent_version=version - 1, step=2 * version, meta=meta, update=update, timestamp="t"
        )

    prov = {"provisional": {"targets": [{"task_id": "t"}]}}
    restore = {"op": "restore_guidance", "task_id": "t2", "from_version": 1}
    verdicts = [{"version": 1, "verdict": "confirm"}, {"version": 2, "verdict": "revert"}]
    data = {
        "metrics": [],
        "events": [],
        "eval": {},
        "updates": [
            upd(1, prov),
            upd(2, prov),
            upd(3, prov),
            upd(4, {"source": "revert", "revert_of": 2}, restore),
            upd(5, {"fallback": True}),
        ],
        "rounds": [
            RoundRecord.model_validate(
                {"step": 8, "provisional": {"verdicts": verdicts, "n_confirmed": 1, "n_reverted": 1}}
            )
        ],
    }
    s = summary(data)
    assert (s["confirmed_total"], s["reverted_total"], s["provisional_total"], s["revert_total"]) == (1, 1, 1, 1)
    assert s["accepted_total"] == 3 and s["fallback_total"] == 1  # a revert is not an accept
    assert [r["outcome"] for r in update_effect_rows(data["metrics"], data["updates"], data["rounds"])] == [
        "confirmed",
        "reverted",
        "provisional",
        "revert",
        "fallback",
    ]
    assert any(line.startswith("Training confirmed 1 accepted update and reverted 1") for line in summary_sentences(s))
    from trainer.report import verdict_rows

    assert [(r["version"], r["verdict"]) for r in verdict_rows(data)] == [(1, "confirm"), (2, "revert")]


def test_a_reverted_spurious_repair_is_remembered_without_audit_numbers_for_the_llm_roles(tmp_path):
    from harness.types import AddPitfall
    from harness.visibility import hidden_key

    ev = _ev("spurious_audit", "med-001")
    upd = HarnessUpdate(interface="criteria", ops=[AddPitfall(task_id="med-001", criterion=crit("p9", -2))])
    store, mem = _world(tmp_path, update=upd, event=ev)
    for s in (5, 6):  # the audit-failing rollouts are still paid as well as the passing ones
        mem.add_group(
            _group("med-001", s, 1, [1.0, 1.0, 1.0, 0.0], audits=[0.0, 0.0, 1.0, 1.0], hinted=False), harness_version=1
        )
    out = _review(store, mem)
    assert out["revert_versions"] == [2] and store.latest().criteria("med-001") == store.load(0).criteria("med-001")
    rec = mem.get("proposals", graded_id(1, "med-001"))
    assert rec.outcome == "reverted" and rec.measurements["gamed_reward"] == 1.0  # kept for the trainer's report
    doc = rec.document().replace("spurious_audit", "")
    assert "reverted" in doc and "audit" not in doc and "gamed" not in doc and "honest" not in doc
    assert any(hidden_key(k) for k in rec.measurements)  # what redact() strips before a tool shows them


def test_a_task_whose_repair_training_reverted_counts_as_unrepaired_for_generalise(tmp_path):
    from memory.records import ProposalRecord
    from tests.test_generalise import _policy, _run, _setup

    key, svc = _setup(tmp_path, _policy(stuff_targets=True))
    _run(key)  # med-b and med-c repaired by the batch at step 10
    svc.memory.add_proposal(
        ProposalRecord(
            proposal_id=graded_id(2, "med-b"),
            event_id="e",
            task_id="med-b",
            step=12,
            failure_type="stuffing",
            interface="criteria",
            outcome="reverted",
        )
    )
    skipped = dict(s.split(": ", 1) for s in _run(key, version=2, step=14)["reports"][0]["generalised"]["skipped"])
    assert "already repaired" in skipped["med-c"] and "already repaired" not in skipped.get("med-b", "")


@pytest.mark.parametrize(("p", "stated"), [(0.33, 0.046), (0.06, 0.61)])
def test_the_real_rule_reverts_as_often_as_the_stated_rate(p, stated):
    """Simulated binary-reward training groups (G = 4) through `decisions.grade`: a true repair to hit rate 0.33 is
    reverted about 4.6 % of the time at W = 2, a no-op at 0.06 about 61 % (seeded; the band is 4 standard errors)."""
    import numpy as np

    rng = np.random.default_rng(0)
    t = decisions.Target(
        task_id="med-001", graded_on="med-001", failure_type="collapse_low", event_id="e", restore=["med-001"]
    )
    n = 600
    reverted = sum(
        decisions.grade(
            t,
            "criteria",
            [],
            [_group("med-001", 5 + k, 1, [float(x) for x in rng.random(4) < p], hinted=False) for k in range(2)],
            window=2,
            ctx=CTX,
            detector=CFG,
        ).verdict
        == "revert"
        for _ in range(n)
    )
    assert abs(reverted / n - stated) < 4 * (stated * (1 - stated) / n) ** 0.5


def test_a_failing_review_is_logged_and_training_goes_on(tmp_path, monkeypatch):
    from tests.support.tiny_run import tiny_config
    from trainer import evolver_round
    from trainer.callback import HarnessCallback
    from trainer.harness_run import HarnessRun

    run = HarnessRun(tiny_config(tmp_path), memory=TrainingMemory.ephemeral())

    def down(run, step):
        raise ConnectionError("memory server unreachable")

    monkeypatch.setattr(evolver_round, "review_run", down)
    cb = HarnessCallback(run, run_graph=lambda *a: {"accepted": [], "reports": []})
    cb.pause.publish_policy = lambda step: (object(), "local")
    cb.pause._register_services = lambda key, endpoint, context: None
    run.add_events([_ev("collapse_low", "t-paris", step=2)], harness_version=0)
    cb.pause.evolve(2)
    rnd = json.loads(run.paths.rounds.read_text().splitlines()[0])
    assert "ConnectionError: memory server unreachable" in rnd["provisional"]["error"] and rnd["n_events"] == 1
    run.close()


def test_the_trace_page_shows_the_batch_and_its_decision():
    import re

    from graphs.trace_html import _decisions

    attempt = {
        "revision": 0,
        "template": "tighten_repeat",
        "critique": {"measured_ok": True, "reasons": ["ok"], "numbers": {}},
        "decision": {"verdict": "accept", "reasons": ["ok"], "numbers": {}},
    }
    report = {
        "event_id": "e",
        "task_id": "med-a",
        "failure_type": "stuffing",
        "interface": "criteria",
        "decision": "accepted",
        "committed_version": 1,
        "attempts": [attempt],
        "fallback": None,
        "tool_calls": [],
        "note": None,
        "generalised": {
            "targets": ["med-b", "med-c"],
            "decision": "rejected",
            "version": None,
            "verdict": {"verdict": "reject", "reasons": ["batch rule held on 0 of 2 targets"]},
        },
    }
    rows = re.findall(r"<tr>(.*?)</tr>", _decisions({"reports": [report]}))[1:]
    assert len(rows) == 2 and 'rowspan="2"' in rows[0]
    assert (
        "batched" in rows[1]
        and "med-b, med-c" in rows[1]
        and "batch rule held on 0 of 2" in rows[1]
        and ">rejected<" in rows[1]
    )
