"""harness.sampling and harness.guidance: seeded weighted draws, reveal schedules, prompt rendering, leak guard."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from harness.guidance import hint_leaks_reference, render_prompt, reveal_fraction, visible_hints
from harness.ops import apply
from harness.sampling import TaskSampler
from harness.types import Guidance, HarnessUpdate, Hint, Message, Schedule
from tests.support.harness_factories import state, task


def test_weights_floor_and_sum() -> None:
    s = state()
    s.sampling["med-001"].weight = 8.0
    w = TaskSampler(lambda: s, seed=0, floor=0.1).weights()
    assert set(w) == {"med-001", "med-002", "med-003"}  # test task never sampled
    assert sum(w.values()) == pytest.approx(1.0)
    assert w["med-001"] == pytest.approx(0.9 * 8 / 10 + 0.1 / 3)
    assert w["med-002"] == pytest.approx(0.9 * 1 / 10 + 0.1 / 3)


def test_draw_is_seeded_and_follows_weights() -> None:
    s = state()
    s.sampling["med-001"].weight = 8.0
    a, b = TaskSampler(lambda: s, seed=3), TaskSampler(lambda: s, seed=3)
    draws = a.draw(4000)
    assert draws == b.draw(4000)
    counts = Counter(draws)
    assert counts["med-001"] > 2500 and counts["med-002"] > 100  # floor keeps down-weighted tasks reachable


def test_updates_show_up_on_next_draw() -> None:
    holder = {"s": state()}
    sampler = TaskSampler(lambda: holder["s"], seed=1)
    assert "med-002" in sampler.draw(200)
    holder["s"] = apply(
        holder["s"],
        HarnessUpdate(
            interface="sampling",
            ops=[
                {"op": "retire", "task_id": "med-002"},
                {
                    "op": "add_variant",
                    "task_id": "med-001",
                    "variant_id": "v1",
                    "prompt": [{"role": "user", "content": "Harder?"}],
                },
            ],
        ),
    )
    drawn = set(sampler.draw(300))
    assert "med-002" not in drawn and "v1" in drawn


def test_multiplier_and_zero_multipliers() -> None:
    s = state()
    sampler = TaskSampler(lambda: s, seed=0, floor=0.0)
    sampler.set_multiplier("med-001", 0.0)
    assert sampler.weights()["med-001"] == 0.0
    for t in ("med-002", "med-003"):
        sampler.set_multiplier(t, 0.0)
    assert sampler.weights() == pytest.approx({t: 1 / 3 for t in ("med-001", "med-002", "med-003")})
    with pytest.raises(ValueError, match=">= 0"):
        sampler.set_multiplier("med-001", float("nan"))


def test_sampler_state_round_trip() -> None:
    import json

    s = state()
    a = TaskSampler(lambda: s, seed=5)
    a.draw(7)
    a.set_multiplier("med-003", 0.5)
    saved = json.loads(json.dumps(a.state_dict()))
    b = TaskSampler(lambda: s, seed=99)
    b.load_state_dict(saved)
    assert a.draw(50) == b.draw(50)


def test_quarantined_task_is_skipped_until_its_expiry_step_then_drawn_again() -> None:
    s = apply(
        state(),
        HarnessUpdate(interface="sampling", ops=[{"op": "quarantine", "task_id": "med-002", "until_step": 8}]),
        step=4,
    )
    sampler = TaskSampler(lambda: s, seed=2)
    for step in (4, 5, 7):
        assert set(sampler.weights(step)) == {"med-001", "med-003"}
        assert "med-002" not in sampler.draw(300, step=step)
    assert set(sampler.weights(8)) == {"med-001", "med-002", "med-003"}
    assert "med-002" in sampler.draw(300, step=8)  # back with no further update
    assert "med-002" in sampler.draw(300, step=50)
    assert "med-002" not in sampler.draw(300)  # no training clock: judged at the version's step (4)


def test_no_active_task_is_a_clear_error() -> None:
    s = state()
    for t in s.sampling.values():
        t.status = "retired"
    with pytest.raises(ValueError, match="no active task"):
        TaskSampler(lambda: s, seed=0).draw(1)


SCHEDULE_CASES = [
    (Schedule(mode="constant"), 500, 1.0),
    (Schedule(mode="linear", start_step=10, end_step=20), 5, 1.0),
    (Schedule(mode="linear", start_step=10, end_step=20), 15, 0.5),
    (Schedule(mode="linear", start_step=10, end_step=20), 20, 0.0),
    (Schedule(mode="linear", start_step=10, end_step=20), 99, 0.0),
    (Schedule(mode="linear", start_step=10, end_step=20, floor=0.2), 99, 0.2),
    (Schedule(mode="linear", start_step=10, end_step=20, floor=0.2), 15, 0.6),
    (Schedule(mode="sigmoid", start_step=0, end_step=100), 50, 0.5),
    (Schedule(mode="sigmoid", start_step=0, end_step=100), 100, 0.0),
]


@pytest.mark.parametrize("schedule,step,expected", SCHEDULE_CASES)
def test_reveal_fraction(schedule: Schedule, step: int, expected: float) -> None:
    assert reveal_fraction(schedule, step) == pytest.approx(expected)


def test_sigmoid_is_monotone() -> None:
    sch = Schedule(mode="sigmoid", start_step=0, end_step=100)
    vals = [reveal_fraction(sch, s) for s in range(0, 101, 5)]
    assert vals == sorted(vals, reverse=True) and vals[1] > 0.9 and vals[-2] < 0.1


HINTS = [Hint(id=f"h{i}", text=f"hint number {i}") for i in range(4)]


@pytest.mark.parametrize("step,expected", [(0, 4), (15, 2), (14, 3), (20, 0)])
def test_visible_hints_reveal_prefix(step: int, expected: int) -> None:
    g = Guidance(hints=HINTS, schedule=Schedule(mode="linear", start_step=10, end_step=20))
    shown = visible_hints(g, step, random.Random(0))
    assert [h.id for h in shown] == [h.id for h in HINTS[:expected]]


def test_hinted_share_mixes_hinted_and_unhinted_visits() -> None:
    g = Guidance(hints=HINTS, schedule=Schedule(mode="constant", hinted_share=0.3))
    rng = random.Random(0)
    hinted = sum(bool(visible_hints(g, 0, rng)) for _ in range(2000))
    assert 500 < hinted < 700
    assert visible_hints(Guidance(), 0, rng) == []


def test_render_prompt_user_and_system() -> None:
    t = task("t1")
    hints = HINTS[:2]
    user = render_prompt(t, hints)
    assert user[-1]["content"].endswith("\n\nHint: hint number 0\nHint: hint number 1")
    assert t.prompt[-1].content == "What should I do about a mild headache?"  # task untouched
    sysm = render_prompt(t, hints, "system")
    assert sysm[0]["role"] == "system" and "- hint number 1" in sysm[0]["content"]
    assert sysm[1]["content"] == t.prompt[-1].content
    t2 = t.model_copy(update={"prompt": [Message(role="system", content="Be brief."), *t.prompt]})
    merged = render_prompt(t2, hints, "system")
    assert len(merged) == 2 and merged[0]["content"].startswith("Be brief.\n\nHints")
    assert render_prompt(t, []) == [{"role": "user", "content": t.prompt[-1].content}]
    with pytest.raises(ValueError, match="placement"):
        render_prompt(t, hints, "assistant")  # type: ignore[arg-type]


REF = "Drink plenty of water and rest in a dark quiet room for an hour"
LEAK_CASES = [
    ("Mention hydration and rest.", REF, False),
    (REF, REF, True),
    ("ANSWER: drink plenty of WATER, and rest in a dark, quiet room for an hour!!", REF, True),  # normalised
    ("plenty of water and rest in a dark quiet", REF, True),  # 8-word run of a long reference
    ("plenty of water and rest in a", REF, False),  # 7 words: not enough
    ("The capital is Paris.", "Paris", True),
    ("Think about Parisian history.", "Paris", False),  # whole words only
    ("The answer is 42.", "42", True),
    ("anything", None, False),
    ("anything", "   ", False),
    ("Ｐａｒｉｓ is it", "Paris", True),  # NFKC folds full-width letters
]


@pytest.mark.parametrize("hint,reference,expected", LEAK_CASES)
def test_hint_leaks_reference(hint: str, reference: str | None, expected: bool) -> None:
    assert hint_leaks_reference(hint, reference) is expected
