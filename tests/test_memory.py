"""Training-time memory on the hashing embedder: records, writes, within-task and cross-task queries, bad
folders, persistence across processes, snapshots. Real Chroma throughout; no model is loaded here."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.types import FailureEvent, HarnessUpdate
from memory import (
    KINDS,
    AttributionRecord,
    EventRecord,
    GroupSummary,
    HashEmbedding,
    MemoryStoreError,
    ProposalRecord,
    TrainingMemory,
    make_embedding,
    record_from_metadata,
)
from memory.records import MAX_RESPONSE_CHARS

REPO = Path(__file__).resolve().parents[1]


def _run_py(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def _event(i: str, task: str, step: int, type_: str = "collapse_low", **stats: float) -> FailureEvent:
    return FailureEvent(id=i, type=type_, task_id=task, step=step, stats=stats or {"mean": 0.0}, window=[step])


def _hint_update(task: str, text: str) -> HarnessUpdate:
    return HarnessUpdate.model_validate(
        {"interface": "guidance", "ops": [{"op": "add_hint", "task_id": task, "hint": {"id": "h1", "text": text}}]}
    )


def _proposal(
    pid: str,
    task: str,
    step: int,
    outcome: str = "accepted",
    interface: str = "guidance",
    failure_type: str = "collapse_low",
    text: str = "Name the drug interaction",
    **deltas: float,
) -> ProposalRecord:
    if interface == "guidance":
        update = _hint_update(task, text)
    else:
        update = HarnessUpdate.model_validate(
            {"interface": "sampling", "ops": [{"op": "reweight", "task_id": task, "weight": 0.2}]}
        )
    return ProposalRecord(
        proposal_id=pid,
        event_id=f"ev-{pid}",
        task_id=task,
        failure_type=failure_type,
        interface=interface,
        update=update,
        outcome=outcome,
        deltas=deltas or {"std": 0.1},
        step=step,
        measurements={"candidate": {"std": 0.2}, "control": {"std": 0.1}},
        reasons=[f"{outcome} by critic"],
    )


@dataclasses.dataclass
class _FakeGroupStats:  # shaped like harness.detector.GroupStats, which memory must accept as a dataclass
    task_id: str
    step: int
    n: int
    mean: float
    std: float
    pass_rates: dict[str, float]


@pytest.fixture
def mem():
    m = TrainingMemory.ephemeral(embedding="hash")
    yield m
    m.close()


# -- embeddings -------------------------------------------------------------------------------------------------
def test_hash_embedding_is_deterministic_normalised_and_overlap_sensitive():
    ef = HashEmbedding()
    a, b, c = ef(["warfarin interaction hint", "warfarin interaction hint", "retire the saturated poem task"])
    assert a.shape == (256,) and np.allclose(a, b)
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-6
    q = ef(["warfarin hint"])[0]
    assert float(q @ a) > float(q @ c)
    assert np.all(np.isfinite(ef([""])[0]))  # no words still gives a usable unit vector


def test_hash_embedding_is_stable_across_processes():
    # blake2b, not hash(): PYTHONHASHSEED must not change the vectors, or a reopened store would not match.
    code = "from memory import HashEmbedding; print(list(map(float, HashEmbedding()(['stable words here'])[0]))[:32])"
    outs = {_run_py(code).stdout for _ in range(2)}
    here = list(map(float, HashEmbedding()(["stable words here"])[0]))[:32]
    assert len(outs) == 1 and json.loads(outs.pop()) == pytest.approx(here)


@pytest.mark.parametrize(
    "kind,name,config",
    [
        ("hash", "harnessrl-hash", {"dim": 256}),
        ("minilm", "harnessrl-minilm", {"model": "all-MiniLM-L6-v2", "batch_size": 64}),
    ],
)
def test_embedding_config_round_trips(kind, name, config):
    ef = make_embedding(kind)
    assert ef.name() == name and ef.get_config() == config
    rebuilt = type(ef).build_from_config(ef.get_config())
    assert rebuilt.get_config() == config


def test_unknown_embedding_is_rejected():
    with pytest.raises(ValueError, match="unknown embedding 'default'"):
        make_embedding("default")


def test_import_memory_does_not_import_torch():
    r = _run_py("import sys, memory; print('torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


# -- records ----------------------------------------------------------------------------------------------------
RECORDS = [
    GroupSummary.from_stats(
        {
            "task_id": "med-1",
            "step": 4,
            "n": 8,
            "mean": 0.0,
            "std": 0.0,
            "lengths": [3, 4],
            "audit_mean": None,
            "pass_rates": {"c1": 0.0, "c2": 0.25},
        },
        best={"text": "Take it with food.", "reward": 0.2, "verdicts": {"c1": False, "c2": True}, "hinted": False},
        worst={"text": "What?", "reward": 0.0, "verdicts": {"c1": False, "c2": False}},
        harness_version=2,
        domain="medical",
    ),
    EventRecord(event=_event("e1", "med-1", 4, std=0.0), domain="medical", harness_version=2),
    AttributionRecord(
        event_id="e1",
        task_id="med-1",
        interface="guidance",
        diagnosis="never names the interaction",
        confidence=0.8,
        evidence_ids=["grp:med-1:4:0"],
        failure_type="collapse_low",
        step=4,
    ),
    _proposal("p1", "med-1", 4, "rejected", std=0.05, dead_share=-0.5),
]


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.kind)
def test_record_metadata_is_flat_and_round_trips(rec):
    meta = rec.metadata()
    assert all(isinstance(v, str | int | float | bool) for v in meta.values()), meta
    assert meta["kind"] == rec.kind and meta["task_id"] == "med-1"
    assert record_from_metadata(meta) == rec
    doc = rec.document()
    assert "med-1" in doc and len(doc) < 800


def test_record_documents_carry_what_search_needs():
    group, event, attribution, proposal = (r.document() for r in RECORDS)
    assert "mean 0.00" in group and "What?" in group and "unmet c1" in group
    assert event.startswith("collapse_low on med-1 (medical) at step 4")
    assert "attributed to guidance" in attribution
    assert "add_hint Name the drug interaction" in proposal and "outcome rejected" in proposal
    assert "dead_share -0.50" in proposal
    meta = RECORDS[3].metadata()
    assert meta["delta_dead_share"] == -0.5 and meta["outcome"] == "rejected" and meta["interface"] == "guidance"


def test_group_summary_accepts_dataclass_stats_and_caps_response_text():
    stats = _FakeGroupStats(task_id="sci-2", step=9, n=4, mean=0.5, std=0.1, pass_rates={"c1": 0.5})
    g = GroupSummary.from_stats(stats, best={"text": "x" * (MAX_RESPONSE_CHARS + 50), "reward": 1.0})
    assert g.record_id == "grp:sci-2:9:0" and g.stats["mean"] == 0.5
    assert len(g.best.text) == MAX_RESPONSE_CHARS


def test_add_group_takes_the_detectors_real_stats_and_rollouts(mem):
    from harness.detector import GroupStats, RolloutRecord

    rollouts = [
        RolloutRecord(text="What?", reward=0.0, verdicts={"c1": False}, hinted=True, hint_texts=["h"]),
        RolloutRecord(text="Warfarin raises bleeding risk.", reward=1.0, verdicts={"c1": True}),
    ]
    stats = GroupStats.from_rollouts("med-3", 12, rollouts, harness_version=1)
    rid = mem.add_group(stats, best=rollouts[1], worst=rollouts[0], harness_version=1, domain="medical", group_index=1)
    (got,) = mem.task_history("med-3")
    assert rid == got.record_id == "grp:med-3:12:1"
    assert (
        got.stats["rewards"] == [0.0, 1.0]
        and got.best.text.startswith("Warfarin")
        and got.worst.verdicts == {"c1": False}
    )
    assert "best (1.00, met c1; unmet -)" in got.document()


def test_group_summary_names_the_missing_field():
    with pytest.raises(ValueError, match="lack 'task_id'"):
        GroupSummary.from_stats({"step": 1, "mean": 0.0})


# -- writes and queries ---------------------------------------------------------------------------------------
def test_task_history_orders_by_step_then_insertion_and_keeps_last_n(mem):
    mem.add_event(_event("e-late", "t1", 20))
    mem.add_event(_event("e-first", "t1", 10))  # same step as the group below, recorded before it
    mem.add_group({"task_id": "t1", "step": 10, "mean": 0.0, "std": 0.0})
    mem.add_event(_event("e-early", "t1", 10))  # same step as the group, recorded after it
    mem.add_proposal(_proposal("p-t1", "t1", 20))
    mem.add_event(_event("e-other", "t2", 15))
    hist = mem.task_history("t1", last_n=10)
    assert [r.record_id for r in hist] == ["e-first", "grp:t1:10:0", "e-early", "e-late", "p-t1"]
    assert [r.record_id for r in mem.task_history("t1", last_n=2)] == ["e-late", "p-t1"]
    assert [r.record_id for r in mem.task_history("t1", kinds=("events",))] == ["e-first", "e-early", "e-late"]
    assert mem.task_history("no-such-task") == []
    assert mem.task_history("t1", last_n=0) == []


def test_rerecording_is_idempotent(mem):
    for _ in range(3):
        mem.add_event(_event("e1", "t1", 1))
        mem.add_proposal(_proposal("p1", "t1", 1))
    mem.add_proposal(_proposal("p1", "t1", 1, "rejected"))  # the last recording of an id is the one kept
    assert mem.count() == {"groups": 0, "events": 1, "attributions": 0, "proposals": 1}
    assert mem.get("proposals", "p1").outcome == "rejected"


def test_similar_cases_filters_and_returns_outcomes_and_deltas(mem):
    mem.add_proposals(
        [
            _proposal("acc", "med-1", 5, "accepted", text="Name the warfarin drug interaction", std=0.12),
            _proposal("rej", "med-2", 6, "rejected", text="Mention warfarin and aspirin interaction", std=-0.01),
            _proposal("samp", "poem-1", 7, "accepted", interface="sampling", failure_type="collapse_high", std=0.3),
            _proposal("other", "sci-1", 8, "fallback", text="Explain photosynthesis light reactions", std=0.0),
        ]
    )
    hits = mem.similar_cases("warfarin interaction hint", k=5, failure_type="collapse_low")
    assert {h.id for h in hits} == {"acc", "rej", "other"}  # both accepted and rejected come back
    assert hits[-1].id == "other"  # no shared words: farthest
    by_id = {h.id: h for h in hits}
    assert by_id["acc"].outcome == "accepted" and by_id["acc"].deltas == {"std": 0.12}
    assert by_id["rej"].outcome == "rejected" and by_id["rej"].deltas == {"std": -0.01}
    assert isinstance(by_id["rej"].record, ProposalRecord) and by_id["rej"].record.reasons == ["rejected by critic"]
    assert [h.id for h in mem.similar_cases("warfarin", interface="sampling")] == ["samp"]
    assert [h.id for h in mem.similar_cases("warfarin", outcome="rejected")] == ["rej"]
    assert {h.id for h in mem.similar_cases("warfarin", failure_type="collapse_low", exclude_task="med-1")} == {
        "rej",
        "other",
    }
    assert mem.similar_cases("warfarin", failure_type="stuffing") == []
    assert len(mem.similar_cases("warfarin", k=2)) == 2


def test_similar_events_and_proposals_for(mem):
    mem.add_events([EventRecord(event=_event("a", "t1", 1, "stuffing")), EventRecord(event=_event("b", "t2", 2))])
    assert [h.id for h in mem.similar_events("stuffing", failure_type="stuffing")] == ["a"]
    mem.add_proposal(_proposal("g", "t1", 3))
    mem.add_proposal(_proposal("s", "t1", 2, interface="sampling"))
    assert [p.proposal_id for p in mem.proposals_for("t1")] == ["s", "g"]
    assert [p.proposal_id for p in mem.proposals_for("t1", interface="guidance")] == ["g"]
    assert mem.proposals_for("nope") == []


def test_run_ids_keep_stores_apart():
    a, b = TrainingMemory.ephemeral(run_id="run-a"), TrainingMemory.ephemeral(run_id="run-b")
    try:
        a.add_event(_event("e1", "t1", 1))
        assert a.count()["events"] == 1 and b.count()["events"] == 0
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("bad", ["", "-x", "a..b", "has space", "x" * 200])
def test_bad_run_id_is_rejected(bad):
    with pytest.raises(ValueError, match="run_id"):
        TrainingMemory.ephemeral(run_id=bad)


def test_closed_store_says_so(mem):
    mem.close()
    with pytest.raises(MemoryStoreError, match="closed"):
        mem.count()


# -- bad folders -----------------------------------------------------------------------------------------------
def _file(tmp: Path) -> Path:
    (tmp / "memory").write_text("not a folder")
    return tmp / "memory"


def _garbage_sqlite(tmp: Path) -> Path:
    (tmp / "memory").mkdir()
    (tmp / "memory" / "chroma.sqlite3").write_bytes(b"garbage" * 200)
    return tmp / "memory"


def _under_a_file(tmp: Path) -> Path:
    (tmp / "f").write_text("x")
    return tmp / "f" / "memory"


@pytest.mark.parametrize(
    "make,match",
    [
        (_file, "is not a folder"),
        (_garbage_sqlite, "cannot be opened by Chroma.*file is not a database.*move the folder aside"),
        (_under_a_file, "cannot create the folder"),
    ],
)
def test_bad_folder_gives_clear_error_naming_the_path(tmp_path, make, match):
    path = make(tmp_path)
    with pytest.raises(MemoryStoreError, match=match) as exc:
        TrainingMemory.persistent(path, embedding="hash")
    assert str(path) in str(exc.value)


def _open_as_unprivileged(path: Path, q) -> None:
    """Forked child: drop to `nobody` (root ignores file permissions), then open the store."""
    os.setgid(65534)
    os.setuid(65534)
    try:
        TrainingMemory.persistent(path, embedding="hash").close()
        q.put("opened")
    except MemoryStoreError as e:
        q.put(f"MemoryStoreError: {e}")
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the test with it
        q.put(f"{type(e).__name__}: {e}")


def test_read_only_folder_gives_clear_error(tmp_path):
    """A folder the process may not write names itself in the error. CI runs as root, which ignores file
    permissions, so there the check runs in a forked child that has dropped to `nobody` (modules are
    imported before the fork, so the child needs no access to the interpreter's files)."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(MemoryStoreError, match=str(ro)):
            TrainingMemory.persistent(ro, embedding="hash")
        return
    import multiprocessing
    import shutil
    import tempfile

    TrainingMemory.persistent(tmp_path / "warm", embedding="hash").close()  # import everything lazily loaded
    base = Path(tempfile.mkdtemp(prefix="harnessrl-ro-"))  # under /tmp, outside pytest's root-only folder
    try:
        base.chmod(0o755)
        ro = base / "ro"
        ro.mkdir()
        os.chown(ro, 65534, 65534)
        ro.chmod(0o500)
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        child = ctx.Process(target=_open_as_unprivileged, args=(ro, q))
        child.start()
        got = q.get(timeout=120)
        child.join(timeout=30)
        assert got.startswith("MemoryStoreError: ") and str(ro) in got, got
        assert "Permission denied" in got, got
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_locked_folder_gives_clear_error_in_this_and_another_process(tmp_path):
    path = tmp_path / "memory"
    with TrainingMemory.persistent(path, embedding="hash"):
        with pytest.raises(MemoryStoreError, match=f"{path} is locked by another open store \\(pid {os.getpid()}\\)"):
            TrainingMemory.persistent(path, embedding="hash")
        r = _run_py(
            "from memory import TrainingMemory, MemoryStoreError\n"
            f"try:\n    TrainingMemory.persistent({str(path)!r}, embedding='hash')\n"
            "except MemoryStoreError as e:\n    print('LOCKED', e)\n"
        )
        assert r.stdout.startswith("LOCKED") and "TrainingMemory.http" in r.stdout, r.stdout + r.stderr
    TrainingMemory.persistent(path, embedding="hash").close()  # released on close


@pytest.mark.parametrize(
    "other,match",
    [
        ("minilm", "Embedding function conflict.*harnessrl-hash"),
        (HashEmbedding(dim=128), 'built with embedding harnessrl-hash {"dim": 256}'),
    ],
)
def test_reopening_with_another_embedding_is_an_error(tmp_path, other, match):
    path = tmp_path / "memory"
    with TrainingMemory.persistent(path, embedding="hash") as m:
        m.add_event(_event("e1", "t1", 1))
    with pytest.raises(MemoryStoreError, match=match):
        TrainingMemory.persistent(path, embedding=other)
    with TrainingMemory.persistent(path, embedding="hash") as m:  # the failed open released the lock
        assert m.count()["events"] == 1


def test_unreachable_server_is_a_clear_error():
    with pytest.raises(MemoryStoreError, match=r"no Chroma server at http://127.0.0.1:9 .*chroma run"):
        TrainingMemory.http("127.0.0.1", 9, embedding="hash")


# -- persistence and snapshots -----------------------------------------------------------------------------------
def test_store_reopened_in_new_process_finds_everything(tmp_path):
    path = tmp_path / "memory"
    with TrainingMemory.persistent(path, embedding="hash", run_id="r1") as m:
        for rec in RECORDS:
            m._put([rec])
        m.add_proposal(_proposal("p2", "med-9", 7, "accepted", text="warfarin bleeding risk"))
        before = m.count()
    code = (
        "import json\nfrom memory import KINDS, TrainingMemory\n"
        f"m = TrainingMemory.persistent({str(path)!r}, embedding='hash', run_id='r1')\n"
        "print(json.dumps({'count': m.count(), 'hist': [r.record_id for r in m.task_history('med-1', kinds=KINDS)],"
        " 'sim': [h.id for h in m.similar_cases('warfarin bleeding', k=1)]}))\n"
        "m.add_event(__import__('harness.types', fromlist=['x']).FailureEvent("
        "id='e-child', type='flat', task_id='med-1', step=99))\n"
        "m.close()\n"
    )
    r = _run_py(code)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["count"] == before == {k: (2 if k == "proposals" else 1) for k in KINDS}
    assert out["hist"] == ["grp:med-1:4:0", "e1", "attr:e1", "p1"]
    assert out["sim"] == ["p2"]
    with TrainingMemory.persistent(path, embedding="hash", run_id="r1") as m:  # and the child's write is back here
        assert m.task_history("med-1", last_n=1)[0].record_id == "e-child"


def test_snapshot_restore_round_trip(tmp_path, mem):
    for rec in RECORDS:
        mem._put([rec])
    snap = mem.snapshot(tmp_path / "snap" / "memory.jsonl")
    assert not list(snap.parent.glob("*.tmp*"))
    other = TrainingMemory.ephemeral()
    try:
        assert other.restore(snap) == {k: 1 for k in KINDS}
        assert other.count() == mem.count()
        assert [r.record_id for r in other.task_history("med-1", kinds=KINDS)] == [
            r.record_id for r in mem.task_history("med-1", kinds=KINDS)
        ]
    finally:
        other.close()


def test_bad_snapshot_row_names_file_and_line(tmp_path, mem):
    snap = mem.snapshot(tmp_path / "memory.jsonl")
    with open(snap, "a") as f:
        f.write('{"kind": "events", "record": {"event": {"id": "x"}}}\n')
    with pytest.raises(MemoryStoreError, match=f"{snap}:2: bad memory snapshot row"):
        mem.restore(snap)
