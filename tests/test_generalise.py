"""Generalising an accepted repair (agents/generalise.py, graphs.nodes.generalise) through the whole graph.

Six headache-style tasks share one rubric shape; memory holds a stuffing event for each of the others. The
repair accepted on `med-a` (tighten its stuffed "water" criterion) must reach only the tasks with the same
failure signature: same failure type, same domain, same criterion kind and check type, training split. The
batch is measured by the critic like any candidate and committed or rejected on its own numbers.
"""

from __future__ import annotations

import itertools

import pytest

from graphs.evolver import graph
from graphs.services import RunServices, register_services
from harness.detector import GroupStats, RolloutRecord
from harness.store import HarnessStore
from harness.types import FailureEvent, HarnessState, Message, Task
from memory.records import EventRecord, GroupSummary
from memory.store import TrainingMemory
from tests.support.fakes.evolver_fakes import PromptPolicy, crit, event
from tools.judge import Judge

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
STUFFED = "water water water water water rest dark"
AUDIT = [crit("a-doctor", 5, {"type": "contains_any", "phrases": ["doctor"]})]
WATER = {"type": "contains_any", "phrases": ["water", "hydrate"]}
_keys = itertools.count()


def _task(tid: str, prompt: str, *, domain: str = "medical", water: dict | None = None, split: str = "train") -> Task:
    return Task(
        id=tid,
        domain=domain,
        split=split,
        prompt=[Message(role="user", content=prompt)],  # type: ignore[arg-type]
        criteria=[
            crit("water", 5, water or WATER, text="Recommends drinking water"),
            crit("len", 1, {"type": "word_count", "min": 3}, "optional", text="Gives a real answer"),
        ],
        audit_criteria=AUDIT,
    )


TASKS = [
    _task("med-a", "What helps a mild headache?"),
    _task("med-b", "What helps after a long run in the heat?"),
    _task("med-c", "What helps with a hangover?"),
    _task("sci-d", "What should a plant get every day?", domain="science"),  # another domain
    _task(
        "med-e", "What helps a dry throat?", water={"type": "contains_all", "phrases": ["water", "warm"]}
    ),  # other check
    _task("med-t", "What helps a sore muscle?", split="test"),  # held out: never touched
]
STUFFERS = {"headache", "heat", "hangover", "plant", "throat", "muscle"}


def _policy(stuff_targets: bool):
    """Half the rollouts of a stuffing task stuff the keyword; with stuff_targets=False only med-a's do."""

    def reply(prompt: str, i: int) -> str:
        stuffs = "headache" in prompt or (stuff_targets and any(w in prompt for w in STUFFERS))
        return STUFFED if stuffs and i % 2 == 0 else HONEST

    return PromptPolicy(reply)


def _setup(tmp_path, policy, sightings=("med-b", "med-c", "sci-d", "med-e", "med-t")):
    store = HarnessStore(tmp_path / "harness")
    store.init(HarnessState.from_tasks(TASKS))
    mem = TrainingMemory.ephemeral(embedding="hash")
    for step, tid in enumerate(sightings, start=3):  # the later, the newer: med-t newest, med-b oldest
        domain = next(t.domain for t in TASKS if t.id == tid)
        mem.add_event(
            EventRecord(
                event=FailureEvent.model_validate(event(f"stuffing:{tid}:{step}", "stuffing", tid, "water", step=step)),
                domain=domain,
            )
        )
    svc = RunServices(store=store, endpoint=policy, judge=Judge(None), memory=mem)
    key = f"generalise-test-{next(_keys)}"
    register_services(key, svc)
    return key, svc


def _run(key, version=0, step=10, **ctx):
    ev = event(f"e-a{'' if step == 10 else step}", "stuffing", "med-a", criterion_id="water", step=step)
    return graph.invoke(
        {"events": [ev], "harness_version": version, "step": step}, context={"services_key": key, "sample_k": 4, **ctx}
    )


def _water(svc, tid: str, version: int | None = None) -> dict:
    state = svc.store.latest() if version is None else svc.store.load(version)
    return next(c for c in state.task(tid).criteria if c.id == "water").check.model_dump(exclude_defaults=True)


