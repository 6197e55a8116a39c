"""`graphs/runner.py` in process: the async SQLite checkpointer, approval interrupts answered by the approver,
resuming a waiting thread by id, `thread_unfinished` (what `harnessrl evolve --thread` resumes on), and
`load_snapshot` reading events copied from a run's `events.jsonl`.

Real store, memory, judge and measurement; the frozen policy is the scripted `PromptPolicy`.
"""

from __future__ import annotations

import json

import pytest

from agents.context import EvolverContext
from graphs.runner import load_snapshot, run_in_process, thread_unfinished
from harness.types import FailureEvent
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."


def _stuffing(prompt, i):
    return "water water water water water rest dark" if i % 2 == 0 else HONEST


def _input():
    return {"events": [event("e1", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": 10}


def test_waiting_thread_is_resumed_and_answered_by_the_approver(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(_stuffing))
    ctx = EvolverContext(services_key=key, sample_k=4, require_approval=True)
    db = tmp_path / "evolver.sqlite"
    assert not thread_unfinished(db, "t1")

    waiting = run_in_process(_input(), ctx, db, "t1")  # no approver: the run stops at the interrupt
    (interrupt,) = waiting["__interrupt__"]
    assert interrupt.value["critique"]["measured_ok"] is True and svc.store.latest().version == 0
    assert thread_unfinished(db, "t1")

    asked = []
    out = run_in_process(None, ctx, db, "t1", approve=lambda payload: asked.append(payload) or True)
    assert len(asked) == 1 and asked[0]["proposal"]["template"] == interrupt.value["proposal"]["template"]
    assert out["reports"][0]["decision"] == "accepted" and svc.store.latest().version == 1
    assert "__interrupt__" not in out and not thread_unfinished(db, "t1")


def test_approver_can_reject(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(_stuffing))
    ctx = EvolverContext(services_key=key, sample_k=4, require_approval=True)
    out = run_in_process(_input(), ctx, tmp_path / "evolver.sqlite", "t2", approve=lambda payload: False)
    assert out["reports"][0]["decision"] == "rejected_by_human" and svc.store.latest().version == 0


def test_without_approval_the_round_runs_through(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(_stuffing))
    ctx = EvolverContext(services_key=key, sample_k=4)
    out = run_in_process(_input(), ctx, tmp_path / "evolver.sqlite", "t3")
    assert out["reports"][0]["decision"] == "accepted" and out["harness_version"] == svc.store.latest().version == 1


def _snapshot(tmp_path, events):
    (tmp_path / "events.json").write_text(json.dumps({"events": events, "harness_version": 3, "step": 12}))
    return tmp_path


def test_snapshot_takes_events_copied_from_the_run_log(tmp_path):
    logged = FailureEvent.model_validate(event("e1", "collapse_low", "med-1")).log_line(harness_version=2)
    assert logged["harness_version"] == 2  # what trainer/harness_run.py writes to events.jsonl
    inp = load_snapshot(_snapshot(tmp_path, [logged]))
    assert inp["harness_version"] == 3 and inp["step"] == 12  # the snapshot's version, not the event's logged one
    assert [FailureEvent.model_validate(e) for e in inp["events"]] == [FailureEvent.from_log_line(logged)]
    assert "harness_version" not in inp["events"][0]


def test_snapshot_event_with_an_unknown_field_names_file_and_index(tmp_path):
    bad = {**event("e1", "collapse_low", "med-1"), "severity": "high"}
    with pytest.raises(ValueError, match=r"(?s)events\.json: events\[1\]: .*severity.*Extra inputs"):
        load_snapshot(_snapshot(tmp_path, [event("e0", "flat", "med-2"), bad]))


def test_a_langgraph_server_that_does_not_answer_is_named(tmp_path):
    from graphs.runner import LangGraphServerDown, run_on_server
    from tests.support.server_process import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(
        LangGraphServerDown, match=rf"LangGraph server at {url} unreachable or stopped answering.*tries it again"
    ):
        run_on_server(url, _input(), EvolverContext(run_dir=str(tmp_path)), timeout_s=5)
