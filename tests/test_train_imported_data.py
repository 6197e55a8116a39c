"""Training on the data users have: a suite folder whose train.jsonl is RaR-style and test.jsonl is
HealthBench-style, and a single HealthBench file split by a seeded share. Their criteria are text-only, so the
LLM judge (here the OpenAI-compatible stub over real HTTP) decides every verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.cli import main

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def _judge(stub) -> None:
    # A verdict that depends on the graded response, so groups have variance and rewards are not all 0;
    # pitfalls ("Advises waiting ...") are never met, or they would cancel the essential criterion's points.
    def verdict(request: dict) -> dict:
        text = json.dumps(request["messages"])
        return {"met": "Advises waiting" not in text and len(text) % 2 == 0, "reason": "stub"}

    stub.responder = verdict


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["folder", "single-file"])
def test_a_few_steps_on_rar_and_healthbench_files(tmp_path, tiny_model_dir, openai_stub, layout):
    if layout == "folder":
        suite = tmp_path / "suite"
        suite.mkdir()
        (suite / "train.jsonl").write_bytes((FIXTURES / "rar_sample.jsonl").read_bytes())
        (suite / "test.jsonl").write_bytes((FIXTURES / "healthbench_sample.jsonl").read_bytes())
        extra = []
    else:
        suite = tmp_path / "all.jsonl"
        suite.write_bytes((FIXTURES / "healthbench_sample.jsonl").read_bytes())
        extra = ["--set", "data.test_share=0.5", "--set", "data.split_seed=3"]
    _judge(openai_stub)
    run_dir = tmp_path / "run"
    rc = main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            f"run_dir={run_dir}",
            f"data.suite={suite}",
            "train.max_steps=2",
            "harness.evolver=false",
            "harness.judge_drift=false",  # its probes would reach the stub too: the requests below are the reward's
            "evolver.judge_model=openai:stub",
            f"evolver.base_url={openai_stub.base_url}",
            "--no-progress",
            *extra,
        ]
    )
    assert rc == 0
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert openai_stub.requests, "the LLM judge decided the text-only criteria"
    from harness.data import load_suite

    split = {t.id: t.split for t in load_suite(suite, test_share=0.5, split_seed=3)}
    drawn = {tid for m in metrics for tid in m["tasks"]}
    assert drawn and all(split[tid] == "train" for tid in drawn)  # held-out tasks are never trained on
    assert any(m["reward"] > 0 for m in metrics) or any(m["reward_std"] > 0 for m in metrics), metrics
