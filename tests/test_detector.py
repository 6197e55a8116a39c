"""harness.detector on synthetic groups: one case per failure type, thresholds, windows, flood control, resume."""

from __future__ import annotations

import json

import pytest

from harness.detector import Detector, DetectorConfig, GroupStats, RolloutRecord
from harness.types import FailureEvent
from tests.support.harness_factories import crit

HEALTHY_TEXTS = [
    "Rest and drink water.",
    "Drink some water, rest a little, and see a doctor if it persists for days.",
    "Take a short walk outside.",
    "Sleep it off and drink fluids, then check in with a clinician tomorrow.",
    "Try rest, water, and a cool compress on your forehead for twenty minutes.",
    "Water.",
    "Lie down in a dark room.",
    "Consider an over the counter painkiller following the label.",
]


def group(
    rewards: list[float],
    step: int = 1,
    task_id: str = "t",
    texts: list[str] | None = None,
    verdicts: list[dict[str, bool]] | None = None,
    audit: float | None = None,
    hints: list[str] | None = None,
    criteria=(),
    version: int | None = None,
) -> GroupStats:
    texts = texts or [HEALTHY_TEXTS[i % len(HEALTHY_TEXTS)] for i in range(len(rewards))]
    rollouts = [
        RolloutRecord(
            text=texts[i],
            reward=r,
            verdicts=(verdicts[i] if verdicts else {}),
            audit=audit,
            hinted=hints is not None,
            hint_texts=hints or [],
        )
        for i, r in enumerate(rewards)
    ]
    return GroupStats.from_rollouts(task_id, step, rollouts, criteria=criteria, harness_version=version)


def types(events) -> list[str]:
    return [e.type for e in events]


MIXED = [0.0, 0.2, 0.5, 0.9, 0.3, 0.6, 0.1, 0.8]


def test_group_stats_basic() -> None:
    g = group([0.0, 1.0, 0.5, 0.5], verdicts=[{"a": True}, {"a": False}, {"a": True}, {"a": True, "b": False}])
    assert (g.n, g.mean, g.min, g.max) == (4, 0.5, 0.0, 1.0)
    assert g.std == pytest.approx(0.35355, abs=1e-4)
    assert g.pass_rates == {"a": 0.75, "b": 0.0}
    assert g.lengths == [4, 15, 5, 13]
    assert g.audit_mean is None and not g.hinted
    json.loads(g.model_dump_json())
    with pytest.raises(ValueError, match="no rollouts"):
        GroupStats.from_rollouts("t", 0, [])


def test_healthy_group_raises_nothing() -> None:
    d = Detector()
    for step in range(1, 6):
        assert d.observe(group(MIXED[step:] + MIXED[:step], step=step)) == []


# (name, reward vectors per visit, config overrides, expected event types per visit)
COLLAPSE_CASES = [
    ("low first visit", [[0.0] * 8], {}, [["collapse_low"]]),
    ("low near-zero variance", [[0.0] * 7 + [0.0003]], {}, [["collapse_low"]]),
    ("low without first-visit needs two hits", [[0.0] * 8, [0.05] * 8], {"first_visit": False}, [[], ["collapse_low"]]),
    ("high first visit", [[1.0] * 8], {}, [["collapse_high"]]),
    ("high with tiny spread", [[0.95, 0.9502, 0.9501, 0.95]], {}, [["collapse_high"]]),
    ("flat needs two hits", [[0.4] * 8, [0.4] * 8], {}, [[], ["flat"]]),
    ("flat std 1e-4 counts as zero variance", [[0.4, 0.4002] * 4, [0.4] * 8], {}, [[], ["flat"]]),
    ("std 0.06 is not flat", [[0.34, 0.46] * 4, [0.34, 0.46] * 4], {}, [[], []]),
    ("flat hits outside the window do not count", [[0.4] * 8, MIXED, MIXED, [0.4] * 8], {}, [[], [], [], []]),
    ("low in the second visit after a mixed one", [MIXED, [0.0] * 8, [0.0] * 8], {}, [[], [], ["collapse_low"]]),
    ("thresholds are configurable", [[0.15] * 8], {"tau_lo": 0.2}, [["collapse_low"]]),
    ("mean 0.15 is flat, not low", [[0.15] * 8, [0.15] * 8], {}, [[], ["flat"]]),
]


