"""The public API for a user's own TRL script (`trainer.api`) and `examples/own_trl_script.py`, run for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.api import _override
from trainer.config import ConfigError

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "name,value,expect",
    [
        ("max_steps", 8, "train.max_steps=8"),
        ("evolve_every", 2, "harness.evolve_every=2"),
        ("run_dir", "runs/x", "run_dir=runs/x"),
        ("evolver__sample_k", 8, "evolver.sample_k=8"),
        ("interfaces", ["sampling"], 'evolver.interfaces=["sampling"]'),
    ],
)
def test_keyword_settings_name_config_fields(name, value, expect):
    assert _override(name, value) == expect


def test_unknown_keyword_setting_says_how_to_write_it():
    with pytest.raises(ConfigError, match="'max_stpes' is in no section.*section__max_stpes"):
        _override("max_stpes", 3)


@pytest.mark.slow
def test_example_script_trains_with_the_harness(tmp_path, tiny_model_dir):
    run_dir = tmp_path / "own"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, str(REPO / "examples" / "own_trl_script.py"), "--run-dir", str(run_dir), "--max-steps", "4"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "harness version after training" in r.stdout
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    rounds = [json.loads(line) for line in (run_dir / "rounds.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rounds] == [2], rounds  # evolve_every=2; no round after the last step
    assert (run_dir / "checkpoints" / "checkpoint-2" / "harness_version.json").is_file()


@pytest.mark.slow
def test_attach_refuses_args_that_would_make_the_harness_wrong(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from trainer.api import harness_parts

    parts = harness_parts(REPO / "configs" / "tiny.yaml", run_dir=str(tmp_path / "run"), max_steps=4)
    try:
        grpo = GRPOConfig(
            output_dir=str(tmp_path / "ck"),
            max_steps=4,
            per_device_train_batch_size=8,
            num_generations=8,
            save_steps=3,
            shuffle_dataset=True,
            use_cpu=True,
            bf16=False,
            report_to="none",
        )
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        tok = AutoTokenizer.from_pretrained(tiny_model_dir, padding_side="left")
        trainer = parts.trainer_class(model=model, processing_class=tok, args=grpo, **parts.trainer_kwargs())
        with pytest.raises(ConfigError) as err:
            parts.attach(trainer)
        msg = str(err.value)
        assert "num_generations=8" in msg and "shuffle_dataset=True" in msg and "save_steps=3" in msg
        assert parts.callback.trainer is None
    finally:
        parts.close()
