"""Resume with the training memory on a Chroma server (`harness.memory_url`).

A run folder's memory is moved aside and rebuilt from the checkpoint's `memory.jsonl`; a server cannot be moved
aside, so `trainer.checkpoint.restore` makes it hold exactly that snapshot (`TrainingMemory.restore_exactly`):
records written after the checkpoint (by the trainer or by another process, e.g. a LangGraph server) are
deleted, records changed or lost since come back as the snapshot has them. The first test checks the store
method offline; the `chroma_server` test resumes a run against a real `chroma run` server (the session's,
emptied before the test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.types import FailureEvent
from memory import AttributionRecord, EventRecord, TrainingMemory
from tests.support.tiny_run import tiny_config


def _event(i: str, task: str, step: int, domain: str = "writing") -> EventRecord:
    return EventRecord(
        event=FailureEvent(id=i, type="collapse_high", task_id=task, step=step), domain=domain, step=step
    )


def _attribution(event_id: str, task: str, interface: str) -> AttributionRecord:
    return AttributionRecord(
        event_id=event_id, task_id=task, interface=interface, diagnosis="d", confidence=0.5, step=2
    )


def _records(mem: TrainingMemory, tmp: Path) -> list[str]:
    """Every record the store holds, as the snapshot writes them (order-free: restoring renumbers `seq`)."""
    mem.snapshot(tmp)
    return sorted(tmp.read_text(encoding="utf-8").splitlines()[1:])


def _snapshot_rows(path: Path) -> list[str]:
    return sorted(path.read_text(encoding="utf-8").splitlines()[1:])


def test_restore_exactly_leaves_only_the_snapshot(tmp_path):
    mem = TrainingMemory.ephemeral()
    mem.add_event(_event("e1", "t-a", 1))
    mem.add_event(_event("e0", "t-a", 1))
    snap = mem.snapshot(tmp_path / "snap.jsonl")
    mem.add_event(_event("e2", "t-a", 3))
    mem.add_event(_event("e0", "t-a", 1, domain="medical"))

    assert mem.restore_exactly(snap) == {"groups": 0, "events": 1, "attributions": 0, "proposals": 0}
    assert _records(mem, tmp_path / "now.jsonl") == _snapshot_rows(snap)
    assert mem.get("events", "e0").domain == "writing"  # changed after the snapshot: its snapshot value is back
    mem.close()


# -- against a real `chroma run` server (the `chroma_url` fixture of tests/conftest.py) ---------------------------
@pytest.mark.chroma_server
def test_resume_rolls_the_memory_server_back_to_the_checkpoint(chroma_url, tmp_path):
    import chromadb

    from trainer.checkpoint import MEMORY_FILE, restore, write_checkpoint_state
    from trainer.harness_run import HarnessRun

    cfg = tiny_config(tmp_path, f"harness.memory_url={chroma_url}")
    run = HarnessRun(cfg)
    run.memory.add_events([_event("e1", "t-paris", 1), _event("e2", "t-photo", 2)])
    run.memory.add_attribution(_attribution("e1", "t-paris", "guidance"))
    ckpt = cfg.run_path / "checkpoints" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    write_checkpoint_state(ckpt, run, step=2)
    snapshot = ckpt / MEMORY_FILE
    assert len(_snapshot_rows(snapshot)) == 3

    # After the checkpoint: the trainer and another process (as a LangGraph server would) write to the server,
    # a record changes, and a record of the checkpoint is lost.
    run.memory.add_event(_event("e3", "t-paris", 3))
    run.memory.add_attribution(_attribution("e1", "t-paris", "criteria"))
    host, port = chroma_url.removeprefix("http://").split(":")
    with TrainingMemory.http(host, int(port), embedding="hash") as other:
        other.add_event(_event("e4", "t-any", 4))
    chromadb.HttpClient(host=host, port=int(port)).get_collection("events").delete(ids=["e2"])
    run.close()

    resumed = HarnessRun(cfg, open_memory=False)  # as `train --resume` opens it
    summary = restore(resumed, ckpt)
    assert summary["memory_dropped"] == {"groups": 0, "events": 2, "attributions": 0, "proposals": 0}
    assert _records(resumed.memory, tmp_path / "after.jsonl") == _snapshot_rows(snapshot)
    assert resumed.memory.get("attributions", "attr:e1").interface == "guidance"
    resumed.close()

    # What the server held before the resume is kept aside, as a memory folder would be.
    with TrainingMemory.ephemeral() as held:
        assert held.restore(Path(summary["aside"]) / MEMORY_FILE)["events"] == 3
        assert all(held.get("events", i) is not None for i in ("e1", "e3", "e4"))
    # A fresh client (another process) sees the rolled-back memory.
    with TrainingMemory.http(host, int(port), embedding="hash") as fresh:
        assert [r.record_id for r in fresh.task_history("t-paris", kinds=("events",))] == ["e1"]
        assert fresh.get("events", "e2") is not None and fresh.get("events", "e4") is None
