"""The external yardstick (`tools/ifeval.py`): IFEval's own checkers score responses as IFEval would, bad
prompt rows are errors naming file, line and field, and nothing opens a network connection."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from harness.data import DataError
from tools import ifeval
from tools.ifeval import IFEvalPrompt, load_prompts, parse_row, prepare_offline, score, score_response


@pytest.fixture(scope="module")
def nltk_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("nltk")


@pytest.fixture(autouse=True)
def no_network(monkeypatch, nltk_dir):
    """Every test runs with sockets refused: a download attempt (nltk, the hub) fails the test loudly."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HARNESSRL_NLTK_DATA", str(nltk_dir))
    prepare_offline(nltk_dir)


def one(iid: str, kwargs: dict | None = None, text: str = "Do the thing.") -> IFEvalPrompt:
    return parse_row({"key": "k", "prompt": text, "instruction_id_list": [iid], "kwargs": [kwargs or {}]}, "t", 1)


LT, AL = "less than", "at least"
# (instruction id, kwargs, response, strict verdict): each row meets or misses its instruction.
CASES = [
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LT}, "Dr. Lee came home. He slept.", True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LT}, "One. Two. Three. Four.", False),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": AL}, "Be ON TIME, ASK.", True),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": AL}, "Be on time.", False),
    ("language:response_language", {"language": "fr"}, "Bonjour mon ami, as-tu bien dormi cette nuit ?", True),
    ("language:response_language", {"language": "fr"}, "Good morning my friend, did you sleep well last night?", False),
    ("punctuation:no_comma", {}, "No commas here.", True),
    ("punctuation:no_comma", {}, "Yes, one comma.", False),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* water\n* light", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* water\n* light\n* soil", False),
    ("keywords:forbidden_words", {"forbidden_words": ["wet"]}, "The street shines.", True),
    ("keywords:forbidden_words", {"forbidden_words": ["wet"]}, "The street is wet.", False),
    ("length_constraints:number_words", {"num_words": 5, "relation": LT}, "Four words only here.", True),
    ("length_constraints:number_words", {"num_words": 5, "relation": LT}, "These are six words right here.", False),
    ("detectable_format:json_format", {}, '```json\n{"capital": "Paris"}\n```', True),
    ("detectable_format:json_format", {}, "capital: Paris", False),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Save money. Any other questions?", True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Any other questions? Save money.", False),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Thanks!\n\nP.S. See you.", True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Thanks! See you.", False),
    ("change_case:english_lowercase", {}, "all lowercase here.", True),
    ("change_case:english_lowercase", {}, "Not lowercase.", False),
]


@pytest.mark.parametrize("iid,kwargs,response,want", CASES)
def test_checker_verdicts(iid, kwargs, response, want):
    assert score_response(one(iid, kwargs), response).strict == (want,)


def test_loose_forgives_a_leading_line_strict_does_not():
    p = one("startend:quotation")
    s = score_response(p, 'Here it is:\n"A calm weekend by the sea."')
    assert s.strict == (False,) and s.loose == (True,)


def test_empty_response_fails_every_instruction():
    p = parse_row(
        {
            "key": 1,
            "prompt": "x",
            "instruction_id_list": ["punctuation:no_comma", "startend:quotation"],
            "kwargs": [{}, {}],
        },
        "t",
        1,
    )
    assert score_response(p, "   ") == ifeval.ResponseScore((False, False), (False, False))


def test_score_aggregates_prompt_and_instruction_level(nltk_dir):
    a = parse_row(
        {
            "key": "a",
            "prompt": "x",
            "instruction_id_list": ["punctuation:no_comma", "startend:quotation"],
            "kwargs": [{}, {}],
        },
        "t",
        1,
    )
    b = one("change_case:english_lowercase")
    res = score([a, b], [['"no commas"', "a, b"], ["all lower", "All"]], nltk_dir)
    # a: response 1 meets both, response 2 meets neither; b: one of two meets it.
    assert res["prompts"]["a"]["prompt_strict"] == 0.5
    assert res["prompt_strict"] == pytest.approx((0.5 + 0.5) / 2)
    assert res["instruction_strict"] == pytest.approx((0.5 + 0.5 + 0.5) / 3)
    assert res["per_instruction"]["punctuation:no_comma"] == {"n": 1, "strict": 0.5, "loose": 0.5}
    assert res["n_prompts"] == 2 and res["n_instructions"] == 3 and res["k"] == 2
    with pytest.raises(ValueError, match="1 response lists for 2 prompts"):
        score([a, b], [["x"]], nltk_dir)


