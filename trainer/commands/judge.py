"""`harnessrl judge check`: how far an LLM judge agrees with the checks and with labels, and its biases.

The measurements are `tools/judge_check.py`'s; this file reads the suite and the optional files, builds the judge's
chat model (`agents.chat_models.load_chat_model`) and prints a table or JSON. Exit 0 after a measurement, 1 for bad
input (every bad row as file:line: field), 2 when the judge does not answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainer.commands.data import SUITE_NAME, default_suite_dir


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "judge", help="check an LLM judge against the checks and labels", description="Check an LLM rubric judge."
    )
    sub = p.add_subparsers(dest="judge_command", metavar="<action>", required=True)
    ch = sub.add_parser(
        "check",
        help="agreement with the programmatic checks and labels, position and verbosity bias",
        description="Puts the suite's checked criteria to the LLM judge as text-only criteria and compares its "
        "verdicts with the checks' (agreement with a Wilson 95% interval, Cohen's kappa with a bootstrap 95% "
        "interval, confusion counts, per domain), with labelled verdicts (--labels), and measures how often a "
        "verdict flips when the group's responses are reversed and when neutral padding is appended. Responses "
        "come from --responses, else from fixed candidates per task (its reference answer where it has one, a "
        "sentence of its checks' keywords, perturbations of it).",
    )
    ch.add_argument("--suite", default=None, help=f"suite folder or task file (default: the bundled data/{SUITE_NAME})")
    ch.add_argument(
        "--judge",
        required=True,
        metavar="PROVIDER:MODEL",
        help="the judge model, e.g. openai:Qwen/Qwen3-8B; `rules` for the rule judge (the checks), as a comparison",
    )
    ch.add_argument(
        "--base-url", default=None, help="OpenAI-compatible base URL of the judge (vLLM), e.g. http://h:8000/v1"
    )
    ch.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    ch.add_argument("--labels", type=Path, default=None, help="JSONL of {task_id, criterion_id, response, verdict}")
    ch.add_argument("--responses", type=Path, default=None, help="JSONL of {task_id, response} to judge")
    ch.add_argument("--max-items", type=int, default=120, help="(criterion, response) items for the checks (120)")
    ch.add_argument("--concurrency", type=int, default=16, help="judge calls in flight (16)")
    ch.add_argument("--timeout-s", type=float, default=60.0, help="timeout of one judge call (60 s)")
    ch.add_argument("--max-tokens", type=int, default=None, help="token limit of a verdict (default: the server's)")
    ch.add_argument("--json", action="store_true", help="print JSON instead of tables")
    ch.set_defaults(func=run)


RULES_NOTE = (
    "the rule judge is the checks: its agreement with them and its order and padding flips are 1 and 0 by "
    "construction; with --labels, its agreement with the labels is the measurement (a text-only criterion it cannot "
    "decide counts as failed)"
)


def run(args: argparse.Namespace) -> int:
    from agents.chat_models import is_rules, load_chat_model
    from harness.data import DataError, load_suite, load_tasks
    from tools.judge_check import JudgeUnreachable, check_items, check_judge, parse_labels, parse_responses

    if args.max_items < 1:
        print(f"error: --max-items must be >= 1, got {args.max_items}", file=sys.stderr)
        return 1
    suite = Path(args.suite) if args.suite else default_suite_dir()
    try:
        tasks = load_suite(suite) if suite.is_dir() else load_tasks(suite).tasks
        responses = parse_responses(args.responses, tasks) if args.responses else None
        labels = parse_labels(args.labels, tasks) if args.labels else None
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    items = check_items(tasks, responses, args.max_items)
    if not items:
        print(f"error: no checked criterion to judge in {suite} for the responses given", file=sys.stderr)
        return 1
    source = (
        f"{args.responses} ({sum(len(v) for v in responses.values())} responses)"
        if responses is not None
        else "fixed candidates per task (reference answer or keyword sentence, and perturbations of it)"
    )
    try:  # None: the rule judge (the checks decide, text-only criteria are skipped)
        llm = (
            None
            if is_rules(args.judge)
            else load_chat_model(
                args.judge,
                base_url=args.base_url,
                api_key_env=args.api_key_env,
                timeout_s=args.timeout_s,
                max_tokens=args.max_tokens,
            )
        )
    except (ValueError, ImportError) as err:
        print(f"error: --judge {args.judge}: {err}", file=sys.stderr)
        return 1
    try:
        report = check_judge(llm, items, labels=labels, responses_from=source, concurrency=args.concurrency)
    except JudgeUnreachable as err:
        where = args.base_url or "the provider's default URL"
        print(f"error: {err}; is {args.judge} served at {where}? (--judge, --base-url)", file=sys.stderr)
        return 2
    out = {"judge": args.judge, "suite": str(suite), **report.as_json()}
    if is_rules(args.judge):
        out["note"] = RULES_NOTE
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_report(out)
    return 0


def _ci(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if low is not None and high is not None else f"{value:.2f}"


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "n/a (n = 0)"


def _table(title: str, rows: list[dict], reference: str):
    from rich.table import Table

    t = Table(title=title)
    for col in ("domain", "n", "agreement [95% CI]", "kappa [95% CI]", "both met", "judge only", f"{reference} only"):
        t.add_column(col, justify="left" if col == "domain" else "right")
    t.add_column("neither", justify="right")
    t.add_column("failed", justify="right")
    for r in rows:
        t.add_row(
            ("[bold]" if r["domain"] == "all" else "") + r["domain"],
            str(r["n"]),
            _ci(r["agreement"], r["low"], r["high"]),
            _ci(r["kappa"], r["kappa_low"], r["kappa_high"]),
            str(r["both_met"]),
            str(r["judge_only"]),
            str(r["reference_only"]),
            str(r["neither"]),
            str(r["failed"]),
        )
    return t


def print_report(out: dict) -> None:
    from rich.console import Console

    console = Console()
    console.width = max(console.width, 132)  # the agreement table's nine columns; a pipe gets 80 otherwise
    console.print(f"judge {out['judge']} on {out['suite']}; responses: {out['responses_from']}")
    if "note" in out:
        console.print(out["note"])
    console.print(_table(f"agreement with the checks ({out['items']} items)", out["by_domain"], "check"))
    if out["labels"] is not None:
        console.print(_table("agreement with the labels", out["labels"], "label"))
        cl = out["checks_vs_labels"]
        console.print(
            f"the checks against the same labels: {_ci(cl['agreement'], cl['low'], cl['high'])} (n={cl['n']})"
        )
    pos, rep, v = out["position"], out["repeat"], out["verbosity"]
    console.print(
        f"position (responses reversed in each group): {_rate(pos['flips'], pos['n'])} verdicts flipped; "
        f"the same order again: {_rate(rep['flips'], rep['n'])}"
    )
    console.print(
        f"verbosity (neutral padding appended): unmet -> met {_rate(v['unmet_to_met'], v['n_unmet'])}, "
        f"met -> unmet {_rate(v['met_to_unmet'], v['n_met'])}; {v['excluded']} items left out (the padding "
        "changed their check's verdict)"
    )
    s = out["judge_stats"]
    console.print(
        f"judge calls {s['llm_calls']}, malformed replies {s['malformed']}, errors {s['errors']}, "
        f"verdicts not given {s['llm_failures']}"
    )
