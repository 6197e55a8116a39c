"""`import harness` must stay light: the evolver side and `harnessrl data ...` never pay for torch/trl."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import sys
import harness
import harness.ops, harness.store, harness.scoring, harness.detector, harness.sampling, harness.guidance
heavy = sorted(m for m in ("torch", "trl", "transformers", "chromadb", "langgraph") if m in sys.modules)
assert not heavy, f"importing harness loaded {heavy}"
assert harness.__file__.startswith(sys.argv[1]), harness.__file__
print("ok")
"""


def test_import_harness_loads_no_heavy_packages() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_public_names_are_exported() -> None:
    import harness

    for name in harness.__all__:
        assert getattr(harness, name) is not None, name
