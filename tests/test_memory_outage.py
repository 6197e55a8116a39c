"""A Chroma memory server (`harness.memory_url`) that dies and comes back (issue 34 item 3).

Writes it cannot take are queued in order and written when it answers again (`memory/outage.py`); a read while it
is away is a `MemoryServerDown` naming it; a queue that would overflow stops training with the fix rather than drop
a record; a checkpoint saved while it is away is left incomplete (its memory cannot be read); the run's metrics
count the outage and the report names it. The offline tests check the queue and the report's sentence; the
`chroma_server` tests kill a real `chroma run` of their own (SIGKILL), never the session's shared one, and restart
it on the same folder and port: first under a bare store, then under a real training run whose evolver round is
cut off mid-pause.
"""

from __future__ import annotations

import logging
import warnings

import httpx
import pytest

from harness.types import FailureEvent
from memory import EventRecord, TrainingMemory
from memory.outage import QueuedWrite, WriteQueue
from memory.store import MemoryServerDown
from trainer.report import summary, summary_sentences
from trainer.step_metrics import StepMetrics


def _event(i: str, step: int, task: str = "t-paris") -> EventRecord:
    return EventRecord(event=FailureEvent(id=i, type="collapse_low", task_id=task, step=step), domain="science")


def _write(i: str, n: int = 1) -> QueuedWrite:
    return QueuedWrite("events", [f"{i}.{k}" for k in range(n)], ["doc"] * n, [{}] * n)


# -- offline: the queue, and the report's sentence -------------------------------------------------------------
def test_queue_flushes_in_order_and_says_each_outage_once(caplog):
    q = WriteQueue("http://127.0.0.1:9", limit=5)
    written: list[str] = []
    down = True

    def put(w: QueuedWrite) -> None:
        if down:
            raise httpx.ConnectError("refused")
        written.extend(w.ids)

    with caplog.at_level(logging.WARNING, logger="memory.outage"):
        for i, n in (("a", 2), ("b", 1)):
            q.add(_write(i, n), httpx.ConnectError("refused"))
        assert q.down and q.queued == 3 and q.fits(2) and not q.fits(3)
        with pytest.raises(httpx.ConnectError):
            q.flush(put)  # still away: nothing leaves the queue
        assert q.queued == 3 and written == []
        down = False
        q.flush(put)
    assert written == ["a.0", "a.1", "b.0"] and not q.down
    assert (q.queued, q.flushed, q.outages) == (0, 3, 1)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines  # one when it starts, one when it ends
    assert "unreachable" in lines[0] and "http://127.0.0.1:9" in lines[0] and "queued in order" in lines[0]
    assert "answers again" in lines[1] and "queued meanwhile written: 3" in lines[1]


@pytest.mark.parametrize(
    "queued, flushed, sentence",
    [
        ([0, 3, 2, 0, 0], [0, 0, 0, 5, 0], "unreachable at the end of 2 steps (steps 2-3); 5 queued records written"),
        (
            [0, 1, 0, 0, 4],
            [0, 0, 1, 0, 0],
            "2 steps (steps 2, 5); 1 queued record written once it answered again, "
            "4 still queued at the last step (not written)",
        ),
        ([0, 0, 0], [0, 0, 0], None),
    ],
)
def test_report_names_the_outage(queued, flushed, sentence):
    metrics = [
        StepMetrics(step=i + 1, memory_queued=q, memory_flushed=f) for i, (q, f) in enumerate(zip(queued, flushed))
    ]
    s = summary({"metrics": metrics, "rounds": [], "events": [], "updates": [], "eval": {}, "dead_eps": None})
    lines = [line for line in summary_sentences(s) if "memory server" in line]
    assert lines == [] if sentence is None else sentence in lines[0], lines


# -- a real `chroma run`, killed and restarted ------------------------------------------------------------------
@pytest.fixture
def chroma(tmp_path):
    from tests.support.servers import RestartableChroma

    server = RestartableChroma(tmp_path / "chroma")
    server.root.mkdir()
    server.start()
    yield server
    server.stop()