@pytest.mark.parametrize("name,visits,overrides,expected", COLLAPSE_CASES, ids=[c[0] for c in COLLAPSE_CASES])
def test_collapse_and_flat(name: str, visits: list[list[float]], overrides: dict, expected: list[list[str]]) -> None:
    d = Detector(DetectorConfig(**overrides))
    got = [types(d.observe(group(r, step=10 * (i + 1)))) for i, r in enumerate(visits)]
    assert got == expected


def test_event_fields_and_deterministic_id() -> None:
    d = Detector(DetectorConfig(first_visit=False))
    d.observe(group([0.0] * 8, step=10, task_id="med-1"))
    (ev,) = d.observe(group([0.0] * 8, step=20, task_id="med-1"))
    assert ev.id == "collapse_low:med-1:20" and ev.task_id == "med-1" and ev.step == 20
    assert ev.window == [10, 20] and ev.stats["max"] == 0.0 and ev.stats["hits"] == 2


def test_flood_control_and_new_harness_version() -> None:
    d = Detector()
    fired = [bool(d.observe(group([0.0] * 8, step=s, version=0))) for s in range(1, 8)]
    assert fired == [True, False, False, True, False, False, True]  # once per window of 3 visits
    d2 = Detector()
    assert d2.observe(group([0.0] * 8, step=1, version=0))
    assert not d2.observe(group([0.0] * 8, step=2, version=0))
    assert d2.observe(group([0.0] * 8, step=3, version=1))  # the harness changed: new evidence


def test_spurious_length() -> None:
    texts = [" ".join(f"w{j}" for j in range(5 + 10 * i)) for i in range(8)]  # distinct words: no stuffing
    rewards = [0.1 * i for i in range(8)]
    (ev,) = Detector().observe(group(rewards, texts=texts))
    assert ev.type == "spurious_length" and ev.stats["pooled_length_corr"] == pytest.approx(1.0)
    # Same lengths, rewards unrelated to length: nothing.
    assert Detector().observe(group([0.3, 0.7, 0.1, 0.5, 0.6, 0.2, 0.4, 0.0], texts=texts)) == []
    # Too few rollouts for a correlation.
    assert Detector().observe(group(rewards[:4], texts=texts[:4])) == []


def test_spurious_audit_gap_and_trend() -> None:
    (ev,) = Detector().observe(group(MIXED, audit=0.1))  # train mean 0.425, audit 0.1: gap 0.325 > 0.25
    assert ev.type == "spurious_audit" and ev.stats["train_audit_gap"] == pytest.approx(0.325)
    assert Detector().observe(group(MIXED, audit=0.3)) == []
    d = Detector()
    out = []
    for step, (shift, audit) in enumerate([(0.0, 0.40), (0.1, 0.40), (0.2, 0.39)], 1):
        out.append(types(d.observe(group([min(1.0, r + shift) for r in MIXED], step=step, audit=audit))))
    assert out == [[], ["spurious_audit"], []]  # train up 0.1 with audit flat; muted next visit
    d = Detector()
    for step, (shift, audit) in enumerate([(0.0, 0.40), (0.1, 0.52)], 1):
        assert d.observe(group([min(1.0, r + shift) for r in MIXED], step=step, audit=audit)) == []


