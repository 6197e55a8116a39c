"""Task loaders: our JSONL schema, RaR-style and HealthBench-style records, and Hugging Face ids.

Every loader turns records into `harness.types.Task`s. A bad row never disappears: it becomes a
`RowError{file, line, field, message}` (printed as ``data/x.jsonl:17: field 'criteria[2].weight': ...``).
By default any error raises a `DataError` carrying *all* errors of the source, so one run of
`harnessrl data validate` shows every problem; with `skip_invalid=True` the good rows load and
every skipped row is reported in `LoadResult.skipped`.

Formats (``fmt``):

- ``harnessrl``: one `Task` JSON object per line (what `data/rubric-mix-lite/` uses).
- ``rar``: ``{question, reference_answer, rubric: [{title, description, weight}]}`` (RaR-Medicine /
  RaR-Science). Kind comes from a "Essential Criteria:"-style prefix in title/description when
  present, else from the weight: < 0 pitfall, >= 5 essential, >= 3 important, else optional.
- ``healthbench``: ``{prompt: [messages], rubrics: [{criterion, points, tags}], ideal_completions_data?}``.
  Points map to weight and kind the same way; tags are kept in ``meta["criterion_tags"]``.
- ``hf:<dataset id>[:split]`` as the path: read through `datasets` (optional dependency, imported
  only here and only then); the columns decide between the RaR and HealthBench mappings.
- ``auto``: the first JSON object of a file decides (``rubrics`` -> healthbench, ``rubric`` or
  ``question`` -> rar, else harnessrl, so a broken harnessrl row still gets field-level errors).

Imported records carry no programmatic checks: their criteria go to the LLM judge.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import ValidationError

from harness.checks import CHECK_TYPES
from harness.types import Criterion, Task

Format = Literal["auto", "harnessrl", "rar", "healthbench"]
FORMATS: tuple[str, ...] = ("auto", "harnessrl", "rar", "healthbench")
KINDS = ("essential", "important", "optional", "pitfall")
# A DataError message lists at most this many errors; `.errors` always holds all of them.
MAX_ERRORS_IN_MESSAGE = 50

_KIND_PREFIX = re.compile(r"^\s*(essential|important|optional|pitfall)s?(?:\s+criteri(?:a|on))?\s*:\s*", re.I)
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")


@dataclass(frozen=True)
class RowError:
    """One problem in one row.

    `line` is 1-based (0 = the whole source); `field` is a path like ``criteria[2].check.pattern`` ("" when the
    row as a whole is bad).
    """

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: field '{self.field}': {self.message}" if self.field else f"{where}: {self.message}"


class DataError(ValueError):
    """Raised when a source has bad rows (or cannot be read at all); `.errors` lists every problem."""

    def __init__(self, errors: list[RowError]):
        self.errors = list(errors)
        shown = [str(e) for e in self.errors[:MAX_ERRORS_IN_MESSAGE]]
        more = len(self.errors) - len(shown)
        super().__init__("\n".join(shown) + (f"\n... and {more} more" if more > 0 else ""))


@dataclass
class LoadResult:
    tasks: list[Task]
    skipped: list[RowError] = field(default_factory=list)

    @property
    def skipped_rows(self) -> int:
        return len({(e.file, e.line) for e in self.skipped})


class _RowInvalid(Exception):
    """Internal: a record failed conversion; carries (field, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__(problems)
        self.problems = problems


# -- field paths from pydantic errors --------------------------------------------------------------
def loc_to_path(loc: Iterable[Any], rename: dict[str, str] | None = None) -> str:
    """``('criteria', 2, 'check', 'regex', 'pattern')`` -> ``criteria[2].check.pattern``.

    Discriminated-union tags (the check type pydantic inserts after ``check``/``checks[i]``) are
    dropped because they are not keys of the record. `rename` maps our top-level field names back
    to the source format's (``criteria`` -> ``rubric``) so errors point at what the user wrote.
    """
    parts = list(loc)
    out = ""
    for i, part in enumerate(parts):
        prev = parts[i - 1] if i > 0 else None
        prevprev = parts[i - 2] if i > 1 else None
        if (
            isinstance(part, str)
            and part in CHECK_TYPES
            and (prev == "check" or (isinstance(prev, int) and prevprev == "checks"))
        ):
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = rename.get(part, part) if (rename and i == 0) else part
            out += f".{name}" if out else str(name)
    return out


def _problems(e: ValidationError, prefix: str = "", rename: dict[str, str] | None = None) -> list[tuple[str, str]]:
    out = []
    for err in e.errors(include_url=False):
        path = loc_to_path(err["loc"], rename)
        if prefix:
            path = f"{prefix}.{path}" if path and not path.startswith("[") else f"{prefix}{path}"
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "required field is missing"
        out.append((path, msg))
    return out


# -- kind / weight mapping (RaR, HealthBench) --------------------------------------------------------
def kind_for(weight: float, label: str = "") -> str:
    """Criterion kind from a RaR/HealthBench weight and an optional "Essential Criteria: ..." label.

    The sign always decides pitfall vs positive (a negative weight *is* a pitfall); a label only
    refines positive kinds. A label that contradicts the sign raises `ValueError`.
    """
    m = _KIND_PREFIX.match(label or "")
    named = m.group(1).lower() if m else None
    if weight < 0:
        if named not in (None, "pitfall"):
            raise ValueError(f"label says {named!r} but the weight {weight:g} is negative")
        return "pitfall"
    if named == "pitfall":
        raise ValueError(f"label says 'pitfall' but the weight {weight:g} is not negative")
    if named:
        return named
    return "essential" if weight >= 5 else "important" if weight >= 3 else "optional"


def strip_kind_prefix(text: str) -> str:
    return _KIND_PREFIX.sub("", text, count=1).strip()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _make_criterion(
    i: int, text: Any, weight: Any, label: str, origin: str, src: str, text_field: str, weight_field: str
) -> tuple[Criterion | None, list[tuple[str, str]]]:
    where = f"{src}[{i}]"
    probs: list[tuple[str, str]] = []
    if not isinstance(text, str) or not text.strip():
        probs.append((f"{where}.{text_field}", "required non-empty string"))
    if not _is_number(weight):
        probs.append((f"{where}.{weight_field}", f"must be a number, got {type(weight).__name__}"))
    if probs:
        return None, probs
    try:
        kind = kind_for(float(weight), label)
    except ValueError as e:
        return None, [(f"{where}.{weight_field}", str(e))]
    try:
        return Criterion(
            id=f"c{i + 1}", text=strip_kind_prefix(text), weight=float(weight), kind=kind, origin=origin
        ), []
    except ValidationError as e:
        # Point at the source record's field names; model-level errors (kind vs sign) concern the weight.
        rename = {"text": text_field, "weight": weight_field}
        out = []
        for err in e.errors(include_url=False):
            name = rename.get(str(err["loc"][0]), str(err["loc"][0])) if err["loc"] else weight_field
            out.append((f"{where}.{name}", err["msg"]))
        return None, out


def _build_task(data: dict[str, Any], rename: dict[str, str]) -> Task:
    try:
        return Task.model_validate(data)
    except ValidationError as e:
        raise _RowInvalid(_problems(e, rename=rename)) from None


def _default_id(src_name: str, line: int) -> str:
    stem = _ID_UNSAFE.sub("-", src_name).strip("-") or "row"
    return f"{stem[:100]}-{line:05d}"


# -- per-format converters ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Ctx:
    src_name: str  # short name used for generated ids
    line: int
    domain: str | None
    split: str | None


def _from_harnessrl(obj: dict[str, Any], ctx: _Ctx) -> Task:
    return _build_task(obj, rename={})


def _from_rar(obj: dict[str, Any], ctx: _Ctx) -> Task:
    probs: list[tuple[str, str]] = []
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        probs.append(("question", "required non-empty string" if "question" in obj else "required field is missing"))
    ref = obj.get("reference_answer")
    if ref is not None and not isinstance(ref, str):
        probs.append(("reference_answer", f"must be a string, got {type(ref).__name__}"))
    rubric = obj.get("rubric")
    criteria: list[Criterion] = []
    if not isinstance(rubric, list) or not rubric:
        probs.append(
            (
                "rubric",
                "required non-empty list of {title, description, weight}"
                if "rubric" in obj
                else "required field is missing",
            )
        )
    else:
        for i, item in enumerate(rubric):
            if not isinstance(item, dict):
                probs.append((f"rubric[{i}]", f"must be an object, got {type(item).__name__}"))
                continue
            title = item.get("title") if isinstance(item.get("title"), str) else ""
            desc = item.get("description") or title
            # RaR puts the "Essential Criteria:" label in the description; some exports put it in the title.
            label = title if _KIND_PREFIX.match(title) else (desc if isinstance(desc, str) else "")
            c, p = _make_criterion(i, desc, item.get("weight"), label, "rar", "rubric", "description", "weight")
            probs += p
            if c:
                criteria.append(c)
    if probs:
        raise _RowInvalid(probs)
    meta = {"source": "rar"}
    for k in ("question_source", "rubric_count"):
        if k in obj:
            meta[k] = obj[k]
    data = {
        "id": obj.get("id") or _default_id(ctx.src_name, ctx.line),
        "domain": obj.get("domain") or ctx.domain or "general",
        "split": obj.get("split") or ctx.split or "train",
        "prompt": [{"role": "user", "content": question}],
        "criteria": [c.model_dump() for c in criteria],
        "reference_answer": ref or None,
        "meta": meta,
    }
    return _build_task(data, rename={"prompt": "question", "criteria": "rubric"})


def _from_healthbench(obj: dict[str, Any], ctx: _Ctx) -> Task:
    probs: list[tuple[str, str]] = []
    prompt = obj.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        probs.append(
            (
                "prompt",
                "required non-empty list of {role, content} messages"
                if "prompt" in obj
                else "required field is missing",
            )
        )
    rubrics = obj.get("rubrics")
    criteria: list[Criterion] = []
    tags: dict[str, list[str]] = {}
    if not isinstance(rubrics, list) or not rubrics:
        probs.append(
            (
                "rubrics",
                "required non-empty list of {criterion, points, tags}"
                if "rubrics" in obj
                else "required field is missing",
            )
        )
    else:
        for i, item in enumerate(rubrics):
            if not isinstance(item, dict):
                probs.append((f"rubrics[{i}]", f"must be an object, got {type(item).__name__}"))
                continue
            c, p = _make_criterion(
                i, item.get("criterion"), item.get("points"), "", "healthbench", "rubrics", "criterion", "points"
            )
            t = item.get("tags", [])
            if not isinstance(t, list) or not all(isinstance(x, str) for x in t):
                p.append((f"rubrics[{i}].tags", "must be a list of strings"))
            probs += p
            if c and not p:
                criteria.append(c)
                if t:
                    tags[c.id] = t
    ideal = obj.get("ideal_completions_data")
    ref = None
    if isinstance(ideal, dict):
        ref = ideal.get("ideal_completion")
        if ref is not None and not isinstance(ref, str):
            probs.append(("ideal_completions_data.ideal_completion", "must be a string"))
    elif ideal is not None:
        probs.append(("ideal_completions_data", f"must be an object, got {type(ideal).__name__}"))
    if probs:
        raise _RowInvalid(probs)
    meta: dict[str, Any] = {"source": "healthbench"}
    if tags:
        meta["criterion_tags"] = tags
    if isinstance(obj.get("example_tags"), list):
        meta["example_tags"] = obj["example_tags"]
    data = {
        "id": obj.get("id") or obj.get("prompt_id") or _default_id(ctx.src_name, ctx.line),
        "domain": obj.get("domain") or ctx.domain or "medical",
        "split": obj.get("split") or ctx.split or "train",
        "prompt": prompt,
        "criteria": [c.model_dump() for c in criteria],
        "reference_answer": ref or None,
        "meta": meta,
    }
    return _build_task(data, rename={"criteria": "rubrics"})


CONVERTERS: dict[str, Callable[[dict[str, Any], _Ctx], Task]] = {
    "harnessrl": _from_harnessrl,
    "rar": _from_rar,
    "healthbench": _from_healthbench,
}


def detect_format(obj: dict[str, Any]) -> str:
    if "rubrics" in obj:
        return "healthbench"
    if "rubric" in obj or "question" in obj:
        return "rar"
    return "harnessrl"


# -- row loop shared by files and HF datasets ----------------------------------------------------------
def _convert_rows(
    rows: Iterable[tuple[int, Any]], source: str, src_name: str, fmt: str, domain: str | None, split: str | None
) -> tuple[list[Task], list[RowError]]:
    """`rows` yields (line, parsed JSON value or a RowError for unparsable lines)."""
    tasks: list[Task] = []
    errors: list[RowError] = []
    first_line: dict[str, int] = {}
    chosen = None if fmt == "auto" else fmt
    for line, obj in rows:
        if isinstance(obj, RowError):
            errors.append(obj)
            continue
        if not isinstance(obj, dict):
            errors.append(RowError(source, line, "", f"expected a JSON object, got {type(obj).__name__}"))
            continue
        if chosen is None:
            chosen = detect_format(obj)
        try:
            task = CONVERTERS[chosen](obj, _Ctx(src_name, line, domain, split))
        except _RowInvalid as e:
            errors += [RowError(source, line, f, m) for f, m in e.problems]
            continue
        if task.id in first_line:
            errors.append(
                RowError(source, line, "id", f"duplicate task id {task.id!r} (first on line {first_line[task.id]})")
            )
            continue
        first_line[task.id] = line
        tasks.append(task)
    return tasks, errors


def _jsonl_rows(path: Path, source: str) -> Iterable[tuple[int, Any]]:
    """(line, parsed JSON or RowError) per line of `path`.

    Each line is decoded on its own, so a non-UTF-8 byte is reported on the line that holds it (with the byte's
    column) and the other lines still load.
    """
    with path.open("rb") as f:
        for i, raw_bytes in enumerate(f, 1):
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as e:
                yield (
                    i,
                    RowError(source, i, "", f"not UTF-8 text: byte 0x{raw_bytes[e.start]:02x} at column {e.start + 1}"),
                )
                continue
            if not raw.strip():
                continue  # blank lines (often a trailing newline) carry no record
            try:
                yield i, json.loads(raw)
            except json.JSONDecodeError as e:
                yield i, RowError(source, i, "", f"invalid JSON: {e.msg} (column {e.colno})")


def _load_hf(spec: str, fmt: str, domain: str | None, split: str | None) -> tuple[list[Task], list[RowError]]:
    """``hf:<id>[:split]`` through `datasets` (optional dependency; offline users get a clear error)."""
    rest = spec[len("hf:") :]
    ds_id, _, hf_split = rest.partition(":")
    hf_split = hf_split or "train"
    if not ds_id:
        raise DataError([RowError(spec, 0, "", "expected hf:<dataset id>[:split]")])
    try:
        import datasets  # noqa: PLC0415 - optional and heavy: only this code path needs it
    except ImportError:
        raise DataError(
            [
                RowError(
                    spec,
                    0,
                    "",
                    "Hugging Face ids need the `datasets` package: "
                    "pip install 'harnessrl[train]' (or pip install datasets)",
                )
            ]
        ) from None
    try:
        ds = datasets.load_dataset(ds_id, split=hf_split)
    except Exception as e:  # noqa: BLE001 - offline/missing/auth all surface here; re-raised with the source named
        raise DataError(
            [
                RowError(
                    spec,
                    0,
                    "",
                    f"could not load dataset {ds_id!r} split {hf_split!r} "
                    f"({type(e).__name__}: {e}); offline? set HF_DATASETS_OFFLINE only "
                    "with a cached copy, or download the JSONL and pass the file",
                )
            ]
        ) from e
    cols = set(ds.column_names)
    if fmt == "auto":
        if {"prompt", "rubrics"} <= cols:
            fmt = "healthbench"
        elif {"question", "rubric"} <= cols:
            fmt = "rar"
        else:
            raise DataError(
                [
                    RowError(
                        spec,
                        0,
                        "",
                        f"cannot tell the format from columns {sorted(cols)}: expected "
                        "question+rubric (RaR) or prompt+rubrics (HealthBench)",
                    )
                ]
            )
    name = ds_id.rsplit("/", 1)[-1]
    if domain is None:
        low = name.lower()
        domain = "medical" if ("medic" in low or "health" in low) else "science" if "scien" in low else None
    if split is None:
        split = "test" if hf_split.startswith("test") else "train"
    rows = ((i + 1, dict(r)) for i, r in enumerate(ds))
    return _convert_rows(rows, spec, f"{name}-{hf_split}", fmt, domain, split)


def load_tasks(
    path: str | Path, fmt: str = "auto", skip_invalid: bool = False, domain: str | None = None, split: str | None = None
) -> LoadResult:
    """Load tasks from a JSONL file or an ``hf:<id>[:split]`` spec.

    `domain` / `split` fill in records that do not carry them (RaR and HealthBench records usually
    don't). Raises `DataError` with every problem unless `skip_invalid`, in which case the good rows
    load and the problems come back in `LoadResult.skipped`. A source that cannot be read at all
    (missing file, unknown format, `datasets` not installed) always raises.
    """
    if fmt not in FORMATS:
        raise DataError([RowError(str(path), 0, "", f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")])
    if split is not None and split not in ("train", "test"):
        raise DataError([RowError(str(path), 0, "", f"split must be 'train' or 'test', got {split!r}")])
    spec = str(path)
    if spec.startswith("hf:"):
        tasks, errors = _load_hf(spec, fmt, domain, split)
    else:
        p = Path(path)
        if not p.is_file():
            raise DataError([RowError(spec, 0, "", "no such file" if not p.exists() else "not a regular file")])
        tasks, errors = _convert_rows(_jsonl_rows(p, spec), spec, p.stem, fmt, domain, split)
    if errors and not skip_invalid:
        raise DataError(errors)
    return LoadResult(tasks=tasks, skipped=errors)


DEFAULT_TEST_SHARE = 0.2


def load_suite(source: str | Path, *, test_share: float = DEFAULT_TEST_SHARE, split_seed: int = 0) -> list[Task]:
    """Train + held-out tasks from where users keep them. Raises `DataError` listing every problem.

    - a folder with ``train.jsonl`` + ``test.jsonl``, each in any supported format (detected per file):
      a row's split must match its file (records that carry no split take the file's), and task ids
      must be unique across both files;
    - a single JSONL file or an ``hf:<dataset id>[:split]`` spec: rows that say ``split: test`` are
      held out; when none do, a seeded `test_share` of the tasks (by sorted id, `split_seed`) is held
      out, so the same file and settings always give the same split.
    """
    spec = str(source)
    if not spec.startswith("hf:") and Path(source).is_dir():
        return _load_suite_folder(Path(source))
    if not 0.0 <= test_share < 1.0:
        raise DataError([RowError(spec, 0, "", f"test_share must be in [0, 1), got {test_share}")])
    tasks = load_tasks(source).tasks
    if any(t.split == "test" for t in tasks) or test_share == 0.0:
        return tasks
    ids = sorted(t.id for t in tasks)
    held = set(random.Random(split_seed).sample(ids, round(len(ids) * test_share)))
    return [t.model_copy(update={"split": "test"}) if t.id in held else t for t in tasks]


def _load_suite_folder(d: Path) -> list[Task]:
    tasks: list[Task] = []
    errors: list[RowError] = []
    seen: dict[str, str] = {}
    for split in ("train", "test"):
        f = d / f"{split}.jsonl"
        try:
            res = load_tasks(f, split=split)
        except DataError as e:
            errors += e.errors
            continue
        # Line numbers for the cross-file checks: tasks come back in file order, blank lines skipped.
        lines = [i for i, raw in enumerate(f.read_bytes().splitlines(), 1) if raw.strip()]
        for line, t in zip(lines, res.tasks):
            if t.split != split:
                errors.append(RowError(str(f), line, "split", f"is {t.split!r} but the row is in {split}.jsonl"))
            if t.id in seen:
                errors.append(RowError(str(f), line, "id", f"duplicate task id {t.id!r} (also in {seen[t.id]})"))
            seen[t.id] = str(f)
            tasks.append(t)
    if errors:
        raise DataError(errors)
    return tasks
