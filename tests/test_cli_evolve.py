"""`harnessrl evolve` on the recorded snapshot, then `harnessrl trace` on its checkpoints.

Fast path: the frozen policy is the OpenAI stub server over real HTTP (`openai:<url>#stub`). Slow
path: the tiny model through `LocalEndpoint` (k=4, 16 tokens). Also: a used run folder is refused (the
snapshot's version is no longer the latest), and usage errors. Replaying a training run's round
(`--step N`) is tested in test_replay.py.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from agents.repair_ladder import climb_of
from trainer.cli import main

SNAPSHOT = Path(__file__).parent / "fixtures" / "evolver_snapshot"
HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."


def test_evolve_snapshot_then_trace(tmp_path, openai_stub, capsys):
    counter = itertools.count()
    openai_stub.responder = lambda request: "water water water water water rest" if next(counter) % 2 else HONEST
    run_dir = tmp_path / "run"
    rc = main(
        [
            "evolve",
            str(SNAPSHOT),
            "--run-dir",
            str(run_dir),
            "--policy",
            f"openai:{openai_stub.base_url}#stub",
            "--sample-k",
            "4",
            "--sample-k-max",
            "4",
            "--max-tokens",
            "16",
            "--thread",
            "t1",
            "--json",
            str(tmp_path / "out.json"),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "snap-stuffing-med-1" in printed and "accepted:" in printed
    out = json.loads((tmp_path / "out.json").read_text())
    by_event = {r["event_id"]: r for r in out["reports"]}
    assert set(by_event) == {"snap-stuffing-med-1", "snap-low-med-2", "snap-high-geo-1"}
    # Half the rollouts stuff "water" and fail the audit: tightening the criterion is measured and accepted.
    assert by_event["snap-stuffing-med-1"]["decision"] == "accepted"
    numbers = by_event["snap-stuffing-med-1"]["attempts"][-1]["critique"]["numbers"]
    assert numbers["gamed_drop"] > 0.1 and numbers["k"] == 4
    assert out["harness_version"] == sum(1 for r in out["reports"] if r["committed_version"])
    # The fixture itself is untouched: the run works on its own copy.
    assert sorted(p.name for p in (SNAPSHOT / "harness" / "versions").iterdir()) == ["v000000.json"]

    page = tmp_path / "trace.html"
    assert main(["trace", str(run_dir), "--thread", "t1", "--out", str(page)]) == 0
    text = page.read_text()
    assert "<svg" in text and "graph TD" in text  # drawn locally + mermaid source
    for needle in ("gather_evidence", "critique", "fallback", "snap-stuffing-med-1", "gamed_drop"):
        assert needle in text
    assert "<script" not in text and "cdn" not in text.lower()
    # Decisions: each attempt row carries its own outcome; the event's final decision appears once per event.
    decisions = text[text.index("<h2>Decisions</h2>") : text.index("<h2>Steps</h2>")]
    fell_back = [r for r in out["reports"] if r["decision"] == "fallback"]
    assert fell_back and all(len(r["attempts"]) > 1 for r in fell_back)
    # Every attempt but an event's last was refused and revised (a fallback's, or a rejection's the ladder deferred).
    assert decisions.count("rejected → revised") == sum(len(r["attempts"]) - 1 for r in out["reports"])
    for r in fell_back:
        assert decisions.count(f"rejected → fallback v{r['committed_version']}") == 1
        assert decisions.count(f"<b>fallback v{r['committed_version']}</b>") == 1
    assert f"accepted v{by_event['snap-stuffing-med-1']['committed_version']}</td>" in decisions


def test_trace_unknown_thread_is_a_clear_error(tmp_path, openai_stub):
    openai_stub.responder = lambda request: HONEST
    run_dir = tmp_path / "run"
    main(
        [
            "evolve",
            str(SNAPSHOT),
            "--run-dir",
            str(run_dir),
            "--policy",
            f"openai:{openai_stub.base_url}#stub",
            "--sample-k",
            "2",
            "--sample-k-max",
            "2",
            "--max-revisions",
            "0",
            "--thread",
            "t1",
        ]
    )
    with pytest.raises(ValueError, match="thread 'nope' has no checkpoints"):
        main(["trace", str(run_dir), "--thread", "nope", "--out", str(tmp_path / "x.html")])


@pytest.mark.slow
def test_evolve_with_tiny_model_on_local_endpoint(tmp_path, tiny_model_dir, capsys):
    run_dir = tmp_path / "run"
    rc = main(
        [
            "evolve",
            str(SNAPSHOT),
            "--run-dir",
            str(run_dir),
            "--policy",
            f"local:{tiny_model_dir}",
            "--sample-k",
            "4",
            "--sample-k-max",
            "4",
            "--max-tokens",
            "16",
            "--max-revisions",
            "0",
            "--memory-location",
            str(tmp_path / "mem"),
            "--memory-embedding",
            "hash",
            "--thread",
            "tiny",
            "--json",
            str(tmp_path / "out.json"),
        ]
    )
    assert rc == 0
    out = json.loads((tmp_path / "out.json").read_text())
    # A dead task's event may climb its repair ladder within the round (`<id>:hop1`, one more report).
    assert len([r for r in out["reports"] if not climb_of(r["event_id"])[1]]) == 3
    for r in out["reports"]:
        assert r["decision"] in ("accepted", "fallback", "rejected")
        # --max-revisions 0: one attempt costs the event's only revision; candidates that change no score are
        # refused for free before it (agents/decisions.py), so they may come first.
        *free, attempt = r["attempts"]
        assert all(a["critique"]["no_effect"] and a["measurement"]["k"] == 4 for a in free)
        if attempt["critique"]["invalid"]:  # the rule brain ran out of templates after the free refusals
            assert free and attempt["update"] is None and attempt["measurement"] is None
        else:
            assert attempt["measurement"]["k"] == 4 and attempt["critique"]["measured"]


def test_second_run_on_a_used_run_dir_is_refused_not_run_on_the_newer_harness(tmp_path, openai_stub):
    # The snapshot's events are about v0; after a first run committed v1.. the store is past it.
    openai_stub.responder = lambda request: (
        "water water water water water rest" if len(openai_stub.requests) % 2 else HONEST
    )
    run_dir = tmp_path / "run"
    args = [
        "evolve",
        str(SNAPSHOT),
        "--run-dir",
        str(run_dir),
        "--policy",
        f"openai:{openai_stub.base_url}#stub",
        "--sample-k",
        "4",
        "--sample-k-max",
        "4",
        "--max-tokens",
        "16",
    ]
    assert main(args) == 0
    from harness.store import HarnessStore

    latest = HarnessStore(run_dir / "harness").latest().version
    assert latest > 0
    with pytest.raises(
        ValueError, match=rf"harness_version=0, but the harness store .* is at v{latest}.*new --run-dir"
    ):
        main(args)
    assert HarnessStore(run_dir / "harness").latest().version == latest


def test_usage_errors_name_the_fix(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "rounds.jsonl").write_text("")
    assert main(["evolve", str(run)]) == 2
    assert "pass --step N" in capsys.readouterr().err
    assert (
        main(
            [
                "evolve",
                str(SNAPSHOT),
                "--run-dir",
                str(tmp_path / "r"),
                "--policy",
                "openai:http://x/v1#m",
                "--proposer-model",
                "rules,openai:m",
            ]
        )
        == 2
    )
    assert "one brain set; got 2" in capsys.readouterr().err
    assert main(["evolve", str(run), "--step", "2", "--thread", "t"]) == 2
    assert "--thread only apply to a snapshot" in capsys.readouterr().err
    assert main(["evolve", str(run), "--step", "2"]) == 1  # one line naming the file, not a traceback
    assert "rounds.jsonl: no evolver round at step 2" in capsys.readouterr().err
