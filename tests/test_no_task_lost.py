"""No task is lost to a failed repair: the evolver graph end to end (issue 10, point 3).

Real store, memory, judge, measurement and graph; the frozen policy is a scripted prompt policy and
the proposer LLM is `ChatOpenAI` against the OpenAI stub answering garbage (prose, malformed JSON),
as a new user's badly prompted model would. After the round every training task is still in
training: active with a positive weight, and drawn again by the sampler once any quarantine ends.
"""

from __future__ import annotations

import itertools

from graphs.evolver import graph
from harness.sampling import TaskSampler
from harness.types import HarnessState
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
GARBAGE = [
    "I would tighten the rubric so that stuffing no longer pays off.",
    '```json\n{"update": {"interface": "criteria", "ops": [{"op": "edit_criterion", "task_id": ',
    "Sure! Here is my proposal: make the water criterion stricter.",
]


def _stuffing(prompt: str, i: int) -> str:
    return "water water water water water rest dark" if i % 2 == 0 else HONEST


def _events() -> list[dict]:
    unconfirmed = {
        **event("e-med2", "stuffing", "med-2", criterion_id="cool"),
        "window": [10],
        "window_hits": 1,
        "confirmed": False,
    }
    return [
        event("e-med1", "stuffing", "med-1", criterion_id="water"),
        unconfirmed,
        event("e-geo1", "flat", "geo-1", mean=0.5, std=0.0),
    ]


def _run(key: str, stub=None, **ctx) -> dict:
    context = {"services_key": key, "sample_k": 4, **ctx}
    if stub is not None:
        context |= {"proposer_model": "openai:stub", "base_url": stub.base_url, "llm_timeout_s": 5}
    return graph.invoke(
        {"events": _events(), "harness_version": 0, "step": 10}, {"configurable": {"thread_id": "t"}}, context=context
    )


def _assert_all_in_training(before: HarnessState, after: HarnessState) -> None:
    train = sorted(t for t, task in before.tasks.items() if task.split == "train")
    assert after.active_task_ids() == sorted(set(train) | set(after.variants))
    back = max([s.quarantined_until or 0 for s in after.sampling.values()] + [after.step])
    drawn = set(TaskSampler(lambda: after, seed=0).draw(400, step=back))
    assert drawn == set(after.active_task_ids()), "a task is never drawn again"


def test_garbage_llm_proposer_leaves_every_task_in_training(tmp_path, openai_stub):
    replies = itertools.cycle(GARBAGE)
    openai_stub.responder = lambda request: next(replies)
    key, svc = make_run(tmp_path, PromptPolicy(_stuffing))
    before = svc.store.latest()
    out = _run(key, openai_stub)
    reports = {r["event_id"]: r for r in out["reports"]}
    for r in reports.values():
        assert r["decision"] in ("accepted", "rejected", "fallback")
        # Each garbage answer handed its decision to the rule brain (issue 20 item 3), and says so.
        assert r["attempts"] and all(a["source"] == "llm_fallback" and a["llm_error"] for a in r["attempts"])
    _assert_all_in_training(before, svc.store.latest())
    assert svc.store.latest().sampling["med-2"] == before.sampling["med-2"]  # unconfirmed: untouched


def test_garbage_llm_answers_decide_what_the_rule_brains_decide(tmp_path, openai_stub):
    """Garbage from the LLM changes nothing of its own: the round decides, and commits, what the rule brains do."""
    replies = itertools.cycle(GARBAGE)
    openai_stub.responder = lambda request: next(replies)
    key, svc = make_run(tmp_path / "llm", PromptPolicy(_stuffing))
    out = _run(key, openai_stub)
    key_rules, svc_rules = make_run(tmp_path / "rules", PromptPolicy(_stuffing))
    ref = _run(key_rules)

    def decided(o):
        return [(r["event_id"], r["decision"], [a["template"] for a in r["attempts"]]) for r in o["reports"]]

    assert decided(out) == decided(ref)
    assert svc.store.latest().sampling == svc_rules.store.latest().sampling
    assert svc.store.latest().version == svc_rules.store.latest().version


def test_unconfirmed_event_never_changes_sampling_with_rule_brains(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    before = svc.store.latest()
    ev = {**event("e-low", "collapse_low", "med-1", mean=0.0, std=0.0), "window": [10]}  # one group: noise
    out = graph.invoke(
        {"events": [ev], "harness_version": 0, "step": 10},
        {"configurable": {"thread_id": "t"}},
        context={"services_key": key, "sample_k": 4, "interfaces": ["guidance", "sampling"]},  # no ladder deferral
    )
    (report,) = out["reports"]
    assert report["decision"] == "rejected" and report["fallback"]["applied"] is False
    assert "not confirmed" in report["fallback"]["reason"]
    assert svc.store.latest().sampling == before.sampling


def test_fallback_is_recorded_as_a_proposal_with_its_reason(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    out = graph.invoke(
        {"events": [event("e-low", "collapse_low", "med-1", mean=0.0, std=0.0)], "harness_version": 0, "step": 10},
        {"configurable": {"thread_id": "t"}},
        context={"services_key": key, "sample_k": 4, "interfaces": ["guidance", "sampling"]},  # no ladder deferral
    )
    (report,) = out["reports"]
    assert report["decision"] == "fallback"
    (record,) = [p for p in svc.memory.proposals_for("med-1") if p.outcome == "fallback"]
    assert record.reasons == [record.update.rationale] and "confirmed in 2 groups" in record.reasons[0]
    _assert_all_in_training(HarnessState.from_tasks(list(svc.store.latest().tasks.values())), svc.store.latest())
