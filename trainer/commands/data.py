"""`harnessrl data`: suite statistics, validation, conversion, rubrics and audits, suite generation.

Validation and conversion take task files in any supported format; `rubric` builds criteria and a held-out audit
for imported prompts.

Light on purpose: it imports only `harness` (pydantic), `suitegen` (for `generate`), `rich`, and for
`rubric --model` the LLM writer in `agents`, never torch, so it answers in well under a second.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SUITE_NAME = "rubric-mix-lite"


def default_suite_dir() -> Path:
    """The bundled suite next to the package (``<repo>/data/rubric-mix-lite``), independent of the CWD."""
    return Path(__file__).resolve().parents[2] / "data" / SUITE_NAME


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "data",
        help="task suite statistics, validation and generation",
        description="Inspect, validate and generate rubric task data.",
    )
    sub = p.add_subparsers(dest="data_command", metavar="<action>", required=True)

    st = sub.add_parser("stats", help="counts by domain/split/kind, check share, audit coverage")
    st.add_argument(
        "--suite",
        default=None,
        help=f"suite folder with train.jsonl + test.jsonl, or one task file (default: the bundled data/{SUITE_NAME})",
    )
    st.add_argument("--json", action="store_true", help="print JSON instead of a table")
    st.set_defaults(func=_stats)

    va = sub.add_parser(
        "validate",
        help="load task files and report every problem (file:line: field)",
        description="Loads each source and prints every problem as FILE:LINE: field 'PATH': "
        "message. Exit code 1 when any problem is found; with --skip-invalid, row "
        "problems are reported as skipped rows and only unreadable sources fail.",
    )
    va.add_argument("files", nargs="+", metavar="FILE", help="JSONL files or hf:<dataset id>[:split]")
    va.add_argument("--format", dest="fmt", default="auto", choices=["auto", "harnessrl", "rar", "healthbench"])
    va.add_argument(
        "--skip-invalid", action="store_true", help="treat bad rows as skipped (still listed) instead of failing"
    )
    va.set_defaults(func=_validate)

    co = sub.add_parser(
        "convert",
        help="write tasks from any supported source in this project's own format",
        description="Load a suite folder, one task file (ours, RaR or HealthBench) or hf:<dataset id> "
        "and write it as train.jsonl + test.jsonl in the project's format (a folder "
        "`data.suite` can point at). Source ids and metadata are kept. A source whose "
        "rows carry no split gets a seeded held-out share.",
    )
    co.add_argument("source", help="suite folder, JSONL file or hf:<dataset id>[:split]")
    co.add_argument("--out", required=True, help="output folder (train.jsonl + test.jsonl); must be empty or new")
    co.add_argument("--test-share", type=float, default=0.2, help="held-out share when rows carry no split (0.2)")
    co.add_argument("--split-seed", type=int, default=0, help="seed of that held-out pick (0)")
    co.set_defaults(func=_convert)

    ru = sub.add_parser(
        "rubric",
        help="build criteria, checks and a held-out audit for imported prompts",
        description="Load a suite folder, a task file (ours, RaR or HealthBench; rows may come without a rubric) "
        "or hf:<dataset id>, and write train.jsonl + test.jsonl in the project's format with: criteria for "
        "tasks that have none (the prompt's constraints as checks, the reference's key terms), the prompt's "
        "constraints as checks beside a source rubric, and for every task without one a held-out audit of "
        "programmatic criteria that catch reward hacks (stuffing, padding, off-topic, unsupported evidence "
        "claims). Source criteria are kept unless --replace. By rules (offline, deterministic) or by a role "
        "model (--model provider:model) with a per-task fallback to the rules.",
    )
    ru.add_argument("source", help="suite folder, JSONL file or hf:<dataset id>[:split]")
    ru.add_argument("--out", required=True, help="output folder (train.jsonl + test.jsonl); must be empty or new")
    ru.add_argument("--format", dest="fmt", default="auto", choices=["auto", "harnessrl", "rar", "healthbench"])
    how = ru.add_mutually_exclusive_group()
    how.add_argument("--model", default=None, help="provider:model of the rubric writer (e.g. openai:Qwen/Qwen3-8B)")
    how.add_argument("--rules", action="store_true", help="the rule path only: offline and deterministic (default)")
    ru.add_argument("--base-url", default=None, help="OpenAI-compatible server of --model")
    ru.add_argument("--api-key-env", default="OPENAI_API_KEY", help="variable holding that server's key")
    ru.add_argument("--timeout", type=float, default=60.0, help="seconds per model call (60)")
    ru.add_argument("--max-tokens", type=int, default=1024, help="token limit of one model answer (1024)")
    ru.add_argument(
        "--only-missing", action="store_true", help="leave source rubrics as they are (no constraint checks added)"
    )
    ru.add_argument("--audit-only", action="store_true", help="build the audit only; every task must have criteria")
    ru.add_argument("--replace", action="store_true", help="rebuild criteria and audit even where the source has them")
    ru.add_argument("--test-share", type=float, default=0.2, help="held-out share when rows carry no split (0.2)")
    ru.add_argument("--split-seed", type=int, default=0, help="seed of that held-out pick (0)")
    ru.set_defaults(func=_rubric)

    ge = sub.add_parser("generate", help=f"regenerate the bundled {SUITE_NAME} suite (deterministic)")
    ge.add_argument("--out", default=None, help=f"output folder (default: the bundled data/{SUITE_NAME})")
    ge.set_defaults(func=_generate)


def _load_for_stats(target: Path):
    from harness.data import load_suite, load_tasks

    if target.is_dir():
        return load_suite(target)
    return load_tasks(target).tasks


def _stats(args: argparse.Namespace) -> int:
    from harness.data import DataError
    from harness.suite_stats import suite_stats

    target = Path(args.suite) if args.suite else default_suite_dir()
    if not target.exists():
        print(f"error: {target}: no such suite folder or file (pass --suite DIR)", file=sys.stderr)
        return 1
    try:
        tasks = _load_for_stats(target)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    stats = suite_stats(tasks)
    stats["source"] = str(target)
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    _print_tables(stats)
    return 0


def _print_tables(s: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"{s['source']}: {s['n_tasks']} tasks")
    for col in ("domain", "train", "test", "total"):
        t.add_column(col, justify="left" if col == "domain" else "right")
    for d, v in s["by_domain_split"].items():
        t.add_row(d, str(v["train"]), str(v["test"]), str(v["train"] + v["test"]))
    t.add_row("[bold]all", str(s["by_split"]["train"]), str(s["by_split"]["test"]), str(s["n_tasks"]))
    console.print(t)
    c = s["criteria"]
    k = Table(title="criteria")
    k.add_column("kind")
    k.add_column("count", justify="right")
    for kind, n in c["by_kind"].items():
        k.add_row(kind, str(n))
    k.add_row("[bold]total", str(c["total"]))
    console.print(k)
    a = s["audit"]
    console.print(
        f"programmatic checks: {c['with_check']}/{c['total']} ({100 * c['check_share']:.1f}%)   "
        f"criteria per task: {c['mean_per_task']}"
    )
    console.print(
        f"audit coverage: {a['tasks_with_audit']}/{s['n_tasks']} tasks ({100 * a['coverage']:.0f}%), "
        f"{a['total']} audit criteria"
    )
    console.print("difficulty: " + ", ".join(f"{d} {n}" for d, n in s["by_difficulty"].items()))


def _validate(args: argparse.Namespace) -> int:
    from harness.data import DataError, load_tasks

    problems = 0
    fatal = False
    for f in args.files:
        try:
            res = load_tasks(f, fmt=args.fmt, skip_invalid=True)
        except DataError as e:  # the source itself is unreadable: missing file, no `datasets`, bad format name
            for err in e.errors:
                print(str(err))
            problems += len(e.errors)
            fatal = True
            continue
        for err in res.skipped:
            print(str(err))
        problems += len(res.skipped)
        note = f", {res.skipped_rows} rows {'skipped' if args.skip_invalid else 'invalid'}" if res.skipped else ""
        print(f"{f}: {len(res.tasks)} tasks ok{note}", file=sys.stderr)
    if fatal or (problems and not args.skip_invalid):
        print(f"{problems} problem(s) found", file=sys.stderr)
        return 1
    return 0


def _convert(args: argparse.Namespace) -> int:
    from harness.atomic import atomic_write_text
    from harness.data import DataError, load_suite

    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"error: {out} exists and is not an empty folder; choose a new --out", file=sys.stderr)
        return 1
    try:
        tasks = load_suite(args.source, test_share=args.test_share, split_seed=args.split_seed)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for split in ("train", "test"):
        rows = [t.model_dump_json(exclude_none=True) + "\n" for t in tasks if t.split == split]
        atomic_write_text(out / f"{split}.jsonl", "".join(rows))
        print(f"{out / f'{split}.jsonl'}: {len(rows)} tasks")
    return 0


def _rubric(args: argparse.Namespace) -> int:
    from harness.atomic import atomic_write_text
    from harness.data import DataError
    from harness.rubric_builder import Plan, build_task, load_prompts, summarize

    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"error: {out} exists and is not an empty folder; choose a new --out", file=sys.stderr)
        return 1
    if args.only_missing and args.replace:
        print("error: --only-missing and --replace contradict each other", file=sys.stderr)
        return 1
    writer = None
    if args.model and args.model != "rules":
        from agents.chat_models import load_chat_model
        from agents.rubric_writer import make_writer

        try:
            llm = load_chat_model(
                args.model,
                base_url=args.base_url,
                api_key_env=args.api_key_env,
                timeout_s=args.timeout,
                max_tokens=args.max_tokens,
            )
        except ValueError as e:
            print(f"error: --model: {e}", file=sys.stderr)
            return 1
        writer = make_writer(llm)
    try:
        tasks = load_prompts(args.source, args.fmt, test_share=args.test_share, split_seed=args.split_seed)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    plan = Plan(only_missing=args.only_missing, audit_only=args.audit_only, replace=args.replace)
    results = []
    for task in tasks:
        try:
            results.append(build_task(task, plan, writer))
        except ValueError as e:
            print(f"error: {args.source}: {e}", file=sys.stderr)
            return 1
        for note in results[-1].notes:
            print(note)
    for split in ("train", "test"):
        rows = [r.task.model_dump_json(exclude_none=True) + "\n" for r in results if r.task.split == split]
        atomic_write_text(out / f"{split}.jsonl", "".join(rows))
        print(f"{out / f'{split}.jsonl'}: {len(rows)} tasks")
    s = summarize(results)
    print(
        f"{s['tasks']} tasks ({'model ' + args.model if writer else 'rules'}): criteria built for "
        f"{s['criteria_built']}, {s['criteria_added']} criteria added ({s['checks_added']} with a check), "
        f"{s['audit_items']} audit items, {s['llm_tasks']} tasks from the model, {s['fallbacks']} fallbacks to rules, "
        f"{s['rejected']} model items rejected"
    )
    return 0


def _generate(args: argparse.Namespace) -> int:
    from suitegen.generate import write_suite

    out = Path(args.out) if args.out else default_suite_dir()
    for p in write_suite(out):
        print(p)
    return 0
