"""The pre-flight round (trainer/preflight.py): probes of the initial policy fire dead-task events on the first
visit, land in memory as step-0 groups, a failing probe is a failed round that training survives, and on real TRL
GRPO (tiny preset) the round runs before step 1 and is recorded like any round."""

from __future__ import annotations

import pytest
from test_detector import group

from harness.guidance import prompt_digest, render_prompt
from memory.store import TrainingMemory
from tests.support.tiny_run import tiny_config
from trainer import preflight
from trainer.evolver_round import EvolverPause
from trainer.harness_run import HarnessRun
from trainer.io import read_jsonl
from trainer.preflight import run_preflight


@pytest.mark.parametrize(("probe", "fired"), [(False, []), (True, ["flat"])])
def test_a_flat_probe_fires_on_the_first_visit_only_as_a_probe(probe, fired):
    from harness.detector import Detector, DetectorConfig

    det = Detector(DetectorConfig(window=3, min_hits=2))
    events = det.observe(group([0.5, 0.5, 0.5, 0.5], step=0), probe=probe)
    assert [e.type for e in events] == fired


class ConstantPolicy:
    """Stands in for the policy: every rollout is the same text, so every probe group is dead."""

    name = "constant"

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        self.calls.append((n, max_tokens))
        return [["ok"] * n for _ in messages_batch]


@pytest.fixture
def run(tmp_path):
    r = HarnessRun(tiny_config(tmp_path, "harness.preflight=true"), memory=TrainingMemory.ephemeral())
    yield r
    r.close()


def test_probes_are_training_groups_at_step_0_and_dead_ones_queue_events(run):
    tasks, pool = preflight.probe_tasks(run)
    assert tasks == sorted(run.state.drawable_task_ids(0)) and pool == len(tasks)
    policy = ConstantPolicy()
    summary = preflight.observe(run, preflight.probe(run, policy, tasks))
    cfg = run.cfg.train
    assert policy.calls == [(cfg.num_generations, cfg.max_completion_length)]  # one request: every task's group
    assert summary["probed"] == tasks and summary["dead"] == tasks  # identical rollouts: zero variance
    assert summary["rollouts"] == len(tasks) * cfg.num_generations
    assert {e.task_id for e in run.pending_events} == set(tasks)  # one dead event per task, first visit
    assert all(e.step == 0 and e.type in {"collapse_low", "collapse_high", "flat"} for e in run.pending_events)
    for tid in tasks:  # memory's first cached groups: the critic's control and training's grading read them
        history = run.memory.task_history(tid, last_n=8, kinds=("groups",))
        assert [g.step for g in history] == [0]
        # keyed by the prompt the critic renders for an unhinted control (tools.probes.prompt_rollouts)
        assert history[0].stats["prompt_digest"] == prompt_digest(render_prompt(run.state.task(tid), []))


class ScriptedPolicy:
    """Stands in for the policy: the i-th call returns `groups[i]` (one probe group each)."""

    name = "scripted"

    def __init__(self, groups):
        self.groups = list(groups)

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        return [self.groups.pop(0) for _ in messages_batch]


@pytest.mark.parametrize(
    ("second", "share", "repaired"),
    [
        (["Paris.", "No.", "No.", "No."], 0.5, True),  # 7 of 8 answers alike: half the groups of 4 are dead
        (["Paris.", "No.", "Paris.", "No."], 15 / 70, False),  # a dead group by chance on a task that varies
    ],
)
def test_several_probe_groups_repair_a_task_only_when_most_of_its_groups_would_be_dead(
    tmp_path, second, share, repaired
):
    cfg = tiny_config(tmp_path, "harness.preflight=true", "harness.preflight_groups=2", "data.tasks=[t-paris]")
    r = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    try:
        summary = preflight.observe(r, preflight.probe(r, ScriptedPolicy([["No."] * 4, second]), ["t-paris"], 2))
        assert summary["groups_per_task"] == 2 and summary["rollouts"] == 8
        assert summary["dead_share"]["t-paris"] == pytest.approx(share, abs=1e-4)
        assert r.liveness.dead_rate("t-paris") == pytest.approx((2 * share + 1) / 4)  # 2 groups' worth + prior
        assert (summary["dead"] == ["t-paris"]) is repaired
        assert bool(r.pending_events) is repaired and ("dead_by_chance" in summary) is not repaired
        assert len(r.memory.task_history("t-paris", last_n=16, kinds=("groups",))) == 2
    finally:
        r.close()


