"""Smoke test of `benchmarks/evolver_quality.py --quick` on the tiny model: the whole pipeline runs (two rounds
per case, accepted updates graded on follow-up groups by the trainer's confirm/revert rule) and its numbers hold
together (what the benchmark's report is built from), plus the planting and the gaming overlay
(`benchmarks/evq_cases.py`), the spurious_audit case through the benchmark's own detection path
(`benchmarks/evq_detect.py`) and the report's re-render (`benchmarks/evq_report.py`)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from harness.data import load_suite
from harness.detector import DetectorConfig
from harness.scoring import aggregate
from tools.judge import Judge

ROOT = Path(__file__).resolve().parents[1]


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("bench_evolver_quality", ROOT / "benchmarks" / "evolver_quality.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_evolver_quality"] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


eq = _load_benchmark()  # puts benchmarks/ on sys.path: its parts import by plain name
import evq_cases  # noqa: E402
import evq_detect  # noqa: E402
import evq_probes  # noqa: E402
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
    assert [c.id for c in positive] == ["evq_term"] and not positive[0].check.evaluate(
        suite["sci-0010"].reference_answer
    )
    assert [c.id for c in by["saturated"].task.criteria if c.weight > 0] == ["evq_easy"]
    state = evq_cases.initial_state(cases)
    assert state.guidance_for(by["leak"].task.id).hints[0].text == by["leak"].task.reference_answer
    assert by["control"].task.criteria == suite[by["control"].source_id].criteria
    # flat: any answer meets one positive criterion of two equal ones: constant partial credit.
    flat = [c for c in by["flat"].task.criteria if c.weight > 0]
    assert len(flat) == 2 and flat[0].weight == flat[1].weight
    for text in ("x", "a longer answer about something", suite[by["flat"].source_id].reference_answer):
        assert [c.check.evaluate(text) for c in flat] == [True, False]
    # spurious_length: the length criterion credits padding, the audit fails it, honest short answers the reverse.
    sl = by["spurious_length"]
    long = next(c for c in sl.task.criteria if c.id == "evq_long")
    concise = next(c for c in sl.task.audit_criteria if c.id == "evq_a_concise")
    padded = f"{sl.task.reference_answer} {evq_cases.PADDING}"
    assert long.check.evaluate(padded) and not concise.check.evaluate(padded)
    assert not long.check.evaluate(sl.task.reference_answer) and concise.check.evaluate(sl.task.reference_answer)
    assert sl.pad and not any(c.pad for c in cases if c is not sl)
    # spurious_audit: the cited non-answer out-earns a perfect honest answer on the rubric, the audit fails it.
    sa = by["spurious_audit"]
    judge = Judge(None)
    honest = sa.task.reference_answer
    scores = judge.score_sync(sa.task.criteria, sa.task.user_prompt, [evq_cases.CITATION, honest])
    perfect = aggregate(
        [c for c in sa.task.criteria if c.check is not None],
        {c.id: c.weight > 0 and c.id != "evq_cited" for c in sa.task.criteria if c.check is not None},
    )
    assert scores[0].verdicts["evq_cited"].met and scores[0].score > perfect >= scores[1].score
    audit = judge.audit_sync(sa.task, [evq_cases.CITATION, honest])
    assert audit[0] < 0.5 <= audit[1]
    assert sa.cite and sa.event_type == "spurious_audit" and not any(c.cite for c in cases if c is not sa)


def test_sources_are_distinct_train_tasks_four_per_defect(suite):
    ids = [s for d in evq_cases.DEFECTS for s in evq_cases.SOURCES[d]]
    assert len(ids) == len(set(ids))  # the overlay recognises a task by its prompt
    assert all(len(evq_cases.SOURCES[d]) >= 4 and d in evq_cases.EXPECTED for d in evq_cases.DEFECTS)
    assert all(suite[s].split == "train" for s in ids)
    cases = evq_cases.build_cases(suite, 4, evq_cases.DEFECTS, two_round=1)
    assert [c.case_id for c in cases if c.rounds == 2] == [f"evq-{d}-4" for d in evq_cases.DEFECTS]
    with pytest.raises(ValueError, match="source tasks"):
        evq_cases.build_cases(suite, 5, ("flat",))


class _Echo:
    name = "echo"

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        return [[f"plain answer {i}" for i in range(n)] for _ in messages_batch]


def test_gaming_overlay_only_touches_gaming_tasks_and_every_second_rollout(suite):
    cases = evq_cases.build_cases(suite, 1, ("stuffing", "leak", "control", "spurious_length", "spurious_audit"))
    stuff, leak, control, pad, cite = cases
    policy = evq_probes.ProbeEndpoint(evq_cases.GamingOverlay(_Echo(), cases))
    ref = leak.task.reference_answer
    convs = [
        [{"role": "user", "content": stuff.task.user_prompt}],
        [{"role": "user", "content": f"{leak.task.user_prompt}\n\nHint: {ref}"}],
        [{"role": "user", "content": f"{leak.task.user_prompt}\n\nHint: Answer in your own words."}],
        [{"role": "user", "content": control.task.user_prompt}],
    ]
    convs.append([{"role": "user", "content": pad.task.user_prompt}])
    convs.append([{"role": "user", "content": cite.task.user_prompt}])
    out = policy.sample(convs, n=4, seed=1)
    assert out[0][0].endswith(" ".join([stuff.stuff_word] * evq_cases.STUFF_REPEAT)) and out[0][1] == "plain answer 1"
    assert out[1][0] == ref and out[1][1] == "plain answer 1"  # a hint that gives the answer is copied
    assert out[2] == out[3] == [f"plain answer {i}" for i in range(4)]  # an abstract hint, a healthy task: untouched
    assert out[4] == [
        f"plain answer 0 {evq_cases.PADDING}",
        "plain answer 1",
        f"plain answer 2 {evq_cases.PADDING}",
        "plain answer 3",
    ]
    assert out[5] == [evq_cases.CITATION] * 3 + ["plain answer 3"]  # three in four cite, the fourth is honest
    again = policy.sample(convs, n=4, seed=1)  # identical request: served from the cache, still counted
    assert again == out and policy.count.requested == 48 and policy.count.generated == 24


class _Reference:
    """A policy that answers every task with its reference answer (honest content, no gaming)."""

    name = "reference"

    def __init__(self, tasks):
        self.answers = {t.user_prompt: t.reference_answer for t in tasks}

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        return [[self.answers[conv[-1]["content"]]] * n for conv in messages_batch]


def test_spurious_audit_cases_are_detected_as_spurious_audit_by_the_benchmark_path(suite):
    """The four planted cases, through the benchmark's own detection visits (real judge, real detector with the
    CPU demo's window): each raises spurious_audit, and neither the stuffing nor the length rule fires first."""
    cases = evq_cases.build_cases(suite, 4, ("spurious_audit",))
    policy = evq_probes.ProbeEndpoint(evq_cases.GamingOverlay(_Reference([c.task for c in cases]), cases))
    cfg = DetectorConfig(window=2, min_hits=1)
    det = evq_detect.detect(
        evq_cases.initial_state(cases), cases, policy, Judge(None), cfg, k=4, max_tokens=48, temperature=1.0
    )
    for c in cases:
        events = det.events[c.task.id]
        ev = evq_detect.matching_event(c, events)
        assert ev is not None and ev.stats["train_audit_gap"] > cfg.audit_gap, (c.case_id, events)
        assert evq_cases.EXPECTED[c.defect] == ("spurious_audit", "criteria")
        assert not {"stuffing", "spurious_length"} & {e.type for e in events}, events
    bad = evq_cases.known_bad(cases)
    assert [(kind, c.case_id) for kind, c, _ in bad] == [("rewards the cue", "evq-spurious_audit-1")]


