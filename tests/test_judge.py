"""Judge: verdict parsing, check vs LLM routing, retries, caching, concurrency, audit, and the real
`ChatOpenAI` path over HTTP against the OpenAI stub (guided-decoding request, timeouts, 500s, malformed
bodies). A judge that keeps failing leaves the criterion out of the group's scores, never counts it unmet."""

from __future__ import annotations

import asyncio
import logging

import pytest
from langchain_openai import ChatOpenAI

from harness.types import Criterion, Message, Task
from tests.support.fakes.fake_chat import FunctionChatModel, scripted
from tools.judge import Judge, parse_verdict

YES = '{"met": true, "reason": "it does"}'
NO = '{"met": false, "reason": "it does not"}'


def _crit(cid: str, weight: float = 5.0, check: dict | None = None, text: str | None = None) -> Criterion:
    kind = "pitfall" if weight < 0 else "essential"
    return Criterion(id=cid, text=text or f"criterion {cid}", weight=weight, kind=kind, check=check)


CHECKED = _crit("c1", 5, check={"type": "contains_any", "phrases": ["water"]})
TEXT_A = _crit("t1", 3, text="The response is empathetic.")
TEXT_B = _crit("t2", 2, text="The response mentions seeing a doctor.")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (YES, (True, "it does")),
        (NO, (False, "it does not")),
        ('```json\n{"met": true, "reason": "fenced"}\n```', (True, "fenced")),
        ('Sure! Here is my verdict: {"met": "yes", "reason": "prose around"} Hope it helps.', (True, "prose around")),
        ('{"met": "not met", "reason": "string no"}', (False, "string no")),
        ('{"verdict": "MET"}', (True, "")),
        ('{"met": 1}', (True, "")),
        ("yes", (True, "")),
        ("No.", (False, "")),
        ('{"other": 1} then {"met": false, "reason": "second object"}', (False, "second object")),
        ('{"reason": "a } brace in a string", "met": true}', (True, "a } brace in a string")),
        ("I think it is fine", None),
        ('{"met": "maybe"}', None),
        ('{"met": true', None),
        ("", None),
        ("{" * 10_000, None),  # unbalanced flood: bounded scan, no blow-up
    ],
)
def test_parse_verdict(reply, expected):
    assert parse_verdict(reply) == expected


def test_checks_decide_checked_criteria_without_calling_the_llm():
    llm = scripted()  # any call would raise StopIteration -> counted as an error
    judge = Judge(llm)
    [res] = judge.score_sync([CHECKED], "q", ["drink water"])
    assert res.score == 1.0 and res.verdicts["c1"].source == "check"
    assert judge.stats.llm_calls == 0


def test_without_llm_text_only_criteria_are_skipped_not_unmet():
    judge = Judge(None)
    [res] = judge.score_sync([CHECKED, TEXT_A], "q", ["drink water"])
    assert res.verdicts["t1"].source == "skipped"
    assert res.score == 1.0  # t1 excluded from the denominator, not counted unmet (which would give 5/8)
    assert judge.stats.skipped == 1


def test_without_llm_and_no_scoreable_positive_criterion_scores_zero_and_counts():
    judge = Judge(None)
    [res] = judge.score_sync([TEXT_A], "q", ["anything"])
    assert res.score == 0.0 and judge.stats.unscoreable == 1


def test_llm_verdicts_aggregate_with_checks():
    llm = FunctionChatModel(respond=lambda msgs: YES if "empathetic" in msgs[-1].content else NO)
    judge = Judge(llm)
    [res] = judge.score_sync([CHECKED, TEXT_A, TEXT_B], "How to treat a headache?", ["drink water"])
    assert res.verdicts["t1"].met and not res.verdicts["t2"].met
    assert res.verdicts["t1"].source == "llm" and res.verdicts["t1"].reason == "it does"
    assert res.score == pytest.approx(8 / 10)


