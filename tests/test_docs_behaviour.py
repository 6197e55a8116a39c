"""What README.md and docs/DESIGN.md state about the evolver, kept by tests where no other test kept it.

Each test names the sentence it keeps (file and section). Kept elsewhere, and not repeated here:

- an answer that does not parse or fit the schema hands the decision to the rule brain:
  `tests/test_evolver_graph.py::test_llm_proposer_over_http_bad_outputs_fall_back_to_the_rules_not_the_harness`;
- the fixed order of failure classes and, among dead failures, the repair value:
  `tests/test_trainer_units.py::test_take_events_prioritises_and_dedupes`,
  `tests/test_trainer_units.py::test_dead_events_rank_by_the_dead_groups_a_repair_could_revive`;
- `evolver.memory=false`: the in-process round's services hold no memory
  (`tests/test_trainer_units.py::test_round_context_and_services_take_the_config_knobs`), `generalise` is off
  (`tests/test_generalise.py::test_memory_ablation_does_not_generalise`), the repair ladder defers no fallback
  (`tests/test_fallback_decision.py::test_decide_defers_to_the_ladder_only_with_memory`);
- `evolver.critic=false`: the fallback commits unprobed and says so
  (`tests/test_fallback_decision.py::test_decide_keeps_the_rule_answer_and_says_why_nothing_was_probed`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from graphs.evolver import graph
from memory.records import GroupSummary
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
UNSURE = "I am not sure."
HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."


def _run(key: str, events: list[dict], **ctx) -> dict:
    context = {"services_key": key, "sample_k": 4, **ctx}
    return graph.invoke(
        {"events": events, "harness_version": 0, "step": 10}, {"configurable": {"thread_id": "docs"}}, context=context
    )


def _confirmed(eid: str, etype: str, task_id: str, **kw) -> dict:
    return {**event(eid, etype, task_id, **kw), "window_hits": 2, "confirmed": True}


# -- README "GPUs, vLLM and scaling out", "No task is lost"; DESIGN §6 propose ---------------------------------
def test_a_schema_valid_llm_update_the_harness_refuses_costs_a_revision_and_changes_nothing(tmp_path, openai_stub):
    """A schema-valid proposal naming a criterion the task does not have is not handed to the rule brain: each such
    answer is an invalid attempt charged as a revision, and when all of them were, the event ends with no change
    (the fallback, allowed and on a confirmed failure, changes no sampling)."""
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: HONEST))
    ghost = {"op": "reweight_criterion", "task_id": "med-1", "criterion_id": "c-ghost", "weight": 2}
    openai_stub.responder = lambda request: json.dumps(
        {"update": {"interface": "criteria", "ops": [ghost], "rationale": "r"}, "rationale": "r"}
    )
    out = _run(
        key,
        [_confirmed("e1", "stuffing", "med-1", criterion_id="water")],
        proposer_model="openai:stub",
        base_url=openai_stub.base_url,
        llm_timeout_s=5,
        max_tool_rounds=0,
        max_revisions=1,
    )
    (report,) = out["reports"]
    attempts = report["attempts"]
    assert len(attempts) == 2  # the first answer and R = 1 revision
    for a in attempts:
        assert a["source"] == "llm" and a["llm_error"] is None  # not handed to the rule brain
        assert a["critique"]["invalid"] and a["measurement"] is None
        assert "'c-ghost' is not a criterion of task 'med-1'" in " ".join(a["critique"]["reasons"])
    assert [a["decision"]["verdict"] for a in attempts] == ["revise", "fallback"]
    assert "revision 1 of 1" in attempts[0]["decision"]["reasons"]
    assert report["fallback"]["applied"] is False and "never a sampling change" in report["fallback"]["reason"]
    assert svc.store.latest().version == 0 and svc.store.history() == []  # no change


# -- README "Ablation switches"; DESIGN §11 `evolver.memory=false` -------------------------------------------------
def _dead_groups(memory, task_id: str, n_groups: int) -> None:
    for step in range(1, n_groups + 1):
        stats = {"task_id": task_id, "step": step, "n": 4, "mean": 0.0, "std": 0.0, "hinted": False}
        memory.add_group(GroupSummary.from_stats(stats, domain="medical", texts=[UNSURE] * 4))


def _first_measurement(tmp_path: Path, *, memory: bool, ablated: bool = False) -> dict:
    """`memory`: whether the run's services hold a memory; `ablated`: the graph's context says `memory=false`."""
    hint_helps = PromptPolicy(lambda p, i: HONEST if "Hint:" in p and i % 2 == 0 else UNSURE)
    key, svc = make_run(tmp_path, hint_helps, memory=memory)
    if svc.memory is not None:
        _dead_groups(svc.memory, "med-1", 8)  # 32 cached unhinted rollouts: twice the cap of 16
    ctx = {"memory": False} if ablated else {}
    (report,) = _run(key, [_confirmed("e-low", "collapse_low", "med-1", mean=0.0, std=0.0)], **ctx)["reports"]
    return report["attempts"][0]["measurement"]


def test_without_memory_the_critics_control_is_probed_fresh_not_pooled(tmp_path):
    """A round without memory (what `evolver.memory=false` gives a training round in process) measures a dead-group
    repair against fresh control probes; with memory it pools the task's cached training groups instead."""
    pooled = _first_measurement(tmp_path / "with", memory=True)
    assert pooled["cost"]["reused_rollouts"] == 32 and pooled["sequential"]["control_n"] == 32
    fresh = _first_measurement(tmp_path / "without", memory=False)
    assert fresh["cost"]["reused_rollouts"] == 0
    assert fresh["cost"]["probe_rollouts"] > pooled["cost"]["probe_rollouts"]  # the control was sampled too


