"""Proposals sized from the task's own rollouts: `agents.rollout_signals` and the templates that read it."""

from __future__ import annotations

import json

from agents import proposer
from agents.rollout_signals import rollout_signals
from agents.schemas import Attribution
from harness.detector import GroupStats, RolloutRecord
from harness.ops import apply, validate
from harness.types import FailureEvent, HarnessState
from memory.records import GroupSummary
from tests.support.fakes.evolver_fakes import suite
from tests.support.fakes.fake_chat import FunctionChatModel

STATE = HarnessState.from_tasks(suite())


def _group(
    texts: list[str],
    rewards: list[float],
    audits: list[float] | None = None,
    verdicts: list[dict[str, bool]] | None = None,
    step: int = 1,
) -> GroupSummary:
    rollouts = [
        RolloutRecord(
            text=t,
            reward=r,
            audit=None if audits is None else audits[i],
            verdicts={} if verdicts is None else verdicts[i],
        )
        for i, (t, r) in enumerate(zip(texts, rewards))
    ]
    stats = GroupStats.from_rollouts("med-1", step, rollouts)
    return GroupSummary.from_stats(stats, texts=texts)


def _words(n: int, word: str = "rest") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def _ev(etype: str, **kw) -> FailureEvent:
    return FailureEvent(
        id=f"e-{etype}", type=etype, task_id="med-1", step=10, window=[9, 10], window_hits=2, confirmed=True, **kw
    )


def test_signals_summarise_lengths_rewards_and_contrasts() -> None:
    texts = [_words(10), _words(20), _words(30), _words(40)]
    sig = rollout_signals([_group(texts, [0.1, 0.2, 0.8, 0.9])])
    assert (sig.n, sig.length_median, sig.low_reward_length, sig.high_reward_length) == (4, 25.0, 15.0, 35.0)
    assert sig.best is not None and sig.best.startswith("rest0") and sig.contrast_criteria == []
    # Gamed rollouts (audit < 0.5) meet "water" far more often than honest ones: its id, and only its id, is named.
    verdicts = [
        {"water": True, "x": True},
        {"water": True, "x": False},
        {"water": False, "x": True},
        {"water": False, "x": False},
    ]
    sig = rollout_signals([_group(texts, [0.5] * 4, audits=[0.1, 0.2, 0.9, 0.8], verdicts=verdicts)])
    assert sig.contrast_criteria == ["water"]
    assert "audit" not in json.dumps(sig.public())
    assert rollout_signals([]).n == 0


def test_saturated_task_gets_a_variant_sized_to_its_rollouts() -> None:
    texts = [_words(12), _words(16), _words(24), _words(30)]
    sig = rollout_signals([_group(texts, [1.0] * 4)])
    prop = proposer.rule_proposal(
        _ev("collapse_high"), Attribution(interface="sampling", diagnosis="d"), STATE, [], step=10, signals=sig
    )
    (op,) = prop.update.ops
    assert prop.template == "variant_sized" and "at most 20 words" in op.prompt[-1].content
    check = op.extra_criteria[0].check
    met = [check.evaluate(t) for t in texts]
    assert met == [True, True, False, False]  # the budget splits what the policy writes now
    assert validate(STATE, prop.update) == []
    # Without cached rollouts the bank's fixed constraints are used, as before.
    plain = proposer.rule_proposal(
        _ev("collapse_high"), Attribution(interface="sampling", diagnosis="d"), STATE, [], step=10
    )
    assert plain.template.startswith("variant:")


def test_padding_pitfall_is_sized_and_needs_length_to_be_credited() -> None:
    texts = [_words(10), _words(20), _words(30), _words(40)]
    att = Attribution(interface="criteria", diagnosis="d")
    credited = rollout_signals([_group(texts, [0.1, 0.2, 0.8, 0.9])])
    prop = proposer.rule_proposal(_ev("spurious_length"), att, STATE, [], step=10, signals=credited)
    (op,) = prop.update.ops
    assert prop.template == "pitfall_padding" and "32 words" in prop.update.rationale  # the upper quartile, 32.5
    after = apply(STATE, prop.update)
    assert len(after.task("med-1").criteria) == len(STATE.task("med-1").criteria) + 1
    # Length not credited (the long answers score lower): no padding pitfall, the next template is tried.
    uncredited = rollout_signals([_group(texts, [0.9, 0.8, 0.2, 0.1])])
    prop = proposer.rule_proposal(_ev("spurious_length"), att, STATE, [], step=10, signals=uncredited)
    assert prop.template != "pitfall_padding"


def test_spurious_repairs_target_the_contrast_criteria_with_a_sized_floor() -> None:
    texts = [_words(6, "water"), _words(8, "water"), _words(30), _words(34)]
    verdicts = [{"water": True}, {"water": True}, {"water": False}, {"water": False}]
    sig = rollout_signals([_group(texts, [0.9, 0.9, 0.4, 0.4], audits=[0.0, 0.1, 0.9, 0.9], verdicts=verdicts)])
    prop = proposer.rule_proposal(
        _ev("spurious_audit"), Attribution(interface="criteria", diagnosis="d"), STATE, [], step=10, signals=sig
    )
    assert prop.template == "tighten_contrast"
    (op,) = prop.update.ops
    assert op.criterion_id == "water"
    floor = int(sig.length_q25)  # the first quartile of the task's lengths, not the fixed 8-word floor
    assert floor == 7 and f'"min": {floor}' in json.dumps(op.check.model_dump(mode="json")).replace("'", '"')


def test_llm_proposer_reads_the_rollouts_but_never_an_audit_score() -> None:
    texts = [_words(6, "water"), _words(8, "water"), _words(30), _words(34)]
    verdicts = [{"water": True}, {"water": True}, {"water": False}, {"water": False}]
    sig = rollout_signals([_group(texts, [0.9, 0.9, 0.4, 0.4], audits=[0.0, 0.1, 0.9, 0.9], verdicts=verdicts)])
    seen: list[str] = []

    def respond(messages) -> str:
        seen.extend(str(m.content) for m in messages)
        return "not json"

    proposer.llm_proposal(
        FunctionChatModel(respond=respond),
        _ev("spurious_audit"),
        Attribution(interface="criteria", diagnosis="d"),
        STATE,
        [],
        signals=sig,
    )
    prompt = "\n".join(seen)
    assert '"contrast_criteria": [' in prompt and "water0 water1" in prompt  # ids and snippets reach the LLM
    rollouts = prompt.split('"rollouts"', 1)[1]
    assert "audit" not in rollouts.lower() and "gamed" not in rollouts.lower()
