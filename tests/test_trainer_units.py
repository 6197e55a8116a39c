"""Trainer pieces without a training loop: sampler, reward, callback pause (incl. failures), broadcast, resume."""

from __future__ import annotations

import asyncio
import json
import pickle
from types import SimpleNamespace

import pytest

from harness.detector import GroupStats, RolloutRecord
from harness.guidance import prompt_digest
from harness.types import AddHint, FailureEvent, HarnessUpdate, Hint, Reweight, Schedule, SetSchedule
from memory.store import TrainingMemory
from tests.support.tiny_run import tiny_config
from trainer.callback import HarnessCallback
from trainer.checkpoint import read_state, restore, write_checkpoint_state
from trainer.harness_run import HarnessRun
from trainer.reward import RubricReward
from trainer.round_events import live_check, stale_check, take_events
from trainer.sampler import HarnessSampler, make_dataset


@pytest.fixture
def run(tmp_path):
    cfg = tiny_config(tmp_path)
    r = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    HarnessSampler(r, seed=0)
    yield r
    r.close()


def _hint_update(task_id="t-paris", text="The answer is a city on the Seine."):
    return HarnessUpdate(
        interface="guidance",
        ops=[
            AddHint(task_id=task_id, hint=Hint(id="h1", text=text)),
            SetSchedule(task_id=task_id, schedule=Schedule(mode="constant")),
        ],
    )


def _only(run, task_id):
    for tid in run.state.active_task_ids():
        if tid != task_id:
            run.store.commit(HarnessUpdate(interface="sampling", ops=[Reweight(task_id=tid, weight=0.0)]))
    run.refresh()


# -- sampler ---------------------------------------------------------------------------------------------
def test_sampler_rows_follow_the_current_harness(run):
    _only(run, "t-paris")
    row = run.sampler.draw_row()
    assert row["task_id"] == "t-paris" and not row["hinted"] and "Hint:" not in row["prompt"][-1]["content"]
    run.store.commit(_hint_update())
    run.refresh()  # what the callback does after a round
    row = run.sampler.draw_row()
    assert row["harness_version"] == run.state.version and row["hinted"]
    assert row["prompt"][-1]["content"].endswith("Hint: The answer is a city on the Seine.")


def test_a_drawn_rows_prompt_is_the_one_the_critic_would_measure_for_that_visit(run):
    """The critic finds a control prompt's cached training groups by the digest of the messages training sampled
    (tools.probes.prompt_rollouts), so both must render a visit alike, hinted or not."""
    from tools.candidate_plan import visit_strata

    _only(run, "t-paris")
    for update in (None, _hint_update()):
        if update is not None:
            run.store.commit(update)
            run.refresh()
        row = run.sampler.draw_row()
        strata = visit_strata(run.state, "t-paris", run.sampler.step)
        assert prompt_digest(row["prompt"]) in {s.spec.digest for s in strata}
        assert len(strata) == 1 and bool(strata[0].spec.hints) == row["hinted"] == (update is not None)


def test_trl_repeats_each_row_into_one_group(run):
    from trl.trainer.utils import repeat_iterable_dataset

    ds = repeat_iterable_dataset(make_dataset(run.sampler), mini_repeat_count=4, batch_size=2)
    rows = [r for _, r in zip(range(16), ds)]
    for g in range(4):
        group = rows[4 * g : 4 * g + 4]
        assert len({(r["task_id"], r["harness_version"]) for r in group}) == 1


def test_dynamic_filtering_downweights_dead_tasks(tmp_path):
    cfg = tiny_config(tmp_path)
    r = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    s = HarnessSampler(r, seed=0, dynamic_filtering=True, df_window=2, df_multiplier=0.1)
    before = s.core.weights()["t-paris"]
    s.observe_group("t-paris", dead=True)
    assert s.core.weights()["t-paris"] == pytest.approx(before)  # one dead visit is not enough
    s.observe_group("t-paris", dead=True)
    assert s.core.weights()["t-paris"] < before / 2
    s.observe_group("t-paris", dead=False)
    assert s.core.weights()["t-paris"] == pytest.approx(before)
    r.close()