@pytest.mark.chroma_server
def test_writes_while_the_server_is_away_are_queued_and_flushed(chroma, tmp_path, caplog):
    mem = TrainingMemory.http("127.0.0.1", chroma.port, embedding="hash", max_queued=3)
    try:
        mem.add_event(_event("e1", 1))
        chroma.kill()
        with caplog.at_level(logging.WARNING, logger="memory.outage"):
            mem.add_event(_event("e2", 2))
            mem.add_events([_event("e3", 3), _event("e4", 3)])
            assert mem.queue_counts() == {"queued": 3, "flushed": 0, "outages": 1}
            # A read cannot be served, and says by whom and what waits.
            down = rf"{chroma.url} unreachable while reading .*records queued for it: 3"
            with pytest.raises(MemoryServerDown, match=down):
                mem.task_history("t-paris")
            with pytest.raises(MemoryServerDown):
                mem.snapshot(tmp_path / "snap.jsonl")
            assert not (tmp_path / "snap.jsonl").exists()
            # The queue is full: a fourth record stops the caller (training) with the fix, and is not taken.
            with pytest.raises(MemoryServerDown, match=r"3 records are queued.*rather than drop a record.*--resume"):
                mem.add_event(_event("e5", 4))
            assert mem.queue_counts()["queued"] == 3
            chroma.start()  # same folder, same port
            history = mem.task_history("t-paris")  # the read writes the queue out first
        assert [r.record_id for r in history] == ["e1", "e2", "e3", "e4"]
        assert mem.queue_counts() == {"queued": 0, "flushed": 3, "outages": 1}
        messages = [r.getMessage() for r in caplog.records]
        assert sum("unreachable (" in m for m in messages) == 1 and sum("answers again" in m for m in messages) == 1
        mem.add_event(_event("e6", 5))  # the next write goes straight to the server
        assert mem.count()["events"] == 5
    finally:
        mem.close()
    # Another client (another process) sees every record, in the order they were made.
    with TrainingMemory.http("127.0.0.1", chroma.port, embedding="hash") as other:
        assert [r.record_id for r in other.task_history("t-paris")] == ["e1", "e2", "e3", "e4", "e6"]


@pytest.mark.slow
@pytest.mark.chroma_server
def test_training_survives_a_memory_server_outage(chroma, tmp_path):
    """Killed in the pause after step 2 (the round then reads memory), restarted in the pause after step 4.

    The round at step 2 fails visibly and is rolled back; checkpoint-2 cannot snapshot the memory and is left
    incomplete; steps 3 and 4 queue their records; the round at step 4 flushes them and uses the memory again;
    training finishes with every group record on the server and the report names the outage."""
    from graphs.round_record import RoundRecord
    from tests.support.tiny_run import tiny_config
    from trainer.checkpoint import MEMORY_FILE, STATE_FILE, complete_checkpoints
    from trainer.evolver_round import run_round
    from trainer.grpo import train
    from trainer.io import read_jsonl
    from trainer.report_data import collect

    def graph(cfg, events, version, step, context, thread_id):
        if step == 2:
            chroma.kill()
        if step == 4:
            chroma.start()
        return run_round(cfg, events, version, step, context, thread_id)

    cfg = tiny_config(tmp_path, "train.max_steps=6", "data.tasks=[t-long,t-paris]", f"harness.memory_url={chroma.url}")
    result = train(cfg, progress=False, run_graph=graph)
    assert result["steps"] == 6

    rounds = {r["step"]: RoundRecord.model_validate(r) for r in read_jsonl(cfg.run_path / "rounds.jsonl")}
    assert rounds[2].error and "MemoryServerDown" in rounds[2].error and chroma.url in rounds[2].error
    # The next round reaches the server again: whatever else may fail it, it is not the memory. (In one CI run under
    # load this round failed with sqlite "database is locked" from the in-process evolver's checkpoint db, not from
    # the Chroma server; its cause is not found yet, so that failure is reported here with its traceback, not hidden.)
    assert rounds[4].error is None or "Memory" not in rounds[4].error, (rounds[4].error, rounds[4].traceback)
    if rounds[4].error is not None:
        warnings.warn(f"round 4 failed, not on the memory: {rounds[4].error}\n{rounds[4].traceback}", stacklevel=1)
    metrics = read_jsonl(cfg.run_path / "metrics.jsonl")
    by_step = {m["step"]: m for m in metrics}
    assert by_step[2]["memory_queued"] > 0 and by_step[3]["memory_queued"] > by_step[2]["memory_queued"]
    # Step 4's own records queued too (the server came back in its pause): all were written then.
    assert "memory_queued" not in by_step[4] and by_step[4]["memory_flushed"] > by_step[3]["memory_queued"]
    assert {"memory_queued", "memory_flushed"}.isdisjoint(by_step[1]) and "memory_queued" not in by_step[6]
    # The checkpoint saved while the server was away is incomplete; the ones after it are whole.
    ckpts = cfg.run_path / "checkpoints"
    assert not (ckpts / "checkpoint-2" / STATE_FILE).exists()
    assert [n for n, _ in complete_checkpoints(cfg.run_path)][-2:] == [4, 6]

    # Nothing lost: one group record per group trained, every detected event, on the server and in the snapshot.
    n_groups = sum(m["n_groups"] for m in metrics)
    events = {e["id"] for e in read_jsonl(cfg.run_path / "events.jsonl")}
    with TrainingMemory.http("127.0.0.1", chroma.port, embedding="hash") as mem:
        assert mem.count()["groups"] == n_groups
        snapshot = read_jsonl(ckpts / "checkpoint-6" / MEMORY_FILE)[1:]
        assert sum(r["kind"] == "groups" for r in snapshot) == n_groups
        stored = {r["record"]["event"]["id"] for r in snapshot if r["kind"] == "events"}
        assert events <= stored

    lines = summary_sentences(summary(collect(cfg.run_path)))
    assert any("memory server was unreachable at the end of 2 steps (steps 2-3)" in line for line in lines), lines
