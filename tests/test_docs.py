"""The docs match the code: every module is in docs/ARCHITECTURE.md, every path and name it gives exists,
and no file in the repository cites design notes that live outside it.

Rules (each check is a plain function, exercised on the real tree and on a synthetic input that must fail):

- a *package* is a top-level folder of the repo with an `__init__.py` (`tests/` excluded); its *modules* are
  all `.py` files below it except `__init__.py` (subpackages such as `trainer/commands/` included);
- a module counts as documented when its repo-relative path (e.g. `graphs/evolver.py`) appears verbatim in
  docs/ARCHITECTURE.md: file names alone are ambiguous (`models.py` exists in `agents/` and `trainer/`);
- every repo-relative path ending in `.py` that ARCHITECTURE.md names (a token with a `/`) must exist;
- in a table row of ARCHITECTURE.md whose first cell names one module path, every backticked name in the
  last cell must be defined in that module (`def`, `class` or a top-level assignment; for `A.b`, both parts);
- no tracked or new (not ignored) file cites the design blueprint or the notes folder outside the repo.
- every dotted name (`trainer.sampler.HarnessSampler.fill`) in docs/DESIGN.md's walk through one training step
  is defined where it says: the module file exists and defines each part in turn (read with `ast`, nothing is
  imported).
- every file the README's tree lists under a package folder (`harness/`, then `  types.py ...`) exists there.
- every backticked repository path in README.md, AGENTS.md, docs/*.md and benchmarks/*.md (`agents/critic.py`,
  `tools/vllm_cpu/`, `configs/tiny.yaml`) exists. A path counts when it names a folder (`/` at the end) or a source
  or text file, holds no placeholder (`<group>`, `*`), and either names a module outside `runs/` or starts with a
  top-level entry of the tree other than `runs/`: a run folder's `final/` or `checkpoint-N/`, and user-chosen names
  such as `runs/mine` or `my_tasks.jsonl`, are not checked. Inline code only: fenced blocks (commands, the README's
  tree) are left out.
- every backticked dotted name of a package in those docs (`agents.decisions.after_critique`, `tools.judge`) resolves
  as `unresolved` reads it, or names a module or package; `harness.<x>` where `harness/<x>.py` is no module is a
  config key (`harness.max_events`; `tests/test_readme_config.py` checks the config's fields) and a file name
  (`memory.jsonl`) is no name: neither is checked here.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
DESIGN = REPO / "docs" / "DESIGN.md"
README = REPO / "README.md"
STEP_HEADING = "### One training step, from draw to commit"

# Assembled from pieces so that this file does not match its own pattern.
CITATION = re.compile(
    "|".join(
        [
            "SYSTEM" r"\.md",
            r"(?<![A-Za-z])" "notes" "/",
            r"\b[a-z0-9]+(?:-[a-z0-9]+)*-" "facts" r"\b",
            "anchor" + "-apis",
            "paper" + "-reconstruction",
            "style" + "-anchors",
        ]
    )
)
MODULE_PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w-]*/)+[A-Za-z_]\w*\.py)\b")
BACKTICKED = re.compile(r"`([^`]+)`")
IDENT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
BINARY_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".pdf", ".gz", ".zip", ".whl", ".onnx", ".sqlite"}


# -- the checks ------------------------------------------------------------------------------------------------
def package_modules(root: Path) -> list[str]:
    """Repo-relative paths of every module in every top-level package (see the module docstring)."""
    out: list[str] = []
    for pkg in sorted(p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
        if pkg.name == "tests" or pkg.name.startswith("."):
            continue
        for f in sorted(pkg.rglob("*.py")):
            if f.name != "__init__.py" and "__pycache__" not in f.parts:
                out.append(f.relative_to(root).as_posix())
    return out


def undocumented(modules: list[str], doc: str) -> list[str]:
    return [m for m in modules if m not in doc]


def missing_paths(doc: str, root: Path) -> list[str]:
    return sorted({p for p in MODULE_PATH.findall(doc) if not (root / p).is_file()})


def _defined(source: str, name: str) -> bool:
    pattern = rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]"
    return re.search(pattern, source, re.MULTILINE) is not None


def undefined_names(doc: str, root: Path) -> list[str]:
    """`module: name` for each backticked name in a module's table row that the module does not define."""
    problems: list[str] = []
    for line in doc.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        paths = MODULE_PATH.findall(cells[0]) if len(cells) >= 2 else []
        if len(paths) != 1 or not (root / paths[0]).is_file():
            continue  # header rows, rows about folders or several modules; missing paths are check (b)
        source = (root / paths[0]).read_text(encoding="utf-8")
        for token in BACKTICKED.findall(cells[-1]):
            m = IDENT.match(token.strip())
            if m is None:
                continue
            for part in m.group(0).split("."):
                if not _defined(source, part):
                    problems.append(f"{paths[0]}: {m.group(0)}")
                    break
    return problems


