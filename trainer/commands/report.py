"""`harnessrl report RUN`: write RUN/report.html (self-contained, plots embedded) and print the counts."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="write a self-contained HTML report of a run",
                              description="Reads metrics, events, rounds, harness updates and eval.json of a run "
                                          "folder and writes report.html into it.")
    p.add_argument("run", help="run folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainer.report import build_report, collect, summary

    try:
        out = build_report(args.run)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary(collect(args.run)), indent=2))
    print(f"report: {out}")
    return 0
