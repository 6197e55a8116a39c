"""`harnessrl report RUN`: write RUN/report.html (self-contained, plots embedded) and print its summary."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a run",
        description="Reads metrics, events, rounds, harness updates and eval.json of a run "
        "folder and writes report.html into it.",
    )
    p.add_argument("run", help="run folder")
    p.add_argument("--json", action="store_true", help="print every count as JSON instead of the summary sentences")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainer.report import build_report, collect, summary, summary_sentences

    try:
        out = build_report(args.run)
        counts = summary(collect(args.run))
    except (FileNotFoundError, ValueError) as e:  # ValueError: a corrupt eval.json or harness file, named in e
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(counts, indent=2) if args.json else "\n".join(summary_sentences(counts)))
    # With --json, stdout is the JSON alone (a pipe into a parser); the report's path goes to stderr.
    print(f"report: {out}", file=sys.stderr if args.json else sys.stdout)
    return 0
