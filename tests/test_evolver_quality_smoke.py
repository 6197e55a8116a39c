"""Smoke test of `benchmarks/evolver_quality.py --quick` on the tiny model: the whole pipeline runs and its
numbers hold together (what the benchmark's report is built from), plus the planting and the gaming overlay
(`benchmarks/evq_cases.py`) and the report's re-render (`benchmarks/evq_report.py`)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from harness.data import load_suite

ROOT = Path(__file__).resolve().parents[1]


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("bench_evolver_quality", ROOT / "benchmarks" / "evolver_quality.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_evolver_quality"] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


eq = _load_benchmark()  # puts benchmarks/ on sys.path: its parts import by plain name
import evq_cases  # noqa: E402
import evq_report  # noqa: E402


@pytest.fixture(scope="module")
def suite():
    return {t.id: t for t in load_suite(ROOT / "data" / "rubric-mix-lite")}


def test_planted_defects_have_the_promised_shape(suite):
    cases = evq_cases.build_cases(suite, 1, evq_cases.DEFECTS)
    by = {c.defect: c for c in cases}
    assert [c.defect for c in cases] == list(evq_cases.DEFECTS)
    # The blind criterion is met by any non-empty answer; the impossible task rewards only a made-up term.
    blind = next(c for c in by["blind"].task.criteria if c.id == "evq_blind")
    assert blind.check.evaluate("x") and not blind.check.evaluate("")
    positive = [c for c in by["impossible"].task.criteria if c.weight > 0]
    assert [c.id for c in positive] == ["evq_term"] and not positive[0].check.evaluate(suite["sci-0010"].reference_answer)
    assert [c.id for c in by["saturated"].task.criteria if c.weight > 0] == ["evq_easy"]
    state = evq_cases.initial_state(cases)
    assert state.guidance_for(by["leak"].task.id).hints[0].text == by["leak"].task.reference_answer
    assert by["control"].task.criteria == suite[by["control"].source_id].criteria


class _Echo:
    name = "echo"

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        return [[f"plain answer {i}" for i in range(n)] for _ in messages_batch]


def test_gaming_overlay_only_touches_gaming_tasks_and_every_second_rollout(suite):
    cases = evq_cases.build_cases(suite, 1, ("stuffing", "leak", "control"))
    stuff, leak, control = cases
    policy = eq.ProbeEndpoint(evq_cases.GamingOverlay(_Echo(), cases))
    ref = leak.task.reference_answer
    convs = [[{"role": "user", "content": stuff.task.user_prompt}],
             [{"role": "user", "content": f"{leak.task.user_prompt}\n\nHint: {ref}"}],
             [{"role": "user", "content": f"{leak.task.user_prompt}\n\nHint: Answer in your own words."}],
             [{"role": "user", "content": control.task.user_prompt}]]
    out = policy.sample(convs, n=4, seed=1)
    assert out[0][0].endswith(" ".join([stuff.stuff_word] * evq_cases.STUFF_REPEAT)) and out[0][1] == "plain answer 1"
    assert out[1][0] == ref and out[1][1] == "plain answer 1"  # a hint that gives the answer is copied
    assert out[2] == out[3] == [f"plain answer {i}" for i in range(4)]  # an abstract hint, a healthy task: untouched
    again = policy.sample(convs, n=4, seed=1)  # identical request: served from the cache, still counted
    assert again == out and policy.count.requested == 32 and policy.count.generated == 16


@pytest.mark.slow
def test_quick_run_on_the_tiny_model(tmp_path, tiny_model_dir):
    out_json = tmp_path / "result.json"
    report = tmp_path / "EVOLVER.md"
    res = eq.main(["--quick", "--model", str(tiny_model_dir), "--label", "smoke", "--out", str(tmp_path / "runs"),
                   "--json", str(out_json), "--report", str(report)])
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(res, default=str))
    arms = list(eq.ARMS)
    assert {(r["arm"], r["defect"]) for r in res["cases"]} == {(a, d) for a in arms for d in evq_cases.DEFECTS}
    decisions = {"accepted", "rejected", "fallback", "rejected_stale", "skipped"}
    for r in res["cases"]:
        assert r["decision"] in decisions, r
        assert r["harness_changed"] == (r["decision"] in ("accepted", "fallback")), r
        if r["arm"] == "no-critic":  # nothing measured: no probes, and the first valid proposal is taken
            assert r["probe_rollouts"] == 0 and r["decision"] == "accepted", r
        else:  # what the evolver asked for includes what the cache served
            assert 0 <= r["generated_rollouts"] <= r["probe_rollouts"], r
    assert sum(r["probe_rollouts"] for r in res["cases"] if r["arm"] == "rules") > 0  # the critic measured something
    summary = res["summary"]["per_defect"]
    for d in evq_cases.DEFECTS:
        for a in arms:
            s = summary[d]["arms"][a]
            rows = [r for r in res["cases"] if r["arm"] == a and r["defect"] == d]
            assert s["n"] == len(rows) == 1
            assert s["accepted"] == sum(r["accepted"] for r in rows)
    bad = res["bad_candidates"]
    assert {r["kind"] for r in bad} == {"loosened criterion", "leaking hint"}
    # The reference answer as a hint is refused by the static leak guard in every arm, before any probe.
    ref_hint = [r for r in bad if r["kind"] == "leaking hint" and r["case"].startswith("evq-impossible")]
    assert ref_hint and all(r["invalid"] and not r["accepted"] and r["probe_rollouts"] == 0 for r in ref_hint)
    text = report.read_text()
    assert "| blind | rules |" in text and evq_report.PENDING in text and evq_report.NOTES_MARKER in text
    # Re-rendering keeps hand-written notes below the marker.
    report.write_text(text + "my note\n")
    eq.main(["--render", str(out_json), "--report", str(report)])
    assert report.read_text().endswith("my note\n")