@pytest.mark.parametrize(
    ("replies", "source", "calls", "malformed", "failed"),
    [
        ([YES], "llm", 1, 0, 0),
        (["garbage", YES], "llm", 2, 1, 0),
        (["garbage", "more garbage", "still garbage"], "error", 3, 3, 1),
    ],
)
def test_malformed_replies_are_retried_then_left_out_and_counted(replies, source, calls, malformed, failed, caplog):
    judge = Judge(scripted(*replies), retries=2)
    with caplog.at_level(logging.WARNING, logger="tools.judge"):
        [res] = judge.score_sync([CHECKED, TEXT_A], "q", ["water"])
    verdict = res.verdicts["t1"]
    assert verdict.source == source and verdict.decided is (not failed)
    # A verdict the judge never gave is left out (score 5/5), not counted unmet (which would give 5/8).
    assert res.score == 1.0
    assert (judge.stats.llm_calls, judge.stats.malformed, judge.stats.llm_failures) == (calls, malformed, failed)
    assert bool(failed) == any("leaving it out of the score" in r.message for r in caplog.records)
    assert judge.stats.as_metrics()["judge/llm_failures"] == failed
    assert judge.stats.left_out == failed


def test_retry_shows_the_model_its_bad_reply():
    seen: list[int] = []

    def respond(msgs):
        seen.append(len(msgs))
        return "nonsense" if len(seen) == 1 else YES

    judge = Judge(FunctionChatModel(respond=respond))
    judge.score_sync([TEXT_A], "q", ["r"])
    assert seen == [2, 4]  # system+user, then + bad reply + correction


def test_exceptions_from_the_llm_leave_the_criterion_out_with_a_warning():
    def boom(msgs):
        raise ConnectionError("judge down")

    judge = Judge(FunctionChatModel(respond=boom), retries=1)
    [res] = judge.score_sync([CHECKED, TEXT_A], "q", ["water"])
    v = res.verdicts["t1"]
    assert (v.source, v.decided) == ("error", False) and "ConnectionError" in v.reason
    assert res.score == 1.0  # t1 left out; counted unmet it would be 5/8
    assert (judge.stats.errors, judge.stats.llm_failures, judge.stats.left_out) == (2, 1, 1)


def test_a_judge_failure_on_one_response_leaves_the_criterion_out_of_the_whole_group(caplog):
    # The judge breaks on one response only (e.g. a rollout that derails it): the pitfall t3 must not be
    # dropped for that response alone, or breaking the judge would dodge the penalty.
    pitfall = _crit("t3", -4, text="The response recommends antibiotics.")

    def respond(msgs):
        if "BREAK" in msgs[1].content:
            return "???"
        return YES if "antibiotics" in msgs[1].content.split("<response>")[1] else NO

    judge = Judge(FunctionChatModel(respond=respond), retries=1)
    with caplog.at_level(logging.WARNING, logger="tools.judge"):
        results = judge.score_sync(
            [CHECKED, pitfall], "q", ["water", "water and antibiotics", "water BREAK antibiotics"]
        )
    assert [r.verdicts["t3"].source for r in results] == ["error"] * 3
    assert [r.score for r in results] == [1.0, 1.0, 1.0]
    assert "another response of the group" in results[0].verdicts["t3"].reason
    assert "malformed reply" in results[2].verdicts["t3"].reason
    assert (judge.stats.llm_failures, judge.stats.left_out) == (1, 3)
    assert any("not counted unmet" in r.message for r in caplog.records)


def test_a_total_judge_outage_scores_no_response_and_counts_it():
    judge = Judge(FunctionChatModel(respond=lambda msgs: "garbage"), retries=0)
    results = judge.score_sync([TEXT_A, TEXT_B], "q", ["a", "b"])
    assert [r.score for r in results] == [0.0, 0.0]
    assert all(not v.decided for r in results for v in r.verdicts.values())
    assert (judge.stats.llm_failures, judge.stats.left_out, judge.stats.unscoreable) == (4, 4, 2)


def test_cache_and_in_batch_dedup():
    llm = FunctionChatModel(respond=lambda msgs: YES)
    judge = Judge(llm)
    judge.score_sync([TEXT_A], "q", ["same", "same", "other"])
    assert llm.calls == 2  # duplicates in one batch are judged once
    judge.score_sync([TEXT_A], "q", ["same"])
    assert llm.calls == 2 and judge.stats.cache_hits == 1
    # A different criterion text is a different key, even with the same id.
    judge.score_sync([_crit("t1", 3, text="Something else.")], "q", ["same"])
    assert llm.calls == 3


def test_failed_verdicts_are_not_cached():
    judge = Judge(scripted("bad", "bad", YES), retries=1)
    assert judge.score_sync([TEXT_A], "q", ["r"])[0].verdicts["t1"].source == "error"
    again = judge.score_sync([TEXT_A], "q", ["r"])[0].verdicts["t1"]
    assert again.met and again.source == "llm"