# -- reward ----------------------------------------------------------------------------------------------
def _call(reward, run, task_ids, texts, versions, step=0):
    n = len(texts)
    metrics: dict = {}
    out = asyncio.run(
        reward(
            prompts=[[{"role": "user", "content": "x"}]] * n,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            task_id=task_ids,
            harness_version=versions,
            hinted=[False] * n,
            hint_text=[""] * n,
            trainer_state=SimpleNamespace(global_step=step),
            log_extra=lambda *a: None,
            log_metric=lambda k, v: metrics.setdefault(k, v),
        )
    )
    return out, metrics


def test_reward_scores_groups_feeds_detector_memory_and_metrics(run):
    reward = RubricReward(run, num_generations=4)
    texts = ["Paris is the capital."] * 2 + ["No idea."] * 2 + ["nothing"] * 4
    out, metrics = _call(reward, run, ["t-paris"] * 4 + ["t-photo"] * 4, texts, [0] * 8)
    assert out[:4] == [1.0, 1.0, 0.0, 0.0] and out[4:] == [0.0] * 4
    assert metrics["pass_rate/t-paris/c1"] == 0.5
    events = take_events(run, 10).taken
    assert [(e.type, e.task_id) for e in events] == [("collapse_low", "t-photo")]  # first-visit all-0 group
    rec = run.pop_step(1)
    assert rec["dead_share"] == 0.5 and rec["harness_version"] == 0 and rec["reward"] == pytest.approx(0.25)
    assert run.memory.count()["groups"] == 2
    groups = run.memory.task_history("t-paris", kinds=("groups",))
    assert groups[0].stats["prompt_digest"] == prompt_digest([{"role": "user", "content": "x"}])  # what was sampled
    assert json.loads(run.paths.events.read_text().splitlines()[0])["task_id"] == "t-photo"


def test_reward_uses_the_rubric_of_the_rows_version(run):
    from harness.types import AddCriterion, Criterion

    run.store.commit(
        HarnessUpdate(
            interface="criteria",
            ops=[
                AddCriterion(
                    task_id="t-paris",
                    criterion=Criterion(
                        id="c9",
                        text="Ends with !",
                        weight=5,
                        kind="essential",
                        check={"type": "ends_with", "text": "!"},
                    ),
                )
            ],
        )
    )
    run.refresh()
    reward = RubricReward(run, num_generations=2)
    old, _ = _call(reward, run, ["t-paris"] * 2, ["Paris.", "Paris."], [0, 0])
    new, _ = _call(reward, run, ["t-paris"] * 2, ["Paris.", "Paris."], [1, 1], step=1)
    assert old == [1.0, 1.0] and new == [0.5, 0.5]


def test_reward_refuses_rows_that_are_not_groups(run):
    reward = RubricReward(run, num_generations=2)
    with pytest.raises(ValueError, match="not one group"):
        _call(reward, run, ["t-paris", "t-photo"], ["a", "b"], [0, 0])


def test_reward_is_picklable_and_finds_the_live_run(run):
    reward = RubricReward(run, num_generations=4)
    clone = pickle.loads(pickle.dumps(reward))
    assert clone.__name__ == "rubric" and clone.run is run


# -- callback: pause, failures, broadcast ----------------------------------------------------------------------
def _event(task_id="t-paris", step=2, version=0):
    return FailureEvent(
        id=f"collapse_low:{task_id}:{step}",
        type="collapse_low",
        task_id=task_id,
        step=step,
        stats={"harness_version": version},
    )


def test_round_applies_committed_update_and_records_pause(run):
    def graph(cfg, events, version, step, context, thread_id):
        assert context.services_key and "guidance" in context.interfaces and context.critic
        run.store.commit(_hint_update(), step=step)
        return {
            "accepted": [{"event_id": events[0].id}],
            "reports": [
                {
                    "event_id": events[0].id,
                    "task_id": "t-paris",
                    "failure_type": events[0].type,
                    "decision": "accepted",
                    "interface": "guidance",
                    "attempts": [],
                }
            ],
        }

    cb = HarnessCallback(run, run_graph=graph)
    cb.pause.publish_policy = lambda step: (object(), "local")
    cb.pause._register_services = lambda key, endpoint, context: None
    _only(run, "t-paris")
    before = run.state.version
    run.add_events([_event(version=before)], harness_version=before)
    pause = cb.pause.evolve(2)
    assert run.state.version == before + 1 and pause >= 0
    rounds = [json.loads(x) for x in run.paths.rounds.read_text().splitlines()]
    assert rounds[0]["n_accepted"] == 1 and rounds[0]["accepted_interfaces"] == ["guidance"]
    row = run.sampler.draw_row()  # the next sampled prompt follows the new version
    assert row["harness_version"] == before + 1 and row["hinted"]


