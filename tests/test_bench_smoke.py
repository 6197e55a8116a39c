"""Tests for the benchmark (`benchmarks/compare.py` and its bench_* modules): planning, metric extraction and
the report (fast), plus a smoke run of every arm on the tiny preset through the real trainer (slow-marked,
about a minute on a quiet 2-core box)."""

from __future__ import annotations

import dataclasses
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

import bench_code  # noqa: E402
import bench_collect  # noqa: E402
import bench_eval  # noqa: E402
import bench_render  # noqa: E402
import bench_run  # noqa: E402
import bench_spec  # noqa: E402
import bench_stats  # noqa: E402
import bench_tables  # noqa: E402


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

    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare.py"), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "--preset" in out.stdout


def test_code_snapshot_holds_every_benchmark_module():
    # Workers run the frozen copy in OUT/code: a bench module missing from it would be imported from nowhere.
    modules = {
        f"benchmarks/{p.name}"
        for p in (ROOT / "benchmarks").glob("*.py")
        if p.name == "compare.py" or p.name.startswith("bench_")
    }
    assert modules <= set(bench_code.SNAPSHOT_PATHS)
    assert all((ROOT / p).exists() for p in bench_code.SNAPSHOT_PATHS)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("key", ["fixed", "dapo", "harnessrl", "harnessrl-dapo", "fixed-norm", "skip"]),
        ("all", list(bench_spec.ARMS)),
        ("harnessrl,fixed,harnessrl", ["harnessrl", "fixed"]),
        ("key,no-critic", ["fixed", "dapo", "harnessrl", "harnessrl-dapo", "fixed-norm", "skip", "no-critic"]),
    ],
)
def test_parse_arms(text, expected):
    assert compare.parse_arms(text) == expected


@pytest.mark.parametrize("text", ["bogus", "fixed,nope", ""])
def test_parse_arms_rejects_unknown(text):
    with pytest.raises(Exception, match="unknown arm|empty"):
        compare.parse_arms(text)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--preset", "tiny", "--batch", "6", "--group", "4"], "multiple of"),
        (["--preset", "tiny", "--steps", "0"], "--steps must be >= 1"),
        (["--preset", "tiny", "--ifeval-max-tokens", "-1"], "--ifeval-max-tokens must be >= 0"),
    ],
)
def test_bad_arguments_say_what_to_fix(argv, message):
    with pytest.raises(SystemExit, match=message):
        compare.resolve_args(compare.build_parser().parse_args(argv))


def _args(tmp_path, *extra):
    return compare.resolve_args(compare.build_parser().parse_args(["--preset", "tiny", "--out", str(tmp_path), *extra]))


def test_plan_orders_key_arms_first_and_shares_the_budget(tmp_path):
    args = _args(
        tmp_path, "--seeds", "0,1", "--arms", "all", "--steps", "6", "--evolve-every", "2", "--eval-every", "2"
    )
    jobs = bench_run.plan(args)
    names = [j.name for j in jobs]
    assert names[0] == "base"
    # Key arms for seed 0, then seed 1, then ablations (first seed only): a time budget cuts ablations first.
    key = ["fixed", "dapo", "harnessrl", "harnessrl-dapo", "fixed-norm", "skip"]
    assert names[1:13] == [f"{a}-s{s}" for s in (0, 1) for a in key]
    assert names[13:] == [f"{a}-s0" for a in bench_spec.ARMS if not bench_spec.ARMS[a].key]
    arm_jobs = [j for j in jobs if j.kind == "arm"]
    assert len({tuple(j.eval_tasks) for j in jobs}) == 1  # every model sees the same held-out subset
    assert {j.ifeval_max_tokens for j in jobs} == {bench_spec.PRESETS["tiny"].ifeval_max_tokens}  # the yardstick too
    off = bench_run.plan(_args(tmp_path, "--ifeval-max-tokens", "0"))
    assert {j.ifeval_max_tokens for j in off} == {0}
    for j in arm_jobs:
        assert "train.max_steps=6" in j.overrides and f"train.seed={j.seed}" in j.overrides
        assert j.overrides[-1] == f"run_dir={j.run_dir}"
    fixed = next(j for j in arm_jobs if j.arm == "fixed")
    assert "harness.evolver=false" in fixed.overrides
    nocrit = next(j for j in arm_jobs if j.arm == "no-critic")
    assert nocrit.overrides.index("evolver.critic=false") > nocrit.overrides.index("evolver.critic=true")


def test_every_arm_resolves_to_a_valid_trainer_config(tmp_path):
    from trainer.config_loader import load_config

    args = _args(tmp_path, "--arms", "all", "--seeds", "3")
    for job in bench_run.plan(args)[1:]:
        cfg = load_config(job.config, job.overrides)
        h = cfg.harness
        assert cfg.train.seed == 3 and cfg.run_dir == job.run_dir
        assert len(cfg.data.tasks) == 10  # the tiny preset's pool: 2 train tasks per domain, the same for every arm
        expect = {
            "fixed": (False, False, 3, True, True),
            "dynfilter": (False, True, 3, True, True),
            "harnessrl": (True, False, 3, True, True),
            "no-sampling": (True, False, 2, True, True),
            "no-guidance": (True, False, 2, True, True),
            "no-criteria": (True, False, 2, True, True),
            "no-memory": (True, False, 3, False, True),
            "no-critic": (True, False, 3, True, False),
            "no-confirm": (True, False, 3, True, True),
            "no-preflight": (True, False, 3, True, True),
            "dapo": (False, False, 3, True, True),
            "plain": (False, False, 3, True, True),
            "harnessrl-dapo": (True, False, 3, True, True),
            "fixed-norm": (False, False, 3, True, True),
            "skip": (False, False, 3, True, True),
        }[job.arm]
        e = cfg.evolver
        assert (h.evolver, h.dynamic_filtering, len(e.interfaces), e.memory, e.critic) == expect, job.arm
        dapo = job.arm in ("dapo", "harnessrl-dapo")
        assert h.dynamic_sampling == (bench_spec.DAPO_OVERSAMPLE if dapo else 0), job.arm
        assert job.runner == ("plain" if job.arm == "plain" else "harness")
        if job.arm.startswith("no-") and job.arm[3:] in INTERFACES:
            assert job.arm[3:] not in cfg.evolver.interfaces
        # Only the no-confirm ablation turns off training's grade of accepted updates.
        assert (h.confirm_window == 0) == (job.arm == "no-confirm"), job.arm
        # Every HarnessRL arm runs the pre-flight round but the no-preflight ablation; no baseline runs it.
        assert h.preflight == (h.evolver and job.arm != "no-preflight"), job.arm
        # The two controls (issue 32): each its own knob, nothing else.
        assert (h.live_token_norm, h.skip_dead) == (job.arm == "fixed-norm", job.arm == "skip"), job.arm


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


@pytest.mark.parametrize(
    "per_domain, words", [(0, "all 3 held-out test tasks"), (1, "fixed subset of 3 test tasks (1 per domain)")]
)
def test_report_names_the_eval_set(per_domain, words):
    assert bench_render.eval_subset({"eval_tasks": ["a", "b", "c"], "eval_per_domain": per_domain}) == words


