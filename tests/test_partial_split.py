"""The full-and-partial split of a criterion no cached answer meets (`criteria_templates.t_split_partial`)."""

from __future__ import annotations

import statistics

import pytest

from agents import rules_bank as bank
from agents.criteria_templates import t_split_partial
from agents.rollout_signals import RolloutSignals
from agents.template_input import TemplateInput
from harness.checks import BulletCount, CharClass, ContainsAny, EndsWith, Regex, SentenceCount, StartsWith, WordCount
from harness.ops import apply, validate
from harness.scoring import aggregate, programmatic_verdicts
from harness.types import Criterion, FailureEvent, HarnessState, Task

STORY = Task(
    id="story-1",
    domain="writing",
    prompt=[{"role": "user", "content": "Write a two-sentence story about a harbour that ends with '!'."}],
    criteria=[
        Criterion(
            id="topic",
            text="About a harbour.",
            weight=5.0,
            kind="essential",
            check=ContainsAny(phrases=["harbour", "boat"]),
        ),
        Criterion(
            id="bang",
            text="Ends with an exclamation mark.",
            weight=3.0,
            kind="important",
            check=EndsWith(text="!", min_words=10),
        ),
        Criterion(id="list", text="Three bullets.", weight=1.0, kind="optional", check=BulletCount(min=3, max=3)),
    ],
)
STATE = HarnessState.from_tasks([STORY])
# What the policy writes: on topic, never ending with '!', twice with an exclamation inside (cut-off answers).
TEXTS = [
    "The harbour was quiet! Boats rocked in the dark water while the old keeper",
    "A boat came into the harbour at dawn and the gulls followed it along the",
    "Wow! The harbour lights flickered as the storm rolled over the sleeping town and",
    "The harbour keeper counted the boats each night, and one night there was one more",
]


def _input(texts: list[str], task: Task = STORY, state: HarnessState = STATE) -> TemplateInput:
    event = FailureEvent(
        id="e-flat", type="flat", task_id=task.id, step=8, window=[7, 8], window_hits=2, confirmed=True
    )
    return TemplateInput(
        event=event, state=state, task=task, step=8, attempts=[], signals=RolloutSignals(n=len(texts), texts=texts)
    )


def _rewards(task: Task, texts: list[str]) -> list[float]:
    return [
        aggregate(task.criteria, {k: v.met for k, v in programmatic_verdicts(task.criteria, t).items()}) for t in texts
    ]


def test_the_partial_form_is_chosen_on_the_answers_and_revives_their_group():
    assert statistics.pstdev(_rewards(STORY, TEXTS)) == 0.0  # a flat group: everyone meets "topic" only
    upd = t_split_partial(_input(TEXTS))
    assert upd is not None and validate(STATE, upd) == []
    (op,) = upd.ops
    # "bang" (weight 3) is the criterion no answer meets whose partial form, the mark anywhere, splits them; "list"
    # (weight 1) has no partial form any answer meets.
    assert op.criterion_id == "bang"
    full, part = op.into
    assert full.check == STORY.criteria[1].check and full.weight == part.weight == 1.5
    assert part.check == ContainsAny(phrases=["!"], whole_word=False)
    assert part.text == "Ends with an exclamation mark. (partly: mentions '!')"  # words, for a hint to read
    assert "50%" in upd.rationale
    after = apply(STATE, upd).task("story-1")
    rewards = _rewards(after, TEXTS)
    assert statistics.pstdev(rewards) > 0.05  # past the detector's dead threshold
    # An answer that meets the criterion in full earns what it earned before the split.
    done = "The harbour was quiet and every boat was home at last, safe from the storm!"
    assert _rewards(after, [done]) == pytest.approx(_rewards(STORY, [done]))


def test_nothing_when_no_form_splits_the_answers_or_there_are_too_few():
    plain = [t.replace("!", ".") for t in TEXTS]
    assert t_split_partial(_input(plain)) is None  # no answer has a '!' anywhere, nor three bullets or one
    assert t_split_partial(_input(TEXTS[:2])) is None  # fewer answers than a group: nothing to choose on
    assert t_split_partial(_input(["", "", "", ""])) is None  # records that kept no completions


@pytest.mark.parametrize(
    ("check", "meets", "form_meets"),
    [
        (EndsWith(text="?", min_words=6), "so what do you think of the black holes here?", "what? then it went on"),
        (StartsWith(text="Dear"), "Dear Sam, hello", "Hello, dear Sam"),
        (BulletCount(min=3, max=3), "- a\n- b\n- c", "- a"),
        (SentenceCount(min=2, max=2), "One. Two.", "One. Two. Three. Four."),
        (WordCount(min=20), " ".join(["w"] * 20), " ".join(["w"] * 10)),
    ],
)
def test_every_partial_form_is_met_by_whatever_meets_the_check(check, meets, form_meets):
    forms = bank.partial_forms(check)
    assert forms and check not in forms
    assert check.evaluate(meets) and all(f.evaluate(meets) for f in forms)
    assert not check.evaluate(form_meets) and any(f.evaluate(form_meets) for f in forms)


def test_checks_without_an_obvious_part_have_no_partial_form():
    assert bank.partial_forms(CharClass(mode="all_lowercase")) == []
    assert bank.partial_forms(Regex(pattern="^[a-z]+$")) == []
