"""Test scratch does not pile up: with the project's pytest settings (pyproject.toml), a passing test's tmp_path
is deleted as soon as the test ends and a failing test's is kept for inspection. A full run writes about 2 GB of
checkpoints; kept until a later session, they once filled a shared disk mid-run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

MODULE = """
def test_passes(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)

def test_fails(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)
    assert False, "kept for inspection"
"""


def test_passing_folder_goes_failing_folder_stays(tmp_path):
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_two.py").write_text(MODULE)
    base = tmp_path / "base"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(PYPROJECT),
            "--rootdir",
            str(project),
            "--basetemp",
            str(base),
            "tests",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert not (base / "test_passes0").exists()
    assert (base / "test_fails0" / "weights.bin").stat().st_size == 1000