def repo_files(root: Path) -> list[str]:
    """Tracked files plus new files git does not ignore (a colleague's file counts before it is committed)."""
    try:
        res = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        )
    except (FileNotFoundError, subprocess.CalledProcessError) as err:
        pytest.skip(f"not a git checkout ({err}): cannot list the repository's files")
    return sorted({p for p in res.stdout.decode().split("\0") if p})


def citations(files: dict[str, str]) -> list[str]:
    """`path:line: text` for every line citing material outside the repository."""
    hits: list[str] = []
    for path, text in files.items():
        for no, line in enumerate(text.splitlines(), 1):
            if CITATION.search(line):
                hits.append(f"{path}:{no}: {line.strip()[:120]}")
    return hits


def _read_texts(root: Path, paths: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in paths:
        f = root / p
        if f.suffix.lower() in BINARY_SUFFIXES or not f.is_file():
            continue  # deleted in the work tree but still tracked, or binary
        out[p] = f.read_bytes().decode("utf-8", errors="replace")
    return out


def section(doc: str, heading: str) -> str:
    """The text under `heading` up to the next heading of any level ("" when the heading is absent)."""
    lines = doc.splitlines()
    if heading not in lines:
        return ""
    body = lines[lines.index(heading) + 1 :]
    end = next((i for i, line in enumerate(body) if line.startswith("#")), len(body))
    return "\n".join(body[:end])


def dotted_names(text: str, packages: set[str]) -> list[str]:
    """Backticked `pkg.module.Name[.attr]` tokens whose first part is one of `packages`, in order of appearance."""
    out: list[str] = []
    for token in BACKTICKED.findall(text):
        m = IDENT.fullmatch(token.strip())
        if m is not None and "." in token and token.split(".")[0] in packages:
            out.append(token.strip())
    return out


def _member(body: list[ast.stmt], name: str) -> ast.stmt | None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    return None


def unresolved(names: list[str], root: Path) -> list[str]:
    """The dotted names that do not resolve.

    A name resolves when its longest prefix names a module file and each remaining part is defined in the body of
    the one before (a class's methods, a function's nested classes).
    """
    bad: list[str] = []
    for name in names:
        parts = name.split(".")
        found = next(
            (i for i in range(len(parts) - 1, 0, -1) if (root / Path(*parts[:i])).with_suffix(".py").is_file()), None
        )
        if found is None:
            bad.append(name)
            continue
        node: ast.stmt | ast.Module | None = ast.parse(
            (root / Path(*parts[:found])).with_suffix(".py").read_text(encoding="utf-8")
        )
        for part in parts[found:]:
            scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
            body = node.body if isinstance(node, scopes) else []
            node = _member(body, part)
            if node is None:
                bad.append(name)
                break
    return bad


# -- the real tree -------------------------------------------------------------------------------------------
def test_every_package_module_is_in_architecture():
    modules = package_modules(REPO)
    assert "harness/types.py" in modules and "trainer/commands/train.py" in modules  # discovery works
    missing = undocumented(modules, ARCHITECTURE.read_text(encoding="utf-8"))
    assert not missing, f"docs/ARCHITECTURE.md does not name these modules (add their paths): {missing}"


def test_architecture_names_only_existing_modules():
    bad = missing_paths(ARCHITECTURE.read_text(encoding="utf-8"), REPO)
    assert not bad, f"docs/ARCHITECTURE.md names module paths that do not exist: {bad}"


def test_architecture_names_only_defined_functions_and_classes():
    bad = undefined_names(ARCHITECTURE.read_text(encoding="utf-8"), REPO)
    assert not bad, f"docs/ARCHITECTURE.md lists names their module does not define: {bad}"


def duplicated_rows(doc: str) -> list[str]:
    """Module paths that head more than one table row (two rows for one module drift apart)."""
    heads = [m.group(1) for m in re.finditer(r"^\| `([^`]+\.py)` \|", doc, re.M)]
    return sorted({h for h in heads if heads.count(h) > 1})


def test_architecture_lists_each_module_once():
    assert duplicated_rows("| `a/x.py` | one |\n| `a/y.py` | two |\n| `a/x.py` | again |\n") == ["a/x.py"]
    dup = duplicated_rows(ARCHITECTURE.read_text(encoding="utf-8"))
    assert not dup, f"docs/ARCHITECTURE.md has more than one row for: {dup}"


def test_no_file_cites_material_outside_the_repo():
    hits = citations(_read_texts(REPO, repo_files(REPO)))
    assert not hits, "cite the fact itself or docs/DESIGN.md instead:\n" + "\n".join(hits)


def test_the_walk_through_one_step_names_only_existing_functions():
    walk = section(DESIGN.read_text(encoding="utf-8"), STEP_HEADING)
    packages = {m.split("/")[0] for m in package_modules(REPO)}
    names = dotted_names(walk, packages)
    assert len(names) >= 20, f"docs/DESIGN.md '{STEP_HEADING}' is missing or names too few functions: {names}"
    bad = unresolved(names, REPO)
    assert not bad, f"docs/DESIGN.md '{STEP_HEADING}' names functions that do not exist (renamed?): {bad}"


# -- each check can fail -------------------------------------------------------------------------------------
def _fake_repo(tmp_path: Path) -> Path:
    for rel, text in {
        "pkg/__init__.py": "",
        "pkg/alpha.py": "def run():\n    pass\n\nclass Box:\n    def open(self):\n        pass\n\nLIMIT = 3\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/beta.py": "",
        "tests/__init__.py": "",
        "tests/test_x.py": "",
        "scripts/tool.py": "",  # no __init__.py: not a package
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_synthetic_undocumented_module_fails(tmp_path):
    root = _fake_repo(tmp_path)
    assert package_modules(root) == ["pkg/alpha.py", "pkg/sub/beta.py"]
    assert undocumented(package_modules(root), "| `pkg/alpha.py` | ... |\n`beta.py` alone is not enough") == [
        "pkg/sub/beta.py"
    ]
    assert undocumented(package_modules(root), "`pkg/alpha.py`, `pkg/sub/beta.py`") == []


def test_synthetic_missing_path_fails(tmp_path):
    root = _fake_repo(tmp_path)
    doc = "`pkg/alpha.py` and `pkg/gone.py`; see also pkg/sub/beta.py and `trainer/commands/<group>.py`"
    assert missing_paths(doc, root) == ["pkg/gone.py"]


def test_synthetic_undefined_name_fails(tmp_path):
    root = _fake_repo(tmp_path)
    doc = (
        "| module | names |\n|---|---|\n"
        "| `pkg/alpha.py` | `run()`, `Box.open`, `LIMIT`, `upsert_task_profile(...)`, `Box.close` |\n"
    )
    assert undefined_names(doc, root) == ["pkg/alpha.py: upsert_task_profile", "pkg/alpha.py: Box.close"]


@pytest.mark.parametrize(
    "line",
    [
        "see " + "SYSTEM" + ".md §6",
        "(" + "notes" + "/paper-x.md §4)",
        "../shared/" + "notes" + "/vllm.md",
        "(environment-" + "facts §2a)",
        "(smollm2-grpo-" + "facts.md)",
        "anchor" + "-apis.md",
    ],
)
def test_synthetic_citation_fails(line):
    assert citations({"x.py": f"ok\n# {line}\n"}) == [f"x.py:2: # {line}"]


def test_plain_words_are_not_citations():
    text = "footnotes/ here, the facts of the matter, release notes are fine"
    assert citations({"x.md": text}) == []


def test_synthetic_walk_with_a_renamed_function_fails(tmp_path):
    root = _fake_repo(tmp_path)
    doc = (
        "# Design\n### Walk\n1. `pkg.alpha.run`, then `pkg.alpha.Box.open` and `pkg.alpha.LIMIT`;"
        " `other.x.y` and `run` are not ours\n"
        "2. `pkg.alpha.Box.close`, `pkg.alpha.gone`, `pkg.sub.beta.f`, `pkg.missing.f`\n"
        "## Next\n`pkg.alpha.later`\n"
    )
    names = dotted_names(section(doc, "### Walk"), {"pkg"})
    assert names == [
        "pkg.alpha.run",
        "pkg.alpha.Box.open",
        "pkg.alpha.LIMIT",
        "pkg.alpha.Box.close",
        "pkg.alpha.gone",
        "pkg.sub.beta.f",
        "pkg.missing.f",
    ]
    assert unresolved(names, root) == ["pkg.alpha.Box.close", "pkg.alpha.gone", "pkg.sub.beta.f", "pkg.missing.f"]
    assert section(doc, "### Absent") == ""


def readme_tree_misses(readme: str, root: Path) -> list[str]:
    """Module files the README's tree lists under a package folder that do not exist there."""
    block = readme.split("## What is in the repo", 1)[-1].split("```", 2)[1]
    missing: list[str] = []
    folder: Path | None = None
    for line in block.splitlines():
        if line and not line.startswith(" "):  # a top-level entry: a package folder or anything else
            head = line.split()[0]
            folder = root / head if head.endswith("/") and (root / head / "__init__.py").exists() else None
        elif folder is not None and line.strip():  # "  a.py, b.py   what they are": names before the gap
            for name in line.strip().split("  ")[0].split(","):
                if name.strip().endswith(".py") and not (folder / name.strip()).exists():
                    missing.append(f"{folder.name}/{name.strip()}")
    return missing


def test_readme_tree_names_only_existing_modules(tmp_path):
    fake = "## What is in the repo\n\n```\npkg/   a package\n  alpha.py   here\n  gone.py, alpha.py   not\n```\n"
    assert readme_tree_misses(fake, _fake_repo(tmp_path)) == ["pkg/gone.py"]
    assert readme_tree_misses(README.read_text(encoding="utf-8"), REPO) == []


# -- backticked repository paths and names in the prose docs ------------------------------------------------------
PATH_DOCS = ("README.md", "AGENTS.md", "docs/*.md", "benchmarks/*.md")
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(
    r"(?<![\w./<>*-])((?:[A-Za-z_][\w.-]*/)+(?:[A-Za-z_][\w.-]*\.(?:py|md|yaml|yml|toml|txt|cfg|sh|json))?)(?![\w<>*/-])"
)
FILE_SUFFIXES = {"py", "md", "json", "jsonl", "yaml", "yml", "html", "sqlite", "lock", "txt", "torn"}
CONFIG_SECTION_PACKAGES = {"harness"}  # a package whose name is also a config section (`harness.max_events`)


def inline_code(doc: str) -> list[str]:
    """The inline code spans of a Markdown text, fenced blocks left out (their backticks would pair wrongly)."""
    return INLINE_CODE.findall(FENCED.sub("", doc))


def tree_tops(files: list[str]) -> set[str]:
    """The top-level entries of the tree (first parts of its files), without `runs/`, where run folders go."""
    return {f.split("/")[0] for f in files} - {"runs"}


def missing_repo_paths(doc: str, root: Path, tops: set[str]) -> list[str]:
    """Backticked repository paths in `doc` that do not exist under `root` (see the module docstring)."""
    missing: list[str] = []
    for token in inline_code(doc):
        for path in REPO_PATH.findall(token):
            first = path.split("/")[0]
            ours = first in tops or (path.endswith(".py") and first != "runs")  # no run folder holds a module
            if ours and not (root / path).exists() and path not in missing:
                missing.append(path)
    return missing


def _spans(doc: str) -> str:
    return "\n".join(f"`{c}`" for c in inline_code(doc))


def unresolved_refs(doc: str, root: Path, packages: set[str]) -> list[str]:
    """Backticked dotted names of `packages` in `doc` that name no module, package or definition (docstring)."""
    bad: list[str] = []
    for name in dotted_names(_spans(doc), packages):
        parts = name.split(".")
        if parts[-1] in FILE_SUFFIXES:
            continue  # a file name (`memory.jsonl`)
        if parts[0] in CONFIG_SECTION_PACKAGES and not (root / parts[0] / f"{parts[1]}.py").is_file():
            continue  # a config key
        if (root / Path(*parts)).with_suffix(".py").is_file() or (root / Path(*parts) / "__init__.py").is_file():
            continue  # a module or package
        if unresolved([name], root) and name not in bad:
            bad.append(name)
    return bad


def _path_docs(root: Path) -> dict[str, str]:
    return {
        f.relative_to(root).as_posix(): f.read_text(encoding="utf-8")
        for pattern in PATH_DOCS
        for f in sorted(root.glob(pattern))
    }


def test_backticked_repository_paths_in_the_docs_exist():
    docs = _path_docs(REPO)
    assert {"README.md", "AGENTS.md", "docs/DESIGN.md", "docs/ARCHITECTURE.md"} <= set(docs)
    tops = tree_tops(repo_files(REPO))
    checked = [p for text in docs.values() for c in inline_code(text) for p in REPO_PATH.findall(c)]
    assert len([p for p in checked if p.split("/")[0] in tops]) >= 100, "the path pattern finds too few paths"
    bad = {name: missing for name, text in docs.items() if (missing := missing_repo_paths(text, REPO, tops))}
    assert not bad, f"these docs name repository paths that do not exist (moved or renamed?): {bad}"


def test_backticked_dotted_names_in_the_docs_exist():
    docs = _path_docs(REPO)
    packages = {m.split("/")[0] for m in package_modules(REPO)}
    assert sum(len(dotted_names(_spans(text), packages)) for text in docs.values()) >= 50, "too few names found"
    bad = {name: refs for name, text in docs.items() if (refs := unresolved_refs(text, REPO, packages))}
    assert not bad, f"these docs name modules or functions that do not exist (moved or renamed?): {bad}"


def test_synthetic_doc_with_a_planted_bad_path_fails(tmp_path):
    root = _fake_repo(tmp_path)
    tops = tree_tops(["pkg/alpha.py", "scripts/tool.py", "runs/old/config.yaml"])
    assert tops == {"pkg", "scripts"}
    doc = (
        "`pkg/alpha.py` and `pkg/sub/`, `scripts/tool.py --help`, `pkg/gone.py` (planted), `pkg/nothere/`,"
        " `moved/alpha.py` (a folder that is gone),\n"
        "```\npkg/fenced.py is a command's, not checked\n```\n"
        "`python pkg/gone.py` again, `runs/mine/x.py`, a run's `final/` and `checkpoint-N/`, `pkg/<name>.py`,"
        " `pkg/content/*.yaml`, `my_tasks.jsonl`, `pkg/updates.jsonl`, `pkg.alpha.run`, plain pkg/gone2.py"
    )
    assert missing_repo_paths(doc, root, tops) == ["pkg/gone.py", "pkg/nothere/", "moved/alpha.py"]


def test_synthetic_doc_with_a_planted_bad_name_fails(tmp_path):
    root = _fake_repo(tmp_path)
    doc = (
        "`pkg.alpha.run`, `pkg.alpha.Box.open`, `pkg.alpha`, `pkg.sub`, `pkg.sub.beta`, `pkg.alpha.gone` (planted),"
        " `pkg.measure` (a moved module), `pkg.sub.beta.f`, `other.x.y`, `pkg/alpha.py`\n"
        "```\n`pkg.fenced.name` in a block\n```\n"
    )
    assert unresolved_refs(doc, root, {"pkg"}) == ["pkg.alpha.gone", "pkg.measure", "pkg.sub.beta.f"]
    assert unresolved_refs("`harness.max_events` `harness.gone.f`", root, {"harness"}) == []  # config keys
    assert unresolved_refs("`pkg.jsonl` `pkg.gone.py`", root, {"pkg"}) == []  # file names