def write(tmp_path: Path, rows: list) -> Path:
    f = tmp_path / "prompts.jsonl"
    f.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return f


GOOD = {"key": "g", "prompt": "Say hi.", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
BAD_ROWS = [
    ({**GOOD, "instruction_id_list": ["no_comma"]}, "instruction_id_list[0]", "did you mean 'punctuation:no_comma'"),
    (
        {**GOOD, "instruction_id_list": ["length_constraints:number_words"], "kwargs": [{"num_words": 5}]},
        "kwargs[0]",
        "missing 'relation'",
    ),
    ({**GOOD, "kwargs": [{"num_words": 5}]}, "kwargs[0]", "unknown argument 'num_words'"),
    (
        {
            **GOOD,
            "instruction_id_list": ["length_constraints:number_words"],
            "kwargs": [{"num_words": 5, "relation": "about"}],
        },
        "kwargs[0]",
        "refuses",
    ),
    ({**GOOD, "kwargs": [{}, {}]}, "kwargs", "2 entries for 1 instruction ids"),
    (
        {
            **GOOD,
            "instruction_id_list": ["change_case:english_lowercase", "change_case:english_capital"],
            "kwargs": [{}, {}],
        },
        "instruction_id_list[0]",
        "conflicts with",
    ),
    ({**GOOD, "prompt": ""}, "prompt", "non-empty string"),
    ({k: v for k, v in GOOD.items() if k != "key"}, "key", "required"),
    ({**GOOD, "extra": 1}, "extra", "unknown field"),
]


@pytest.mark.parametrize("row,fld,msg", BAD_ROWS)
def test_bad_row_names_file_line_and_field(tmp_path, row, fld, msg):
    f = write(tmp_path, [GOOD | {"key": "first"}, row])
    with pytest.raises(DataError) as e:
        load_prompts(f)
    err = next(x for x in e.value.errors if x.field == fld)
    assert err.file == str(f) and err.line == 2 and msg in err.message
    assert f"{f}:2: field '{fld}'" in str(e.value)


def test_file_level_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_prompts(tmp_path / "missing.jsonl")
    f = write(tmp_path, [GOOD, "{not json", GOOD])
    with pytest.raises(DataError) as e:
        load_prompts(f)
    assert [(x.line, x.field) for x in e.value.errors] == [(2, ""), (3, "key")]  # bad JSON, then a duplicate key


def test_ifeval_rows_with_nulls_for_unused_kwargs_load(tmp_path):
    # The hub's rows carry every kwarg name with null for the unused ones.
    row = {**GOOD, "kwargs": [{"num_words": None, "relation": None}]}
    assert load_prompts(write(tmp_path, [row]))[0].kwargs == ({},)


def test_shipped_prompts_load_and_every_checker_runs_offline(nltk_dir):
    prompts = load_prompts()
    assert 40 <= len(prompts) <= 60
    ids = {i for p in prompts for i in p.instruction_ids}
    assert len(ids) >= 20  # broad: most of IFEval's registry, not one kind of instruction
    res = score(
        prompts, [["Sure.", "* Here is a longer answer, with a comma.\n\nP.S. done"] for _ in prompts], nltk_dir
    )
    assert 0.0 < res["instruction_strict"] < 1.0  # trivial answers meet some instructions, not all
    assert set(res["per_instruction"]) == ids


def test_prepare_offline_builds_punkt_once(tmp_path):
    root = prepare_offline(tmp_path)
    english = root / "tokenizers" / "punkt_tab" / "english"
    assert sorted(p.name for p in english.iterdir()) == [
        "abbrev_types.txt",
        "collocations.tab",
        "ortho_context.tab",
        "sent_starters.txt",
    ]
    stamp = (english / "abbrev_types.txt").stat().st_mtime_ns
    assert prepare_offline(tmp_path) == root and (english / "abbrev_types.txt").stat().st_mtime_ns == stamp