def test_lru_evicts_oldest():
    llm = FunctionChatModel(respond=lambda msgs: YES)
    judge = Judge(llm, cache_size=2)
    judge.score_sync([TEXT_A], "q", ["a", "b", "c"])
    judge.score_sync([TEXT_A], "q", ["a"])  # evicted -> judged again
    assert llm.calls == 4


class _InFlight(FunctionChatModel):
    active: int = 0
    peak: int = 0

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        finally:
            self.active -= 1


@pytest.mark.parametrize("concurrency", [1, 4])
def test_concurrency_is_bounded(concurrency):
    llm = _InFlight(respond=lambda msgs: YES, latency_s=0.01)
    judge = Judge(llm, concurrency=concurrency)
    judge.score_sync([TEXT_A, TEXT_B], "q", [f"r{i}" for i in range(8)])
    assert llm.calls == 16 and llm.peak == concurrency


def test_hanging_model_hits_the_outer_timeout():
    judge = Judge(FunctionChatModel(respond=lambda msgs: YES, latency_s=30), retries=0, call_timeout_s=0.05)
    [res] = judge.score_sync([TEXT_A], "q", ["r"])
    assert res.verdicts["t1"].source == "error" and "TimeoutError" in res.verdicts["t1"].reason


def test_audit_scores_hidden_criteria():
    task = Task(
        id="t",
        domain="d",
        prompt=[Message(role="user", content="q")],
        criteria=[CHECKED],
        audit_criteria=[_crit("a1", 5, check={"type": "contains_any", "phrases": ["doctor"]}), TEXT_A],
    )
    no_llm = Judge(None)
    assert no_llm.audit_sync(task, ["see a doctor", "rest"]) == [1.0, 0.0]  # text-only audit item skipped
    with_llm = Judge(FunctionChatModel(respond=lambda msgs: YES))
    assert with_llm.audit_sync(task, ["see a doctor", "rest"]) == [1.0, pytest.approx(3 / 8)]
    bare = task.model_copy(update={"audit_criteria": []})
    assert no_llm.audit_sync(bare, ["x"]) == [None]
    text_only = task.model_copy(update={"audit_criteria": [TEXT_A]})
    assert no_llm.audit_sync(text_only, ["x"]) == [None]


async def test_score_sync_refuses_a_running_loop_but_async_works():
    judge = Judge(FunctionChatModel(respond=lambda msgs: YES))
    with pytest.raises(RuntimeError, match="running event loop"):
        judge.score_sync([TEXT_A], "q", ["r"])
    [res] = await judge.score([TEXT_A], "q", ["r"])
    assert res.score == 1.0


def test_invalid_arguments():
    with pytest.raises(ValueError, match="concurrency"):
        Judge(None, concurrency=0)
    with pytest.raises(ValueError, match="criteria"):
        Judge(None).score_sync([], "q", ["r"])


# -- the real ChatOpenAI client over HTTP against the stub server ---------------------------------
def _chat(stub, timeout: float = 5.0) -> ChatOpenAI:
    return ChatOpenAI(base_url=stub.base_url, api_key="x", model="stub", max_retries=0, timeout=timeout)


def test_chat_openai_valid_verdicts(openai_stub):
    openai_stub.responder = lambda req: YES if "empathetic" in req["messages"][-1]["content"] else NO
    judge = Judge(_chat(openai_stub), concurrency=4)
    results = judge.score_sync([CHECKED, TEXT_A, TEXT_B], "How to treat a headache?", ["drink water", "nothing"])
    assert [r.score for r in results] == [pytest.approx(8 / 10), pytest.approx(3 / 10)]
    assert len(openai_stub.requests) == 4
    sent = openai_stub.requests[0]["messages"]
    assert sent[0]["role"] == "system" and "How to treat a headache?" in sent[1]["content"]


def test_chat_openai_asks_for_the_verdict_schema_with_guided_decoding(openai_stub):
    openai_stub.responder = lambda req: NO
    judge = Judge(_chat(openai_stub))
    [res] = judge.score_sync([TEXT_A], "q", ["r"])
    assert (res.verdicts["t1"].met, res.verdicts["t1"].reason) == (False, "it does not")
    fmt = openai_stub.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Verdict"
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["met", "reason"] and schema["properties"]["met"]["type"] == "boolean"
    assert schema["properties"]["reason"]["maxLength"] == 200


