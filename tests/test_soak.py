"""The soak benchmark's analysis: slopes per half, the run folder's parts, rendering old and new summaries."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ is not a package: its modules are imported by plain name, as when the script runs.
sys.path.insert(0, str(ROOT / "benchmarks"))

import soak  # noqa: E402


@pytest.mark.parametrize(
    ("series", "first", "second"),
    [
        ([(s, 2.0 * s) for s in range(1, 301)], 200.0, 200.0),  # linear: the same slope in both halves
        ([(s, 5.0) for s in range(1, 301)], 0.0, 0.0),  # flat
        ([(s, s * s / 100) for s in range(1, 301)], 150.0, 450.0),  # quadratic: the second half grows 3x faster
    ],
)
def test_growth_tells_linear_from_faster(series, first, second):
    g = soak.growth(series, steps=300)
    assert g["first_half"] == pytest.approx(first, rel=0.02, abs=1e-9)
    assert g["second_half"] == pytest.approx(second, rel=0.02, abs=1e-9)


def test_too_few_points_give_no_slope():
    assert soak.growth([(1, 1.0), (200, 3.0)], steps=300) == {"first_half": None, "second_half": None, "whole": None}


def test_the_run_folder_is_split_into_its_parts(tmp_path):
    for rel, size in [
        ("checkpoints/checkpoint-2/optimizer.pt", 2**20),
        ("memory/chroma.sqlite3", 2**19),
        ("harness/versions/v1.json", 2**18),
        ("evolver.sqlite", 2**17),
        ("metrics.jsonl", 2**16),
        ("config.yaml", 2**15),
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x" * size)
    d = soak._disk(tmp_path)
    assert d["checkpoints_mb"] == 1.0 and d["memory_mb"] == 0.5 and d["harness_mb"] == 0.25
    assert d["evolver_db_mb"] == 0.125 and d["logs_mb"] == 0.0625 and d["other_mb"] == 0.03125
    assert d["total_mb"] == pytest.approx(sum(v for k, v in d.items() if k != "total_mb"))


def test_a_summary_renders_and_one_without_newer_series_still_does():
    samples = [
        {
            "step": s,
            "rss_mb": 900.0 + s,
            "open_fds": 40,
            "threads": 20,
            "total_mb": s / 2,
            **{f"{p}_mb": 1.0 for p in soak.PARTS},
        }
        for s in range(1, 41)
    ]
    probes = [{"step": s, "records": 10 * s, "task_history_ms": 2.0, "similar_cases_ms": 3.0} for s in (10, 20, 30, 40)]
    summary = soak.summarise(samples, [{"step": 20, "pause_s": 5.0}], probes, steps=40)
    result = {
        "name": "t",
        "steps": 40,
        "config": "configs/tiny.yaml",
        "command": "benchmarks/soak.py --name t",
        "wall_s": 60.0,
        "machine": "x",
        "load_before": [1.0, 1.0, 1.0],
        "load_after": [1.0, 1.0, 1.0],
        "summary": summary,
    }
    text = soak.render([result])
    assert "| RSS (MB) | 901.0 | 940.0 | 100.00 | 100.00 |" in text
    assert "evolver.sqlite (MB)" in text
    del summary["evolver_db_mb"], summary["harness_mb"]  # as in a summary written before they were recorded
    old = soak.render([result])
    assert "evolver.sqlite" not in old and "| memory records |" in old


def test_write_refuses_a_document_without_markers(tmp_path):
    doc = tmp_path / "SOAK.md"
    doc.write_text("# Soak\n\nno markers here\n")
    with pytest.raises(SystemExit, match="markers"):
        soak.write(doc)
    assert doc.read_text() == "# Soak\n\nno markers here\n"


def test_a_checkpoints_memory_snapshot_is_probed_once(tmp_path, capsys):
    """The probe restores a checkpoint's `memory.jsonl` with the run's own embedding and times the evolver's queries;
    a checkpoint already probed is not probed again (the last one is probed after the trainer exits)."""
    from memory import TrainingMemory
    from memory.records import GroupSummary

    (tmp_path / "config.yaml").write_text("evolver:\n  memory_embedding: hash\n")
    snap = tmp_path / "checkpoints" / "checkpoint-4" / "memory.jsonl"
    snap.parent.mkdir(parents=True)
    store = TrainingMemory.ephemeral(embedding="hash")
    for step in range(1, 5):
        stats = {"task_id": f"t-{step % 2}", "step": step, "n": 4, "mean": 0.5, "std": 0.1, "hinted": False}
        store.add_group(GroupSummary.from_stats(stats, domain="medical", texts=["a", "b", "c", "d"]))
    store.snapshot(snap)
    store.close()
    probed: set[str] = set()
    probes: list[dict] = []
    sample = {"rss_mb": 900.0, "total_mb": 3.0}
    soak._probe_new_checkpoints(tmp_path, probed, probes, sample)
    soak._probe_new_checkpoints(tmp_path, probed, probes, sample)
    (p,) = probes
    assert p["step"] == 4 and p["records"] == 4 and p["per_kind"]["groups"] == 4
    assert p["task_history_ms"] > 0 and p["similar_cases_ms"] > 0
    assert capsys.readouterr().out.count("soak: step 4:") == 1
