"""Failures that stop or flag (issue 20 item 6): failed evolver rounds in a row stop training with the cause and
how to resume; an in-process round that outlasts `harness.max_pause_s` is cancelled and rolled back; responses
that cannot be scored and criteria skipped for want of a judge are counted per step, flagged on the console and
summed in the report; what a LangGraph server round does not take from the config is named.

Real callback, run folder, store, reward, judge and evolver graph; the frozen policy is a scripted stand-in.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from types import SimpleNamespace

import pytest

from agents.context import EvolverContext
from graphs.runner import RoundTimeout, run_in_process, split_context
from harness.types import FailureEvent
from memory.store import TrainingMemory
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run
from tests.support.tiny_run import TINY_TASKS, _task, tiny_config, write_suite
from trainer.callback import HarnessCallback
from trainer.evolver_round import EvolverStopped, server_setting_notes
from trainer.harness_run import HarnessRun
from trainer.progress import ConsoleProgress, scoring_flag_lines
from trainer.report import summary, summary_sentences
from trainer.reward import RubricReward
from trainer.round_events import take_events
from trainer.sampler import HarnessSampler
from trainer.step_metrics import StepMetrics


def _run(tmp_path, *overrides, tasks=TINY_TASKS):
    suite = write_suite(tmp_path / "suite-x", tasks)
    r = HarnessRun(tiny_config(tmp_path, f"data.suite={suite}", *overrides), memory=TrainingMemory.ephemeral())
    HarnessSampler(r, seed=0)
    return r


def _event(step):
    return FailureEvent(
        id=f"collapse_low:t-paris:{step}",
        type="collapse_low",
        task_id="t-paris",
        step=step,
        stats={"harness_version": 0},
    )


def _callback(run, outcomes):
    """A callback whose rounds fail (True) or succeed (False) in the order given."""
    script = iter(outcomes)

    def graph(cfg, events, version, step, context, thread_id):
        if next(script):
            raise ConnectionError("LLM endpoint http://127.0.0.1:9/v1 unreachable")
        return {"accepted": [], "reports": []}

    cb = HarnessCallback(run, run_graph=graph)
    cb.pause.publish_policy = lambda step: (object(), "local")
    cb.pause._register_services = lambda key, endpoint, context: None
    return cb


def _step(cb, run, step, *, events=True):
    """What the trainer does at the end of `step` (a round at every even step below max_steps)."""
    if events:
        run.add_events([_event(step)], harness_version=run.state.version)
    control = SimpleNamespace(should_training_stop=False)
    run.record_step(step, {"reward": 0.0})
    cb.on_step_end(None, SimpleNamespace(global_step=step, max_steps=100), control)
    return control.should_training_stop


# -- failed rounds in a row stop training -------------------------------------------------------------------
@pytest.mark.parametrize(
    "outcomes, limit, stops_at",
    [
        ([True, True, True], 3, 6),  # three failures in a row: stop after the third
        ([True, True, False, True, True], 3, None),  # a round that ran resets the count
        ([True], 1, 2),
        ([True] * 5, 0, None),  # 0: never stop
    ],
)
def test_failed_rounds_in_a_row_stop_training(tmp_path, outcomes, limit, stops_at, caplog):
    run = _run(tmp_path, f"harness.max_failed_rounds={limit}")
    try:
        cb = _callback(run, outcomes)
        stopped = []
        with caplog.at_level(logging.ERROR, logger="trainer.evolver_round"):
            for i in range(len(outcomes)):
                if _step(cb, run, 2 * (i + 1)):
                    stopped.append(2 * (i + 1))
        assert stopped == ([stops_at] if stops_at else [])
        if stops_at:
            assert stopped == [2 * len(outcomes)]  # not before the last failure
            reason = cb.pause.stop_reason
            assert f"{limit} evolver rounds in a row failed" in reason and "ConnectionError" in reason
            assert f"after step {stops_at}" in reason and "--resume" in reason and "max_failed_rounds=0" in reason
            assert reason in caplog.text
            # The round's events stay pending: the step's checkpoint carries them into the resumed run.
            assert [e.id for e in run.pending_events] == [f"collapse_low:t-paris:{stops_at}"]
        else:
            assert cb.pause.stop_reason is None
    finally:
        run.close()


def test_rounds_without_events_neither_count_nor_reset(tmp_path):
    run = _run(tmp_path, "harness.max_failed_rounds=2")
    try:
        cb = _callback(run, [True, True])
        assert not _step(cb, run, 2)
        take_events(run, 100)  # the failed round's events went back to pending; say they went stale
        assert not _step(cb, run, 4, events=False)  # nothing to do: no round ran
        assert cb.pause.failed_in_a_row == 1
        assert _step(cb, run, 6)
    finally:
        run.close()


def test_config_refuses_a_negative_limit(tmp_path):
    from trainer.config import ConfigError

    with pytest.raises(ConfigError, match="max_failed_rounds"):
        tiny_config(tmp_path, "harness.max_failed_rounds=-1")


def test_harnessrl_train_exits_non_zero_with_the_reason(tmp_path, monkeypatch, capsys):
    import trainer.grpo
    from trainer.commands import train as train_cmd

    def stopped(cfg, **kw):
        raise EvolverStopped("3 evolver rounds in a row failed ... `harnessrl train --config <your config> --resume`")

    monkeypatch.setattr(trainer.grpo, "train", stopped)
    from trainer.cli import build_parser

    suite = write_suite(tmp_path / "suite")
    args = build_parser().parse_args(
        ["train", "--set", f"run_dir={tmp_path / 'run'}", "--set", f"data.suite={suite}", "--no-progress"]
    )
    assert train_cmd.run(args) == 1
    assert "rounds in a row failed" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_whose_rounds_all_fail_stops_after_the_checkpoint(tmp_path):
    """Real TRL training of the tiny model: every round fails, so training stops at the second round's step with
    that step's checkpoint written (the resume point) and no final model."""
    from trainer.checkpoint import find_checkpoint
    from trainer.grpo import train
    from trainer.io import read_jsonl

    def down(cfg, events, version, step, context, thread_id):
        raise ConnectionError("evolver LLM endpoint down")

    cfg = tiny_config(tmp_path, "train.max_steps=8", "harness.max_failed_rounds=2", "evolver.critic=false")
    with pytest.raises(EvolverStopped, match="2 evolver rounds in a row failed") as err:
        train(cfg, run_graph=down, progress=False)
    assert "after step 4" in str(err.value)
    rounds = read_jsonl(cfg.run_path / "rounds.jsonl")
    assert [r["step"] for r in rounds] == [2, 4] and all("ConnectionError" in r["error"] for r in rounds)
    assert [m["step"] for m in read_jsonl(cfg.run_path / "metrics.jsonl")] == [1, 2, 3, 4]
    assert find_checkpoint(cfg.run_path, "latest").name == "checkpoint-4"
    assert not (cfg.run_path / "final").exists()