def test_round_context_and_services_take_the_config_knobs(tmp_path):
    """One name per knob from the YAML to the graph.

    And the agents' tools sample with the run's seed, like the critic.
    """
    from graphs.services import get_services

    cfg = tiny_config(
        tmp_path,
        "train.seed=7",
        "evolver.sample_k=3",
        "evolver.critic=false",
        "evolver.memory=false",
        "evolver.interfaces=[criteria]",
    )
    r = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    seen = {}

    def graph(cfg, events, version, step, context, thread_id):
        seen.update(ctx=context, svc=get_services(context.services_key))
        return {"accepted": [], "reports": []}

    cb = HarnessCallback(r, run_graph=graph)
    cb.pause.publish_policy = lambda step: (object(), "local")
    r.add_events([_event()], harness_version=0)
    try:
        cb.pause.evolve(2)
    finally:
        r.close()
    ctx, svc = seen["ctx"], seen["svc"]
    assert (ctx.seed, ctx.sample_k, ctx.critic, ctx.memory, ctx.interfaces) == (7, 3, False, False, ["criteria"])
    numbers = ("max_tokens", "temperature", "seed")  # the services' sampling numbers: the context's
    assert {k: getattr(svc, k) for k in numbers} == {k: getattr(ctx, k) for k in numbers}
    assert svc.memory is None


@pytest.mark.parametrize("commit_first", [False, True])
def test_failed_round_leaves_harness_unchanged(run, commit_first):
    def graph(cfg, events, version, step, context, thread_id):
        if commit_first:  # a partial round: one update committed, then the judge/endpoint fails
            run.store.commit(_hint_update(), step=step)
        raise ConnectionError("judge endpoint unreachable")

    cb = HarnessCallback(run, run_graph=graph)
    cb.pause.publish_policy = lambda step: (object(), "local")
    cb.pause._register_services = lambda key, endpoint, context: None
    run.add_events([_event()], harness_version=0)
    cb.pause.evolve(2)
    assert run.state.version == 0 and run.store.versions() == [0]
    rnd = json.loads(run.paths.rounds.read_text().splitlines()[0])
    assert "ConnectionError" in rnd["error"] and rnd["rolled_back_versions"] == ([1] if commit_first else [])
    assert [e.id for e in take_events(run, 5).taken] == ["collapse_low:t-paris:2"]  # kept for the next round


def test_real_graph_with_failing_endpoint_keeps_harness(run):
    """The evolver graph itself, with a frozen policy that is down: no update, training goes on."""
    from tools.endpoint import EndpointError

    class Down:
        name = "down"

        def sample(self, *a, **k):
            raise EndpointError("policy endpoint down")

    cb = HarnessCallback(run)
    cb.pause.publish_policy = lambda step: (Down(), "local")
    run.add_events([_event("t-paris")], harness_version=0)
    cb.pause.evolve(2)
    assert run.store.versions()[-1] == run.state.version
    rnd = json.loads(run.paths.rounds.read_text().splitlines()[0])
    assert rnd["n_accepted"] == 0
    # Either the graph reported the failure per event or the round failed as a whole; no version was accepted.
    assert all(r["decision"] != "accepted" for r in rnd.get("reports", []))


def test_stale_events_are_dropped(run):
    run.store.commit(_hint_update())
    run.refresh()
    run.add_events([_event(version=0), _event("t-photo", version=0), _event(version=1, step=1)], harness_version=0)
    taken, superseded, stale, *_ = take_events(run, 10, is_stale=stale_check(run.store))
    assert [(e.task_id, e.stats["harness_version"]) for e in stale] == [("t-paris", 0)]
    assert sorted((e.task_id, e.stats["harness_version"]) for e in taken) == [("t-paris", 1), ("t-photo", 0)]
    assert superseded == [] and run.pending_events == []