def test_the_memory_ablation_probes_fresh_also_where_a_memory_service_is_open(tmp_path):
    """`memory=false` in the graph's context with a memory open (a Studio or `harnessrl evolve` round given a memory
    location): the critic's control is still sampled fresh, never pooled from the cached groups."""
    m = _first_measurement(tmp_path, memory=True, ablated=True)
    assert m["cost"]["reused_rollouts"] == 0 and m["cost"]["probe_rollouts"] > 0


def test_with_the_memory_ablation_the_agents_read_no_memory_and_the_event_is_still_recorded(tmp_path):
    """`evolver.memory=false` in the graph's context: the evidence holds the task alone (memory's history, proposals and
    similar cases are empty), while the event still goes to memory."""
    from graphs.nodes import gather_evidence

    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: HONEST))
    read = {"history", "proposals", "similar", "cross_task"}

    def evidence(eid: str, memory: bool) -> dict:
        lane = {"events": [event(eid, "stuffing", "med-1", criterion_id="water")], "cursor": 0, "harness_version": 0}
        ctx = SimpleNamespace(context={"services_key": key, "memory": memory})
        return gather_evidence(lane, ctx)["evidence"]  # type: ignore[arg-type]

    assert evidence("e-on", True)["history"]  # the event just recorded, at least
    off = evidence("e-off", False)
    assert all(off[k] == [] for k in read) and off["task"]["id"] == "med-1"  # the same keys, empty
    assert {r.event.id for r in svc.memory.task_history("med-1", kinds=("events",))} == {"e-on", "e-off"}


def test_a_training_round_without_memory_opens_none_unless_a_memory_server_is_named(tmp_path):
    """The round's context names no memory with `evolver.memory=false`, except a `harness.memory_url` (a server round
    then opens that Chroma server)."""
    from tests.support.tiny_run import tiny_config
    from trainer.evolver_round import evolver_context

    off = tiny_config(tmp_path, "evolver.memory=false")
    assert evolver_context(off, services_key=None).memory_location == "none"
    on = tiny_config(tmp_path)
    assert evolver_context(on, services_key=None).memory_location == str(on.run_path / "memory")
    url = tiny_config(tmp_path, "evolver.memory=false", "harness.memory_url=http://127.0.0.1:8002")
    assert evolver_context(url, services_key=None).memory_location == "http://127.0.0.1:8002"


# -- README "Which failures get a round's slots"; DESIGN §2 ------------------------------------------------------
def test_each_events_repair_value_goes_to_rounds_jsonl_and_the_console(tmp_path):
    """`rounds.jsonl` records per event the value that ranked it (`event_values`), and the console prints it."""
    from harness.types import FailureEvent
    from memory.store import TrainingMemory
    from tests.support.tiny_run import tiny_config
    from trainer.callback import HarnessCallback
    from trainer.harness_run import HarnessRun
    from trainer.progress import round_lines
    from trainer.round_events import repair_values
    from trainer.run_logs import read_rounds
    from trainer.sampler import HarnessSampler

    run = HarnessRun(tiny_config(tmp_path), memory=TrainingMemory.ephemeral())
    HarnessSampler(run, seed=0)
    for _ in range(3):
        run.liveness.observe("t-paris", dead=True)
    ev = FailureEvent(
        id="collapse_low:t-paris:2", type="collapse_low", task_id="t-paris", step=2, stats={"harness_version": 0}
    )
    cb = HarnessCallback(run, run_graph=lambda *a, **k: {"accepted": [], "reports": []})
    cb.pause.publish_policy = lambda step: (object(), "local")
    run.add_events([ev], harness_version=0)
    expected = repair_values(run, [ev], 2)[ev.id].as_record()
    try:
        cb.pause.evolve(2)
    finally:
        run.close()
    (record,) = read_rounds(run.paths.rounds)
    assert record.event_values[ev.id].model_dump() == expected and expected["value"] > 0
    lines = round_lines(2, record, 0, 0, 0.0, 1)
    assert any(line.strip().startswith("slots by the dead groups a repair could revive") for line in lines), lines


# -- README: the counts it states ----------------------------------------------------------------------------
def _lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def _ifeval_kinds() -> int:
    rows = (REPO / "data" / "ifeval-heldout" / "prompts.jsonl").read_text(encoding="utf-8").splitlines()
    return len({i for row in rows if row.strip() for i in json.loads(row)["instruction_id_list"]})


COUNTS = [
    # (what the README writes, with the number as a group; the true number)
    (r"the bundled (\d+)-task suite", lambda: sum(_lines(p) for p in (REPO / "data/rubric-mix-lite").glob("*.jsonl"))),
    (r"(\d+) held-out instruction-following prompts", lambda: _lines(REPO / "data/ifeval-heldout/prompts.jsonl")),
    (r"(\d+) instruction kinds", _ifeval_kinds),
    (r"held-out evaluation \((\d+) tasks", lambda: _lines(REPO / "data/rubric-mix-lite/test.jsonl")),
]


def stated_counts(text: str, pattern: str) -> list[int]:
    return [int(n) for n in re.findall(pattern, text)]


def test_the_counts_the_readme_states_are_the_trees():
    text = README.read_text(encoding="utf-8")
    for pattern, true in COUNTS:
        stated = stated_counts(text, pattern)
        assert stated, f"README.md no longer states {pattern!r}: drop it from COUNTS"
        assert set(stated) == {true()}, f"README.md states {pattern!r} as {stated}, the tree has {true()}"
    assert stated_counts("the bundled 300-task suite", COUNTS[0][0]) == [300] != [COUNTS[0][1]()]  # can fail