def test_length_stats_within_task_correlation():
    result = {"tasks": {"t1": {"scores": [0.5, 1.0]}, "t2": {"scores": [0.0, 0.5]}}}
    # Longer answers score higher inside each task -> +1, although the longer task (t2) scores lower overall.
    pos = bench_eval.length_stats(result, [["a", "a b c"], ["a b c d e", "a b c d e f g"]])
    assert pos["length_corr"] == pytest.approx(1.0)
    neg = bench_eval.length_stats(result, [["a b c", "a"], ["a b c d e f g", "a b c d e"]])
    assert neg["length_corr"] == pytest.approx(-1.0)
    flat = bench_eval.length_stats(result, [["a", "b"], ["c", "d"]])
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
    ep = bench_eval.BatchedEvalEndpoint(inner, [render_prompt(t, []) for t in tasks], 3, 16, 1.0, 7)
    res = evaluate(tasks, ep, Judge(), k=3, max_tokens=16, temperature=1.0, seed=7, progress=False)
    assert inner.calls == [(len(tasks), 3, 7)]  # one batched call for every task
    assert [len(r) for r in ep.responses] == [3] * len(tasks) and ep.responses[1][0] == "answer 0 word "
    assert set(res["tasks"]) == {t.id for t in tasks}
    stats = bench_eval.length_stats(res, ep.responses)
    assert stats["mean_words"] > 1
    with pytest.raises(RuntimeError, match="does not match"):
        ep.sample([render_prompt(tasks[0], [])], n=3, max_tokens=16, temperature=1.0)  # past the end


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_collect_run_counts_dead_groups_pauses_and_proposals(tmp_path):
    _jsonl(
        tmp_path / "metrics.jsonl",
        [
            {
                "step": 1,
                "dead_share": 1.0,
                "n_groups": 2,
                "pause_s": 0.0,
                "judge_warnings": 1,
                "time": 10.0,
                "tasks": ["a", "b"],
                "group_means": [0.0, 0.5],
                "group_stds": [0.0, 0.0],
                "reward": 0.2,
                "hinted_share": 0.0,
            },
            {
                "step": 2,
                "dead_share": 0.5,
                "n_groups": 2,
                "pause_s": 4.0,
                "judge_warnings": 0,
                "time": 20.0,
                "tasks": ["a.v1-x", "b"],
                "reward": 0.6,
                "hinted_share": 0.5,
            },
        ],
    )
    _jsonl(
        tmp_path / "rounds.jsonl",
        [
            {
                "step": 2,
                "reports": [
                    {
                        "interface": "guidance",
                        "decision": "accepted",
                        "attempts": [
                            {"reasons": ["std 0.1 -> 0.1", "FAIL: std_gain"]},
                            {"reasons": ["PASS: std_gain"]},
                        ],
                    },
                    {"interface": "criteria", "decision": "fallback", "attempts": [{}]},
                    {"interface": None, "decision": "skipped", "attempts": []},
                ],
            },
            {"step": 4, "error": "RuntimeError: endpoint down", "reports": []},
            {
                "step": 6,
                "reports": [],
                "provisional": {
                    "verdicts": [{"version": 2, "task_id": "b", "verdict": "revert", "reasons": ["still dead"]}]
                },
            },
        ],
    )
    _jsonl(
        tmp_path / "events.jsonl",
        [
            {"id": f"e{i}", "type": t, "task_id": "a", "step": 1}
            for i, t in enumerate(("collapse_low", "spurious_length", "stuffing"))
        ],
    )
    (tmp_path / "harness").mkdir()

    def reweight(version: int, step: int, task: str) -> dict:
        update = {"interface": "sampling", "ops": [{"task_id": task, "op": "reweight", "weight": 2.0}]}
        return {"version": version, "parent_version": version - 1, "step": step, "timestamp": "t", "update": update}

    # Draws happen at step time: the rows of steps 1 and 2 follow the first (step 1 draws a, step 2 a.v1); no step
    # after 3: the second is never revisited.
    _jsonl(tmp_path / "harness" / "updates.jsonl", [reweight(1, 0, "a"), reweight(2, 2, "b")])
    got = bench_collect.collect_run(tmp_path)
    assert got["zero_var_share"] == pytest.approx(0.75)
    assert got["pause_s"] == 4.0 and got["judge_warnings"] == 1 and got["loop_s"] == 10.0
    assert got["per_interface"]["guidance"] == {"proposals": 2, "accepted": 1, "rejected": 1}
    assert got["per_interface"]["criteria"] == {"proposals": 1, "accepted": 0, "rejected": 1}
    assert got["per_interface"]["sampling"] == {"proposals": 0, "accepted": 0, "rejected": 0}
    assert got["fallbacks"] == 1 and got["rounds"] == 3 and got["round_errors"] == 1
    # Per step, each group's task, mean and std; each verdict with its reasons; no pre-flight round here.
    assert got["steps"][0]["tasks"] == ["a", "b"] and got["steps"][0]["group_stds"] == [0.0, 0.0]
    assert got["steps"][1]["group_means"] is None and got["preflight"] is None
    assert got["update_log"][1]["verdicts"] == {"b": {"verdict": "revert", "step": 6, "reasons": ["still dead"]}}
    assert got["spurious_events"] == 2
    assert got["critic_fails"] == {"guidance: std_gain": 1}
    assert got["updates"] == 2 and got["updated_task_revisits"] == 2
    assert got["hinted_share"] == pytest.approx(0.25) and got["train_reward_late"] == pytest.approx(0.6)


def _fake_run(arm, seed, curve, zero_var=0.4, pause=5.0, wall=100.0):
    evals = {
        str(s): {
            "avg_at_k": sc,
            "audit": au,
            "domains": {"medical": {"avg_at_k": sc, "audit": au}},
            "length_corr": 0.1,
            "mean_words": 20.0,
            "seconds": 1.0,
        }
        for s, sc, au in curve
    }
    return {
        "kind": "arm",
        "name": f"{arm}-s{seed}",
        "arm": arm,
        "seed": seed,
        "train_s": wall,
        "pause_s": pause,
        "zero_var_share": zero_var,
        "judge_warnings": 0,
        "eval_judge_warnings": 0,
        "rounds": 1,
        "round_errors": 0,
        "fallbacks": 0,
        "event_types": {},
        "spurious_events": 0,
        "steps": [{"step": 1, "dead_share": zero_var}],
        "per_interface": {i: {"proposals": 1, "accepted": 1, "rejected": 0} for i in INTERFACES},
        "summary": {"harness_version": 1},
        "evals": evals,
    }


def test_summaries_and_targets():
    base = {
        "eval": {
            "avg_at_k": 0.30,
            "audit": 0.40,
            "length_corr": 0.0,
            "mean_words": 25.0,
            "domains": {"medical": {"avg_at_k": 0.30, "audit": 0.40}},
        }
    }
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
    assert rows["audit(harnessrl) - audit(dapo) >= 3 points (final checkpoint)"]["met"] is None  # not run
    paired = bench_collect.paired_vs_fixed([fixed, h])
    assert paired == {"harnessrl": {"seeds": [0], "score": [pytest.approx(3.0)], "audit": [pytest.approx(5.0)]}}


