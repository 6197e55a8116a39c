"""Imports point one way, and private names stay inside their package.

Rules (each check is a plain function, exercised on the real tree and on synthetic sources that must fail):

- the layers, lowest first: harness < memory, suitegen < tools < agents < graphs < trainer < benchmarks, examples.
  A module may import its own package and lower layers only; packages on the same rank may not import each other.
  Every import counts, wherever it is written: at the top, inside a function (lazy), under `TYPE_CHECKING`;
- a *package* is a top-level folder of the repo holding `.py` files (`tests/` excluded). One that is not in
  `LAYERS` fails the test: a new package has to be placed in the order first;
- a private name (one leading underscore, not a dunder) of another package is never imported: not
  `from x.y import _z`, not `import x._y`, and not reached as an attribute (`x.y._z`, `mod._z` where `mod`
  was imported from another package). `benchmarks/` scripts follow this rule too; tests do not;
- no import circle between the modules of one package (cross-package circles the layers already rule out): the
  graph's edges are every import, at the top, inside a function (lazy) and under `TYPE_CHECKING`. A type-only
  import is not a load-order circle, but it counts: a type named is still a dependency on the module that
  defines it, a circle through one is the same two modules each knowing the other (it turns into a load-order
  circle the day the type is needed at run time, e.g. by an `isinstance`), and the layer check counts it too.
  A module that must name the type of a module above it takes a narrow `Protocol` of its own instead. Importing
  `pkg.mod` runs `pkg/__init__.py` first, but that is the loader's order, not an edge: an `__init__` re-exporting
  its modules is no circle; a module importing a name from its package's `__init__` (`from pkg import Name`) is
  an edge to it. A failure names the circle's path, each step with the file and line of its import.
"""

from __future__ import annotations

import ast
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Rank per top-level package; an import must go to a strictly lower rank (or stay in its own package).
LAYERS: dict[str, int] = {
    "harness": 0,
    "memory": 1,
    "suitegen": 1,  # the suite generator: content and builders over harness types, called by `harnessrl data`
    "tools": 2,
    "agents": 3,
    "graphs": 4,
    "trainer": 5,
    "benchmarks": 6,  # scripts that may import everything; nothing imports them
    "examples": 6,  # user scripts on the public API; nothing imports them
}
NOT_PACKAGES = {"tests", "docs", "data", "configs"}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    statement: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}  ({self.why})"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _top(dotted: str) -> str:
    return dotted.split(".", 1)[0]


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"] when the expression is a plain attribute chain on a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def check_source(rel_path: str, source: str) -> list[Violation]:
    """Violations in one module; `rel_path` (e.g. "agents/llm.py") gives its package."""
    own = _top(rel_path.replace("/", "."))
    rank = LAYERS[own]
    tree = ast.parse(source, filename=rel_path)
    lines = source.splitlines()
    found: list[Violation] = []
    bound: dict[str, str] = {}  # local name -> the module path it was imported from, for other packages only

    def flag(node: ast.AST, why: str) -> None:
        text = lines[node.lineno - 1].strip() if node.lineno <= len(lines) else ""
        found.append(Violation(rel_path, node.lineno, text, why))

    def check_target(node: ast.AST, module: str) -> bool:
        """Flags an upward import; True when `module` is in another layered package."""
        target = _top(module)
        if target == own or target not in LAYERS:
            return False
        if LAYERS[target] >= rank:
            flag(node, f"{own} (layer {rank}) imports {module} (layer {LAYERS[target]}): imports must point down")
        return True

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not check_target(node, alias.name):
                    continue
                if any(_private(p) for p in alias.name.split(".")):
                    flag(node, f"private module {alias.name} of another package")
                local = alias.asname or _top(alias.name)
                bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not check_target(node, node.module):
                continue
            if any(_private(p) for p in node.module.split(".")):
                flag(node, f"private module {node.module} of another package")
            for alias in node.names:
                if _private(alias.name):
                    flag(node, f"private name {alias.name} of {node.module}")
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    # Attribute access reaching a private name through something imported from another package; only whole
    # chains are read (`a.b._c`, not also its inner `a.b`).
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _dotted(node)
            if chain and chain[0] in bound and any(_private(p) for p in chain[1:]):
                flag(node, f"private name {'.'.join(chain)} of {bound[chain[0]]}")
    return sorted(set(found), key=lambda v: (v.line, v.why))


