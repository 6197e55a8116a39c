"""`harnessrl train` from the command line: errors that say how to fix, --overwrite, and (slow) the SmolLM2 demo
config as shipped. A SIGKILLed `harnessrl train` finished by `--resume` is tests/test_crash_consistency.py's
(a kill at each fault point, every run-folder invariant checked after the resume)."""

from __future__ import annotations

import pytest

from tests.support.tiny_run import REPO, write_suite
from trainer.cli import main
from trainer.io import read_jsonl


def test_bad_config_exits_2_naming_field_and_fix(tmp_path, capsys):
    rc = main(["train", "--config", str(REPO / "configs" / "tiny.yaml"), "--set", "harness.evolve_every=3"])
    err = capsys.readouterr().err
    assert rc == 2 and "harness.evolve_every" in err and "set train.save_steps=1" in err


def test_unknown_key_suggests_the_right_one(capsys):
    rc = main(["train", "--config", str(REPO / "configs" / "tiny.yaml"), "train.num_generation=4"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown key 'train.num_generation'" in err and "num_generations" in err


def test_missing_model_says_how_to_prepare(tmp_path, capsys):
    suite = write_suite(tmp_path / "suite")
    rc = main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            f"run_dir={tmp_path / 'run'}",
            f"data.suite={suite}",
            f"model.name={tmp_path / 'no-such-model'}",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "harnessrl policy prepare" in err
    assert not (tmp_path / "run").exists()  # nothing written before the model is found


def test_fresh_run_refuses_a_used_folder(tmp_path, capsys):
    suite = write_suite(tmp_path / "suite")
    (tmp_path / "run" / "harness" / "versions").mkdir(parents=True)
    rc = main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            f"run_dir={tmp_path / 'run'}",
            f"data.suite={suite}",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "--resume" in err and "--overwrite" in err


def test_overwrite_starts_afresh_in_a_used_folder(tmp_path, capsys):
    suite = write_suite(tmp_path / "suite")
    run_dir = tmp_path / "run"
    (run_dir / "harness" / "versions").mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text('{"step": 99}\n')
    rc = main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            f"run_dir={run_dir}",
            f"data.suite={suite}",
            "train.max_steps=2",
            "harness.evolver=false",
            "evolver.memory_embedding=hash",
            "--overwrite",
            "--no-progress",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2]  # the old run's lines are gone


@pytest.mark.parametrize(
    "entries,refused",
    [
        (["config.yaml", "harness/versions/v000000.json", "memory/x", "report.html"], False),
        (["config.yaml", "pyproject.toml"], True),  # run_dir=. by mistake must not delete a checkout
    ],
)
def test_clear_run_folder_deletes_only_run_folders(tmp_path, entries, refused):
    from trainer.grpo import clear_run_folder

    for e in entries:
        (tmp_path / "run" / e).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "run" / e).write_text("x")
    if refused:
        with pytest.raises(FileExistsError, match="pyproject.toml"):
            clear_run_folder(tmp_path / "run")
        assert (tmp_path / "run" / "config.yaml").exists()
    else:
        clear_run_folder(tmp_path / "run")
        assert not (tmp_path / "run").exists()


def test_overwrite_and_resume_exclude_each_other(capsys):
    rc = main(["train", "--config", str(REPO / "configs" / "tiny.yaml"), "--overwrite", "--resume"])
    assert rc == 2 and "--overwrite" in capsys.readouterr().err


@pytest.mark.slow
# About 250 s on an idle two-core machine; it ran past the default 600 s at a load average of 10.
@pytest.mark.timeout(1500)
def test_the_demo_config_as_shipped_confirms_a_repair(tmp_path):
    """`make demo`'s training, configs/cpu-demo.yaml unchanged (SmolLM2-135M + LoRA, seed 0): the pre-flight probes
    the 6 pool tasks, rounds follow steps 4 and 8, and training confirms at least one accepted update, which the
    demo's report then shows (on a fresh clone: med-0003's graded split, accepted in the pre-flight, confirmed at
    step 4). About 4 minutes on one thread."""
    run = tmp_path / "run"
    assert main(["train", "--config", str(REPO / "configs" / "cpu-demo.yaml"), f"run_dir={run}", "--no-progress"]) == 0
    assert [m["step"] for m in read_jsonl(run / "metrics.jsonl")] == list(range(1, 11))
    rounds = read_jsonl(run / "rounds.jsonl")
    assert [r["step"] for r in rounds] == [0, 4, 8] and not any("error" in r for r in rounds), rounds
    assert "preflight" in rounds[0] and len(rounds[0]["preflight"]["probed"]) == 6
    verdicts = [v for r in rounds for v in (r.get("provisional") or {}).get("verdicts", [])]
    assert any(v["verdict"] == "confirm" for v in verdicts), verdicts
    assert (run / "final" / "adapter_config.json").is_file()