@pytest.mark.parametrize(
    ("program", "source", "errors", "malformed"),
    [
        (lambda s: s.fail_next(status=500, times=1), "llm", 1, 0),  # 500 then a good reply
        (lambda s: s.malformed_next(times=1), "llm", 1, 0),  # broken JSON body then a good reply
        (lambda s: s.script(["not json at all"]), "llm", 0, 1),  # garbage content then a good reply
        (lambda s: s.script(['{"met": "perhaps"}']), "llm", 0, 1),  # schema-shaped but no verdict, then good
        (lambda s: s.fail_next(status=500, times=3), "error", 3, 0),  # down for every attempt
        (lambda s: s.script(["garbage"] * 3), "error", 0, 3),  # garbage for every attempt
    ],
)
def test_chat_openai_error_paths(openai_stub, program, source, errors, malformed):
    openai_stub.responder = lambda req: YES
    program(openai_stub)
    judge = Judge(_chat(openai_stub), retries=2)
    [res] = judge.score_sync([CHECKED, TEXT_A], "q", ["water"])
    assert res.verdicts["t1"].source == source
    assert res.score == 1.0  # met when judged; left out (not 5/8) when the judge kept failing
    assert (judge.stats.errors, judge.stats.malformed) == (errors, malformed)
    assert judge.stats.llm_failures == judge.stats.left_out == (source == "error")


def test_chat_openai_timeout_is_left_out(openai_stub):
    openai_stub.responder = lambda req: NO
    openai_stub.delay = 3.0
    judge = Judge(_chat(openai_stub, timeout=0.2), retries=1)
    [res] = judge.score_sync([CHECKED, TEXT_A], "q", ["water"])
    assert res.verdicts["t1"].source == "error" and "Timeout" in res.verdicts["t1"].reason
    assert res.score == 1.0
    assert (judge.stats.errors, judge.stats.llm_failures) == (2, 1)


def test_judge_is_usable_from_concurrent_tasks_in_one_loop():
    llm = _InFlight(respond=lambda msgs: YES, latency_s=0.01)
    judge = Judge(llm, concurrency=3)

    async def main():
        return await asyncio.gather(*(judge.score([TEXT_A], "q", [f"r{i}-{j}" for j in range(4)]) for i in range(4)))

    out = asyncio.run(main())
    assert len(out) == 4 and llm.peak == 3  # one semaphore shared by all score() calls on the loop


SLOW = r"[a-z]*[a-z]*[a-z]*[a-z]*[0-9]"  # times out (harness.checks.REGEX_TIMEOUT_S) on a long digit-free run


@pytest.mark.parametrize("must_match", [True, False])
def test_a_check_timeout_fails_the_criterion_for_the_whole_group(must_match, caplog):
    slow = _crit("slow", -5, check={"type": "regex", "pattern": SLOW, "must_match": must_match})
    responses = ["water abc1", "water " + "a" * 60_000, "no drink"]
    judge = Judge(None)
    with caplog.at_level(logging.WARNING, logger="tools.judge"):
        results = judge.score_sync([CHECKED, slow], "q", responses)
    # Neither met nor unmet on any response of the group: every score leaves the criterion out alike, so the
    # response that made its check time out gains nothing over the others.
    assert [r.verdicts["slow"].source for r in results] == ["error"] * 3
    assert [r.score for r in results] == [1.0, 1.0, 0.0]
    assert "timed out" in results[1].verdicts["slow"].reason
    assert "another response of the group" in results[0].verdicts["slow"].reason
    assert judge.stats.check_failures == 1 and judge.stats.as_metrics()["judge/check_failures"] == 1
    assert any("could not decide" in r.message for r in caplog.records)


def test_a_group_without_a_timeout_keeps_its_check_verdicts():
    slow = _crit("slow", -5, check={"type": "regex", "pattern": SLOW})
    judge = Judge(None)
    results = judge.score_sync([CHECKED, slow], "q", ["water abc1", "water"])
    assert [r.verdicts["slow"].source for r in results] == ["check", "check"]
    assert [r.score for r in results] == [0.0, 1.0]
    assert judge.stats.check_failures == 0
