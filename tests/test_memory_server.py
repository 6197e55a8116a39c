"""`TrainingMemory.http` against a real `chroma run` server (the session's, emptied before each test): two stores
(as two processes would) share one memory, and a child process's writes are visible here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.types import FailureEvent
from memory import EventRecord, TrainingMemory

pytestmark = pytest.mark.chroma_server

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def chroma_port(chroma_url):
    return int(chroma_url.rsplit(":", 1)[1])


def _event(i: str, task: str, step: int) -> EventRecord:
    return EventRecord(event=FailureEvent(id=i, type="collapse_high", task_id=task, step=step), domain="writing")


def test_http_stores_share_one_memory(chroma_port):
    a = TrainingMemory.http("127.0.0.1", chroma_port, embedding="hash", run_id="shared")
    b = TrainingMemory.http("127.0.0.1", chroma_port, embedding="hash", run_id="shared")
    try:
        a.add_event(_event("e1", "poem-1", 3))
        b.add_event(_event("e2", "poem-1", 5))
        assert [r.record_id for r in a.task_history("poem-1")] == ["e1", "e2"]
        assert b.count()["events"] == 2
        assert [h.id for h in b.similar_events("collapse_high poem", k=1)] in (["e1"], ["e2"])
    finally:
        a.close()
        b.close()


def test_http_store_sees_another_process_writes(chroma_port):
    code = (
        "from harness.types import FailureEvent\nfrom memory import TrainingMemory\n"
        f"m = TrainingMemory.http('127.0.0.1', {chroma_port}, embedding='hash')\n"
        "m.add_event(FailureEvent(id='child', type='flat', task_id='ifeval-3', step=7))\nm.close()\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with TrainingMemory.http("127.0.0.1", chroma_port, embedding="hash") as m:
        hist = m.task_history("ifeval-3")
        assert [r.record_id for r in hist] == ["child"] and hist[0].event.type == "flat"
