"""Tests for the benchmark (`benchmarks/compare.py` and its bench_* modules): planning, metric extraction and
the report (fast), plus a smoke run of every arm on the tiny preset through the real trainer (slow-marked,
about a minute on a quiet 2-core box)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from harness.types import INTERFACES

ROOT = Path(__file__).resolve().parents[1]
# benchmarks/ is not a package: its modules import each other by plain name, as when compare.py runs.
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_collect  # noqa: E402
import bench_render  # noqa: E402
import bench_run  # noqa: E402
import bench_spec  # noqa: E402


def _load_compare():
    spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "benchmarks" / "compare.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_compare"] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


compare = _load_compare()


# -- fast ---------------------------------------------------------------------------------------------------
def test_help_teaches_the_main_options(capsys):
    with pytest.raises(SystemExit) as exc:
        compare.main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for opt in ("--preset", "smollm2", "tiny", "--steps", "--seeds", "--arms", "--out", "--jobs"):
        assert opt in text, opt


def test_runs_as_a_script_from_another_directory(tmp_path):
    # How the Makefile, the README and every worker process start it: the bench_* siblings must resolve.
    import subprocess

    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare.py"), "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--preset" in out.stdout


def test_code_snapshot_holds_every_benchmark_module():
    # Workers run the frozen copy in OUT/code: a bench module missing from it would be imported from nowhere.
    modules = {f"benchmarks/{p.name}" for p in (ROOT / "benchmarks").glob("*.py")
               if p.name == "compare.py" or p.name.startswith("bench_")}
    assert modules <= set(bench_run.SNAPSHOT_PATHS)
    assert all((ROOT / p).exists() for p in bench_run.SNAPSHOT_PATHS)


@pytest.mark.parametrize("text, expected", [
    ("key", ["fixed", "dynfilter", "harnessrl"]),
    ("all", list(bench_spec.ARMS)),
    ("harnessrl,fixed,harnessrl", ["harnessrl", "fixed"]),
    ("key,no-critic", ["fixed", "dynfilter", "harnessrl", "no-critic"]),
])
def test_parse_arms(text, expected):
    assert compare.parse_arms(text) == expected


@pytest.mark.parametrize("text", ["bogus", "fixed,nope", ""])
def test_parse_arms_rejects_unknown(text):
    with pytest.raises(Exception, match="unknown arm|empty"):
        compare.parse_arms(text)


@pytest.mark.parametrize("argv, message", [
    (["--preset", "tiny", "--batch", "6", "--group", "4"], "multiple of"),
    (["--preset", "tiny", "--steps", "0"], "--steps must be >= 1"),
])
def test_bad_arguments_say_what_to_fix(argv, message):
    with pytest.raises(SystemExit, match=message):
        compare.resolve_args(compare.build_parser().parse_args(argv))


def _args(tmp_path, *extra):
    return compare.resolve_args(compare.build_parser().parse_args(["--preset", "tiny", "--out", str(tmp_path), *extra]))


def test_plan_orders_key_arms_first_and_shares_the_budget(tmp_path):
    args = _args(tmp_path, "--seeds", "0,1", "--arms", "all", "--steps", "6", "--evolve-every", "2", "--eval-every", "2")
    jobs = bench_run.plan(args)
    names = [j.name for j in jobs]
    assert names[0] == "base"
    # Key arms for seed 0, then seed 1, then ablations (first seed only): a time budget cuts ablations first.
    assert names[1:7] == ["fixed-s0", "dynfilter-s0", "harnessrl-s0", "fixed-s1", "dynfilter-s1", "harnessrl-s1"]
    assert names[7:] == [f"{a}-s0" for a in bench_spec.ARMS if not bench_spec.ARMS[a].key]
    arm_jobs = [j for j in jobs if j.kind == "arm"]
    assert len({tuple(j.eval_tasks) for j in jobs}) == 1  # every model sees the same held-out subset
    for j in arm_jobs:
        assert "train.max_steps=6" in j.overrides and f"train.seed={j.seed}" in j.overrides
        assert j.overrides[-1] == f"run_dir={j.run_dir}"
    fixed = next(j for j in arm_jobs if j.arm == "fixed")
    assert "harness.evolver=false" in fixed.overrides
    nocrit = next(j for j in arm_jobs if j.arm == "no-critic")
    assert nocrit.overrides.index("harness.critic=false") > nocrit.overrides.index("harness.critic=true")


def test_every_arm_resolves_to_a_valid_trainer_config(tmp_path):
    from trainer.config import load_config

    args = _args(tmp_path, "--arms", "all", "--seeds", "3")
    for job in bench_run.plan(args)[1:]:
        cfg = load_config(job.config, job.overrides)
        h = cfg.harness
        assert cfg.train.seed == 3 and cfg.run_dir == job.run_dir
        assert len(cfg.data.tasks) == 10  # the tiny preset's pool: 2 train tasks per domain, the same for every arm
        expect = {
            "fixed": (False, False, 3, True, True), "dynfilter": (False, True, 3, True, True),
            "harnessrl": (True, False, 3, True, True), "no-sampling": (True, False, 2, True, True),
            "no-guidance": (True, False, 2, True, True), "no-criteria": (True, False, 2, True, True),
            "no-memory": (True, False, 3, False, True), "no-critic": (True, False, 3, True, False),
        }[job.arm]
        assert (h.evolver, h.dynamic_filtering, len(h.interfaces), h.memory, h.critic) == expect, job.arm
        if job.arm.startswith("no-") and job.arm[3:] in INTERFACES:
            assert job.arm[3:] not in h.interfaces


@pytest.mark.parametrize("evolve, every, expected", [(2, 4, 2), (4, 4, 4), (3, 4, 1), (4, 2, 2)])
def test_checkpoints_serve_both_the_evolver_and_the_evals(tmp_path, evolve, every, expected):
    args = _args(tmp_path, "--evolve-every", str(evolve), "--eval-every", str(every))
    assert bench_run.save_steps(args) == expected
    job = bench_run.plan(args)[1]
    assert f"train.save_steps={expected}" in job.overrides and job.eval_every == every


def test_eval_subset_is_fixed_and_covers_every_domain():
    suite = str(ROOT / "data" / "rubric-mix-lite")
    a = bench_run.pick_eval_tasks(suite, 2)
    assert a == bench_run.pick_eval_tasks(suite, 2)
    assert len(a) == 10 and len({t.split("-")[0] for t in a}) == 5


def test_length_stats_within_task_correlation():
    result = {"tasks": {"t1": {"scores": [0.5, 1.0]}, "t2": {"scores": [0.0, 0.5]}}}
    # Longer answers score higher inside each task -> +1, although the longer task (t2) scores lower overall.
    pos = bench_run.length_stats(result, [["a", "a b c"], ["a b c d e", "a b c d e f g"]])
    assert pos["length_corr"] == pytest.approx(1.0)
    neg = bench_run.length_stats(result, [["a b c", "a"], ["a b c d e f g", "a b c d e"]])
    assert neg["length_corr"] == pytest.approx(-1.0)
    flat = bench_run.length_stats(result, [["a", "b"], ["c", "d"]])
    assert flat["length_corr"] is None and flat["mean_words"] == 1.0


class _FakePolicy:
    """Stands in for the LLM policy: deterministic responses, counts calls."""

    def __init__(self):
        self.calls = []

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        self.calls.append((len(messages_batch), n, seed))
        return [[f"answer {j} " + "word " * (i + j) for j in range(n)] for i in range(len(messages_batch))]


def test_batched_eval_endpoint_with_the_trainers_evaluate():
    from harness.data import load_suite
    from harness.guidance import render_prompt
    from tools.judge import Judge
    from trainer.evaluate import evaluate

    by_id = {t.id: t for t in load_suite(ROOT / "data" / "rubric-mix-lite") if t.split == "test"}
    tasks = [by_id[t] for t in bench_run.pick_eval_tasks(str(ROOT / "data" / "rubric-mix-lite"), 1)]
    inner = _FakePolicy()
    ep = bench_run.BatchedEvalEndpoint(inner, [render_prompt(t, []) for t in tasks], 3, 16, 1.0, 7)
    res = evaluate(tasks, ep, Judge(), k=3, max_tokens=16, temperature=1.0, seed=7, progress=False)
    assert inner.calls == [(len(tasks), 3, 7)]  # one batched call for every task
    assert [len(r) for r in ep.responses] == [3] * len(tasks) and ep.responses[1][0] == "answer 0 word "
    assert set(res["tasks"]) == {t.id for t in tasks}
    stats = bench_run.length_stats(res, ep.responses)
    assert stats["mean_words"] > 1
    with pytest.raises(RuntimeError, match="does not match"):
        ep.sample([render_prompt(tasks[0], [])], n=3, max_tokens=16, temperature=1.0)  # past the end


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_collect_run_counts_dead_groups_pauses_and_proposals(tmp_path):
    _jsonl(tmp_path / "metrics.jsonl", [
        {"step": 1, "dead_share": 1.0, "n_groups": 2, "pause_s": 0.0, "judge_warnings": 1, "time": 10.0,
         "tasks": ["a", "b"], "reward": 0.2, "hinted_share": 0.0},
        {"step": 2, "dead_share": 0.5, "n_groups": 2, "pause_s": 4.0, "judge_warnings": 0, "time": 20.0,
         "tasks": ["a.v1-x", "b"], "reward": 0.6, "hinted_share": 0.5},
    ])
    _jsonl(tmp_path / "rounds.jsonl", [{"step": 2, "reports": [
        {"interface": "guidance", "decision": "accepted",
         "attempts": [{"reasons": ["std 0.1 -> 0.1", "FAIL: std_gain"]}, {"reasons": ["PASS: std_gain"]}]},
        {"interface": "criteria", "decision": "fallback", "attempts": [{}]},
        {"interface": None, "decision": "skipped", "attempts": []},
    ]}, {"step": 4, "error": "RuntimeError: endpoint down", "reports": []}])
    _jsonl(tmp_path / "events.jsonl", [{"type": "collapse_low"}, {"type": "spurious_length"}, {"type": "stuffing"}])
    (tmp_path / "harness").mkdir()
    _jsonl(tmp_path / "harness" / "updates.jsonl", [
        {"step": 0, "update": {"ops": [{"task_id": "a"}]}},  # rows of steps >= 2 follow it: step 2 draws a.v1
        {"step": 2, "update": {"ops": [{"task_id": "b"}]}},  # no step after 3: never revisited
    ])
    got = bench_collect.collect_run(tmp_path)
    assert got["zero_var_share"] == pytest.approx(0.75)
    assert got["pause_s"] == 4.0 and got["judge_warnings"] == 1 and got["loop_s"] == 10.0
    assert got["per_interface"]["guidance"] == {"proposals": 2, "accepted": 1, "rejected": 1}
    assert got["per_interface"]["criteria"] == {"proposals": 1, "accepted": 0, "rejected": 1}
    assert got["per_interface"]["sampling"] == {"proposals": 0, "accepted": 0, "rejected": 0}
    assert got["fallbacks"] == 1 and got["rounds"] == 2 and got["round_errors"] == 1
    assert got["spurious_events"] == 2
    assert got["critic_fails"] == {"guidance: std_gain": 1}
    assert got["updates"] == 2 and got["updated_task_revisits"] == 1
    assert got["hinted_share"] == pytest.approx(0.25) and got["train_reward_late"] == pytest.approx(0.6)


def _fake_run(arm, seed, curve, zero_var=0.4, pause=5.0, wall=100.0):
    evals = {str(s): {"avg_at_k": sc, "audit": au, "domains": {"medical": {"avg_at_k": sc, "audit": au}},
                      "length_corr": 0.1, "mean_words": 20.0, "seconds": 1.0} for s, sc, au in curve}
    return {"kind": "arm", "name": f"{arm}-s{seed}", "arm": arm, "seed": seed, "train_s": wall, "pause_s": pause,
            "zero_var_share": zero_var, "judge_warnings": 0, "eval_judge_warnings": 0, "rounds": 1, "round_errors": 0,
            "fallbacks": 0, "event_types": {}, "spurious_events": 0, "steps": [{"step": 1, "dead_share": zero_var}],
            "per_interface": {i: {"proposals": 1, "accepted": 1, "rejected": 0} for i in INTERFACES},
            "summary": {"harness_version": 1}, "evals": evals}


def test_summaries_and_targets():
    base = {"eval": {"avg_at_k": 0.30, "audit": 0.40, "length_corr": 0.0, "mean_words": 25.0,
                     "domains": {"medical": {"avg_at_k": 0.30, "audit": 0.40}}}}
    fixed = _fake_run("fixed", 0, [(4, 0.32, 0.40), (8, 0.36, 0.41), (12, 0.35, 0.42)], zero_var=0.4, pause=0.0)
    h = _fake_run("harnessrl", 0, [(4, 0.37, 0.45), (8, 0.36, 0.46), (12, 0.38, 0.47)], zero_var=0.1, pause=5.0)
    by_arm = {"fixed": [fixed], "harnessrl": [h]}
    for r in (fixed, h):
        r["summary"] = bench_collect.run_summary(r, base)
    fs = fixed["summary"]
    assert (fs["best_step"], fs["best_score"]) == (8, pytest.approx(36.0))
    assert fs["gap_growth"] == pytest.approx((35.0 - 42.0) - (30.0 - 40.0))
    assert fs["curve"][0] == (0, pytest.approx(30.0), pytest.approx(40.0))  # base is step 0
    arms = {a: bench_collect.arm_summary(rs) for a, rs in by_arm.items()}
    rows = {r["target"]: r for r in bench_collect.targets(by_arm, arms)}
    audit = rows["audit(harnessrl) - audit(fixed) >= 3 points (final checkpoint)"]
    assert audit["value"] == pytest.approx(5.0) and audit["met"] is True
    steps = rows["harnessrl reaches fixed's best held-out score in <= 60% of fixed's steps"]
    assert steps["value"] == pytest.approx(0.5) and steps["met"] is True  # step 4 of fixed's 8
    assert rows["zero-variance share(harnessrl) <= 0.5 x share(fixed)"]["value"] == pytest.approx(0.25)
    assert rows["evolver pause <= 10% of harnessrl wall time"]["met"] is True
    assert rows["audit(harnessrl) - audit(dynfilter) >= 3 points (final checkpoint)"]["met"] is None  # not run
    paired = bench_collect.paired_vs_fixed([fixed, h])
    assert paired == {"harnessrl": {"seeds": [0], "score": [pytest.approx(3.0)], "audit": [pytest.approx(5.0)]}}


def test_render_keeps_the_hand_written_analysis(tmp_path):
    report = tmp_path / "RESULTS.md"
    report.write_text(f"old\n{bench_render.ANALYSIS_BEGIN}\n## Analysis\nkept text\n{bench_render.ANALYSIS_END}\n")
    results = {"preset": "tiny", "command": "cmd", "started": "s", "finished": "f", "runtime_s": 60.0, "jobs": 1,
               "git": {"head": "abc1234", "changed_files": 3},
               "status": {"base": "done"}, "base": None, "runs": [], "arms": {}, "targets": [], "plots": [],
               "plot_dir": str(tmp_path / "plots"),
               "budget": {"config": "c", "steps": 2, "batch": 8, "group": 4, "evolve_every": 1, "eval_every": 1,
                          "eval_tasks": ["a"], "eval_per_domain": 1, "eval_k": 2, "max_tokens": 16, "eval_seed": 1,
                          "seeds": [0], "ablation_seeds": [0]}}
    text = bench_render.render(results, report)
    assert "kept text" in text and "(not written yet)" not in text


# -- slow: the real trainer, every arm ---------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_smoke_every_arm(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out, report = tmp_path / "bench", tmp_path / "report" / "RESULTS.md"
    rc = compare.main(["--preset", "tiny", "--steps", "2", "--arms", "all", "--seeds", "0", "--jobs", "0",
                       "--out", str(out), "--report", str(report)])
    assert rc == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["arms"]) == set(bench_spec.ARMS)
    assert all(v == "done" for v in results["status"].values()), results["status"]
    text = report.read_text()
    table = text.split("## Main table")[1].split("##")[0]
    for arm in bench_spec.ARMS.values():
        assert re.search(rf"^\| {re.escape(arm.label)} \| 1 \| \d", table, re.M), arm.label
    for png in ("heldout.png", "zero_variance.png"):
        assert (report.parent / "plots" / png).stat().st_size > 1000
    for run in results["runs"]:
        s = run["summary"]
        assert [c[0] for c in s["curve"]] == [0, 1, 2]  # base + a checkpoint per step
        for _, score, audit in s["curve"]:
            assert 0.0 <= score <= 100.0 and 0.0 <= audit <= 100.0
        assert 0.0 <= s["zero_var_share"] <= 1.0 and s["wall_s"] > 0 and 0.0 <= s["pause_share"] < 1.0
        evolves = bench_spec.ARMS[run["arm"]].overrides[0] == "harness.evolver=true"
        assert (s["rounds"] >= 1) == evolves, run["name"]
        if not evolves:
            assert s["harness_version"] == 0 and s["pause_s"] == 0
        off = run["arm"][3:] if run["arm"].startswith("no-") else None
        if off in INTERFACES:
            assert s["per_interface"][off]["proposals"] == 0, run["name"]
        if run["arm"] == "no-sampling":
            assert s["fallbacks"] == 0  # the fallback is a sampling change: off with the interface