def top_level_packages(root: Path) -> list[str]:
    """Top-level folders of the repo that hold Python code (see the module docstring). Git-ignored folders
    (run outputs such as a benchmark's frozen code copy under runs/) are not part of the repository."""
    ignored = set(
        subprocess.run(
            ["git", "check-ignore", *[d.name for d in root.iterdir() if d.is_dir()]],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.split()
    )
    return sorted(
        d.name
        for d in root.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and d.name not in NOT_PACKAGES
        and not d.name.endswith(".egg-info")
        and d.name not in ignored
        and any(f for f in d.rglob("*.py") if "__pycache__" not in f.parts)
    )


def unplaced_packages(root: Path) -> list[str]:
    return [p for p in top_level_packages(root) if p not in LAYERS]


def tree_violations(root: Path) -> list[Violation]:
    out: list[Violation] = []
    for pkg in top_level_packages(root):
        if pkg not in LAYERS:
            continue
        for f in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            rel = f.relative_to(root).as_posix()
            out.extend(check_source(rel, f.read_text(encoding="utf-8")))
    return out


# -- import circles inside a package ---------------------------------------------------------------------------
def module_name(rel_path: str) -> str:
    """`trainer/config.py` -> `trainer.config`; a package's `trainer/commands/__init__.py` -> `trainer.commands`."""
    dotted = rel_path.removesuffix(".py").replace("/", ".")
    return dotted.removesuffix(".__init__")


def import_edges(rel_path: str, source: str, modules: set[str]) -> dict[str, int]:
    """Modules of `modules` that one module imports (top-level, lazy or type-only), each with its first line."""
    me = module_name(rel_path)
    package = me if rel_path.endswith("__init__.py") else me.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        # `import a.b.c` is an edge to a.b.c only: running a.b's `__init__` first is the loader's order.
        if target in modules and target != me:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(source, filename=rel_path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                add(sub if sub in modules else origin, node.lineno)  # a submodule, else a name from `origin`
    return found


@dataclass(frozen=True)
class Circle:
    """One import circle: modules in import order, the first repeated at the end, and where each step is."""

    modules: tuple[str, ...]
    steps: tuple[str, ...]  # "path:line" of the import from modules[i] to modules[i + 1]

    def __str__(self) -> str:
        return " -> ".join(self.modules) + "".join(
            f"\n    {self.modules[i]} imports {self.modules[i + 1]} at {step}" for i, step in enumerate(self.steps)
        )


def import_circles(sources: dict[str, str]) -> list[Circle]:
    """Import circles of one package: a shortest one through each module that no circle found before passes through.

    `sources` maps the paths of one package's modules to their text; imports of other packages are no edges."""
    paths = {module_name(p): p for p in sources}
    graph = {m: import_edges(p, sources[p], set(paths)) for m, p in paths.items()}
    circles: list[Circle] = []
    seen: set[str] = set()
    for start in sorted(graph):
        if start in seen:
            continue
        # Breadth-first from `start` back to itself: the shortest circle through it, if any.
        parent: dict[str, str] = {}
        queue, found = [start], False
        while queue and not found:
            nxt: list[str] = []
            for m in queue:
                for t in sorted(graph[m]):
                    if t == start:
                        parent[start], found = m, True
                        break
                    if t not in parent:
                        parent[t] = m
                        nxt.append(t)
                if found:
                    break
            queue = nxt
        if not found:
            continue
        chain = [start]
        while True:
            chain.append(parent[chain[-1]])
            if chain[-1] == start:
                break
        chain.reverse()
        seen.update(chain)
        steps = tuple(f"{paths[a]}:{graph[a][b]}" for a, b in zip(chain, chain[1:]))
        circles.append(Circle(tuple(chain), steps))
    return circles


def tree_circles(root: Path) -> list[Circle]:
    """The import circles of every placed package of the repository."""
    out: list[Circle] = []
    for pkg in top_level_packages(root):
        if pkg not in LAYERS:
            continue
        files = [f for f in sorted((root / pkg).rglob("*.py")) if "__pycache__" not in f.parts]
        out += import_circles({f.relative_to(root).as_posix(): f.read_text(encoding="utf-8") for f in files})
    return out


# -- the real tree -------------------------------------------------------------------------------------------
def test_every_package_is_placed_in_the_layer_order() -> None:
    assert unplaced_packages(REPO) == [], "add the new package to LAYERS in tests/test_layering.py"


def test_imports_point_down_and_private_names_stay_home() -> None:
    problems = tree_violations(REPO)
    assert not problems, "\n" + "\n".join(map(str, problems))


def test_no_import_circle_inside_a_package() -> None:
    circles = tree_circles(REPO)
    assert not circles, "\n" + "\n".join(map(str, circles))


# -- the checker itself can fail -----------------------------------------------------------------------------
SYNTHETIC: list[tuple[str, str, str]] = [
    (
        "harness/x.py",
        "from trainer.harness_run import main\n",
        "harness (layer 0) imports trainer.harness_run (layer 5)",
    ),
    ("tools/x.py", "def f():\n    import agents.llm\n", "tools (layer 2) imports agents.llm"),  # lazy import
    (
        "memory/x.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from graphs.state import S\n",
        "memory (layer 1) imports graphs.state",
    ),
    ("memory/x.py", "import suitegen.generate\n", "memory (layer 1) imports suitegen.generate (layer 1)"),  # same rank
    ("trainer/x.py", "import benchmarks.compare\n", "trainer (layer 5) imports benchmarks.compare (layer 6)"),
    ("agents/x.py", "from tools.judge import _from_obj\n", "private name _from_obj of tools.judge"),
    ("agents/x.py", "import tools._secret as s\n", "private module tools._secret"),
    ("benchmarks/x.py", "from trainer.evaluate import _load_model\n", "private name _load_model of trainer.evaluate"),
    (
        "benchmarks/x.py",
        "import trainer.evaluate\ntrainer.evaluate._load_model('m')\n",
        "private name trainer.evaluate._load_model of trainer",
    ),
    ("graphs/x.py", "from tools import judge as j\nj._balanced(1)\n", "private name j._balanced of tools.judge"),
]


@pytest.mark.parametrize(("path", "source", "why"), SYNTHETIC)
def test_checker_catches_a_bad_import(path: str, source: str, why: str) -> None:
    problems = check_source(path, source)
    assert len(problems) == 1, problems
    assert why in problems[0].why
    assert str(problems[0]).startswith(f"{path}:{problems[0].line}: ")
    assert problems[0].statement in source


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("trainer/x.py", "import harness.types\nfrom agents.llm import ask\nfrom trainer._private import x\n"),
        ("agents/x.py", "from .schemas import _helper\nimport json\nfrom pydantic import BaseModel\n"),
        (
            "benchmarks/x.py",
            "import trainer.evaluate\ntrainer.evaluate.load_model('m')\nfrom harness import __version__\n",
        ),
        ("tools/x.py", "import tools.judge\ntools.judge._from_obj({})\nx = obj._private\n"),
    ],
)
def test_checker_allows_downward_and_own_package_imports(path: str, source: str) -> None:
    assert check_source(path, source) == []