# -- the pause budget in process ------------------------------------------------------------------------------
class SlowPolicy(PromptPolicy):
    """Every sample takes `delay` seconds; records when calls start."""

    def __init__(self, delay):
        super().__init__(lambda prompt, i: "water water rest dark" if i % 2 else "No idea.")
        self.delay = delay
        self.started = []
        self.lock = threading.Lock()

    def sample(self, *a, **k):
        with self.lock:
            self.started.append(time.monotonic())
        time.sleep(self.delay)
        return super().sample(*a, **k)


def test_an_overrunning_in_process_round_is_cancelled(tmp_path):
    policy = SlowPolicy(delay=1.5)  # one sample outlasts the budget: the deadline always falls inside the round
    key, svc = make_run(tmp_path, policy)
    ctx = EvolverContext(services_key=key, sample_k=4)
    inp = {"events": [event("e1", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": 10}
    with pytest.raises(RoundTimeout, match="budget of 1 s"):
        run_in_process(inp, ctx, tmp_path / "evolver.sqlite", "slow", timeout_s=1.0)
    seen, version = len(policy.started), svc.store.latest().version
    # The cancelled round starts nothing more, and commits nothing more, once it has returned. The node that was
    # running at the deadline may have committed before the return (a slow machine): the caller rolls that back.
    time.sleep(1.0)
    assert len(policy.started) == seen and svc.store.latest().version == version
    # The same round, unbounded, runs to its decision (so the timeout above is what stopped it).
    policy.delay = 0.0
    out = run_in_process(inp | {"harness_version": version}, ctx, tmp_path / "evolver2.sqlite", "free")
    assert out["reports"][0]["decision"]


def test_the_trainer_rolls_back_a_round_over_its_pause_budget(tmp_path):
    """`harness.max_pause_s` reaches the in-process runner through `trainer.evolver_round.run_round`."""
    run = _run(tmp_path, "harness.max_pause_s=1", "evolver.memory=false")
    try:
        cb = HarnessCallback(run)
        cb.pause.publish_policy = lambda step: (SlowPolicy(delay=0.5), "local")
        run.add_events([_event(2)], harness_version=0)
        cb.pause.evolve(2)
        rnd = json.loads(run.paths.rounds.read_text().splitlines()[0])
        assert rnd["error"].startswith("RoundTimeout") and "budget of 1 s" in rnd["error"]
        assert run.state.version == 0 and cb.pause.failed_in_a_row == 1
        assert [e.id for e in run.pending_events] == ["collapse_low:t-paris:2"]
    finally:
        run.close()


# -- unscoreable responses and skipped criteria, per step ------------------------------------------------------
TEXT_ONLY = _task("t-text", "Write a kind note.", [{"id": "c1", "text": "Is kind", "weight": 5, "kind": "essential"}])


def _reward_step(run, task_ids, texts):
    reward = RubricReward(run, num_generations=4)
    n = len(texts)
    asyncio.run(
        reward(
            prompts=[[{"role": "user", "content": "x"}]] * n,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            task_id=task_ids,
            harness_version=[0] * n,
            trainer_state=SimpleNamespace(global_step=0),
        )
    )
    return run.pop_step(1)


@pytest.mark.parametrize("share, flagged", [(0.2, True), (0.6, False)])
def test_unscoreable_responses_and_skipped_criteria_are_counted_per_step(tmp_path, share, flagged):
    run = _run(tmp_path, f"harness.max_judge_failure_share={share}", tasks=[*TINY_TASKS, TEXT_ONLY])
    try:
        rec = _reward_step(run, ["t-text"] * 4 + ["t-paris"] * 4, ["Be well."] * 4 + ["Paris."] * 4)
    finally:
        run.close()
    # t-text: its one criterion has no check and there is no judge: 4 verdicts skipped, 4 responses unscoreable.
    assert (rec["unscoreable"], rec["criteria_skipped"]) == (4, 4)
    assert rec["unscoreable_flagged"] is flagged and rec["skipped_flagged"] is flagged  # 4 of 8 both times
    lines = scoring_flag_lines(1, StepMetrics.model_validate(rec))
    assert sorted(lines) == (["skipped", "unscoreable"] if flagged else [])


def test_a_clean_step_has_zero_counts(tmp_path):
    run = _run(tmp_path)
    try:
        rec = _reward_step(run, ["t-paris"] * 4, ["Paris."] * 4)
    finally:
        run.close()
    assert (rec["unscoreable"], rec["criteria_skipped"], rec["unscoreable_flagged"], rec["skipped_flagged"]) == (
        0,
        0,
        False,
        False,
    )


@pytest.mark.parametrize("allowed, skipped_lines", [(True, 1), (False, 3)])
def test_console_says_skipped_criteria_once_when_the_config_allows_them(tmp_path, caplog, allowed, skipped_lines):
    run = _run(tmp_path, f"harness.allow_unjudged_criteria={str(allowed).lower()}")
    try:
        console = ConsoleProgress(run)
        with caplog.at_level(logging.WARNING, logger="harnessrl"):
            for step in (1, 2, 3):
                run.last_record = {
                    "unscoreable": 2,
                    "unscoreable_flagged": True,
                    "criteria_skipped": 4,
                    "skipped_flagged": True,
                }
                console.on_step_end(
                    None, SimpleNamespace(global_step=step, max_steps=3, is_world_process_zero=True), None
                )
    finally:
        run.close()
    assert caplog.text.count("could not be scored") == 3  # never silenced
    assert caplog.text.count("verdict(s) skipped") == skipped_lines


def test_report_sums_the_scoring_counts():
    data = {
        "rounds": [],
        "updates": [],
        "events": [],
        "metrics": [
            StepMetrics(step=1, unscoreable=2, criteria_skipped=4, judge_left_out=0, unscoreable_flagged=True),
            StepMetrics(step=2, unscoreable=0, criteria_skipped=1, judge_left_out=3, judge_flagged=True),
            StepMetrics(step=3),
        ],
    }  # a step written before these counts existed
    s = summary(data)
    assert (s["unscoreable"], s["criteria_skipped"], s["judge_left_out"], s["steps_flagged"]) == (2, 5, 3, 2)
    assert any("2 responses could not be scored" in line and "2 steps flagged" in line for line in summary_sentences(s))


# -- what a LangGraph server round does not take from the config -------------------------------------------
def test_server_notes_name_dropped_and_replaced_settings(tmp_path):
    from trainer.evolver_round import evolver_context

    cfg = tiny_config(tmp_path, "evolver.sample_k=4", "train.temperature=0.7")
    ctx = evolver_context(cfg, services_key=None, policy_spec="local:/x")
    _, values = split_context(ctx)
    # An assistant made from this config (the graph id): nothing replaced; the detector overrides are dropped.
    notes = server_setting_notes(cfg, ctx, values)
    assert len(notes) == 1 and "harness.detector" in notes[0] and "'window': 2" in notes[0]
    # A Studio assistant: its k wins, and a key it lacks takes the context default (temperature 1.0).
    notes = server_setting_notes(cfg, ctx, {"sample_k": 8, "proposer_model": "rules"})
    assert "sample_k: the server's assistant uses 8, not the config's 4" in notes
    assert "temperature: the server's assistant uses 1.0, not the config's 0.7" in notes
    assert not any(n.startswith("proposer_model") for n in notes)
    cfg2 = tiny_config(tmp_path / "b", "harness.detector={}")
    ctx2 = evolver_context(cfg2, services_key=None, policy_spec="local:/x")
    assert server_setting_notes(cfg2, ctx2, split_context(ctx2)[1]) == []