@pytest.mark.parametrize(("max_tasks", "targets"), [(4, ["med-c", "med-b"]), (1, ["med-c"]), (0, None)])
def test_accepted_repair_reaches_only_tasks_with_the_same_signature(tmp_path, max_tasks, targets):
    key, svc = _setup(tmp_path, _policy(stuff_targets=True))
    out = _run(key, generalise_max_tasks=max_tasks)
    (report,) = out["reports"]
    assert report["decision"] == "accepted" and report["committed_version"] == 1
    gen = report["generalised"]
    if targets is None:  # the ablation: no batch at all
        assert gen is None and svc.store.latest().version == 1 and len(out["accepted"]) == 1
        return
    assert gen["targets"] == targets and gen["signature"] == "essential/contains_any"
    skipped = dict(s.split(": ", 1) for s in gen["skipped"])
    assert "sci-d" not in skipped  # another domain is not even looked up (events_like filters on the domain)
    assert "essential/contains_all" in skipped["med-e"]
    assert "held-out" in skipped["med-t"]
    if max_tasks == 1:
        assert "cap of 1" in skipped["med-b"]
    # Measured like any candidate: the batched rule held on the targets and the batch became version 2.
    assert gen["decision"] == "accepted" and gen["version"] == 2 == out["harness_version"]
    assert gen["critique"]["numbers"]["batch_targets"] == len(targets) == gen["critique"]["numbers"]["batch_rule_held"]
    assert set(gen["measurement"]["per_task"]) == set(targets)
    log = svc.store.history()[-1]
    assert log.meta["source"] == "generalise" and log.meta["generalised_from"] == "e-a:r0"
    for tid in targets:  # the same edit, on each target's own criterion
        assert _water(svc, tid) == _water(svc, "med-a") != _water(svc, tid, version=0)
        (rec,) = [p for p in svc.memory.proposals_for(tid) if p.generalised_from]
        assert rec.outcome == "accepted" and rec.template == "tighten_repeat" and rec.task_id == tid
    for tid in {"med-b", "med-c", "sci-d", "med-e", "med-t"} - set(targets):
        assert _water(svc, tid) == _water(svc, tid, version=0)
    acc = out["accepted"][-1]
    assert acc["generalised_from"] == "e-a:r0" and acc["targets"] == targets and acc["version"] == 2


def test_batch_is_rejected_on_its_numbers(tmp_path):
    # Only med-a stuffs: on the targets nothing is gamed, so the stuffing rule cannot hold there.
    key, svc = _setup(tmp_path, _policy(stuff_targets=False))
    out = _run(key)
    (report,) = out["reports"]
    gen = report["generalised"]
    assert report["decision"] == "accepted" and gen["targets"] == ["med-c", "med-b"]
    assert gen["decision"] == "rejected" and gen["version"] is None
    assert gen["critique"]["numbers"]["batch_rule_held"] == 0 and not gen["critique"]["measured_ok"]
    assert svc.store.latest().version == 1 == out["harness_version"] and len(out["accepted"]) == 1
    assert _water(svc, "med-b") == _water(svc, "med-b", version=0)
    assert [p.outcome for p in svc.memory.proposals_for("med-b")] == ["rejected"]


def test_tasks_with_events_of_their_own_this_round_are_left_to_their_lanes(tmp_path):
    key, svc = _setup(tmp_path, _policy(stuff_targets=True))
    evs = [
        event("e-a", "stuffing", "med-a", criterion_id="water"),
        event("e-b", "stuffing", "med-b", criterion_id="water"),
    ]
    out = graph.invoke({"events": evs, "harness_version": 0, "step": 10}, context={"services_key": key, "sample_k": 4})
    by_task = {r["task_id"]: r for r in out["reports"]}
    gen = by_task["med-a"]["generalised"]
    assert "med-b" not in gen["targets"] and any(s.startswith("med-b: has events of its own") for s in gen["skipped"])


def test_already_repaired_task_is_not_repaired_again(tmp_path):
    key, svc = _setup(tmp_path, _policy(stuff_targets=True))
    _run(key)  # med-b and med-c repaired at step 10, after their events (steps 3, 4)
    report = _run(key, version=2, step=14)["reports"][0]
    again = report["generalised"]
    skipped = dict(s.split(": ", 1) for s in again["skipped"])
    assert "already repaired at step 10" in skipped["med-b"] and "already repaired at step 10" in skipped["med-c"]
    # The second repair (a pitfall) touches no existing criterion: its signature has no criterion part, so med-e
    # (same failure and domain, another check on "water") qualifies now.
    assert report["attempts"][-1]["template"] == "pitfall_repeat" and again["signature"] == ""
    assert again["targets"] == ["med-e"]


