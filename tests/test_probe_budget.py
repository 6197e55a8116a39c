"""The run's probe budget (`harness.max_extra_generation`): lanes get shares of it, a candidate that could exceed its
lane's share is refused before it draws anything and uncharged, and the trainer reads what is left from rounds.jsonl.
"""

from __future__ import annotations

import json

import pytest

from agents.context import EvolverContext
from graphs.evolver import graph, lane_budgets
from graphs.round_record import EventReport
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run
from trainer import probe_budget
from trainer.config import ConfigError, HarnessConfig, RunConfig, TrainConfig
from trainer.config_loader import config_from_dict

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."


def _hints_help(prompt: str, i: int) -> str:
    if "Hint:" in prompt:
        return HONEST if i % 2 == 0 else "I am not sure."
    return "I am not sure."


def _round(tmp_path, budget: int | None):
    policy = PromptPolicy(_hints_help)
    key, svc = make_run(tmp_path, policy)
    out = graph.invoke(
        {"events": [event("e-low", "collapse_low", "med-1", mean=0.0, std=0.0)], "harness_version": 0, "step": 10},
        {"configurable": {"thread_id": "t"}},
        # Guidance only: its hint needs probes; the fallback is off so nothing else acts.
        context={
            "services_key": key,
            "sample_k": 4,
            "interfaces": ["guidance"],
            "apply_fallback": False,
            "probe_budget": budget,
        },
    )
    (report,) = out["reports"]
    return policy, svc, report


def test_a_candidate_over_the_budget_is_refused_before_drawing_and_costs_no_revision(tmp_path):
    policy, svc, report = _round(tmp_path / "spent", 0)
    assert policy.calls == 0  # nothing was drawn from the frozen policy
    refused = [a for a in report["attempts"] if a["critique"]["over_budget"]]
    assert refused and refused[0]["critique"]["reasons"][0].startswith("NOT MEASURED: needs up to")
    assert report["decision"] != "accepted" and svc.store.latest().version == 0
    # Uncharged: the lane's decision says so, and memory keeps no failure of those templates.
    assert "over the probe budget: not charged" in refused[0]["decision"]["reasons"]
    stored = {p.template for p in svc.memory.proposals_for("med-1")}
    assert stored.isdisjoint({a["template"] for a in refused})
    assert EventReport.model_validate(report).probe_rollouts() == 0

    # The same round with room for one measurement draws and repairs; the report counts what it drew.
    policy, svc, report = _round(tmp_path / "room", 64)
    assert report["decision"] == "accepted", report["attempts"][-1]["critique"]["reasons"]
    drawn = EventReport.model_validate(report).probe_rollouts()
    assert 0 < drawn <= 64 and policy.calls > 0


def test_lanes_get_whole_measurements_in_event_order():
    assert lane_budgets(None, 3, 8) == [None, None, None]
    assert lane_budgets(24, 4, 8) == [8, 8, 8, 0]  # the most valuable events first; the last lane re-scores only
    assert lane_budgets(30, 2, 8) == [22, 8]  # two units to the first, one to the second, the rest to the first
    assert lane_budgets(5, 3, 8) == [5, 0, 0]
    for budget in (0, 7, 8, 23, 100):
        assert sum(lane_budgets(budget, 3, 8)) == budget


def _cfg(tmp_path, share: float | None, **harness) -> RunConfig:
    return RunConfig(
        run_dir=str(tmp_path),
        train=TrainConfig(max_steps=40, batch_size=16, num_generations=4),
        harness=HarnessConfig(max_extra_generation=share, **harness),
    )


def test_the_budget_left_is_read_back_from_rounds_jsonl(tmp_path):
    cfg = _cfg(tmp_path, 0.1)
    assert probe_budget.planned_rollouts(cfg) == 640 and probe_budget.allowed(cfg) == 64
    rounds = tmp_path / "rounds.jsonl"
    assert probe_budget.left(cfg, rounds, pending=40) == 24  # the pre-flight's probes, before its line is written
    lines = [{"step": 0, "preflight": {"rollouts": 40}, "probe_rollouts": 16}, {"step": 8, "probe_rollouts": 4}]
    rounds.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert probe_budget.spent(rounds) == 60
    assert probe_budget.left(cfg, rounds) == 4
    assert probe_budget.left(cfg, rounds, processes=2) == 128 - 60  # each process trains its own batch
    rounds.write_text(rounds.read_text() + json.dumps({"step": 16, "probe_rollouts": 30}) + "\n")
    assert probe_budget.left(cfg, rounds) == 0  # never negative
    assert probe_budget.left(_cfg(tmp_path, None), rounds) is None


@pytest.mark.parametrize("share", [0.0, -0.1])
def test_a_budget_that_allows_nothing_is_refused_at_start(tmp_path, share):
    with pytest.raises(ConfigError, match="harness.max_extra_generation must be > 0"):
        _cfg(tmp_path, share)


def test_the_trainer_sets_the_rounds_budget_and_a_config_cannot():
    assert EvolverContext().probe_budget is None
    with pytest.raises(ValueError, match="probe_budget must be >= 0"):
        EvolverContext(probe_budget=-1)
    with pytest.raises(ConfigError, match="probe_budget"):
        config_from_dict({"evolver": {"probe_budget": 10}})
    assert config_from_dict({"harness": {"max_extra_generation": 0.1}}).harness.max_extra_generation == 0.1


def test_the_replay_table_names_an_over_budget_attempt():
    from graphs.round_record import AttemptLine
    from trainer.replay_page import _numbers

    line = AttemptLine(template="hint", numbers={"budget_need": 8.0, "budget_left": 0.0})
    assert _numbers(line).startswith("over the probe budget: needs 8")