def test_on_several_processes_every_rank_observes_the_main_processs_probes(run, monkeypatch):
    """The multi-process path: the probes go through `EvolverPause.broadcast`, then every rank observes them."""
    monkeypatch.setattr(preflight, "_endpoint", lambda pause: ConstantPolicy())
    pause = EvolverPause(run, trainer=None)
    pause.num_processes = lambda: 2  # take the broadcast path (a no-op without a process group)
    sent, seen = [], {}
    real = pause.broadcast
    pause.broadcast = lambda value: sent.append(value) or real(value)
    pause.evolve = lambda step, preflight=None: seen.update(step=step, summary=preflight) or 0.0
    run_preflight(pause)
    tasks, _ = preflight.probe_tasks(run)
    groups, error = sent[0]  # the probe groups themselves and no error, from the main process
    assert [s.task_id for s, _ in groups] == tasks and error is None
    assert seen["step"] == 0 and seen["summary"]["probed"] == tasks and seen["summary"]["dead"] == tasks
    assert {e.task_id for e in run.pending_events} == set(tasks)


def test_a_large_pool_is_probed_on_a_seeded_sample(tmp_path):
    cfg = tiny_config(tmp_path, "harness.preflight=true", "harness.preflight_max_tasks=2")
    r = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    try:
        first, pool = preflight.probe_tasks(r)
        again, _ = preflight.probe_tasks(r)
    finally:
        r.close()
    assert len(first) == 2 and pool > 2 and first == again


def test_failed_probes_are_a_failed_round_training_survives(run):
    pause = EvolverPause(run, trainer=None)  # no trainer: the initial policy cannot be published
    run_preflight(pause)
    (record,) = read_jsonl(run.paths.rounds)
    assert record["step"] == 0 and "needs the trainer" in record["error"] and record["n_accepted"] == 0
    assert record["preflight"]["probed"] == [] and pause.failed_in_a_row == 1 and pause.stop_reason is None
    assert run.state.version == 0


@pytest.mark.slow
def test_preflight_round_runs_before_step_1_on_real_grpo(tmp_path):
    from trainer.grpo import train

    cfg = tiny_config(
        tmp_path,
        "harness.preflight=true",
        "train.max_steps=2",
        "data.tasks=[t-long,t-any,t-short]",  # t-short: every answer meets its one criterion, a dead probe
        "evolver.interfaces=[sampling,criteria]",
        # The probe budget through the real trainer: 16 rollouts (2 steps x 8), 12 of them the pre-flight's.
        "harness.max_extra_generation=1.0",
    )
    train(cfg, progress=False)
    rounds = read_jsonl(cfg.run_path / "rounds.jsonl")
    assert [r["step"] for r in rounds] == [0], rounds  # no round after the last step
    pre = rounds[0]["preflight"]
    assert sorted(pre["probed"]) == ["t-any", "t-long", "t-short"] and "error" not in rounds[0]
    assert "t-short" in pre["dead"] and any(":t-short:0" in eid for eid in rounds[0]["event_ids"])
    assert rounds[0]["pause_s"] >= pre["probe_s"] > 0
    # Every event of the round is about a probe group, and each dead probe gave the round one.
    assert all(eid.endswith(":0") or ":0:" in eid for eid in rounds[0]["event_ids"])
    assert len(rounds[0]["event_ids"]) == min(len(pre["dead"]), cfg.harness.max_events)
    assert [m["step"] for m in read_jsonl(cfg.run_path / "metrics.jsonl")] == [1, 2]
    assert pre["rollouts"] == 12 and rounds[0]["probe_budget"] == 16 - 12
    assert pre["rollouts"] + rounds[0]["probe_rollouts"] <= 16


def test_the_probe_budget_caps_the_pre_flight_sample(tmp_path):
    plain = tiny_config(tmp_path / "a", "harness.preflight=true")
    g, planned = plain.train.num_generations, plain.train.max_steps * plain.train.batch_size
    share = 2.5 * g / planned  # pays for two probe groups and a half
    r = HarnessRun(
        tiny_config(tmp_path / "b", "harness.preflight=true", f"harness.max_extra_generation={share}"),
        memory=TrainingMemory.ephemeral(),
    )
    try:
        tasks, pool = preflight.probe_tasks(r)
        assert pool > 2 and len(tasks) == 2 and set(tasks) <= set(r.state.drawable_task_ids(0))
        assert len(preflight.probe_tasks(r, processes=2)[0]) == min(pool, 5)  # two processes train twice as much
    finally:
        r.close()


def test_a_budget_too_small_for_one_probe_group_probes_nothing(tmp_path, monkeypatch):
    plain = tiny_config(tmp_path / "a", "harness.preflight=true")
    share = 0.5 * plain.train.num_generations / (plain.train.max_steps * plain.train.batch_size)
    r = HarnessRun(
        tiny_config(tmp_path / "b", "harness.preflight=true", f"harness.max_extra_generation={share}"),
        memory=TrainingMemory.ephemeral(),
    )
    try:
        policy = ConstantPolicy()
        monkeypatch.setattr(preflight, "_endpoint", lambda pause: policy)
        pause = EvolverPause(r, trainer=None)
        seen = {}
        pause.evolve = lambda step, preflight=None: seen.update(summary=preflight) or 0.0
        run_preflight(pause)
        assert policy.calls == [] and seen["summary"]["probed"] == [] and seen["summary"]["rollouts"] == 0
    finally:
        r.close()
