"""The top-level packages resolve inside this repo, not to same-named PyPI distributions.

`agents`, `tools`, `memory`, `trainer` and `graphs` are all taken on PyPI (the OpenAI Agents SDK
installs an import package literally named `agents`), so a stray install would shadow ours silently.
"""

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ["harness", "memory", "tools", "agents", "graphs", "trainer", "suitegen"]
# Packages that must import without torch (everything but the trainer).
LIGHT = ["harness", "memory", "tools", "agents", "graphs", "suitegen"]


@pytest.mark.parametrize("name", PACKAGES)
def test_package_resolves_inside_repo(name):
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve().parent == REPO / name


def test_packages_listed_explicitly_in_pyproject():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = config["tool"]["setuptools"]["packages"]
    assert sorted(p for p in listed if "." not in p) == sorted(PACKAGES)
    # Subpackages must be listed too, or a wheel install silently drops them.
    on_disk = {
        str(d.relative_to(REPO)).replace("/", ".")
        for p in PACKAGES
        for d in (REPO / p).rglob("*")
        if d.is_dir() and (d / "__init__.py").exists()
    }
    assert on_disk <= set(listed)


def test_data_files_inside_packages_ship_as_package_data():
    # A wheel carries only .py files unless package-data names the rest (e.g. suitegen/content/*.yaml).
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = config["tool"]["setuptools"]["packages"]
    globs = config["tool"]["setuptools"].get("package-data", {})
    missing = []
    for pkg in listed:
        pkg_dir = REPO / pkg.replace(".", "/")
        for f in pkg_dir.rglob("*"):
            if not f.is_file() or f.suffix in (".py", ".pyc") or "__pycache__" in f.parts:
                continue
            owner = max((q for q in listed if f.is_relative_to(REPO / q.replace(".", "/"))), key=len)
            if owner != pkg:
                continue  # checked under its own subpackage
            if not any(f in pkg_dir.glob(g) for g in globs.get(pkg, [])):  # setuptools' glob semantics
                missing.append(str(f.relative_to(REPO)))
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"
    assert (REPO / "suitegen" / "content").is_dir() and "suitegen" in globs  # the case this test exists for


def test_packages_resolve_from_another_working_directory(tmp_path):
    # The console script runs from anywhere: the installed (editable) project must still win.
    code = "import " + ", ".join(PACKAGES) + "; print(agents.__file__, tools.__file__, memory.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    for path in out.stdout.split():
        assert Path(path).resolve().is_relative_to(REPO)


def test_evolver_side_imports_without_torch():
    code = (
        "import sys, "
        + ", ".join(LIGHT)
        + "; print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
