"""Loaders in `harness.data`: good files in every format, and every kind of bad row named by file, line, field."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.data import DataError, RowError, kind_for, load_suite, load_tasks, loc_to_path
from harness.suite_stats import suite_stats

FIXTURES = Path(__file__).parent / "fixtures"


def good_task(tid: str = "t-1", **over) -> dict:
    t = {
        "id": tid,
        "domain": "science",
        "split": "train",
        "prompt": [{"role": "user", "content": "Why is the sky blue?"}],
        "criteria": [
            {
                "id": "c1",
                "text": "Mentions scattering.",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "contains_any", "phrases": ["scatter"]},
            },
            {
                "id": "c2",
                "text": "Under 50 words.",
                "weight": 1,
                "kind": "optional",
                "check": {"type": "word_count", "max": 49},
            },
            {
                "id": "c3",
                "text": "Says the sky reflects the ocean.",
                "weight": -3,
                "kind": "pitfall",
                "check": {"type": "contains_any", "phrases": ["reflects the ocean"]},
            },
        ],
        "reference_answer": "Air scatters blue light more than red light.",
        "audit_criteria": [
            {
                "id": "a1",
                "text": "Substantive.",
                "weight": 5,
                "kind": "essential",
                "check": {
                    "type": "all_of",
                    "checks": [{"type": "contains_any", "phrases": ["scatter"]}, {"type": "word_count", "min": 8}],
                },
            }
        ],
    }
    t.update(over)
    return t


def write_jsonl(path: Path, rows: list) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- good files ---------------------------------------------------------------------------------------
def test_harnessrl_format_round_trip(tmp_path):
    f = write_jsonl(tmp_path / "tasks.jsonl", [good_task("t-1"), "", good_task("t-2", split="test")])
    res = load_tasks(f)
    assert [t.id for t in res.tasks] == ["t-1", "t-2"]
    assert res.skipped == []
    assert res.tasks[1].split == "test"
    assert res.tasks[0].criteria[0].check.evaluate("light scattering")
    assert res.tasks[0].audit_criteria[0].id == "a1"


def test_rar_fixture_maps_kinds_and_weights():
    res = load_tasks(FIXTURES / "rar_sample.jsonl", domain="medical")
    assert len(res.tasks) == 2
    t = res.tasks[0]
    assert t.prompt[0].role == "user" and "peanuts" in t.prompt[0].content
    assert [(c.kind, c.weight) for c in t.criteria] == [
        ("essential", 5.0),
        ("important", 4.0),
        ("optional", 1.0),
        ("pitfall", -2.0),
    ]
    # The "Essential Criteria:" label is a kind marker, not part of the criterion text.
    assert t.criteria[0].text.startswith("Identifies intramuscular epinephrine")
    assert t.reference_answer.startswith("Intramuscular epinephrine")
    assert t.domain == "medical" and t.split == "train" and t.meta["source"] == "rar"
    assert all(c.check is None for c in t.criteria)  # imported rubrics go to the LLM judge
    # Unlabelled rubric items: kind from weight magnitude.
    assert [c.kind for c in res.tasks[1].criteria] == ["essential", "important", "pitfall"]
    assert res.tasks[0].id != res.tasks[1].id


def test_healthbench_fixture_maps_points_tags_and_ideal():
    res = load_tasks(FIXTURES / "healthbench_sample.jsonl", split="test")
    a, b = res.tasks
    assert a.id == "hb-sample-0001" and a.domain == "medical" and a.split == "test"
    assert [(c.kind, c.weight) for c in a.criteria] == [
        ("essential", 7.0),
        ("essential", 5.0),
        ("optional", 2.0),
        ("pitfall", -8.0),
    ]
    assert a.meta["criterion_tags"]["c1"] == ["axis:accuracy", "level:example"]
    assert a.reference_answer.startswith("This is most likely a viral cold")
    assert [m.role for m in b.prompt] == ["system", "user", "assistant", "user"]
    assert b.reference_answer is None


@pytest.mark.parametrize(
    "weight,label,kind",
    [
        (5, "", "essential"),
        (7, "", "essential"),
        (4, "", "important"),
        (3, "", "important"),
        (2, "", "optional"),
        (1, "", "optional"),
        (-1, "", "pitfall"),
        (-10, "", "pitfall"),
        (1, "Essential Criteria: does X", "essential"),
        (5, "Optional Criteria: does X", "optional"),
        (2, "Important Criteria: x", "important"),
        (-2, "Pitfall Criteria: x", "pitfall"),
    ],
)
def test_kind_for_table(weight, label, kind):
    assert kind_for(weight, label) == kind


@pytest.mark.parametrize("weight,label", [(3, "Pitfall Criteria: x"), (-3, "Essential Criteria: x")])
def test_kind_for_rejects_label_sign_conflict(weight, label):
    with pytest.raises(ValueError, match="label says"):
        kind_for(weight, label)


def test_loc_to_path_drops_union_tags():
    assert loc_to_path(("criteria", 2, "check", "regex", "pattern")) == "criteria[2].check.pattern"
    assert (
        loc_to_path(("criteria", 0, "check", "all_of", "checks", 1, "word_count", "min"))
        == "criteria[0].check.checks[1].min"
    )
    assert loc_to_path(("criteria", 1, "weight"), {"criteria": "rubric"}) == "rubric[1].weight"


# -- bad rows: every kind is named by file, line and field ---------------------------------------------
def _crit(**over) -> dict:
    c = {"id": "c1", "text": "x", "weight": 5, "kind": "essential"}
    c.update(over)
    return c


BAD_ROWS = [
    # (name, row, format, expected field, message fragment)
    ("invalid json", '{"id": "x", "domain": ', "harnessrl", "", "invalid JSON"),
    ("not an object", "[1, 2, 3]", "harnessrl", "", "expected a JSON object"),
    ("missing field", {k: v for k, v in good_task().items() if k != "prompt"}, "harnessrl", "prompt", "missing"),
    ("wrong type", good_task(criteria="not a list"), "harnessrl", "criteria", "list"),
    (
        "wrong type nested",
        good_task(prompt=[{"role": "user", "content": 42}]),
        "harnessrl",
        "prompt[0].content",
        "string",
    ),
    (
        "bad weight",
        good_task(criteria=[_crit(), _crit(id="c2", weight=99)]),
        "harnessrl",
        "criteria[1].weight",
        "weight must be",
    ),
    (
        "weight sign vs kind",
        good_task(criteria=[_crit(), _crit(id="c2", weight=-3, kind="important")]),
        "harnessrl",
        "criteria[1]",
        "positive weight",
    ),
    (
        "unknown check type",
        good_task(criteria=[_crit(check={"type": "eval_python", "code": "1"})]),
        "harnessrl",
        "criteria[0].check",
        "eval_python",
    ),
    (
        "bad check spec",
        good_task(criteria=[_crit(check={"type": "word_count", "min": 9, "max": 2})]),
        "harnessrl",
        "criteria[0].check",
        "greater than max",
    ),
    (
        "unsafe regex",
        good_task(criteria=[_crit(check={"type": "regex", "pattern": "(a+)+$"})]),
        "harnessrl",
        "criteria[0].check.pattern",
        "nested quantifier",
    ),
    (
        "unsafe regex backreference",
        good_task(criteria=[_crit(check={"type": "regex", "pattern": r"(a)\1"})]),
        "harnessrl",
        "criteria[0].check.pattern",
        "backreference",
    ),
    ("extra field", good_task(colour="blue"), "harnessrl", "colour", "Extra inputs"),
    (
        "rar missing question",
        {"rubric": [{"title": "t", "description": "d", "weight": 5}]},
        "rar",
        "question",
        "missing",
    ),
    (
        "rar bad weight type",
        {"question": "q?", "rubric": [{"title": "t", "description": "d", "weight": "high"}]},
        "rar",
        "rubric[0].weight",
        "must be a number",
    ),
    (
        "rar zero weight",
        {"question": "q?", "rubric": [{"description": "d", "weight": 5}, {"description": "e", "weight": 0}]},
        "rar",
        "rubric[1].weight",
        "non-zero",
    ),
    (
        "rar label contradicts sign",
        {"question": "q?", "rubric": [{"description": "Pitfall Criteria: d", "weight": 4}]},
        "rar",
        "rubric[0].weight",
        "label says",
    ),
    (
        "healthbench missing rubrics",
        {"prompt": [{"role": "user", "content": "hi"}]},
        "healthbench",
        "rubrics",
        "missing",
    ),
    (
        "healthbench bad role",
        {"prompt": [{"role": "doctor", "content": "hi"}], "rubrics": [{"criterion": "c", "points": 5}]},
        "healthbench",
        "prompt[0].role",
        "Input should be",
    ),
    (
        "healthbench points out of range",
        {"prompt": [{"role": "user", "content": "hi"}], "rubrics": [{"criterion": "c", "points": 50}]},
        "healthbench",
        "rubrics[0].points",
        "weight must be",
    ),
]


@pytest.mark.parametrize("name,row,fmt,field,fragment", BAD_ROWS, ids=[r[0] for r in BAD_ROWS])
def test_bad_row_names_file_line_field(tmp_path, name, row, fmt, field, fragment):
    good = (
        good_task("ok-1")
        if fmt == "harnessrl"
        else (
            {"question": "fine?", "rubric": [{"description": "d", "weight": 5}]}
            if fmt == "rar"
            else {"prompt": [{"role": "user", "content": "hi"}], "rubrics": [{"criterion": "c", "points": 5}]}
        )
    )
    f = write_jsonl(tmp_path / "bad.jsonl", [good, row])  # the bad row is on line 2
    with pytest.raises(DataError) as ei:
        load_tasks(f, fmt=fmt)
    errs = ei.value.errors
    assert errs, "DataError must carry the row errors"
    matching = [e for e in errs if e.line == 2 and e.field == field]
    assert matching, f"no error for line 2 field {field!r}: {[str(e) for e in errs]}"
    assert any(fragment.lower() in e.message.lower() for e in matching), [e.message for e in matching]
    assert all(e.file == str(f) for e in errs)
    assert all(e.line == 2 for e in errs), "the good row on line 1 must not be reported"
    assert f"{f}:2:" in str(ei.value)


def test_duplicate_ids_are_reported_with_first_line(tmp_path):
    f = write_jsonl(tmp_path / "dup.jsonl", [good_task("a"), good_task("b"), good_task("a")])
    with pytest.raises(DataError) as ei:
        load_tasks(f)
    (err,) = ei.value.errors
    assert (err.line, err.field) == (3, "id") and "first on line 1" in err.message


def test_row_error_str_format():
    assert (
        str(RowError("data/x.jsonl", 17, "criteria[2].weight", "too big"))
        == "data/x.jsonl:17: field 'criteria[2].weight': too big"
    )
    assert str(RowError("data/x.jsonl", 3, "", "invalid JSON")) == "data/x.jsonl:3: invalid JSON"
    assert str(RowError("data/x.jsonl", 0, "", "no such file")) == "data/x.jsonl: no such file"


def test_skip_invalid_reports_every_bad_row(tmp_path):
    rows = [
        good_task("a"),
        "{oops",
        good_task("b", criteria=[_crit(weight=0)]),
        "",
        good_task("c"),
        "7",
        good_task("a"),
    ]
    f = write_jsonl(tmp_path / "mixed.jsonl", rows)
    res = load_tasks(f, skip_invalid=True)
    assert [t.id for t in res.tasks] == ["a", "c"]
    assert sorted({e.line for e in res.skipped}) == [2, 3, 6, 7]
    assert res.skipped_rows == 4
    # Without skip_invalid the same file raises with all four rows listed, not just the first.
    with pytest.raises(DataError) as ei:
        load_tasks(f)
    assert sorted({e.line for e in ei.value.errors}) == [2, 3, 6, 7]


def test_multiple_problems_in_one_row_are_all_reported(tmp_path):
    row = {"question": "", "rubric": [{"description": "d", "weight": "x"}, "nope"]}
    f = write_jsonl(tmp_path / "r.jsonl", [row])
    with pytest.raises(DataError) as ei:
        load_tasks(f, fmt="rar")
    assert {e.field for e in ei.value.errors} == {"question", "rubric[0].weight", "rubric[1]"}


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"fmt": "csv"}, "unknown format"),
        ({"split": "dev"}, "split must be"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, fragment):
    f = write_jsonl(tmp_path / "a.jsonl", [good_task()])
    with pytest.raises(DataError, match=fragment):
        load_tasks(f, **kwargs)


def test_missing_file_and_non_utf8(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load_tasks(tmp_path / "nope.jsonl")
    f = tmp_path / "latin1.jsonl"
    f.write_bytes(json.dumps(good_task("a")).encode() + b'\n{"id": "caf\xe9"}\n')
    with pytest.raises(DataError, match="not UTF-8") as ei:
        load_tasks(f)
    # The error names the line (and column) holding the bad byte; the good line before it still loads.
    assert [(e.line, e.field) for e in ei.value.errors] == [(2, "")]
    assert "latin1.jsonl:2: not UTF-8 text: byte 0xe9 at column 12" in str(ei.value)
    assert [t.id for t in load_tasks(f, skip_invalid=True).tasks] == ["a"]


def test_auto_detects_each_format(tmp_path):
    assert load_tasks(FIXTURES / "rar_sample.jsonl").tasks[0].meta["source"] == "rar"
    assert load_tasks(FIXTURES / "healthbench_sample.jsonl").tasks[0].meta["source"] == "healthbench"
    f = write_jsonl(tmp_path / "ours.jsonl", [good_task()])
    assert load_tasks(f).tasks[0].criteria[0].check is not None


# -- suites ---------------------------------------------------------------------------------------------
def test_load_suite_checks_split_and_cross_file_ids(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [good_task("a"), good_task("b", split="test")])
    write_jsonl(tmp_path / "test.jsonl", [good_task("a", split="test")])
    with pytest.raises(DataError) as ei:
        load_suite(tmp_path)
    got = {(Path(e.file).name, e.line, e.field) for e in ei.value.errors}
    assert got == {("train.jsonl", 2, "split"), ("test.jsonl", 1, "id")}


def test_load_suite_missing_file(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [good_task("a")])
    with pytest.raises(DataError, match="test.jsonl: no such file"):
        load_suite(tmp_path)


def test_load_suite_folder_of_rar_and_healthbench_files(tmp_path):
    """A folder whose train.jsonl is RaR-style and test.jsonl HealthBench-style loads; splits follow the files
    and source ids and metadata are kept."""
    (tmp_path / "train.jsonl").write_bytes((FIXTURES / "rar_sample.jsonl").read_bytes())
    (tmp_path / "test.jsonl").write_bytes((FIXTURES / "healthbench_sample.jsonl").read_bytes())
    tasks = load_suite(tmp_path)
    by_split = {s: [t for t in tasks if t.split == s] for s in ("train", "test")}
    assert {t.meta["source"] for t in by_split["train"]} == {"rar"}
    assert {t.meta["source"] for t in by_split["test"]} == {"healthbench"}
    assert by_split["test"][0].id == "hb-sample-0001"


def test_load_suite_single_file_holds_out_a_seeded_share(tmp_path):
    f = write_jsonl(tmp_path / "all.jsonl", [good_task(f"t{i}") for i in range(10)])
    a = load_suite(f, test_share=0.3, split_seed=1)
    held = sorted(t.id for t in a if t.split == "test")
    assert len(held) == 3 and len(a) == 10
    assert held == sorted(t.id for t in load_suite(f, test_share=0.3, split_seed=1) if t.split == "test")
    assert held != sorted(t.id for t in load_suite(f, test_share=0.3, split_seed=2) if t.split == "test")
    # Rows that already say split=test decide on their own: no share is drawn.
    g = write_jsonl(tmp_path / "marked.jsonl", [good_task("x"), good_task("y", split="test")])
    assert [t.id for t in load_suite(g) if t.split == "test"] == ["y"]
    with pytest.raises(DataError, match="test_share must be in"):
        load_suite(f, test_share=1.0)


def test_suite_stats_counts(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [good_task("a"), good_task("b", domain="medical", audit_criteria=[])])
    write_jsonl(tmp_path / "test.jsonl", [good_task("c", split="test")])
    s = suite_stats(load_suite(tmp_path))
    assert s["n_tasks"] == 3
    assert s["by_domain"] == {"medical": 1, "science": 2}
    assert s["by_split"] == {"train": 2, "test": 1}
    assert s["by_domain_split"]["science"] == {"train": 1, "test": 1}
    assert s["criteria"]["by_kind"] == {"essential": 3, "important": 0, "optional": 3, "pitfall": 3}
    assert s["criteria"]["check_share"] == 1.0 and s["criteria"]["mean_per_task"] == 3.0
    assert s["audit"]["tasks_with_audit"] == 2 and s["audit"]["coverage"] == pytest.approx(2 / 3, abs=1e-4)


# -- Hugging Face ids ---------------------------------------------------------------------------------------
def test_hf_without_datasets_installed_says_how_to_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` raise ImportError
    with pytest.raises(DataError, match="need the `datasets` package"):
        load_tasks("hf:ScaleAI/RaR-Medicine")


def test_hf_local_dataset_folder_maps_rar_columns(tmp_path, monkeypatch):
    """A real `datasets.load_dataset` call on a local folder (offline): columns pick the RaR mapping."""
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    ds_dir = tmp_path / "RaR-Science-mini"
    ds_dir.mkdir()
    (ds_dir / "test.jsonl").write_text((FIXTURES / "rar_sample.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    res = load_tasks(f"hf:{ds_dir}:test")
    assert len(res.tasks) == 2
    assert all(t.split == "test" and t.domain == "science" for t in res.tasks)
    assert res.tasks[0].criteria[0].kind == "essential"
    assert res.tasks[0].id == "RaR-Science-mini-test-00001"


def test_hf_unloadable_dataset_is_a_clear_error(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    with pytest.raises(DataError, match="could not load dataset"):
        load_tasks("hf:no-such-org/no-such-dataset-xyz")