def _typed(kind, task_id, step, confirmed=False):
    return FailureEvent(
        id=f"{kind}:{task_id}:{step}",
        type=kind,
        task_id=task_id,
        step=step,
        stats={"harness_version": 0},
        window=[step - 1, step] if confirmed else [step],
        window_hits=2 if confirmed else 1,
        confirmed=confirmed,
    )


@pytest.mark.parametrize(
    "pending,limit,taken,superseded,waiting",
    [
        # one event per task: the most valuable repair wins, the task's other events are superseded
        ([("collapse_low", "a", 3), ("stuffing", "a", 1), ("flat", "a", 4)], 5, ["flat:a:4"], 2, 0),
        # dead groups (low, high, flat) before hacks before diagnostics; within a class the most recent first
        (
            [
                ("blind_criterion", "e", 9),
                ("flat", "b", 9),
                ("collapse_low", "a", 2),
                ("collapse_high", "c", 5),
                ("spurious_length", "d", 1),
            ],
            5,
            ["flat:b:9", "collapse_high:c:5", "collapse_low:a:2", "spurious_length:d:1", "blind_criterion:e:9"],
            0,
            0,
        ),
        # batch-level events go last; beyond the limit they wait for the next round
        (
            [("collapse_low", "*", 9), ("collapse_low", "a", 1), ("flat", "b", 2)],
            2,
            ["flat:b:2", "collapse_low:a:1"],
            0,
            1,
        ),
        # a confirmed dead group gets a slot before a confirmed hack, and both before one-group events
        (
            [
                ("stuffing", "a", 9),
                ("spurious_length", "b", 8),
                ("collapse_low", "c", 2, True),
                ("spurious_audit", "d", 1, True),
            ],
            3,
            ["collapse_low:c:2", "spurious_audit:d:1", "stuffing:a:9"],
            0,
            1,
        ),
        # any confirmed failure goes before an unconfirmed one, whatever its type
        ([("collapse_low", "c", 9), ("stuffing", "a", 2, True)], 1, ["stuffing:a:2"], 0, 1),
        # unconfirmed on both sides, the dead group still goes first
        ([("stuffing", "a", 9), ("collapse_low", "c", 2)], 1, ["collapse_low:c:2"], 0, 1),
        # a dead group seen once goes before a confirmed blind criterion (a zero std is exact, not noise)
        ([("blind_criterion", "a", 9, True), ("flat", "c", 2)], 1, ["flat:c:2"], 0, 1),
    ],
)
def test_take_events_prioritises_and_dedupes(run, pending, limit, taken, superseded, waiting):
    with run.lock:
        run.pending_events = [_typed(*p) for p in pending]
    got = take_events(run, limit)
    assert [e.id for e in got.taken] == taken
    assert len(got.superseded) == superseded and len(run.pending_events) == waiting


def test_dead_events_rank_by_the_dead_groups_a_repair_could_revive(run):
    """Among dead failures of one class, the task expected to train the most dead groups from here goes first."""
    from trainer.round_events import repair_values

    for _ in range(4):
        run.liveness.observe("t-photo", dead=True)
    run.liveness.observe("t-paris", dead=False)
    with run.lock:
        run.pending_events = [
            _typed("collapse_low", "t-paris", 3),
            _typed("flat", "t-photo", 2),
            _typed("blind_criterion", "t-any", 3, True),
        ]
    values = repair_values(run, run.pending_events, step=4)
    cfg = run.cfg.train
    photo = values["flat:t-photo:2"]
    n_tasks = len(run.state.drawable_task_ids(4))  # no sampler: uniform draws
    expected_left = cfg.batch_size // cfg.num_generations * (cfg.max_steps - 4) / n_tasks
    assert photo.draw_p == pytest.approx(1 / n_tasks) and photo.groups_left == pytest.approx(expected_left)
    assert photo.value == pytest.approx(photo.dead_rate * photo.groups_left) and photo.dead_rate > 0.7
    assert values["collapse_low:t-paris:3"].dead_rate < 0.5
    got = take_events(run, 2, values=lambda evs: repair_values(run, evs, 4))
    # Without values the newer t-paris event would go first (same class, same hits); the blind one waits.
    assert [e.id for e in got.taken] == ["flat:t-photo:2", "collapse_low:t-paris:3"]
    assert [e.id for e in run.pending_events] == ["blind_criterion:t-any:3"]
    assert set(got.values) == {e.id for e in run.pending_events} | {e.id for e in got.taken}


