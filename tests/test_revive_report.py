"""benchmarks/revive_report.py: issue 30's yardsticks from run folders, on a hand-made pair of runs."""

from __future__ import annotations

import json

import pytest

from benchmarks.revive_report import dead_levels, main, per_task, seed_report

DEAD, LIVE = 0.0, 0.2


def _metrics(rows):
    return [
        {
            "step": s,
            "tasks": tasks,
            "group_stds": stds,
            # A dead group of task "b" ties at a partial credit (flat), any other at zero (all-low).
            "group_means": [
                0.5 if std < 0.05 and t == "b" else 0.0 if std < 0.05 else 0.4 for t, std in zip(tasks, stds)
            ],
            "n_groups": len(tasks),
            "dead_share": sum(x < 0.05 for x in stds) / len(tasks),
            "train_step_s": 10.0,
        }
        for s, (tasks, stds) in enumerate(rows, start=1)
    ]


def _write(folder, metrics, rounds=()):
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (folder / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    (folder / "config.yaml").write_text("train:\n  num_generations: 4\n")


@pytest.fixture
def pair(tmp_path):
    # Fixed: task a dead in both early steps, b live; after step 2, a dead again and b live.
    fixed = _metrics(
        [(["a", "b"], [DEAD, LIVE]), (["a", "b"], [DEAD, LIVE]), (["a", "b"], [DEAD, LIVE]), (["a", "b"], [DEAD, LIVE])]
    )
    _write(tmp_path / "fixed", fixed[:2])
    (tmp_path / "fixed.json").write_text(json.dumps({"steps": fixed, "zero_var_trained": 0.5}))
    # HarnessRL: a repaired before step 1 (v1, confirmed at step 2), then a varies in one of its two late groups.
    h = _metrics(
        [(["a", "b"], [LIVE, LIVE]), (["b", "b"], [LIVE, LIVE]), (["a", "b"], [DEAD, LIVE]), (["a", "b"], [LIVE, LIVE])]
    )
    rounds = [
        {
            "step": 0,
            "pause_s": 5.0,
            "preflight": {"rollouts": 8},
            "reports": [
                {
                    "task_id": "a",
                    "decision": "accepted",
                    "committed_version": 1,
                    "failure_type": "collapse_low",
                    "interface": "guidance",
                    # A first hint refused without the control's top-up, a second one passing and then getting it.
                    "attempts": [
                        {"template": "hint", "numbers": {"cost_probe_rollouts": 4.0, "seq_control_spared": 4.0}},
                        {"template": "hint", "numbers": {"cost_probe_rollouts": 8.0, "seq_control_late": 4.0}},
                    ],
                    # Tried on a similar task too: generalisation's probes are generation as well.
                    "generalised": {"decision": "rejected", "numbers": {"cost_probe_rollouts": 4.0}},
                }
            ],
        },
        {
            "step": 2,
            "pause_s": 5.0,
            "provisional": {"verdicts": [{"version": 1, "verdict": "confirm"}]},
            "reports": [
                {
                    "task_id": "b",
                    "decision": "rejected",
                    "failure_type": "blind_criterion",
                    "interface": "guidance",
                    "attempts": [{"numbers": {"cost_probe_rollouts": 4.0}}, {"numbers": {"cost_probe_rollouts": 2.0}}],
                }
            ],
        },
    ]
    _write(tmp_path / "h", h, rounds)
    return tmp_path


def test_per_task_counts_groups_and_dead_groups_by_step_range(pair):
    from trainer.io import read_jsonl

    m = read_jsonl(pair / "h" / "metrics.jsonl")
    assert per_task(m, 1, 2) == {"a": [1, 0], "b": [3, 0]}
    assert per_task(m, 3, 4) == {"a": [2, 1], "b": [2, 0]}
    with pytest.raises(ValueError, match="per-step task ids"):
        per_task([{"step": 1, "n_groups": 2}], 1, 1)


def test_seed_report_finds_the_chronic_task_and_its_confirmed_repair(pair):
    r = seed_report(pair / "h", pair / "fixed", pair / "fixed.json", early=2)
    assert list(r["chronic"]) == ["a"]
    a = r["chronic"]["a"]
    assert a["harnessrl_late"] == {"groups": 2, "dead": 1, "varying_share": 0.5} and a["confirmed_repair_by_early"]
    assert r["dead_after_early"] == {"harnessrl": 1, "fixed": 2.0, "groups": 4} and r["dead_after_early_ratio"] == 0.5
    assert r["zero_var_trained"] == {"harnessrl": 1 / 8, "fixed": 0.5}
    assert r["extra_generation"]["generalise_probe_rollouts"] == 4.0
    assert r["extra_generation"]["share"] == pytest.approx((8 + 12 + 6 + 4) / (8 * 4))
    assert r["accepted"] == {"all": 1, "dead": 1, "share_dead": 1.0}
    assert r["pause"]["share"] == pytest.approx(10 / 50)
    # The critic's probes, by where they were spent (generalisation's are counted apart, above).
    assert r["critic_probes"] == [
        {
            "round": "preflight",
            "class": "dead",
            "interface": "guidance",
            "decision": "accepted",
            "reports": 1,
            "rollouts": 12.0,
            "control_spared": 4.0,
            "control_late": 4.0,
        },
        {
            "round": "regular",
            "class": "blind",
            "interface": "guidance",
            "decision": "rejected",
            "reports": 1,
            "rollouts": 6.0,
            "control_spared": 0.0,
            "control_late": 0.0,
        },
    ]


def test_the_cli_refuses_unmatched_seed_lists(pair, capsys):
    with pytest.raises(SystemExit):
        main(["--harnessrl", str(pair / "h"), "--fixed-early", "x", "y", "--fixed-summary", "z", "--out", "o.json"])
    assert "one --harnessrl" in capsys.readouterr().err


def test_a_committed_job_summary_stands_in_for_the_short_fixed_run(pair):
    """The fixed arm's early steps read the same from its job summary's `steps` as from its run folder."""
    from_folder = seed_report(pair / "h", pair / "fixed", pair / "fixed.json", early=2)
    from_summary = seed_report(pair / "h", pair / "fixed.json", pair / "fixed.json", early=2)
    # The summary covers every step, so only it also splits the late cut with fixed's own late rates.
    assert from_folder.pop("late_cut") is None and from_summary.pop("late_cut") is not None
    assert from_summary == from_folder and list(from_summary["chronic"]) == ["a"]


def test_the_late_cut_splits_exactly_with_fixed_own_late_rates(pair, tmp_path):
    """Fewer draws + revival = fixed's late dead groups - HarnessRL's; a variant's groups count as its task's."""
    r = seed_report(pair / "h", pair / "fixed.json", pair / "fixed.json", early=2)["late_cut"]
    # Fixed's a is dead in both late groups (rate 1); HarnessRL drew a twice as well, one of them dead.
    assert (r["fewer_draws"], r["revival"], r["fixed_late_dead"], r["harnessrl_late_dead"]) == (0.0, 1.0, 2, 1)
    # HarnessRL draws a harder variant of b in place of a: one draw of a fewer, b's groups stay live.
    h = _metrics(
        [
            (["a", "b"], [DEAD, LIVE]),
            (["a", "b"], [DEAD, LIVE]),
            (["b.v2-words20", "b"], [LIVE, LIVE]),
            (["a", "b"], [LIVE, LIVE]),
        ]
    )
    (tmp_path / "hv.json").write_text(json.dumps({"steps": h}))
    out = tmp_path / "cut.json"
    assert main(["--cut", f"{tmp_path / 'hv.json'}={pair / 'fixed.json'}", "--early", "2", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["total"] == {"fewer_draws": 1.0, "revival": 1.0}
    assert got["hv"]["tasks"]["b"]["harnessrl_late"] == {"groups": 3, "dead": 0}
    # A fixed source that stops before HarnessRL's last step has no late rates to give.
    with pytest.raises(ValueError, match="end before step 4"):
        main(["--cut", f"{tmp_path / 'hv.json'}={pair / 'fixed'}", "--early", "2", "--out", str(out)])


def test_dead_groups_are_counted_by_the_level_they_tie_at(pair, tmp_path):
    """All-low, all-high or flat (a partial credit every answer got), as the detector types them, per task too."""
    rows = _metrics([(["a", "b", "c"], [DEAD, DEAD, LIVE]), (["b", "c"], [DEAD, DEAD]), (["a"], [DEAD])])
    rows[1]["group_means"][1] = 1.0  # c's dead group at step 2: every answer met every criterion
    got = dead_levels(rows, 2, 3)
    assert got["kinds"] == {"all_low": 1, "all_high": 1, "flat": 1}
    assert got["tasks"] == {
        "a": {"groups": 1, "dead": 1, "dead_levels": [0.0]},
        "b": {"groups": 1, "dead": 1, "dead_levels": [0.5]},
        "c": {"groups": 1, "dead": 1, "dead_levels": [1.0]},
    }
    # From job summaries (their per-step rows), without the fixed arm; and in seed_report after the early steps.
    (tmp_path / "h1.json").write_text(json.dumps({"steps": rows}))
    out = tmp_path / "levels.json"
    assert main(["--levels", str(tmp_path / "h1.json"), "--early", "1", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["total"] == got["kinds"] and written["h1"] == got
    r = seed_report(pair / "h", pair / "fixed", pair / "fixed.json", early=2)
    assert r["dead_levels_after_early"]["kinds"] == {"all_low": 1, "all_high": 0, "flat": 0}
