"""`harnessrl data ...` end to end in a subprocess (as users run it), from a foreign working directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trainer.cli", "data", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )


def test_stats_json_reports_suite_numbers_from_any_cwd(tmp_path):
    r = run_cli("stats", "--json", cwd=tmp_path)  # default suite resolves next to the package, not the CWD
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["n_tasks"] >= 300 and min(s["by_domain"].values()) >= 50 and len(s["by_domain"]) == 5
    assert s["by_split"]["test"] >= 50
    assert s["criteria"]["check_share"] >= 0.7 and s["audit"]["coverage"] == 1.0
    assert all(s["criteria"]["by_kind"][k] > 0 for k in ("essential", "important", "optional", "pitfall"))


def test_stats_table_and_explicit_suite(tmp_path):
    r = run_cli("stats", "--suite", str(REPO / "data" / "rubric-mix-lite"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "instruction_following" in r.stdout and "audit coverage" in r.stdout


def test_stats_does_not_import_torch(tmp_path):
    code = (
        "import sys, trainer.cli; rc = trainer.cli.main(['data', 'stats', '--json']); "
        "assert 'torch' not in sys.modules and 'trl' not in sys.modules, 'torch imported'; sys.exit(rc)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr


def test_validate_bad_file_exits_1_and_names_every_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = {
        "id": "t1",
        "domain": "science",
        "prompt": [{"role": "user", "content": "Hi?"}],
        "criteria": [{"id": "c1", "text": "x", "weight": 5, "kind": "essential"}],
    }
    rows = [
        json.dumps(good),
        "{broken",
        json.dumps({**good, "id": "t2", "criteria": [{**good["criteria"][0], "weight": 50}]}),
        json.dumps(
            {**good, "id": "t3", "criteria": [{**good["criteria"][0], "check": {"type": "regex", "pattern": "(x*)*y"}}]}
        ),
    ]
    bad.write_text("\n".join(rows) + "\n")
    r = run_cli("validate", str(bad), str(REPO / "tests" / "fixtures" / "rar_sample.jsonl"), cwd=tmp_path)
    assert r.returncode == 1
    assert f"{bad}:2: invalid JSON" in r.stdout
    assert f"{bad}:3: field 'criteria[0].weight'" in r.stdout
    assert f"{bad}:4: field 'criteria[0].check.pattern'" in r.stdout
    assert "rar_sample.jsonl: 2 tasks ok" in r.stderr  # later files are still checked
    # --skip-invalid still lists every bad row but accepts the rest.
    r2 = run_cli("validate", "--skip-invalid", str(bad), cwd=tmp_path)
    assert r2.returncode == 0 and r2.stdout.count(str(bad)) == 3 and "3 rows skipped" in r2.stderr


def test_validate_good_files_in_each_format_exit_0(tmp_path):
    suite = REPO / "data" / "rubric-mix-lite"
    r = run_cli(
        "validate",
        str(suite / "train.jsonl"),
        str(suite / "test.jsonl"),
        str(REPO / "tests" / "fixtures" / "rar_sample.jsonl"),
        str(REPO / "tests" / "fixtures" / "healthbench_sample.jsonl"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""


def test_validate_missing_file_exits_1_even_with_skip_invalid(tmp_path):
    r = run_cli("validate", "--skip-invalid", str(tmp_path / "nope.jsonl"), cwd=tmp_path)
    assert r.returncode == 1 and "no such file" in r.stdout


def test_generate_writes_identical_suite(tmp_path):
    out = tmp_path / "suite"
    r = run_cli("generate", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ("train.jsonl", "test.jsonl", "README.md"):
        assert (out / name).read_bytes() == (REPO / "data" / "rubric-mix-lite" / name).read_bytes()


def test_convert_writes_our_format_and_keeps_source_ids(tmp_path, capsys):
    """RaR train + HealthBench test files -> one folder in our format that loads back to the same tasks."""
    from harness.data import load_suite, load_tasks
    from trainer.cli import main

    fixtures = Path(__file__).parent / "fixtures"
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.jsonl").write_bytes((fixtures / "rar_sample.jsonl").read_bytes())
    (src / "test.jsonl").write_bytes((fixtures / "healthbench_sample.jsonl").read_bytes())
    out = tmp_path / "ours"
    assert main(["data", "convert", str(src), "--out", str(out)]) == 0
    converted = load_suite(out)
    assert [t.model_dump() for t in converted] == [t.model_dump() for t in load_suite(src)]
    assert load_tasks(out / "test.jsonl", fmt="harnessrl").tasks[0].id == "hb-sample-0001"
    assert {t.meta["source"] for t in converted} == {"rar", "healthbench"}
    # A second conversion into the same folder is refused rather than mixing files.
    assert main(["data", "convert", str(src), "--out", str(out)]) == 1
    assert "not an empty folder" in capsys.readouterr().err
