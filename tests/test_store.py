"""harness.store: versions on disk, append-only log, diffs, rejected commits, and a SIGKILLed writer."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.ops import UpdateRejected
from harness.store import HarnessStore, StoreCorrupt
from harness.types import OP_INTERFACE, HarnessUpdate
from tests.support.harness_factories import crit, state

REPO = Path(__file__).resolve().parents[1]


def upd(*ops: dict) -> HarnessUpdate:
    return HarnessUpdate.model_validate(
        {"interface": OP_INTERFACE[ops[0]["op"]], "ops": list(ops), "rationale": "test"}
    )


@pytest.fixture
def store(tmp_path: Path) -> HarnessStore:
    s = HarnessStore(tmp_path / "harness")
    s.init(state())
    return s


def test_init_commit_load_history(store: HarnessStore) -> None:
    assert store.versions() == [0] and store.latest().version == 0
    s1 = store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 2}), step=5, meta={"delta_std": 0.1})
    s2 = store.commit(upd({"op": "add_hint", "task_id": "med-002", "hint": {"id": "h1", "text": "Be brief."}}), step=9)
    assert store.versions() == [0, 1, 2]
    assert store.latest() == s2 and store.load(1) == s1 and s1.step == 5
    assert store.path(2).name == "v000002.json"
    hist = store.history()
    assert [(r.version, r.parent_version, r.step) for r in hist] == [(1, 0, 5), (2, 1, 9)]
    assert hist[0].meta == {"delta_std": 0.1} and hist[0].update.ops[0].op == "reweight"
    lines = store.updates_path.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["version"] == 2
    with pytest.raises(FileExistsError, match="already initialised"):
        store.init(state())


def test_rejected_commit_leaves_store_unchanged(store: HarnessStore) -> None:
    store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 2}))
    files = {p.name: p.read_bytes() for p in store.root.rglob("*") if p.is_file()}
    with pytest.raises(UpdateRejected, match=r"ops\[0\] \(remove_criterion\)\.criterion_id"):
        store.commit(upd({"op": "remove_criterion", "task_id": "med-002", "criterion_id": "only"}))
    assert {p.name: p.read_bytes() for p in store.root.rglob("*") if p.is_file()} == files


def test_missing_and_corrupt_versions_name_the_path(store: HarnessStore) -> None:
    with pytest.raises(FileNotFoundError, match=r"harness version 7 not found: .*v000007\.json"):
        store.load(7)
    store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 2}))
    store.path(1).write_text('{"version": 1, "tasks": ')
    with pytest.raises(StoreCorrupt, match=r"v000001\.json: not a valid harness state"):
        store.latest()
    store.path(1).write_text(store.load(0).model_dump_json())
    with pytest.raises(StoreCorrupt, match="holds version 0, expected 1"):
        store.load(1)
    with pytest.raises(FileNotFoundError, match="no versions"):
        HarnessStore(store.root / "empty").latest()


def test_torn_last_log_line_warns_then_is_moved_aside(store: HarnessStore) -> None:
    store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 2}))
    with open(store.updates_path, "ab") as f:
        f.write(b'{"version": 2, "parent_ver')
    with pytest.warns(RuntimeWarning, match=r"updates\.jsonl:2: torn last line"):
        assert [r.version for r in store.history()] == [1]
    with pytest.warns(RuntimeWarning, match="moved to"):
        store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 3}))
    assert [r.version for r in store.history()] == [1, 2]
    assert store.updates_path.with_name("updates.jsonl.torn").read_bytes().startswith(b'{"version": 2')


def test_bad_line_in_the_middle_is_corruption(store: HarnessStore) -> None:
    store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 2}))
    store.updates_path.write_text("not json\n" + store.updates_path.read_text())
    with pytest.raises(StoreCorrupt, match=r"updates\.jsonl:1: invalid update record"):
        store.history()


def test_orphaned_version_gets_a_recovery_record(store: HarnessStore) -> None:
    store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 2}))
    store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 3}))
    # Simulate a crash after the version file was renamed into place but before its log line.
    lines = store.updates_path.read_text().splitlines(keepends=True)
    store.updates_path.write_text(lines[0])
    with pytest.warns(RuntimeWarning, match="no record"):
        store.commit(upd({"op": "reweight", "task_id": "med-001", "weight": 4}))
    hist = store.history()
    assert [(r.version, r.update is None) for r in hist] == [(1, False), (2, True), (3, False)]
    assert hist[1].meta == {"recovered": True}


def test_diff_lines(store: HarnessStore) -> None:
    store.commit(
        upd(
            {"op": "reweight", "task_id": "med-001", "weight": 0.5},
            {"op": "retire", "task_id": "med-002"},
            {
                "op": "add_variant",
                "task_id": "med-003",
                "variant_id": "med-003-v1",
                "prompt": [{"role": "user", "content": "Harder version?"}],
            },
        )
    )
    store.commit(
        upd(
            {"op": "add_hint", "task_id": "med-001", "hint": {"id": "h1", "text": "Mention water."}},
            {"op": "set_schedule", "task_id": "med-001", "schedule": {"mode": "constant"}},
        )
    )
    store.commit(
        upd(
            {"op": "remove_criterion", "task_id": "med-001", "criterion_id": "c2"},
            {"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "p1", "weight": -5},
            {"op": "add_criterion", "task_id": "med-001", "criterion": crit("c7", 1, "optional").model_dump()},
        )
    )
    d = store.diff(0, 3)
    assert "variants: + med-003-v1 (parent med-003, 3 criteria)" in d
    assert "sampling med-001: weight 1 -> 0.5" in d
    assert "sampling med-002: status active -> retired" in d
    assert "sampling med-003-v1: + weight 1, active" in d
    assert "guidance med-001: + hint h1 'Mention water.'" in d
    assert any(x.startswith("guidance med-001: schedule") for x in d)
    assert any(x.startswith("criteria med-001: - c2 [important 3") for x in d)
    assert any(x.startswith("criteria med-001: + c7 [optional 1]") for x in d)
    assert any(x.startswith("criteria med-001: ~ p1 [pitfall -3") and "-> p1 [pitfall -5" in x for x in d)
    assert store.diff(3, 3) == []
    assert store.diff(1, 0) and all("+ med-003-v1" not in x for x in store.diff(1, 0))


WRITER = """
import sys
from harness.store import HarnessStore
from harness.types import HarnessUpdate
store = HarnessStore(sys.argv[1])
i = 0
while True:
    i += 1
    w = float(1 + i % 5)
    store.commit(
        HarnessUpdate(interface="sampling", ops=[{"op": "reweight", "task_id": "med-001", "weight": w}]), step=i
    )
"""


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_killed_writer_leaves_a_loadable_store(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "harness"
    store = HarnessStore(root)
    store.init(state())
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(store.versions()) < 4:  # let it commit a few times, then kill it at a random moment
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "writer died"
            assert time.monotonic() < deadline, "writer made no progress"
            time.sleep(0.01)
        time.sleep(random.Random(seed).uniform(0.0, 0.2))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    versions = store.versions()
    assert versions == list(range(len(versions)))  # contiguous, nothing half-visible
    for v in versions:
        assert store.load(v).version == v  # every version file is complete, valid JSON
    latest = store.latest()
    logged = [r.version for r in store.history()]
    assert logged == list(range(1, len(logged) + 1)) and len(logged) >= len(versions) - 2
    # The store keeps working: the next commit sweeps temp files and logs any orphaned version.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        new = store.commit(upd({"op": "reweight", "task_id": "med-002", "weight": 2}), step=10_000)
    assert new.version == latest.version + 1
    assert [r.version for r in store.history()] == list(range(1, new.version + 1))
    assert not list(store.versions_dir.glob(".*.tmp"))