def test_an_unplaced_package_fails(tmp_path: Path) -> None:
    for name in ("harness", "newpkg", "tests", "docs"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.py").write_text("")
    assert unplaced_packages(tmp_path) == ["newpkg", "scripts"]


# -- the circle check itself can fail -------------------------------------------------------------------------
CIRCLES: list[tuple[dict[str, str], list[tuple[str, ...]]]] = [
    (  # the shape of the old config <-> dynamic_sampling circle: one side lazy
        {
            "trainer/config.py": "def check():\n    from trainer.dynamic_sampling import LOSS_TYPES\n",
            "trainer/dynamic_sampling.py": "from trainer.config import ConfigError\n",
        },
        [("trainer.config", "trainer.dynamic_sampling", "trainer.config")],
    ),
    (  # three modules; a submodule imported by `from pkg import mod`, and a relative import
        {
            "trainer/__init__.py": "",
            "trainer/harness_run.py": "from trainer import evolver_round\n",
            "trainer/evolver_round.py": "import json\nfrom .round_events import take\n",
            "trainer/round_events.py": "import trainer.harness_run as hr\n",
        },
        [("trainer.evolver_round", "trainer.round_events", "trainer.harness_run", "trainer.evolver_round")],
    ),
    (  # a type-only import counts
        {
            "graphs/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from graphs.b import B\n",
            "graphs/b.py": "import graphs.a\n",
        },
        [("graphs.a", "graphs.b", "graphs.a")],
    ),
    (  # a name taken from the package's `__init__`, which imports the module back
        {"tools/__init__.py": "from tools.judge import Judge\n", "tools/judge.py": "from tools import VERSION\n"},
        [("tools", "tools.judge", "tools")],
    ),
    (  # no circle: a chain, an `__init__` re-exporting its modules, a subpackage, other packages' imports
        {
            "harness/__init__.py": "from harness.types import Task\nfrom harness.store import Store\n",
            "harness/types.py": "from harness.checks import Check\nimport trainer.config\n",
            "harness/store.py": "from harness.types import Task\nfrom harness import checks\n",
            "harness/checks.py": "import json\nfrom harness.sub.x import y\n",
            "harness/sub/__init__.py": "",
            "harness/sub/x.py": "from ..checks_base import z\n",
        },
        [],
    ),
]


@pytest.mark.parametrize(("sources", "expect"), CIRCLES)
def test_circle_check_catches_a_planted_circle(sources: dict[str, str], expect: list[tuple[str, ...]]) -> None:
    circles = import_circles(sources)
    assert [c.modules for c in circles] == expect
    for c in circles:
        assert len(c.steps) == len(c.modules) - 1
        assert all(step.split(":")[0] in sources for step in c.steps)
        assert str(c).startswith(" -> ".join(c.modules))


def test_a_circle_names_each_import_with_its_file_and_line() -> None:
    (circle,) = import_circles(CIRCLES[0][0])
    assert str(circle) == (
        "trainer.config -> trainer.dynamic_sampling -> trainer.config\n"
        "    trainer.config imports trainer.dynamic_sampling at trainer/config.py:2\n"
        "    trainer.dynamic_sampling imports trainer.config at trainer/dynamic_sampling.py:1"
    )