def test_targets_compare_two_arms_over_the_seeds_both_ran():
    """A sitting in progress has fixed at seeds 0-1 and HarnessRL at 0, DAPO at 2 only: each target comparing two
    arms is measured over their common seeds (or not at all), never as a difference of unmatched means."""
    base = {"eval": {"avg_at_k": 0.30, "audit": 0.40, "length_corr": 0.0, "mean_words": 25.0, "domains": {}}}
    runs = [
        _fake_run("fixed", 0, [(8, 0.36, 0.40)], zero_var=0.4),
        _fake_run("fixed", 1, [(8, 0.36, 0.60)], zero_var=0.2),  # a lucky seed the other arm has not run
        _fake_run("harnessrl", 0, [(8, 0.36, 0.42)], zero_var=0.1),
        _fake_run("dapo", 2, [(8, 0.36, 0.50)], zero_var=0.1),
    ]
    for r in runs:
        r["summary"] = bench_collect.run_summary(r, base)
    by_arm: dict = {}
    for r in runs:
        by_arm.setdefault(r["arm"], []).append(r)
    arms = {a: bench_collect.arm_summary(rs) for a, rs in by_arm.items()}
    unmatched = {r["target"]: r for r in bench_collect.targets(by_arm, arms)}
    rows = {r["target"]: r for r in bench_tables.seed_matched_targets(runs)}
    vs_fixed = "audit(harnessrl) - audit(fixed) >= 3 points (final checkpoint)"
    assert unmatched[vs_fixed]["value"] == pytest.approx(42.0 - 50.0)  # the mean of fixed's two seeds
    assert rows[vs_fixed]["value"] == pytest.approx(2.0) and rows[vs_fixed]["met"] is False  # seed 0 alone
    assert "over the seeds both ran: [0] (fixed ran [0, 1], harnessrl [0])" in rows[vs_fixed]["note"]
    zero_var = "zero-variance share(harnessrl) <= 0.5 x share(fixed)"
    assert rows[zero_var]["value"] == pytest.approx(0.25) and rows[zero_var]["met"] is True
    vs_dapo = rows["audit(harnessrl) - audit(dapo) >= 3 points (final checkpoint)"]
    assert vs_dapo["value"] is None and vs_dapo["met"] is None and "both ran: []" in vs_dapo["note"]
    assert (
        rows["evolver pause <= 10% of harnessrl wall time"] == unmatched["evolver pause <= 10% of harnessrl wall time"]
    )
    for r in runs:  # the gain section's ratio to fixed is matched the same way
        r.update(zero_var_trained=r["zero_var_share"], groups_generated=10, groups_trained=10, overhead_s=1.0)
        r["summary"] = bench_collect.run_summary(r, base)
    results = {"runs": runs, "arms": {a: bench_collect.arm_summary(rs) for a, rs in by_arm.items()}}
    text = "\n".join(bench_render.gain_section(results))
    ratio = next(line for line in text.splitlines() if line.startswith("| zero-variance share of trained groups"))
    assert ratio == "| zero-variance share of trained groups <= 1/2 of fixed's | 0.25 ✓ | – |"  # harnessrl, dapo


def test_render_keeps_the_hand_written_analysis(tmp_path):
    report = tmp_path / "RESULTS.md"
    report.write_text(f"old\n{bench_render.ANALYSIS_BEGIN}\n## Analysis\nkept text\n{bench_render.ANALYSIS_END}\n")
    results = {
        "preset": "tiny",
        "command": "cmd",
        "started": "s",
        "finished": "f",
        "runtime_s": 60.0,
        "jobs": 1,
        "git": {"head": "abc1234", "changed_files": 3},
        "status": {"base": "done"},
        "base": None,
        "runs": [],
        "arms": {},
        "targets": [],
        "plots": [],
        "plot_dir": str(tmp_path / "plots"),
        "budget": {
            "config": "c",
            "steps": 2,
            "batch": 8,
            "group": 4,
            "evolve_every": 1,
            "eval_every": 1,
            "eval_tasks": ["a"],
            "eval_per_domain": 1,
            "eval_k": 2,
            "max_tokens": 16,
            "eval_seed": 1,
            "seeds": [0],
            "ablation_seeds": [0],
        },
    }
    text = bench_render.render(results, report)
    assert "kept text" in text and "(not written yet)" not in text


def test_ifeval_yardstick_is_a_column_per_arm_when_present(tmp_path):
    """The external yardstick (issue 22): the last checkpoint's and the base's IFEval scores reach the arm
    summary and the main table; summaries without it render as before (no column)."""
    ife = lambda ps, ins: {"prompt_strict": ps, "instruction_strict": ins, "n_prompts": 52, "max_tokens": 128}  # noqa: E731
    base = {
        "eval": {
            "avg_at_k": 0.30,
            "audit": 0.40,
            "length_corr": 0.0,
            "mean_words": 25.0,
            "domains": {"medical": {"avg_at_k": 0.30, "audit": 0.40}},
            "ifeval": ife(0.50, 0.60),
        }
    }
    runs = [_fake_run("fixed", sd, [(4, 0.32, 0.40), (8, 0.36, 0.41)]) for sd in (0, 1)]
    runs[0]["evals"]["8"]["ifeval"], runs[1]["evals"]["8"]["ifeval"] = ife(0.40, 0.55), ife(0.50, 0.65)
    for r in runs:
        r["summary"] = bench_collect.run_summary(r, base)
    assert runs[0]["summary"]["final_ifeval"] == pytest.approx(40.0)
    assert runs[0]["summary"]["base_ifeval_inst"] == pytest.approx(60.0)
    arm = bench_collect.arm_summary(runs)
    assert arm["final_ifeval"] == pytest.approx(45.0) and arm["final_ifeval_inst"] == pytest.approx(60.0)
    results = {
        "preset": "tiny",
        "command": "cmd",
        "started": "s",
        "finished": "f",
        "runtime_s": 60.0,
        "jobs": 1,
        "git": {"head": "abc1234", "changed_files": 0},
        "status": {},
        "base": base,
        "runs": runs,
        "arms": {"fixed": arm},
        "targets": [],
        "plots": [],
        "plot_dir": str(tmp_path / "plots"),
        "budget": {
            "config": "c",
            "steps": 8,
            "batch": 8,
            "group": 4,
            "evolve_every": 4,
            "eval_every": 4,
            "eval_tasks": ["a"],
            "eval_per_domain": 1,
            "eval_k": 2,
            "max_tokens": 16,
            "eval_seed": 1,
            "seeds": [0, 1],
            "ablation_seeds": [0],
        },
        "power": None,
    }
    text = bench_render.render(results, tmp_path / "RESULTS.md")
    row = next(line for line in text.splitlines() if line.startswith(f"| {bench_spec.ARMS['fixed'].label} |"))
    assert row.endswith("| 45.0 ± 7.1 / 60.0 |") and "IFEval final (prompt / instr strict)" in text
    assert "IFEval prompt / instruction strict 50.0 / 60.0 (52 prompts, greedy, 128 tokens)" in text
    for r in runs:
        del r["evals"]["8"]["ifeval"]
        r["summary"] = bench_collect.run_summary(r, {"eval": {k: v for k, v in base["eval"].items() if k != "ifeval"}})
    assert bench_collect.arm_summary(runs)["final_ifeval"] is None
    old = bench_render.render(
        {**results, "base": None, "arms": {"fixed": bench_collect.arm_summary(runs)}}, tmp_path / "OLD.md"
    )
    assert "IFEval" not in old


# -- issue 13: presets, code identity, summaries, DAPO selection, power ------------------------------------
def test_protocol_presets_match_the_issue(tmp_path):
    from trainer.config_loader import load_config

    for name, min_steps in (("smollm2-40", 40), ("gpu", 100)):
        p = bench_spec.PRESETS[name]
        assert p.steps >= min_steps and p.batch == 16 and p.group == 4 and 8 <= p.evolve_every <= 10
        assert p.eval_per_domain == 0 and p.greedy and p.train_per_domain == 2
        args = compare.resolve_args(
            compare.build_parser().parse_args(
                ["--preset", name, "--arms", "all", "--out", str(tmp_path / name), "--results", str(tmp_path / "r")]
            )
        )
        jobs = bench_run.plan(args)
        assert len(jobs[0].eval_tasks) == 65  # every held-out task
        for job in jobs[1:]:  # every arm of the preset is a valid trainer config (the GPU one is never run in CI)
            cfg = load_config(job.config, job.overrides)
            assert cfg.train.max_steps == p.steps and len(cfg.data.tasks) == 10
            if name == "gpu":
                assert cfg.train.bf16 and cfg.train.use_cpu is False
    assert bench_spec.PRESETS["gpu"].jobs >= len(bench_spec.ARMS)  # every job a concurrent process on the GPU


