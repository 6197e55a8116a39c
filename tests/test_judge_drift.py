"""The judge's drift line (trainer/judge_drift.py): the probe set drawn once and kept in the run folder, re-judged at
each pause by a fresh judge over HTTP (the OpenAI stub), the field in metrics.jsonl, a failure recorded never
raised, the config knob, the report's line, and a short real training run that writes it."""

from __future__ import annotations

import json
import logging

import pytest

from memory.store import TrainingMemory
from tests.support.tiny_run import tiny_config
from trainer.config import ConfigError
from trainer.harness_run import HarnessRun
from trainer.judge_drift import PROBE_FILE, DriftLine, JudgeDrift, ProbeSet, drift_enabled, drift_sentence

MET = '{"met": true, "reason": "ok"}'
UNMET = '{"met": false, "reason": "no"}'


def _run(tmp_path, stub, *overrides) -> HarnessRun:
    cfg = tiny_config(
        tmp_path,
        "evolver.judge_model=openai:stub",
        f"evolver.base_url={stub.base_url}",
        "evolver.memory=false",
        *overrides,
    )
    return HarnessRun(cfg, memory=TrainingMemory.ephemeral())


def test_the_probe_set_is_drawn_once_judged_and_kept_for_a_resume(tmp_path, openai_stub):
    openai_stub.responder = lambda request: MET
    run = _run(tmp_path, openai_stub, "harness.judge_drift_items=6")
    try:
        drift = JudgeDrift(run)
        assert drift.enabled
        drift.begin(0)
        probes = ProbeSet.model_validate_json((run.paths.root / PROBE_FILE).read_text())
        assert len(probes.items) == 6 and probes.first_judged_step == 0 and probes.judge_model == "openai:stub"
        assert all(p.first is True for p in probes.items)
        assert {p.task_id for p in probes.items} <= {t.id for t in run.state.tasks.values() if t.split == "train"}
        before = openai_stub.requests[:]
        # Every judge request holds the criterion as text only: the LLM judged the checked criteria too.
        assert len(before) == 6 and all("<criterion>" in r["messages"][1]["content"] for r in before)

        line = drift.at_pause(2, max_steps=8)["judge_drift"]
        assert line == {
            **line,
            "items": 6,
            "n": 6,
            "failed": 0,
            "agreement": 1.0,
            "met_rate": 1.0,
            "first_met_rate": 1.0,
            "first": False,
        }
        assert len(openai_stub.requests) == 12  # a fresh judge: no cache between pauses
        assert drift.at_pause(3, max_steps=8) == {} and drift.at_pause(8, max_steps=8) == {}  # not a pause step

        # A resumed run (a new JudgeDrift on the same folder) keeps the set: begin draws nothing, judges nothing.
        again = JudgeDrift(run)
        again.begin(4)
        assert len(openai_stub.requests) == 12
        assert ProbeSet.model_validate_json((run.paths.root / PROBE_FILE).read_text()) == probes
    finally:
        run.close()


def test_a_judge_that_changes_its_verdicts_shows_as_drift(tmp_path, openai_stub, caplog):
    openai_stub.responder = lambda request: MET
    run = _run(tmp_path, openai_stub, "harness.judge_drift_items=8")
    try:
        drift = JudgeDrift(run)
        drift.begin(0)
        openai_stub.responder = lambda request: UNMET
        with caplog.at_level(logging.WARNING, logger="trainer.judge_drift"):
            line = DriftLine.model_validate(drift.at_pause(2, max_steps=8)["judge_drift"])
        assert (line.agreement, line.met_rate, line.first_met_rate, line.n) == (0.0, 0.0, 1.0, 8)
        checked = [p for p in ProbeSet.model_validate_json((run.paths.root / PROBE_FILE).read_text()).items]
        with_check = [p.check for p in checked if p.check is not None]
        assert with_check and line.check_agreement == pytest.approx(with_check.count(False) / len(with_check))
        assert "8 of 8 probe verdicts differ from their first judging" in caplog.text
    finally:
        run.close()


