"""The benchmark's sitting machinery of issue 32: cheaper seeds (step 0 and the final step only past the first two),
the second held-out set (train-split tasks in no arm's pool), older summaries standing in for an unchanged arm
(`bench_collect.stand_ins`), and the `gpu-4b` preset. Fast and offline: planning, synthetic summaries, rendering."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_collect  # noqa: E402
import bench_render  # noqa: E402
import bench_run  # noqa: E402
import bench_spec  # noqa: E402
import bench_stats  # noqa: E402
import bench_tables  # noqa: E402


def _load_compare():
    spec = importlib.util.spec_from_file_location("bench_compare_sitting", ROOT / "benchmarks" / "compare.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


compare = _load_compare()


def _args(tmp_path, *extra):
    return compare.resolve_args(compare.build_parser().parse_args(["--preset", "tiny", "--out", str(tmp_path), *extra]))


# -- planning ----------------------------------------------------------------------------------------------
def test_seeds_past_the_first_two_evaluate_only_the_base_and_the_final_step(tmp_path):
    args = _args(tmp_path, "--seeds", "0,1,2,3", "--arms", "fixed,harnessrl,no-critic", "--steps", "6")
    arms = [j for j in bench_run.plan(args) if j.kind == "arm"]
    for j in arms:
        assert j.full_curve == (j.seed in (0, 1)), j.name
        assert j.eval_every == (1 if j.full_curve else 6), j.name  # tiny: eval every step; else the last only
    assert {j.seed for j in arms if j.arm == "no-critic"} == {0}  # ablations: the first seed, a full curve
    every = bench_run.plan(_args(tmp_path, "--seeds", "0,1,2", "--arms", "fixed", "--full-curve-seeds", "0"))
    assert all(j.full_curve and j.eval_every == 1 for j in every[1:])


def test_second_heldout_set_is_train_tasks_outside_every_pool(tmp_path):
    from harness.data import load_suite

    jobs = bench_run.plan(_args(tmp_path, "--arms", "fixed,skip"))
    suite = {t.id: t for t in load_suite(str(ROOT / "data" / "rubric-mix-lite"))}
    pool = next(o for o in jobs[1].overrides if o.startswith("data.tasks="))[len("data.tasks=[") : -1].split(",")
    held = jobs[0].train_heldout_tasks
    assert len(held) == 5 and len({suite[t].domain for t in held}) == 5  # tiny: one per domain
    assert all(suite[t].split == "train" and t not in pool for t in held)
    assert {tuple(j.train_heldout_tasks) for j in jobs} == {tuple(held)}  # the base and every arm: one set
    assert {j.train_heldout_k for j in jobs} == {2}
    off = bench_run.plan(_args(tmp_path, "--train-heldout-k", "0"))
    assert all(not j.train_heldout_tasks and j.train_heldout_k == 0 for j in off)
    # The base job checks the set against the arms' pool, not the config's own task list (a preset's pool may leave
    # the config's tasks out, as smollm2-40's does): a config listing a held-out task must not fail the base eval.
    cfg = yaml.safe_load(Path(jobs[0].config).read_text())
    cfg.setdefault("data", {})["tasks"] = held[:1]
    (tmp_path / "listed.yaml").write_text(yaml.safe_dump(cfg))
    base = copy.deepcopy(jobs[0])
    base.config = str(tmp_path / "listed.yaml")
    assert [t.id for t in bench_run._eval_setup(base)[2]] == held
    # The worker refuses a set that overlaps the pool (a job spec edited by hand, or a changed suite).
    bad = copy.deepcopy(jobs[1])
    bad.train_heldout_tasks = [pool[0]]
    with pytest.raises(ValueError, match="outside the pool"):
        bench_run._eval_setup(bad)


@pytest.mark.parametrize("argv, message", [(["--full-curve-seeds", "-1"], "--full-curve-seeds must be >= 0")])
def test_new_options_say_what_to_fix(argv, message):
    with pytest.raises(SystemExit, match=message):
        compare.resolve_args(compare.build_parser().parse_args(["--preset", "tiny", *argv]))


def test_gpu_4b_preset_is_valid_and_reports_to_its_own_file(tmp_path):
    from trainer.config_loader import load_config

    p = bench_spec.PRESETS["gpu-4b"]
    assert p.config == "configs/gpu-4b.yaml" and "GPU only" in p.note and p.report_name == "RESULTS-gpu.md"
    args = compare.resolve_args(
        compare.build_parser().parse_args(["--preset", "gpu-4b", "--arms", "all", "--out", str(tmp_path / "g")])
    )
    assert Path(args.report).name == "RESULTS-gpu.md"
    for job in bench_run.plan(args)[1:]:
        if job.runner == "plain":
            continue  # plain TRL on the CPU model only (bench_plain); not a GPU arm
        cfg = load_config(job.config, job.overrides)
        assert cfg.model.lora and cfg.train.max_steps == p.steps and len(cfg.data.tasks) == 10, job.name
        assert cfg.train.use_vllm and cfg.train.bf16


# -- summaries ---------------------------------------------------------------------------------------------
def _ev(tasks: dict[str, tuple[float, float]]) -> dict:
    n = len(tasks)
    return {
        "avg_at_k": sum(a for a, _ in tasks.values()) / n,
        "audit": sum(b for _, b in tasks.values()) / n,
        "domains": {"medical": {"avg_at_k": 0.3, "audit": 0.4}},
        "length_corr": 0.0,
        "mean_words": 10.0,
        "seconds": 1.0,
        "tasks": {t: {"avg": a, "audit": b} for t, (a, b) in tasks.items()},
    }


def _summary(arm: str, seed: int, code: str, evals: dict[int, dict], *, full_curve: bool = True) -> dict:
    return {
        "kind": "arm",
        "name": f"{arm}-s{seed}",
        "arm": arm,
        "seed": seed,
        "code": {"code_hash": code, "commit": "c" * 40, "dirty": False, "taken": "2026-12-06 00:00 UTC"},
        "job": {"full_curve": full_curve},
        "evals": {str(s): e for s, e in evals.items()},
    }


def _group(code: str, jobs: list[dict]) -> dict:
    return {"code_hash": code, "commits": ["c" * 10], "dirty": False, "taken": "", "jobs": jobs}


def test_an_arm_shown_equal_at_two_seeds_lets_older_summaries_stand_in():
    same = lambda sd: {4: _ev({"a": (0.1 * sd, 0.2), "b": (0.3, 0.4)})}  # noqa: E731
    new = [_summary("fixed", s, "new", same(s)) for s in (0, 1)]
    old = [_summary("fixed", s, "old", same(s)) for s in (0, 1, 2, 3)]
    borrowed, notes = bench_collect.stand_ins(new, [_group("old", old)])
    assert [b["name"] for b in borrowed] == ["fixed-s2", "fixed-s3"]
    assert borrowed[0]["stand_in"] == {"code_hash": "old", "shown_equal_seeds": [0, 1]}
    assert notes == [{"arm": "fixed", "seeds": [2, 3], "code_hash": "old", "shown_equal_seeds": [0, 1]}]
    # One task differing at one seed: the code path changed, nothing stands in.
    changed = copy.deepcopy(old)
    changed[1]["evals"]["4"]["tasks"]["b"]["audit"] = 0.41
    assert bench_collect.stand_ins(new, [_group("old", changed)]) == ([], [])
    # One seed shown equal is not enough.
    assert bench_collect.stand_ins(new[:1], [_group("old", old)]) == ([], [])
    # Another arm's equality says nothing about this one.
    other = [_summary("skip", s, "new", same(s)) for s in (0, 1)]
    assert bench_collect.stand_ins(other, [_group("old", old)]) == ([], [])


def test_stand_ins_are_named_in_the_report():
    notes = [{"arm": "fixed", "seeds": [2], "code_hash": "o" * 64, "shown_equal_seeds": [0, 1]}]
    text = "\n".join(bench_render.stand_in_lines(notes))
    assert "fixed at seeds [2] comes from older code `oooooooooooo`" in text
    assert "equal this code's on every held-out task at seeds [0, 1]" in text


def test_curves_and_steps_to_best_come_from_the_seeds_with_full_curves():
    def run(arm, seed, curve, full=True):
        evals = {s: _ev({"a": (sc, au)}) for s, sc, au in curve}
        r = _summary(arm, seed, "x", evals, full_curve=full)
        r["summary"] = {"curve": [(s, 100 * sc, 100 * au) for s, sc, au in curve], "best_step": None}
        return r

    runs = [
        run("fixed", 0, [(4, 0.3, 0.3), (8, 0.5, 0.5), (12, 0.4, 0.4)]),
        run("fixed", 2, [(12, 0.9, 0.9)], full=False),
    ]
    curve = bench_tables.heldout_curves(runs)["fixed"]
    assert curve.steps == [4, 8, 12] and curve.score[-1] == pytest.approx(40.0)  # seed 2's final point left out
    assert not bench_stats.has_full_curve(runs[1]) and bench_stats.has_full_curve({"arm": "x"})  # old summaries


def test_second_heldout_set_is_paired_beside_the_test_tasks():
    def run(arm, seed, heldout):
        ev = _ev({"t": (0.3, 0.3)})
        ev["train_heldout"] = _ev(heldout)
        r = _summary(arm, seed, "x", {2: ev})
        r["summary"] = {"final_step": 2}
        return r

    runs = [
        run("fixed", 0, {"a": (0.2, 0.2), "b": (0.4, 0.4)}),
        run("harnessrl", 0, {"a": (0.3, 0.5), "b": (0.4, 0.5)}),
    ]
    arms = {a: {"final_train_heldout": None, "final_train_heldout_audit": None} for a in ("fixed", "harnessrl")}
    rows = bench_tables.heldout_train_rows({"runs": runs, "arms": arms})
    assert [(r.arm, r.ref, r.seeds, r.n_tasks) for r in rows] == [("harnessrl", "fixed", [0], 2)]
    assert rows[0].audit[0] == pytest.approx(20.0) and rows[0].score[0] == pytest.approx(5.0)