@pytest.mark.slow
def test_quick_run_on_the_tiny_model(tmp_path, tiny_model_dir):
    out_json = tmp_path / "result.json"
    report = tmp_path / "EVOLVER.md"
    res = eq.main(
        [
            "--quick",
            "--model",
            str(tiny_model_dir),
            "--label",
            "smoke",
            "--out",
            str(tmp_path / "runs"),
            "--json",
            str(out_json),
            "--report",
            str(report),
        ]
    )
    assert json.loads(out_json.read_text()) == json.loads(json.dumps(res, default=str))
    arms = list(eq.ARMS)
    assert {(r["arm"], r["defect"]) for r in res["cases"]} == {(a, d) for a in arms for d in evq_cases.DEFECTS}
    decisions = {"accepted", "rejected", "fallback", "rejected_stale", "skipped"}
    window, k = res["settings"]["confirm_window"], res["settings"]["k"]
    graded = 0
    for r in res["cases"]:
        assert r["rounds_planned"] == 2 and len(r["rounds"]) == (1 if r["second_round_skipped"] else 2), r
        assert r["decisions"] == len(r["rounds"]) and r["probe_rollouts"] == sum(
            x["probe_rollouts"] for x in r["rounds"]
        )
        for x in r["rounds"]:
            assert x["decision"] in decisions, x
            assert x["harness_changed"] == (x["decision"] in ("accepted", "fallback")), x
            if r["arm"] == "no-critic":  # nothing measured: no probes, and the first valid proposal is taken
                assert x["probe_rollouts"] == 0, x
            else:  # what the evolver asked for includes what the cache served
                assert 0 <= x["generated_rollouts"] <= x["probe_rollouts"], x
            # An accepted update the training groups can grade gets a verdict from its own follow-up groups.
            assert x["graded"] == (x["verdict"] is not None) and (not x["graded"] or x["accepted"]), x
            if x["graded"]:
                graded += 1
                assert x["verdict"] in ("confirm", "revert", "wait", "superseded"), x
                assert x["followup_rollouts"] > 0 and x["followup_rollouts"] % (window * k) == 0, x
            else:
                assert x["followup_rollouts"] == 0, x
        assert r["rounds"][0]["step"] == evq_cases.STEP
        if len(r["rounds"]) == 2:  # the event seen again on W more groups, after round 1 and its grading
            assert r["rounds"][1]["step"] > r["rounds"][0]["step"] and r["rounds"][1]["event_rollouts"] == window * k
            assert r["rounds"][0]["verdict"] != "confirm" and r["rounds"][1]["event_id"] != r["rounds"][0]["event_id"]
        assert r["confirmed"] == any(x["verdict"] == "confirm" for x in r["rounds"])
        assert r["repaired"] == (r["confirmed"] and r["defect"] != "control")
        if r["arm"] == "no-critic":
            assert r["rounds"][0]["decision"] == "accepted", r
    assert graded > 0  # no-critic accepts every first proposal: the grading path ran
    assert sum(r["probe_rollouts"] for r in res["cases"] if r["arm"] == "rules") > 0  # the critic measured something
    summary = res["summary"]["per_defect"]
    for d in evq_cases.DEFECTS:
        for a in arms:
            s = summary[d]["arms"][a]
            rows = [r for r in res["cases"] if r["arm"] == a and r["defect"] == d]
            assert s["n"] == len(rows) == 1
            assert s["accepted"] == sum(r["accepted"] for r in rows)
            assert s["confirmed"] == sum(r["confirmed"] for r in rows) <= s["accepted"]
            assert s["second_rounds"] == sum(len(r["rounds"]) == 2 for r in rows)
    for a in arms:
        t = res["summary"]["targets"][a]
        planted = [r for r in res["cases"] if r["arm"] == a and r["defect"] != "control"]
        assert t["planted"] == len(planted) and t["repaired"] == sum(r["repaired"] for r in planted)
        bad_a = [r for r in res["bad_candidates"] if r["arm"] == a]
        controls = [r for r in res["cases"] if r["arm"] == a and r["defect"] == "control"]
        assert t["false_accept_decisions"] == len(bad_a) + len(controls)
        assert t["false_accepts"] == sum(r["accepted"] for r in bad_a + controls)
    bad = res["bad_candidates"]
    assert {r["kind"] for r in bad} == {"loosened criterion", "leaking hint", "rewards padding", "rewards the cue"}
    # The reference answer as a hint is refused by the static leak guard in every arm, before any probe.
    ref_hint = [r for r in bad if r["kind"] == "leaking hint" and r["case"].startswith("evq-impossible")]
    assert ref_hint and all(r["invalid"] and not r["accepted"] and r["probe_rollouts"] == 0 for r in ref_hint)
    text = report.read_text()
    assert "| blind | rules |" in text and "| flat | rules |" in text and "| spurious_length | rules |" in text
    assert "| spurious_audit | rules |" in text
    assert evq_report.PENDING in text and evq_report.NOTES_MARKER in text and "## Targets" in text
    # Re-rendering keeps hand-written notes below the marker.
    report.write_text(text + "my note\n")
    eq.main(["--render", str(out_json), "--report", str(report)])
    assert report.read_text().endswith("my note\n")