def test_a_failing_probe_is_a_warning_and_a_field_never_an_exception(tmp_path, openai_stub, caplog):
    openai_stub.responder = lambda request: MET
    run = _run(tmp_path, openai_stub, "harness.judge_drift_items=4")
    try:
        drift = JudgeDrift(run)
        drift.begin(0)
        openai_stub.fail_next(status=500, times=10_000)  # the judge is down at the pause
        with caplog.at_level(logging.WARNING, logger="trainer.judge_drift"):
            line = drift.at_pause(2, max_steps=8)["judge_drift"]
        assert (line["failed"], line["n"], line.get("agreement")) == (4, 0, None)
        # A damaged probe file: the error is recorded and the file is left as it is (never redrawn over).
        (run.paths.root / PROBE_FILE).write_text("{broken")
        with caplog.at_level(logging.WARNING, logger="trainer.judge_drift"):
            line = drift.at_pause(4, max_steps=8)["judge_drift"]
        assert "not a judge probe set" in line["error"] and "move it aside" in line["error"]
        assert (run.paths.root / PROBE_FILE).read_text() == "{broken"
        assert "the probe failed" in caplog.text
    finally:
        run.close()


def test_the_first_judging_waits_for_a_judge_that_answers(tmp_path, openai_stub):
    openai_stub.responder = lambda request: "no verdict here"
    run = _run(tmp_path, openai_stub, "harness.judge_drift_items=3")
    try:
        drift = JudgeDrift(run)
        drift.begin(0)  # the judge gives no verdict: drawn, not judged, training goes on
        assert ProbeSet.model_validate_json((run.paths.root / PROBE_FILE).read_text()).first_judged_step is None
        openai_stub.responder = lambda request: UNMET
        line = drift.at_pause(2, max_steps=8)["judge_drift"]
        assert line["first"] is True and line["met_rate"] == 0.0 and "agreement" not in line
        assert ProbeSet.model_validate_json((run.paths.root / PROBE_FILE).read_text()).first_judged_step == 2
    finally:
        run.close()


@pytest.mark.parametrize(
    ("overrides", "enabled"),
    [
        ((), False),  # the tiny preset: checks only, which cannot drift
        (("evolver.judge_model=openai:m",), True),
        (("evolver.judge_model=openai:m", "harness.judge_drift=false"), False),
    ],
)
def test_the_knob_defaults_on_only_with_an_llm_judge(tmp_path, overrides, enabled):
    assert drift_enabled(tiny_config(tmp_path, *overrides)) is enabled


def test_drift_without_an_llm_judge_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="harness.judge_drift=true needs an LLM judge"):
        tiny_config(tmp_path, "harness.judge_drift=true")
    with pytest.raises(ConfigError, match="judge_drift_items must be >= 1"):
        tiny_config(tmp_path, "evolver.judge_model=openai:m", "harness.judge_drift_items=0")


def test_the_report_line():
    lines = {
        2: DriftLine(items=8, n=8, agreement=1.0, met_rate=0.5, first_met_rate=0.5, check_agreement=0.75).model_dump(),
        4: DriftLine(items=8, n=8, agreement=0.75, met_rate=0.75, first_met_rate=0.5, check_agreement=0.5).model_dump(),
        6: DriftLine(error="APIConnectionError: down").model_dump(),
    }
    text = drift_sentence(lines)
    assert "8 fixed probe items" in text and "100% at step 2, 75% at step 4" in text
    assert "met rate 50% at first, 75% at step 4" in text and "checks 50%" in text
    assert "failed at 1 pause(s) (steps 6)" in text
    assert drift_sentence({}) is None


@pytest.mark.slow  # ~30 s: a tiny model's training run
@pytest.mark.timeout(300)
def test_a_short_run_writes_the_drift_line_to_metrics_and_the_report(tmp_path, openai_stub):
    from trainer.grpo import train
    from trainer.report import build_report
    from trainer.run_logs import read_metrics

    openai_stub.responder = lambda request: MET
    cfg = tiny_config(
        tmp_path,
        "evolver.judge_model=openai:stub",
        f"evolver.base_url={openai_stub.base_url}",
        "harness.evolver=false",
        "harness.judge_drift_items=4",
        "train.max_steps=3",
    )
    train(cfg, progress=False)
    by_step = {m.step: m for m in read_metrics(cfg.run_path / "metrics.jsonl")}
    assert sorted(by_step) == [1, 2, 3]
    assert by_step[1].judge_drift is None and by_step[3].judge_drift is None
    drift = by_step[2].judge_drift
    assert drift is not None and (drift.items, drift.n, drift.agreement, drift.met_rate) == (4, 4, 1.0, 1.0)
    probe = json.loads((cfg.run_path / PROBE_FILE).read_text())
    assert probe["first_judged_step"] == 0 and len(probe["items"]) == 4
    report = build_report(cfg.run_path).read_text()
    assert "Judge drift (4 fixed probe items" in report and "100% at step 2" in report
