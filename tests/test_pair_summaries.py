"""benchmarks/pair_summaries.py: paired held-out differences across sittings, on hand-made job summaries."""

from __future__ import annotations

import json

import pytest

from benchmarks.pair_summaries import load_runs, main, pair, reach


def _summary(folder, arm, seed, scores, code="aaaa", steps=(40,)):
    """A job summary whose held-out tasks t0.. score `scores` (0-1) at each step in `steps`."""
    tasks = {f"t{i}": {"audit": v, "avg": v / 2} for i, v in enumerate(scores)}
    s = {"kind": "arm", "arm": arm, "seed": seed, "code": {"code_hash": code * 4}, "evals": {}}
    for st in steps:
        s["evals"][str(st)] = {"tasks": tasks}
    _totals(s)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{arm}-s{seed}.json").write_text(json.dumps(s))


def _totals(s):
    for e in s["evals"].values():
        v = [t["audit"] for t in e["tasks"].values()] or [0.0]
        e["audit"], e["avg_at_k"] = sum(v) / len(v), sum(v) / len(v) / 2


def _curve(folder, arm, seed, audit_by_step):
    """A summary with one held-out task whose audit is `audit_by_step[step]` (0-1)."""
    s = {"kind": "arm", "arm": arm, "seed": seed, "code": {"code_hash": "c" * 16}, "evals": {}}
    s["evals"] = {str(st): {"tasks": {"t0": {"audit": v, "avg": v / 2}}} for st, v in audit_by_step.items()}
    _totals(s)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{arm}-s{seed}.json").write_text(json.dumps(s))


def test_reach_counts_steps_to_the_references_best_on_seeds_with_curves(tmp_path):
    _curve(tmp_path, "fixed", 0, {8: 0.70, 16: 0.80, 24: 0.80, 40: 0.75})  # best 80 at 16 (ties: the earliest)
    _curve(tmp_path, "harnessrl", 0, {8: 0.79, 16: 0.81, 40: 0.70})
    _curve(tmp_path, "fixed", 1, {8: 0.70, 40: 0.90})
    _curve(tmp_path, "harnessrl", 1, {8: 0.70, 40: 0.85})  # never reaches 90
    _curve(tmp_path, "fixed", 2, {8: 0.70, 40: 0.90})
    _curve(tmp_path, "harnessrl", 2, {40: 0.95})  # final step only: no curve, left out
    arms = load_runs([f"harnessrl={tmp_path}/harnessrl-*.json", f"fixed={tmp_path}/fixed-*.json"])
    r = reach(arms, "harnessrl", "fixed", "audit")
    assert [x["seed"] for x in r["seeds"]] == [0, 1]
    assert (r["seeds"][0]["ref_best_step"], r["seeds"][0]["reached_at"], r["seeds"][0]["ratio"]) == (16, 16, 1.0)
    assert r["seeds"][1]["reached_at"] is None and r["seeds"][1]["ratio"] is None and r["mean_ratio"] is None
    assert reach(arms, "harnessrl", "fixed", "avg")["seeds"][0]["ref_best"] == pytest.approx(40.0)
    assert reach(arms, "harnessrl", "nobody", "audit") is None


def test_pairs_by_seed_and_task_with_each_numbers_code(tmp_path):
    _summary(tmp_path / "new", "harnessrl", 0, [0.9, 0.7], code="bbbb")
    _summary(tmp_path / "new", "harnessrl", 1, [0.8, 0.8], code="bbbb")
    _summary(tmp_path / "old", "fixed", 0, [0.8, 0.6], steps=(20, 40))
    _summary(tmp_path / "old", "fixed", 1, [0.8, 0.6], steps=(20, 40))
    _summary(tmp_path / "old", "fixed", 2, [0.1, 0.1])  # a seed HarnessRL did not run: left out
    arms = load_runs([f"harnessrl={tmp_path}/new/harnessrl-s*.json", f"fixed={tmp_path}/old/fixed-s*.json"])
    p = pair(arms, "harnessrl", "fixed", None, "audit")
    assert [r["seed"] for r in p["seeds"]] == [0, 1]
    assert [r["diff"] for r in p["seeds"]] == pytest.approx([10.0, 10.0])  # points, mean over tasks
    assert p["seeds"][0]["code"] == ["bbbbbbbbbbbb", "aaaaaaaaaaaa"] and p["seeds"][0]["steps"] == [40, 40]
    assert p["mean"] == pytest.approx(10.0) and p["sd"] == pytest.approx(0.0) and p["power_delta2"] is None
    assert pair(arms, "harnessrl", "fixed", 20, "avg")["seeds"][1]["steps"] == [40, 20]