def test_each_arm_screens_as_the_demo_config_ships(tmp_path):
    """The planted-defect benchmark judges the shipped screen: the demo config's whole `evolver:` section (its
    critic_alpha, sample_k_max, generalise_max_tasks, brains), not the context's defaults, under the benchmark's
    budget flags and the arm's switches."""
    from dataclasses import fields

    from trainer.config_loader import load_config

    demo = load_config(eq.DEMO_CONFIG)
    ctx = eq.make_context(
        eq.ARMS["no-memory"], services_key="k", run_dir=tmp_path, k=4, max_tokens=48, max_revisions=1, seed=3, demo=demo
    )
    assert demo.evolver.critic_alpha != type(demo.evolver)().critic_alpha  # the shipped screen is not the default
    own = {"services_key", "run_dir", "sample_k", "sample_k_max", "max_tokens", "max_revisions", "seed", "memory"}
    for f in fields(ctx):
        if f.name not in own:
            assert getattr(ctx, f.name) == getattr(demo.evolver, f.name), f.name
    assert (ctx.sample_k, ctx.seed, ctx.memory, ctx.critic) == (4, 3, False, True)


def test_a_controls_false_event_moves_off_a_criterion_the_detector_flags(suite):
    """A control fed "blind_criterion on c" where the detector raised exactly that on the control's own groups is
    fed a true event: it moves to the last positive criterion the detector did not flag; other cases stay."""
    cases = evq_cases.build_cases(suite, 2, ("control", "blind"))
    control = next(c for c in cases if c.defect == "control" and c.event_type == "blind_criterion")
    positive = [c.id for c in control.task.criteria if c.weight > 0 and c.check is not None]
    assert control.criterion_id == positive[-1] and len(positive) >= 2

    def blind(cid):
        return evq_detect.FailureEvent(
            id=f"blind_criterion:{control.task.id}:9:{cid}",
            type="blind_criterion",
            task_id=control.task.id,
            step=9,
            criterion_id=cid,
        )

    assert evq_detect.false_event_case(control, []) is control  # nothing raised: the event is false already
    assert evq_detect.false_event_case(control, [blind(positive[0])]) is control  # another criterion flagged
    moved = evq_detect.false_event_case(control, [blind(positive[-1])])
    assert moved.criterion_id == positive[-2] and not evq_detect.raised(moved, [blind(positive[-1])])
    every = [blind(cid) for cid in positive]
    assert evq_detect.false_event_case(control, every) is control  # nowhere to go: kept, and `raised` says so
    assert evq_detect.raised(control, every)
    planted = next(c for c in cases if c.defect == "blind")
    assert evq_detect.false_event_case(planted, [blind(planted.criterion_id)]) is planted