def test_stuffing_names_the_criterion() -> None:
    criteria = [crit("water", 5, check={"type": "contains_any", "phrases": ["hydrate", "water"]}), crit("p", -2)]
    stuffed = "Water water water water, drink water."
    texts = [stuffed] * 5 + HEALTHY_TEXTS[:3]
    (ev,) = Detector().observe(group([0.5] * 5 + [0.2, 0.0, 0.8], texts=texts, criteria=criteria))
    assert ev.type == "stuffing" and ev.criterion_id == "water" and ev.id == "stuffing:t:1:water"
    assert ev.stats["stuffing_share"] == pytest.approx(5 / 7)
    # Stuffers that earn nothing are not rewarded stuffing.
    assert Detector().observe(group([0.0] * 5 + [0.2, 0.1, 0.8], texts=texts, criteria=criteria)) == []
    # Repeated 3-grams count even without a known phrase.
    loop = "I am fine. " * 6
    (ev,) = Detector().observe(group([0.6, 0.6, 0.6, 0.2], texts=[loop] * 3 + ["ok then"]))
    assert ev.type == "stuffing" and ev.criterion_id is None


def test_blind_criterion() -> None:
    d = Detector()
    verdicts = [{"easy": True, "hard": i % 2 == 0, "pit": False} for i in range(8)]
    criteria = [crit("easy", 1, "optional"), crit("hard", 5), crit("pit", -3)]
    events = [d.observe(group(MIXED, step=s, verdicts=verdicts, criteria=criteria)) for s in (1, 2, 3)]
    assert events[0] == [] and events[1] == []
    (ev,) = events[2]
    assert (ev.type, ev.criterion_id, ev.window) == ("blind_criterion", "easy", [1, 2, 3])
    assert ev.id == "blind_criterion:t:3:easy"  # the pitfall never met is not blind: that is its goal
    # A collapsed group is reported as collapse, not as a blind criterion.
    d = Detector()
    for s in (1, 2, 3):
        assert "blind_criterion" not in types(d.observe(group([0.0] * 8, step=s, verdicts=verdicts, criteria=criteria)))


def test_guidance_leak() -> None:
    hint = "State the governing equation before substituting any numbers into it."
    texts = [hint + " Then F = ma gives 10 N."] * 3 + HEALTHY_TEXTS[:5]
    (ev,) = Detector().observe(group(MIXED, texts=texts, hints=[hint]))
    assert ev.type == "guidance_leak" and ev.stats["leak_share"] == pytest.approx(3 / 8)
    assert Detector().observe(group(MIXED, hints=[hint])) == []
    assert Detector().observe(group(MIXED, texts=texts)) == []  # unhinted rollouts cannot leak a hint


def test_batch_dead_share() -> None:
    d = Detector()
    stats = [group([0.0] * 8), group([0.4, 0.4001] * 4), group(MIXED), group([1.0] * 8)]
    b = d.batch(stats)
    assert b.n_groups == 4 and b.dead_share == 0.75 and b.warn
    assert not d.batch([group(MIXED)]).warn
    assert d.batch([]).n_groups == 0


def test_state_dict_resume_matches_uninterrupted() -> None:
    seq = [
        group(r, step=s)
        for s, r in enumerate([[0.4] * 8, MIXED, [0.0] * 8, [0.4] * 8, [0.0] * 8, [0.0] * 8, [0.4] * 8], 1)
    ]
    full = Detector()
    expected = [[e.id for e in full.observe(g)] for g in seq]
    first = Detector()
    got = [[e.id for e in first.observe(g)] for g in seq[:3]]
    resumed = Detector()
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    got += [[e.id for e in resumed.observe(g)] for g in seq[3:]]
    assert got == expected
    assert any(expected)


def test_reset_task_forgets_window() -> None:
    d = Detector(DetectorConfig(first_visit=False))
    d.observe(group([0.0] * 8, step=1))
    d.reset_task("t")
    assert d.window("t") == []
    assert d.observe(group([0.0] * 8, step=2)) == []


# -- confirmation: how many groups of the window show the failure -----------------------------------
STUFF_CRITERIA = [crit("water", 5, check={"type": "contains_any", "phrases": ["hydrate", "water"]})]
STUFFED_TEXTS = ["Water water water water, drink water."] * 5 + HEALTHY_TEXTS[:3]
STUFFED_REWARDS = [0.5] * 5 + [0.2, 0.0, 0.8]