def test_task_flagged_by_its_latest_groups_is_found_without_a_memory_event(tmp_path):
    key, svc = _setup(tmp_path, _policy(stuff_targets=True), sightings=())
    crits = TASKS[1].criteria
    rollouts = [
        RolloutRecord(text=STUFFED if i % 2 == 0 else HONEST, reward=1.0, verdicts={"water": True}) for i in range(4)
    ]
    stats = GroupStats.from_rollouts("med-b", 9, rollouts, criteria=crits)
    svc.memory.add_group(GroupSummary.from_stats(stats, domain="medical"))
    gen = _run(key)["reports"][0]["generalised"]
    assert gen["targets"] == ["med-b"] and gen["seen_in"]["med-b"].startswith("latest groups")


def test_memory_ablation_does_not_generalise(tmp_path):
    key, svc = _setup(tmp_path, _policy(stuff_targets=True))
    (report,) = _run(key, memory=False)["reports"]
    assert report["decision"] == "accepted" and report["generalised"]["decision"] == "none"
    assert svc.store.latest().version == 1


TIGHT = {"type": "all_of", "checks": [WATER, {"type": "word_count", "min": 8}]}
FLUIDS = {"type": "contains_any", "phrases": ["fluids", "drink"]}  # med-b's own phrases in this table
LLM_CASES = [
    # (ops of the accepted LLM update on med-a, what med-b gets or None, the reason when it is skipped)
    (
        [{"op": "edit_criterion", "task_id": "med-a", "criterion_id": "water", "check": TIGHT}],
        [
            {
                "op": "edit_criterion",
                "task_id": "med-b",
                "criterion_id": "water",
                "check": {"type": "all_of", "checks": [FLUIDS, {"type": "word_count", "min": 8}]},
            }
        ],
        "",
    ),
    (
        [{"op": "reweight_criterion", "task_id": "med-a", "criterion_id": "water", "weight": 2.5}],
        [{"op": "reweight_criterion", "task_id": "med-b", "criterion_id": "water", "weight": 2.5}],
        "",
    ),
    (
        [
            {
                "op": "edit_criterion",
                "task_id": "med-a",
                "criterion_id": "water",
                "check": {"type": "contains_any", "phrases": ["fluids"]},
            }
        ],
        None,
        "specific to its check",
    ),
    (
        [{"op": "add_hint", "task_id": "med-a", "hint": {"id": "h1", "text": "Mention water."}}],
        None,
        "add_hint is specific",
    ),
]


@pytest.mark.parametrize(("ops", "expected", "why"), LLM_CASES, ids=["wrap", "reweight", "new-check", "hint"])
def test_llm_update_maps_op_by_op(ops, expected, why):
    from agents.generalise import Sighting, retarget
    from harness.types import HarnessUpdate

    state = HarnessState.from_tasks(
        [TASKS[0], _task("med-b", "What helps after a long run in the heat?", water=FLUIDS)]
    )
    interface = "guidance" if ops[0]["op"] == "add_hint" else "criteria"
    update = HarnessUpdate.model_validate({"interface": interface, "ops": ops})
    ev = FailureEvent.model_validate(event("e-b", "stuffing", "med-b", "water"))
    got, reason = retarget("llm", update, state.task("med-a"), state, Sighting("med-b", ev, "test"), step=10)
    if expected is None:
        assert got is None and why in reason
    else:
        assert got.ops == HarnessUpdate.model_validate({"interface": interface, "ops": expected}).ops and reason == ""


@pytest.mark.parametrize("value", [0, 2])
def test_config_knob_reaches_the_graph_context(tmp_path, value):
    from trainer.config_loader import load_config
    from trainer.evolver_round import evolver_context

    cfg = load_config(None, [f"evolver.generalise_max_tasks={value}", f"run_dir={tmp_path / 'run'}"])
    assert evolver_context(cfg, services_key=None).generalise_max_tasks == value