def test_code_hash_follows_the_code_not_the_report(tmp_path):
    for rel in bench_code.SNAPSHOT_PATHS:
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / rel).is_file():
            f.write_text("y = 1\n")
        else:
            f.mkdir(exist_ok=True)
            (f / "a.py").write_text("x = 1\n")
    h0 = bench_code.code_hash(tmp_path)
    (tmp_path / "benchmarks" / "bench_render.py").write_text("changed\n")  # report-only: same code
    assert bench_code.code_hash(tmp_path) == h0
    (tmp_path / "trainer" / "a.py").write_text("x = 2\n")
    assert bench_code.code_hash(tmp_path) != h0


def _summary(name, code_hash, commit="c0ffee", taken="2026-01-01 00:00 UTC", kind="arm"):
    return {
        "name": name,
        "kind": kind,
        "code": {"code_hash": code_hash, "commit": commit, "dirty": False, "taken": taken},
    }


def test_summaries_of_different_code_never_share_a_table():
    sums = [
        _summary("fixed-s0", "aaa"),
        _summary("dapo-s0", "aaa"),
        _summary("harnessrl-s0", "bbb", "beef", "2026-02-01 00:00 UTC"),
    ]
    chosen, left = bench_collect.select_code(sums)
    assert chosen["code_hash"] == "aaa" and [j["name"] for j in chosen["jobs"]] == ["fixed-s0", "dapo-s0"]
    assert [g["code_hash"] for g in left] == ["bbb"]
    chosen, _ = bench_collect.select_code(sums, "beef")  # --commit chooses by commit prefix ...
    assert [j["name"] for j in chosen["jobs"]] == ["harnessrl-s0"]
    chosen, _ = bench_collect.select_code(sums, "bb")  # ... or by code-hash prefix
    assert chosen["code_hash"] == "bbb"
    with pytest.raises(SystemExit, match="matches 0 code versions"):
        bench_collect.select_code(sums, "nope")
    # Equal job counts: the newest wins.
    chosen, _ = bench_collect.select_code(
        [_summary("a", "x", taken="2026-01-01"), _summary("b", "y", taken="2026-03-01")]
    )
    assert chosen["code_hash"] == "y"


def test_a_job_is_done_only_with_a_summary_of_the_same_code(tmp_path):
    job = bench_spec.Job(
        kind="arm",
        name="fixed-s0",
        config="c",
        overrides=[],
        run_dir=str(tmp_path / "r"),
        eval_tasks=[],
        eval_k=1,
        max_tokens=1,
        eval_seed=0,
        summary_path=str(tmp_path / "fixed-s0.json"),
        code={"code_hash": "aaa"},
    )
    assert not bench_run.summary_done(job)
    (tmp_path / "fixed-s0.json").write_text(json.dumps(_summary("fixed-s0", "bbb")))
    assert not bench_run.summary_done(job)  # other code: run it again
    (tmp_path / "fixed-s0.json").write_text(json.dumps(_summary("fixed-s0", "aaa")))
    assert bench_run.summary_done(job)


def test_dapo_keeps_the_first_informative_groups_and_normalises_over_them():
    import asyncio
    from types import SimpleNamespace

    from trainer.dynamic_sampling import DynamicSamplingReward, select_groups

    rewards = [0.5] * 2 + [0.0, 1.0] + [1.0] * 2 + [0.2, 0.4] + [0.3, 0.1]  # groups of 2: dead, ok, dead, ok, ok
    assert select_groups(rewards, 2, 2) == [1, 3]
    assert select_groups(rewards, 2, 5) == [1, 3, 4]
    recorded = {}

    seen = []  # what the harness (the inner rubric reward: detector, memory, metrics) is given

    class Inner:
        run = SimpleNamespace(
            record_step=lambda step, v: recorded.update(step=step, **v),
            sampler=None,
            detector=SimpleNamespace(config=SimpleNamespace(eps=0.05)),
        )

        async def __call__(self, **kw):
            seen.append(len(kw["completions"]))
            return list(rewards)

    w = DynamicSamplingReward(Inner(), num_generations=2, keep_groups=2)
    ids = [[1] * (i + 1) for i in range(10)]  # row i has i+1 completion tokens
    out = asyncio.run(w(completions=["x"] * 10, completion_ids=ids, trainer_state=SimpleNamespace(global_step=4)))
    assert seen == [10]  # every generated group, the dropped ones too, reaches the harness
    assert out == [None, None, 0.0, 1.0, None, None, 0.2, 0.4, None, None]
    assert w.kept_tokens == 3 + 4 + 7 + 8
    assert recorded["step"] == 5 and recorded["ds_groups_kept"] == 2 and recorded["ds_groups_dead"] == 2
    assert recorded["ds_rollouts_generated"] == 10 and recorded["ds_short"] == 0
    assert recorded["ds_kept_dead"] == 0  # the kept groups' std (0.5, 0.1) is above the detector's eps
    # A kept group can still be dead to the detector (std < eps, wider than DAPO's exact zero): counted.
    Inner.run.detector.config.eps = 0.2
    w3 = DynamicSamplingReward(Inner(), num_generations=2, keep_groups=3)
    asyncio.run(w3(completions=["x"] * 10, completion_ids=ids, trainer_state=SimpleNamespace(global_step=4)))
    assert recorded["ds_groups_kept"] == 3 and recorded["ds_kept_dead"] == 2  # std 0.1 twice, 0.5 once