def test_blind_criteria_rank_by_the_dead_groups_of_their_task(run):
    """Among blind criteria of one class, the one on the task that often ties (dead at one partial credit) first.

    A criterion every answer meets, or none does, is what leaves a group's answers tied; an edit that makes it
    discriminate revives the task's dead groups only where there are some. Their class still comes after dead
    failures."""
    from trainer.round_events import repair_values

    for _ in range(4):
        run.liveness.observe("t-photo", dead=True)
    for _ in range(4):
        run.liveness.observe("t-paris", dead=False)
    with run.lock:
        run.pending_events = [
            _typed("blind_criterion", "t-paris", 5, True),
            _typed("blind_criterion", "t-photo", 3, True),
            _typed("collapse_low", "t-any", 2),
        ]
    values = repair_values(run, run.pending_events, step=4)
    assert values["blind_criterion:t-photo:3"].value > values["blind_criterion:t-paris:5"].value
    got = take_events(run, 2, values=lambda evs: repair_values(run, evs, 4))
    # Without values the newer t-paris event would go first (same class, same hits).
    assert [e.id for e in got.taken] == ["collapse_low:t-any:2", "blind_criterion:t-photo:3"]
    assert [e.id for e in run.pending_events] == ["blind_criterion:t-paris:5"]


def test_a_repairs_value_uses_the_draw_rate_a_revived_task_gets(run):
    """The sampler's multipliers (liveness weighting, dynamic filtering) lift once a task is repaired."""
    from trainer.round_events import repair_values
    from trainer.sampler import HarnessSampler

    sampler = HarnessSampler(run, seed=0, liveness_weighting=True)
    sampler.core.set_multiplier("t-photo", 0.1)  # predicted dead: drawn a tenth as often until repaired
    e = _typed("flat", "t-photo", 2)
    (value,) = repair_values(run, [e], step=2).values()
    assert value.draw_p == pytest.approx(sampler.core.weights(2, multipliers=False)["t-photo"])
    assert value.draw_p > sampler.core.weights(2)["t-photo"]


def _groups(run, task_id, groups, version=0):
    """Training groups of `task_id` in the run's memory, one per step (oldest first)."""
    for step, rewards in enumerate(groups, start=1):
        rollouts = [RolloutRecord(text=f"answer {i}", reward=r) for i, r in enumerate(rewards)]
        run.memory.add_group(GroupStats.from_rollouts(task_id, step, rollouts), harness_version=version)


def _live(run, history_rollouts=64):
    return live_check(run.memory, run.store, run.detector.config.eps, history_rollouts)


DEAD, LIVE = [0.0] * 4, [0.0, 1.0, 0.0, 0.5]


@pytest.mark.parametrize(
    "history, event, dropped",
    [
        ([LIVE, LIVE, DEAD], ("collapse_low", False), True),  # dead once in three: chance on a task that teaches
        ([DEAD, LIVE], ("flat", False), False),  # no live majority
        ([DEAD], ("flat", False), False),  # a task seen once
        ([LIVE, LIVE, DEAD], ("collapse_low", True), False),  # confirmed: never dropped here
        ([LIVE, LIVE, LIVE], ("stuffing", False), False),  # not a dead-group failure
        ([], ("collapse_high", False), False),  # no groups in memory
    ],
)
def test_live_check_drops_a_dead_group_seen_once_on_a_mostly_live_task(run, history, event, dropped):
    _groups(run, "t-paris", history)
    assert _live(run)(_typed(event[0], "t-paris", 3, confirmed=event[1])) is dropped


def test_live_check_reads_only_the_critics_pool_since_the_tasks_last_update(run):
    _groups(run, "t-paris", [LIVE, LIVE, LIVE, DEAD, DEAD])
    e = _typed("flat", "t-paris", 5)
    assert _live(run)(e) is True  # 3 live of 5
    assert _live(run, history_rollouts=8)(e) is False  # the newest 8 rollouts: 2 dead groups
    run.store.commit(_hint_update())  # v1 touches t-paris: groups drawn before it do not count
    _groups(run, "t-paris", [DEAD], version=1)
    assert _live(run)(e) is False


