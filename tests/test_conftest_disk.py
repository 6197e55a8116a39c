"""The disk block of tests/conftest.py: a passing test's tmp_path is deleted at once, a failing one's is kept."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

MODULE = '''
def test_passes(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)

def test_fails(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"x" * 1000)
    assert False, "kept for inspection"
'''


def test_passing_folder_goes_failing_folder_stays(tmp_path):
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copy(CONFTEST, project / "tests" / "conftest.py")
    (project / "tests" / "test_two.py").write_text(MODULE)
    (project / "pytest.ini").write_text("[pytest]\n")
    base = tmp_path / "base"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(base),
                          "tests"], cwd=project, capture_output=True, text=True, timeout=120)
    assert "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert not (base / "test_passes0").exists()
    assert (base / "test_fails0" / "weights.bin").stat().st_size == 1000