def test_power_calculation():
    import bench_power

    # ((1.96 + 0.84) * 1.9 / 2)^2 = 7.1 -> 8 seeds (normal); the t test needs a little more.
    n = bench_power.seeds_needed(2.0, 1.9)
    assert n["normal"] == 8 and n["t"] in (9, 10)
    assert bench_power.power(2.0, 1.9, n["t"]) >= 0.8 > bench_power.power(2.0, 1.9, n["t"] - 1)
    assert bench_power.power(2.0, 1.9, 7, exact=False) < 0.8 <= bench_power.power(2.0, 1.9, 8, exact=False)
    # Eval noise of one model from two eval seeds: per-task differences 2 and 0 points alternating.
    a = {f"t{i}": {"avg": 0.5 + (0.02 if i % 2 else 0.0)} for i in range(10)}
    b = {f"t{i}": {"avg": 0.5} for i in range(10)}
    got = bench_power.eval_noise(a, b)
    assert got["mean_diff"] == pytest.approx(1.0) and got["n_tasks"] == 10
    assert bench_power.sd_d_for_eval(2.0, 1.0, 0.5) == pytest.approx((4 - 2 + 0.5) ** 0.5)
    mean, lo, hi = bench_power.bootstrap_ci([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    assert mean == pytest.approx(2.0) and lo <= mean <= hi and hi - lo > 0


def test_critic_power_runs_the_critics_rule_and_separates_null_from_large_effects():
    """benchmarks/critic_power.py: a repair that leaves a dead group dead is never accepted (and not failed at an
    all-zero first look); one that lifts the hit rate from 0 to 1/2 is, most of the time, once the cap allows 32
    rollouts (seeded: deterministic)."""
    import critic_power
    import numpy as np

    from agents.context import EvolverContext
    from harness.detector import DetectorConfig
    from harness.types import HarnessState

    ctx, cfg, rng = EvolverContext(), DetectorConfig(), np.random.default_rng(0)
    state = HarnessState.from_tasks([critic_power._task(0.625)])
    # (accepted, candidate rollouts per side, fresh control rollouts) with 32 cached rollouts and a cap of 32
    null = [critic_power.one_decision(state, 0.0, 0.0, 32, 32, ctx, cfg, rng, 4) for _ in range(5)]
    large = [critic_power.one_decision(state, 0.0, 0.5, 32, 32, ctx, cfg, rng, 4) for _ in range(10)]
    assert not any(a for a, _, _ in null)  # a dead group left dead is never accepted
    assert all(k > 4 for _, k, _ in null)  # ... and an all-zero first look is undecided, not failed
    assert sum(a for a, _, _ in large) >= 6
    assert all(k in (4, 8, 16, 32) for _, k, _ in null + large)


def test_paired_at_equal_wall_time_uses_the_checkpoints_reached_in_time():
    def run(arm, walls, scores):
        evals = {
            str(s): {"avg_at_k": sc, "audit": sc, "tasks": {"t": {"avg": sc, "audit": sc}}} for s, sc in scores.items()
        }
        return {
            "arm": arm,
            "seed": 0,
            "evals": evals,
            "summary": {
                "final_step": max(scores),
                "wall_s": walls[max(scores)],
                "wall_curve": [(s, walls[s]) for s in sorted(scores)],
            },
        }

    fixed = run("fixed", {4: 10.0, 8: 20.0}, {4: 0.40, 8: 0.50})
    slow = run("harnessrl", {4: 15.0, 8: 30.0}, {4: 0.45, 8: 0.60})
    steps = bench_stats.paired([fixed, slow], None, "harnessrl", "fixed", metric="audit")
    assert steps["per_seed"] == [pytest.approx(10.0)] and steps["steps"] == [(8, 8)]
    timed = bench_stats.paired([fixed, slow], None, "harnessrl", "fixed", metric="audit", equal_time=True)
    assert timed["steps"] == [(4, 8)] and timed["per_seed"] == [pytest.approx(-5.0)]  # 20 s: harnessrl at step 4


@pytest.mark.parametrize(
    "overrides, fields",
    [
        (["harness.dynamic_sampling=2", "train.beta=0.04"], ("harness.dynamic_sampling=2", "train.beta=0")),
        (["harness.dynamic_sampling=2", "train.loss_type=grpo"], ("harness.dynamic_sampling=2", "train.loss_type")),
        (["harness.evolver=true", "harness.dynamic_sampling=2", "train.beta=0.1"], ("train.beta=0",)),
    ],
)
def test_dynamic_sampling_refuses_what_does_not_compose_at_load(overrides, fields):
    """HarnessRL on DAPO (issue 22): what dynamic sampling cannot do is refused when the config loads, naming
    the fields; the evolver itself composes with it (the arm's config loads)."""
    from trainer.config import ConfigError
    from trainer.config_loader import load_config

    with pytest.raises(ConfigError) as exc:
        load_config(ROOT / "configs" / "tiny.yaml", overrides)
    assert all(f in str(exc.value) for f in fields), str(exc.value)
    cfg = load_config(ROOT / "configs" / "tiny.yaml", list(bench_spec.ARMS["harnessrl-dapo"].overrides))
    assert cfg.harness.evolver and cfg.harness.dynamic_sampling == bench_spec.DAPO_OVERSAMPLE


def test_dynamic_sampling_refuses_several_processes_before_the_model_loads(monkeypatch):
    from trainer.config import ConfigError
    from trainer.config_loader import load_config
    from trainer.dynamic_sampling import check_one_process

    cfg = load_config(ROOT / "configs" / "tiny.yaml", list(bench_spec.ARMS["harnessrl-dapo"].overrides))
    monkeypatch.setenv("WORLD_SIZE", "1")
    check_one_process(cfg)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="harness.dynamic_sampling=2 runs on one process only, but WORLD_SIZE=2"):
        check_one_process(cfg)
    check_one_process(load_config(ROOT / "configs" / "tiny.yaml", ["harness.dynamic_sampling=0"]))


def test_dapo_trained_groups_count_the_kept_groups_the_detector_calls_dead(tmp_path):
    _jsonl(
        tmp_path / "metrics.jsonl",
        [
            {
                "step": 1,
                "dead_share": 0.75,
                "n_groups": 4,
                "ds_groups_generated": 4,
                "ds_groups_kept": 2,
                "ds_kept_dead": 1,
            },
            {"step": 2, "dead_share": 0.5, "n_groups": 4, "ds_groups_generated": 4, "ds_groups_kept": 2},  # older run
        ],
    )
    got = bench_collect.collect_run(tmp_path)
    assert got["zero_var_share"] == pytest.approx(5 / 8)  # of every generated group
    assert got["zero_var_trained"] == pytest.approx(1 / 4) and got["groups_trained"] == 4


def _gain_run(arm, seed, *, proposals, accepted, graded=None, zero_var=0.4, dead_curve=None):
    r = _fake_run(arm, seed, [(4, 0.32, 0.40)], zero_var=zero_var)
    r["per_interface"] = {i: {"proposals": 0, "accepted": 0, "rejected": 0} for i in INTERFACES}
    r["per_interface"]["criteria"] = {"proposals": proposals, "accepted": accepted, "rejected": proposals - accepted}
    r.update(zero_var_trained=zero_var, groups_generated=10, groups_trained=10, overhead_s=1.0, train_step_s=100.0)
    if graded is not None:  # summaries from before training's verdicts were collected have none of these
        r["graded"] = {i: {"confirm": 0, "revert": 0, "superseded": 0} for i in INTERFACES}
        r["graded"]["criteria"] = graded
        r["confirmed"], r["reverted"] = graded["confirm"], graded["revert"]
    r["summary"] = bench_collect.run_summary(r, None)
    return r


def test_where_each_gain_comes_from_per_arm_and_targets(tmp_path):
    runs = [
        _gain_run("fixed", 0, proposals=0, accepted=0, graded={"confirm": 0, "revert": 0, "superseded": 0}),
        _gain_run(
            "harnessrl", 0, proposals=8, accepted=4, zero_var=0.1, graded={"confirm": 3, "revert": 1, "superseded": 0}
        ),
        _gain_run(
            "harnessrl", 1, proposals=4, accepted=2, zero_var=0.1, graded={"confirm": 0, "revert": 1, "superseded": 1}
        ),
        _gain_run("no-critic", 0, proposals=4, accepted=4),
    ]  # an old summary: no verdicts
    arms = {
        a: bench_collect.arm_summary([r for r in runs if r["arm"] == a]) for a in ("fixed", "harnessrl", "no-critic")
    }
    h = arms["harnessrl"]
    assert (h["proposals_total"], h["accepted_total"], h["confirmed_total"], h["reverted_total"]) == (12, 6, 3, 2)
    assert h["graded"]["criteria"] == {"confirm": 3, "revert": 2, "superseded": 1}
    assert arms["no-critic"]["graded"] is None and arms["no-critic"]["confirmed_total"] is None
    m = bench_collect.gain_targets(arms)
    assert set(m) == {"harnessrl", "no-critic"}  # fixed is the reference
    assert m["harnessrl"]["accept_share"] == {"value": pytest.approx(0.5), "met": True}
    assert m["harnessrl"]["confirm_share"] == {"value": pytest.approx(0.5), "met": False}  # 3 of 6 < 60%
    assert m["harnessrl"]["zero_var_ratio"] == {"value": pytest.approx(0.25), "met": True}
    assert m["harnessrl"]["extra_generation"]["value"] == 0.0 and m["harnessrl"]["overhead_share"]["met"] is True
    assert m["no-critic"]["confirm_share"] == {"value": None, "met": None}
    results = {"runs": runs, "arms": arms, "power": None, "gpu_summaries": 0}
    text = "\n".join(bench_render.gain_section(results))
    row = next(line for line in text.splitlines() if line.startswith("| harnessrl |"))
    assert "| 12 | 6 (50%) | 6: 3 / 2 / 1 / – (50%) | 0 / 0 / 0 | 0 / 0 / 0 | 6 / 3 / 2 |" in row
    old = next(line for line in text.splitlines() if line.startswith("| no-critic |"))
    assert "| 4 | 4 (100%) | 4: – / – / – / – (–) | 0 / – / – | 0 / – / – | 4 / – / – |" in old
    confirm = next(line for line in text.splitlines() if line.startswith("| >= 60% of accepted updates confirmed |"))
    assert confirm == "| >= 60% of accepted updates confirmed | 50% ✗ | – |"


def test_old_committed_summaries_still_render(tmp_path):
    """The previous code's committed smollm2-40 summaries predate training's verdicts: the new section renders
    them with "–"."""
    sums = ROOT / "benchmarks" / "results" / "smollm2-40-1fdbcb4636e8"
    _, runs = bench_collect.collect(bench_collect.load_summaries(sums), {})
    by_arm: dict = {}
    for r in runs:
        by_arm.setdefault(r["arm"], []).append(r)
    arms = {a: bench_collect.arm_summary(by_arm[a]) for a in bench_spec.ARMS if a in by_arm}
    text = "\n".join(bench_render.gain_section({"runs": runs, "arms": arms}))
    row = next(line for line in text.splitlines() if line.startswith("| harnessrl |"))
    assert "– / – / – / – (–)" in row and "## Where each gain comes from" in text


def test_a_generalised_repair_is_graded_per_update_not_per_accepted_decision():
    """One accepted decision generalised to a sibling task commits two updates, each graded on its own: the
    confirmed share counts them over the accepted updates (2 of 3 here), never over the decisions (2 of 2, or
    more than 100% had both siblings and a third update confirmed). Fallbacks and reverts are not accepted."""

    def upd(version, interface, task, origin, verdict=None):
        v = {task: {"verdict": verdict, "step": 16}} if verdict else {}
        return {"version": version, "step": 8, "interface": interface, "tasks": [task], "domains": ["roleplay"]} | {
            "origin": origin,
            "failure_type": "blind_criterion",
            "ops": ["edit_criterion"],
            "verdicts": v,
        }

    fixed = _gain_run("fixed", 0, proposals=0, accepted=0, graded={"confirm": 0, "revert": 0, "superseded": 0})
    h = _gain_run("harnessrl", 0, proposals=8, accepted=2, graded={"confirm": 2, "revert": 0, "superseded": 0})
    h["update_log"] = [
        upd(1, "criteria", "rp-1", "blind_edit", "confirm"),
        upd(2, "criteria", "rp-2", "blind_edit", "confirm"),  # the generalised sibling of v1
        upd(3, "sampling", "if-1", "fallback"),
        upd(4, "sampling", "if-2", "downweight"),  # accepted at the last pause: never graded
        upd(5, "criteria", "rp-1", "revert"),
    ]
    fixed["update_log"] = []
    au = bench_tables.accepted_updates([h])
    assert (au["updates"], au["confirm"], au["ungraded"]) == (3, 2, 1)
    assert au["per_interface"]["criteria"] == {"updates": 2, "confirm": 2, "revert": 0}
    assert au["per_interface"]["sampling"] == {"updates": 1, "confirm": 0, "revert": 0}
    assert bench_tables.accepted_updates([h, {"arm": "harnessrl"}]) is None  # a summary without the log
    runs = [fixed, h]
    arms = {a: bench_collect.arm_summary([r for r in runs if r["arm"] == a]) for a in ("fixed", "harnessrl")}
    text = "\n".join(bench_render.gain_section({"runs": runs, "arms": arms}))
    row = next(line for line in text.splitlines() if line.startswith("| harnessrl |"))
    assert "| 8 | 2 (25%) | 3: 2 / 0 / 0 / 1 (67%) | 1 / 0 / 0 | 0 / 0 / 0 | 2 / 2 / 0 |" in row
    confirm = next(line for line in text.splitlines() if line.startswith("| >= 60% of accepted updates confirmed |"))
    assert confirm == "| >= 60% of accepted updates confirmed | 67% ✓ |"


# -- slow: the real trainer, every arm ---------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_smoke_every_arm(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out, report = tmp_path / "bench", tmp_path / "report" / "RESULTS.md"
    # The code identity, taken once: on a shared checkout other edits between the two invocations below would
    # (rightly) make every job run again under the new code.
    state = bench_code.code_state()
    monkeypatch.setattr(compare, "code_state", lambda: dict(state))
    sums = tmp_path / "results"
    argv = [
        "--preset",
        "tiny",
        "--steps",
        "2",
        "--arms",
        "all",
        "--seeds",
        "0",
        "--jobs",
        "0",
        "--out",
        str(out),
        "--report",
        str(report),
        "--results",
        str(sums),
        "--pilot-results",
        str(sums),
    ]
    rc = compare.main(argv)
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
    # Every job left a summary that names the code it ran; DAPO over-sampled and counted it; timers ran.
    for name in results["status"]:
        summary = json.loads((sums / f"{name}.json").read_text())
        assert len(summary["code"]["commit"]) == 40 and isinstance(summary["code"]["dirty"], bool)
        assert summary["code"]["code_hash"] == results["code"]["code_hash"]
    for name in ("dapo-s0", "harnessrl-dapo-s0"):
        dapo = json.loads((sums / f"{name}.json").read_text())
        assert dapo["groups_generated"] == bench_spec.DAPO_OVERSAMPLE * 2 * 2, name  # 2 steps x 2 x (8/4) groups
        assert dapo["groups_trained"] + dapo["ds_short"] == 2 * 2, name
    # HarnessRL on DAPO: the evolver ran, and its detector and memory saw every generated group (dropped too).
    hd = next(r for r in results["runs"] if r["arm"] == "harnessrl-dapo")
    assert hd["summary"]["rounds"] >= 1 and sum(s["n_groups"] for s in hd["steps"]) == hd["groups_generated"]
    assert "confirmed" in hd and "graded" in hd
    # Every harness update is one line of the update log, its tasks placed in a domain of the pool.
    for run in results["runs"]:
        assert len(run["update_log"]) == run["updates"], run["name"]
        for u in run["update_log"]:
            assert u["interface"] in INTERFACES and "?" not in u["domains"], (run["name"], u)
            assert set(u["verdicts"]) <= set(u["tasks"]), (run["name"], u)
            assert {v["verdict"] for v in u["verdicts"].values()} <= {"confirm", "revert", "superseded"}, u
    for section in ("## Where each gain comes from", "| harnessrl-dapo − dapo |"):
        assert section in text, section
    fixed = json.loads((sums / "fixed-s0.json").read_text())
    assert fixed["overhead_s"] > 0 and fixed["train_step_s"] > fixed["overhead_s"] and fixed["wall_s"] > 0
    assert fixed["evals"]["2"]["greedy"]["k"] == 1 and "noise" in fixed["evals"]["2"]
    # The external yardstick on the last checkpoint (and the base) only, as a column of the main table.
    assert fixed["evals"]["2"]["ifeval"]["n_prompts"] == 52 and "ifeval" not in fixed["evals"]["1"]
    assert 0.0 <= fixed["evals"]["2"]["ifeval"]["prompt_strict"] <= 1.0 and "IFEval final" in table
    assert set(fixed["ckpt_wall"]) == {"1", "2"}
    # The second held-out set (train tasks outside the pool, issue 32) on the final checkpoint only, k=2.
    assert fixed["evals"]["2"]["train_heldout"]["k"] == 2 and "train_heldout" not in fixed["evals"]["1"]
    assert len(fixed["evals"]["2"]["train_heldout"]["tasks"]) == 5 and "## Second held-out set" in text
    for section in (
        "## Paired differences with bootstrap",
        "## Costs",
        "## Power",
        "## Steps to the fixed arm",
        "has not been run",
    ):
        assert section in text, section

    # Resume: a job whose summary is gone runs again, resuming its run and skipping its cached evals; the
    # others are reused. A summary of other code is never mixed into the table.
    (sums / "fixed-s0.json").unlink()
    (sums / "ghost-s0.json").write_text(
        json.dumps({**fixed, "name": "ghost-s0", "arm": "harnessrl", "code": {**fixed["code"], "code_hash": "0" * 64}})
    )
    rc = compare.main(argv)
    assert rc == 0
    again = json.loads((out / "results.json").read_text())
    assert again["status"]["fixed-s0"] == "done"
    assert all(v == "reused" for k, v in again["status"].items() if k not in ("fixed-s0", "ghost-s0"))
    refit = json.loads((sums / "fixed-s0.json").read_text())
    assert refit["evals"] == fixed["evals"]  # the cached evals, not new ones
    assert [r["name"] for r in again["runs"] if r["arm"] == "harnessrl"] == ["harnessrl-s0"]
    assert again["left_out"] == [
        {
            "code_hash": "0" * 64,
            "commits": [fixed["code"]["commit"]],
            "dirty": fixed["code"]["dirty"],
            "jobs": ["ghost-s0"],
        }
    ]
    assert "Left out (other code, never mixed in)" in report.read_text()


def test_update_log_names_each_updates_origin_domain_and_verdict(tmp_path):
    """The summary's per-update lines, read from the files the trainer writes (harness/updates.jsonl, the first
    harness version's tasks, the pauses' verdicts in rounds.jsonl)."""
    run = tmp_path / "run"
    (run / "harness" / "versions").mkdir(parents=True)
    tasks = {"sci-1": {"id": "sci-1", "domain": "science"}, "med-2": {"id": "med-2", "domain": "medical"}}
    (run / "harness" / "versions" / "v000000.json").write_text(json.dumps({"version": 0, "tasks": tasks}))

    def upd(version, step, interface, op, **meta):
        return {
            "version": version,
            "parent_version": version - 1,
            "step": step,
            "update": {"interface": interface, "ops": [op]},
            "meta": meta,
            "timestamp": "t",
        }

    hint = {"task_id": "sci-1", "op": "add_hint", "hint": {"id": "h1", "text": "Name the law."}}
    quarantine = {"task_id": "med-2.1", "op": "quarantine", "until_step": 12}
    restore = {"task_id": "sci-1", "op": "restore_guidance", "from_version": 0}
    updates = [
        upd(1, 8, "guidance", hint, template="hint", failure_type="collapse_low", source="rules"),
        upd(2, 8, "sampling", quarantine, fallback=True, failure_type="flat"),
        upd(3, 16, "guidance", restore, revert_of=1, source="revert"),
    ]
    (run / "harness" / "updates.jsonl").write_text("".join(json.dumps(u) + "\n" for u in updates))
    verdict = {"version": 1, "task_id": "sci-1", "verdict": "revert", "reasons": ["failure persists on 2 of 2 groups"]}
    rounds = [{"step": 8}, {"step": 16, "provisional": {"verdicts": [verdict]}}]
    metrics = [{"step": s, "n_groups": 2, "dead_share": 0.5, "tasks": ["sci-1", "med-2"]} for s in (8, 16)]
    for name, rows in (("rounds", rounds), ("metrics", metrics)):
        (run / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = bench_collect.collect_run(run)["update_log"]
    assert [(u["version"], u["origin"], u["domains"], u["verdicts"]) for u in log] == [
        (1, "hint", ["science"], {"sci-1": {"verdict": "revert", "step": 16, "reasons": verdict["reasons"]}}),
        (2, "fallback", ["medical"], {}),  # a variant task belongs to its parent's domain
        (3, "revert", ["science"], {}),
    ]
    assert log[0]["ops"] == ["add_hint"] and log[1]["tasks"] == ["med-2.1"] and log[0]["failure_type"] == "collapse_low"


def test_scheduler_runs_one_oversampling_job_at_a_time(tmp_path):
    jobs = {j.name: j for j in bench_run.plan(_args(tmp_path, "--arms", "key", "--seeds", "0,1"))}
    assert [n for n, j in jobs.items() if bench_run.oversamples(j)] == [
        "dapo-s0", "harnessrl-dapo-s0", "dapo-s1", "harnessrl-dapo-s1"
    ]  # fmt: skip
    queue = [jobs[n] for n in ("harnessrl-dapo-s0", "fixed-s1", "dapo-s1")]
    # Beside a DAPO job the next light job goes first, in order; with nothing heavy running, the queue's order.
    assert bench_run.next_job(queue, [jobs["dapo-s0"]]).name == "fixed-s1"
    assert bench_run.next_job(queue, [jobs["fixed-s0"]]).name == "harnessrl-dapo-s0"
    assert bench_run.next_job([jobs["dapo-s1"]], [jobs["harnessrl-dapo-s0"]]) is None
    # The last override wins: a --set that turns over-sampling off makes the job light.
    off = dataclasses.replace(jobs["dapo-s0"], overrides=[*jobs["dapo-s0"].overrides, "harness.dynamic_sampling=0"])
    assert not bench_run.oversamples(off)


def test_which_updates_moved_the_curve_places_each_update_on_its_domains_audit():
    medical = {"avg_at_k": 0.4, "audit": 0.50}
    base = {"eval": {**medical, "domains": {"medical": medical}, "length_corr": 0.1, "mean_words": 20.0}}

    def run(arm, seed, audits, log=None):
        r = _fake_run(arm, seed, [(s, 0.4, a) for s, a in zip((8, 16), audits)])
        if log is not None:
            r["update_log"] = log
        r["summary"] = bench_collect.run_summary(r, base)
        return r

    hint = {"version": 1, "step": 8, "interface": "guidance", "tasks": ["med-1"], "domains": ["medical"]}
    hint |= {"origin": "hint", "failure_type": "flat", "verdicts": {"med-1": {"verdict": "confirm", "step": 16}}}
    runs = [
        run("fixed", 0, (0.50, 0.52)),
        run("fixed", 1, (0.50, 0.50)),
        run("harnessrl", 0, (0.50, 0.60), [hint]),  # the best seed: +8 points at step 16
        run("harnessrl", 1, (0.50, 0.49), []),  # the worst: -1, and no update
        run("no-critic", 0, (0.5, 0.5)),  # an old summary without the log: left out
    ]
    text = "\n".join(bench_render.moves_section({"runs": runs, "base": base}))
    assert "## Which updates moved the curve" in text and "no-critic" not in text
    assert "**harnessrl, best seed (0):** final audit 8.00 points" in text
    assert "**harnessrl, worst seed (1):** final audit -1.00 points" in text and "No harness update" in text
    # The checkpoint before the update (step 8) to the last (16): harnessrl +10, fixed +2, difference +8.
    row = next(line for line in text.splitlines() if line.startswith("| 1 | 8 |"))
    assert "medical 8→16: 10.00 | 2.00 | 8.00 |" in row and "confirm (step 16)" in row
    assert bench_render.moves_section({"runs": runs[-1:], "base": base}) == []


def test_render_only_from_committed_summaries_says_so_and_times_each_job(tmp_path):
    """A table rendered from summaries of several sittings has no single command or runtime: the Setup says it
    was rendered from the summaries, the Runs table gives each job's own time and commit, on every re-render."""
    sums = ROOT / "benchmarks" / "results" / "smollm2-40-1fdbcb4636e8"
    report = tmp_path / "RESULTS.md"
    argv = ["--preset", "smollm2-40", "--render-only", "--arms", "fixed,harnessrl", "--seeds", "0,1"]
    argv += ["--out", str(tmp_path / "out"), "--results", str(sums), "--report", str(report)]
    for _ in range(2):  # the second render finds the first one's results.json: still rendered from summaries
        assert compare.main(argv) == 0
        text = report.read_text()
        assert "- Rendered by `" in text and "no job ran in this invocation" in text and "runtime" not in text
        fixed = json.loads((sums / "fixed-s0.json").read_text())
        row = f"| fixed-s0 | reused | {fixed['job_s'] / 60:.0f} | {fixed['code']['commit'][:7]} |"
        assert row in text
        # that sitting ran its ablations at one seed, its key arms at four: the main table says so
        assert "The arms ran different seeds (fixed [0, 1, 2, 3], dapo [0, 1, 2, 3], harnessrl [0, 1, 2, 3], " in text


def test_longer_horizon_renders_its_curve_from_summaries_of_this_tables_code_only(tmp_path):
    """`--horizon-results`: the longer pair's per-checkpoint audit against fixed, with the paired interval at each
    checkpoint, from summaries of the table's own code; other code there is named, never mixed in."""
    import shutil

    sums = ROOT / "benchmarks" / "results" / "smollm2-40-11a77c985112"
    old = ROOT / "benchmarks" / "results" / "smollm2-40-1fdbcb4636e8"
    horizon, stale = tmp_path / "h", tmp_path / "stale"
    horizon.mkdir(), stale.mkdir()
    for name in ("base", "fixed-s0"):
        shutil.copy(sums / f"{name}.json", horizon)
    changed = json.loads((sums / "harnessrl-s0.json").read_text())
    changed["evals"]["40"]["audit"] -= 0.01  # a run that left this table's at its last checkpoint
    (horizon / "harnessrl-s0.json").write_text(json.dumps(changed))
    shutil.copy(old / "fixed-s1.json", horizon)  # another code version in the same folder
    shutil.copy(old / "fixed-s0.json", stale)
    report = tmp_path / "RESULTS.md"
    argv = ["--preset", "smollm2-40", "--render-only", "--arms", "fixed,harnessrl", "--seeds", "0"]
    argv += ["--out", str(tmp_path / "out"), "--results", str(sums), "--report", str(report)]
    assert compare.main(argv + ["--horizon-results", str(horizon)]) == 0
    text = report.read_text()
    section = text[text.index("## Longer horizon") :].split("\n## ")[0]
    assert section.startswith("## Longer horizon: 40 steps, fixed, harnessrl (seeds [0])")
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [int(r.split("|")[1]) for r in rows] == [0, 8, 16, 24, 32, 40]
    # Step 32 is the same data in both: its interval is the one of the table's own seed-0 runs at that checkpoint.
    runs = [r for r in bench_collect.collect(bench_collect.load_summaries(sums), {})[1] if r["seed"] == 0]
    at32 = bench_stats.paired(runs, None, "harnessrl", "fixed", metric="audit", at_step=32)
    assert rows[-2].split("|")[4].strip() == bench_render._ci(at32) != "–"
    fixed = json.loads((sums / "fixed-s0.json").read_text())
    assert rows[-1].split("|")[2].strip() == f"{100 * fixed['evals']['40']['audit']:.1f}"
    assert "fixed-s0: the same audit and score as this table's at every common checkpoint (to step 40)" in section
    assert "harnessrl-s0: differs from this table's at step(s) 40." in section
    assert "Steps to fixed's best held-out score, harnessrl: s0:" in section and "1fdbcb4636e8" not in section
    # Only other code's summaries: the section says the pair has not run on this code, and names what is there.
    assert compare.main(argv + ["--horizon-results", str(stale)]) == 0
    section = report.read_text().split("## Longer horizon")[1].split("\n## ")[0]
    assert "has not run on it" in section and "`1fdbcb4636e8`: fixed-s0" in section
    (horizon / "harnessrl-s0.json").unlink()  # fixed alone: its curve, and no pair yet
    assert compare.main(argv + ["--horizon-results", str(horizon)]) == 0
    section = report.read_text().split("## Longer horizon")[1].split("\n## ")[0]
    assert "no pair to difference yet" in section and "| step | fixed audit |\n" in section
    with pytest.raises(SystemExit, match="no such folder"):
        compare.main(argv + ["--horizon-results", str(tmp_path / "nope")])
    # Another eval or training pool than the table's: refused, naming the file and the field.
    other = json.loads((sums / "fixed-s0.json").read_text())
    other["job"]["eval_k"] = 8
    other["job"]["overrides"] = [o for o in other["job"]["overrides"] if not o.startswith("data.tasks=")]
    (horizon / "fixed-s0.json").write_text(json.dumps(other))
    with pytest.raises(SystemExit, match=r"fixed-s0.json: not this table's protocol \(eval_k: 8 here, 4 in the table"):
        compare.main(argv + ["--horizon-results", str(horizon)])


def test_collect_run_counts_the_preflight_pause_and_the_probes_as_generation(tmp_path):
    """The pre-flight precedes step 1: its pause is wall time and pause; its probes, the critic's and a generalised
    repair's are generation."""
    (tmp_path / "config.yaml").write_text("train:\n  num_generations: 4\n")
    step = {"dead_share": 0.0, "n_groups": 2, "pause_s": 0.0, "step_started": 0.0}
    _jsonl(
        tmp_path / "metrics.jsonl",
        [{**step, "step": 1, "time": 10.0}, {**step, "step": 2, "pause_s": 2.0, "step_started": 10.0, "time": 22.0}],
    )
    critic = {"attempts": [{"numbers": {"cost_probe_rollouts": 4.0}}], "interface": "guidance", "decision": "rejected"}
    # An accepted repair tried on similar tasks probes them too (its report's `generalised` numbers).
    batch = {"decision": "rejected", "numbers": {"cost_probe_rollouts": 8.0}}
    accepted = {"attempts": [], "interface": "guidance", "decision": "accepted", "generalised": batch}
    _jsonl(
        tmp_path / "rounds.jsonl",
        [
            {"step": 0, "pause_s": 30.0, "preflight": {"rollouts": 8}, "reports": [critic]},
            {"step": 2, "reports": [accepted]},
        ],
    )
    got = bench_collect.collect_run(tmp_path)
    assert got["preflight_pause_s"] == 30.0 and got["pause_s"] == 32.0
    assert got["wall_s"] == 30.0 + 10.0 + 12.0 and got["ckpt_wall"] == {"1": 40.0, "2": 52.0}
    assert got["probe_rollouts"] == 20.0 and got["probe_groups"] == 5.0 and got["groups_trained"] == 4