def test_refuses_a_missing_step_a_doubled_seed_and_an_empty_glob(tmp_path):
    _summary(tmp_path / "a", "fixed", 0, [0.5])
    _summary(tmp_path / "b", "fixed", 0, [0.5])
    with pytest.raises(SystemExit, match="seed 0 is in two files"):
        load_runs([f"fixed={tmp_path}/a/*.json", f"fixed={tmp_path}/b/*.json"])
    with pytest.raises(SystemExit, match="no file matches"):
        load_runs([f"fixed={tmp_path}/none/*.json"])
    arms = load_runs([f"fixed={tmp_path}/a/*.json", f"other={tmp_path}/b/*.json"])
    with pytest.raises(SystemExit, match="no eval at step 8"):
        pair(arms, "fixed", "other", 8, "audit")
    _summary(tmp_path / "c", "fixed", 0, [])  # an eval without per-task numbers: nothing to pair
    arms = load_runs([f"fixed={tmp_path}/a/*.json", f"other={tmp_path}/c/*.json"])
    with pytest.raises(SystemExit, match="share no held-out task"):
        pair(arms, "fixed", "other", None, "audit")


def test_the_cli_writes_every_pair_and_metric(tmp_path, capsys):
    for sd, (h, f) in enumerate([(0.9, 0.8), (0.7, 0.8), (0.9, 0.6)]):
        _summary(tmp_path, "harnessrl", sd, [h, h])
        _summary(tmp_path, "fixed", sd, [f, f])
    out = tmp_path / "pairs.json"
    argv = ["--runs", f"harnessrl={tmp_path}/harnessrl-*.json", "--runs", f"fixed={tmp_path}/fixed-*.json"]
    assert main([*argv, "--pair", "harnessrl:fixed", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert [(p["pair"], p["metric"]) for p in got["pairs"]] == [
        ("harnessrl - fixed", "audit"),
        ("harnessrl - fixed", "avg"),
    ]
    audit = got["pairs"][0]
    assert audit["mean"] == pytest.approx(10.0) and audit["t95"][0] < audit["mean"] < audit["t95"][1]
    assert 0.0 < audit["power_delta2"] < 1.0
    assert "harnessrl - fixed (audit): +10.00" in capsys.readouterr().out


def test_the_second_heldout_set_pairs_only_where_both_have_it(tmp_path):
    for sd in (0, 1):
        _summary(tmp_path, "harnessrl", sd, [0.9, 0.9])
        _summary(tmp_path, "fixed", sd, [0.8, 0.8])
    for name, sd, v in (("harnessrl", 0, 0.5), ("fixed", 0, 0.7), ("harnessrl", 1, 0.5)):  # fixed-s1 lacks the set
        f = tmp_path / f"{name}-s{sd}.json"
        s = json.loads(f.read_text())
        s["evals"]["40"]["train_heldout"] = {"tasks": {"x0": {"audit": v, "avg": v}, "x1": {"audit": v, "avg": v}}}
        f.write_text(json.dumps(s))
    arms = load_runs([f"harnessrl={tmp_path}/harnessrl-*.json", f"fixed={tmp_path}/fixed-*.json"])
    test = pair(arms, "harnessrl", "fixed", None, "audit")
    train = pair(arms, "harnessrl", "fixed", None, "audit", "train")
    assert [r["seed"] for r in test["seeds"]] == [0, 1] and test["mean"] == pytest.approx(10.0)
    assert [r["seed"] for r in train["seeds"]] == [0] and train["mean"] == pytest.approx(-20.0)
    assert train["heldout"] == "train" and test["heldout"] == "test"
    _summary(tmp_path / "none", "skip", 0, [0.5, 0.5])
    arms = load_runs([f"harnessrl={tmp_path}/harnessrl-*.json", f"skip={tmp_path}/none/skip-*.json"])
    assert pair(arms, "harnessrl", "skip", None, "audit", "train") is None