def stuffed(step: int) -> GroupStats:
    return group(STUFFED_REWARDS, step=step, texts=STUFFED_TEXTS, criteria=STUFF_CRITERIA)


def test_an_event_from_one_group_is_not_confirmed() -> None:
    hint = "State the governing equation before substituting any numbers into it."
    length_texts = [" ".join(f"w{j}" for j in range(5 + 10 * i)) for i in range(8)]
    single = [
        group([0.0] * 8),  # collapse_low on the first visit
        stuffed(1),
        group(MIXED, texts=[hint + " Then F = ma gives 10 N."] * 3 + HEALTHY_TEXTS[:5], hints=[hint]),
        group([0.1 * i for i in range(8)], texts=length_texts),  # spurious_length from one group
        group(MIXED, audit=0.1),  # spurious_audit gap in one group
    ]
    for g in single:
        (ev,) = Detector().observe(g)
        assert (ev.window_hits, ev.confirmed) == (1, False), ev.type


def test_stuffing_is_confirmed_by_the_groups_of_the_window() -> None:
    d = Detector()
    fired = [d.observe(stuffed(s)) for s in (1, 2, 3, 4)]
    assert [len(f) for f in fired] == [1, 0, 0, 1]  # flood control mutes visits 2 and 3
    assert (fired[0][0].window_hits, fired[0][0].confirmed) == (1, False)
    assert (fired[3][0].window_hits, fired[3][0].confirmed) == (3, True)
    # Stuffing in one group of the last three is noise, not a confirmed failure.
    d = Detector()
    seq = [stuffed(1), group(MIXED, step=2), group(MIXED, step=3), stuffed(4)]
    (last,) = [d.observe(g) for g in seq][-1]
    assert (last.type, last.window_hits, last.confirmed) == ("stuffing", 1, False)


def test_collapse_blind_and_audit_trend_confirmation() -> None:
    d = Detector(DetectorConfig(first_visit=False))
    d.observe(group([0.0] * 8, step=1))
    (ev,) = d.observe(group([0.0] * 8, step=2))
    assert (ev.type, ev.window_hits, ev.confirmed) == ("collapse_low", 2, True)
    d = Detector()
    verdicts = [{"easy": True, "hard": i % 2 == 0} for i in range(8)]
    criteria = [crit("easy", 1, "optional"), crit("hard", 5)]
    (ev,) = [d.observe(group(MIXED, step=s, verdicts=verdicts, criteria=criteria)) for s in (1, 2, 3)][-1]
    assert (ev.type, ev.window_hits, ev.confirmed) == ("blind_criterion", 3, True)
    d = Detector()
    d.observe(group(MIXED, step=1, audit=0.40))
    (ev,) = d.observe(group([min(1.0, r + 0.1) for r in MIXED], step=2, audit=0.40))
    # A trend spans both visits by construction: it is one signal, not two groups, so it never confirms.
    assert (ev.type, ev.window_hits, ev.confirmed) == ("spurious_audit", 0, False)
    # A stricter detector asks for more groups.
    d = Detector(DetectorConfig(first_visit=False, confirm_hits=3))
    d.observe(group([0.0] * 8, step=1))
    (ev,) = d.observe(group([0.0] * 8, step=2))
    assert (ev.window_hits, ev.confirmed) == (2, False)


def test_confirmation_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="confirm_hits"):
        DetectorConfig(confirm_hits=1)  # one group never confirms
    with pytest.raises(ValueError, match=r"confirm_hits \(2\) exceeds window \(1\)"):
        DetectorConfig(window=1)