def test_live_check_keeps_the_event_when_memory_cannot_be_read(run, caplog):
    _groups(run, "t-paris", [LIVE, LIVE, DEAD])

    def broken(*a, **k):
        raise RuntimeError("chroma is down")

    run.memory.task_history = broken
    with caplog.at_level("WARNING", logger="trainer.round_events"):
        assert _live(run)(_typed("flat", "t-paris", 3)) is False
    assert "the event is kept" in caplog.text and "chroma is down" in caplog.text


def test_take_events_drops_live_events_and_lets_the_next_take_the_slot(run):
    _groups(run, "t-paris", [LIVE, LIVE, DEAD])
    with run.lock:
        run.pending_events = [_typed("collapse_low", "t-paris", 3), _typed("blind_criterion", "t-photo", 2, True)]
    got = take_events(run, 1, is_live=_live(run))
    assert [e.id for e in got.live] == ["collapse_low:t-paris:3"]
    assert [e.id for e in got.taken] == ["blind_criterion:t-photo:2"] and run.pending_events == []


def test_broadcast_path_single_process(run):
    """Rank 0 serialises the new state and broadcast_object_list hands it to every rank (here: one)."""
    run.store.commit(_hint_update())
    cb = HarnessCallback(run)
    cb.pause.num_processes = lambda: 2  # take the multi-process code path
    state = cb.pause.sync_state()
    assert state.version == 1 and run.state.version == 1 and run.state.guidance_for("t-paris").hints


# -- checkpoint / resume ------------------------------------------------------------------------------------
def test_checkpoint_state_and_restore(tmp_path):
    cfg = tiny_config(tmp_path)
    r = HarnessRun(cfg)  # persistent memory in the run folder
    HarnessSampler(r, seed=0)
    reward = RubricReward(r, num_generations=2)
    _call(reward, r, ["t-paris"] * 2, ["no", "no"], [0, 0], step=0)
    ckpt = cfg.run_path / "checkpoints" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    write_checkpoint_state(ckpt, r, step=2)
    groups_at_ckpt = r.memory.count()["groups"]
    # after the checkpoint: a new version, more memory, more log lines
    r.store.commit(_hint_update(), step=3)
    _call(reward, r, ["t-photo"] * 2, ["no", "no"], [1, 1], step=2)
    r.paths.metrics.write_text(json.dumps({"step": 1}) + "\n" + json.dumps({"step": 3}) + "\n")
    assert r.memory.count()["groups"] == groups_at_ckpt + 1
    r.close()

    r2 = HarnessRun(cfg, open_memory=False)
    HarnessSampler(r2, seed=0)
    summary = restore(r2, ckpt)
    assert summary["abandoned_versions"] == [1] and r2.state.version == 0 and r2.store.versions() == [0]
    assert r2.memory.count()["groups"] == groups_at_ckpt
    assert [json.loads(x)["step"] for x in r2.paths.metrics.read_text().splitlines()] == [1]
    assert read_state(ckpt)["harness_version"] == 0
    assert (r2.paths.abandoned / summary["aside"].split("/")[-1] / "versions" / "v000001.json").is_file()
    r2.close()


def test_abandon_versions_after_keeps_log_consistent(run):
    run.store.commit(_hint_update())
    run.store.commit(HarnessUpdate(interface="sampling", ops=[Reweight(task_id="t-any", weight=2.0)]))
    moved = run.store.abandon_versions_after(1, run.paths.abandoned / "x")
    assert moved == [2] and run.store.versions() == [0, 1]
    assert [rec.version for rec in run.store.history()] == [1]
    assert (
        run.store.commit(HarnessUpdate(interface="sampling", ops=[Reweight(task_id="t-any", weight=3.0)])).version == 2
    )


def test_every_failure_type_has_a_slot_class():
    # a failure type without a class would rank after every other event, never repaired while others wait
    from harness.types import FAILURE_TYPES
    from trainer.round_events import EVENT_CLASS, SLOT_ORDER

    assert set(EVENT_CLASS) == set(FAILURE_TYPES)
    assert {(c, conf) for c in set(EVENT_CLASS.values()) for conf in (True, False)} == set(SLOT_ORDER)