def test_failure_event_confirmation_fields() -> None:
    base = {"id": "e", "type": "stuffing", "task_id": "t", "step": 5}
    # Events stored before the fields existed: one supporting step per visit in `window`.
    assert (
        FailureEvent.model_validate({**base, "window": [3, 5]}).window_hits,
        FailureEvent.model_validate({**base, "window": [3, 5]}).confirmed,
    ) == (2, True)
    assert FailureEvent.model_validate({**base, "window": [5]}).confirmed is False
    assert FailureEvent.model_validate(base).window_hits == 1
    explicit = FailureEvent.model_validate({**base, "window": [3, 5], "window_hits": 1, "confirmed": False})
    assert (explicit.window_hits, explicit.confirmed) == (1, False)
    assert FailureEvent.model_validate_json(explicit.model_dump_json()) == explicit
    with pytest.raises(ValueError, match="cannot be confirmed"):
        FailureEvent.model_validate({**base, "window_hits": 1, "confirmed": True})


def audited_group(
    rewards: list[float], audits: list[float], step: int = 1, texts: list[str] | None = None
) -> GroupStats:
    texts = texts or [HEALTHY_TEXTS[i % len(HEALTHY_TEXTS)] for i in range(len(rewards))]
    rollouts = [RolloutRecord(text=t, reward=r, audit=a) for t, r, a in zip(texts, rewards, audits)]
    return GroupStats.from_rollouts("t", step, rollouts)


# (name, rewards, per-rollout audits, fires): a spurious event needs a gamed rollout (audit < 0.5) that the reward
# credits (above tau_lo and at least the audit-passing rollouts' mean less eps).
SPURIOUS_GATE_CASES = [
    ("gamed rollouts credited like honest ones", [0.9, 0.9, 0.8, 0.9], [0.1, 0.2, 0.9, 0.9], True),
    ("gamed rollouts get no credit", [0.05, 0.0, 0.9, 0.9], [0.1, 0.2, 0.9, 0.9], False),
    ("gamed rollouts credited less than honest ones", [0.3, 0.3, 0.9, 0.9], [0.1, 0.2, 0.9, 0.9], False),
    ("every rollout gamed and credited", [0.6, 0.7, 0.8, 0.9], [0.1, 0.1, 0.2, 0.1], True),
]


@pytest.mark.parametrize("name, rewards, audits, fires", SPURIOUS_GATE_CASES, ids=[c[0] for c in SPURIOUS_GATE_CASES])
def test_spurious_audit_needs_credited_gamed_rollouts(name, rewards, audits, fires) -> None:
    # Lower the gap threshold so the gap itself fires in every case: what decides is the gate.
    events = Detector(DetectorConfig(audit_gap=0.0)).observe(audited_group(rewards, audits))
    assert ("spurious_audit" in types(events)) is fires, name


def test_spurious_length_without_gaming_is_not_an_event() -> None:
    texts = [" ".join(f"w{j}" for j in range(5 + 10 * i)) for i in range(8)]
    rewards = [0.1 * i for i in range(8)]
    honest = Detector().observe(audited_group(rewards, [0.9] * 8, texts=texts))  # longer answers really are better
    assert "spurious_length" not in types(honest)
    gamed = Detector().observe(audited_group(rewards, [0.9] * 4 + [0.1] * 4, texts=texts))  # long ones fail the audit
    assert "spurious_length" in types(gamed)


def test_two_gap_groups_confirm_spurious_audit() -> None:
    d = Detector()
    d.observe(audited_group([0.9, 0.8, 0.9, 0.9], [0.1, 0.1, 0.2, 0.1], step=1))
    d.observe(audited_group([0.9, 0.9, 0.8, 0.9], [0.1, 0.2, 0.1, 0.1], step=2))  # muted by flood control
    d.observe(audited_group([0.9, 0.9, 0.9, 0.8], [0.2, 0.1, 0.1, 0.1], step=3))
    (ev,) = d.observe(audited_group([0.8, 0.9, 0.9, 0.9], [0.1, 0.1, 0.1, 0.2], step=4))
    assert (ev.type, ev.window_hits, ev.confirmed) == ("spurious_audit", 3, True)
