"""`harnessrl trace`: render one evolver thread (SQLite checkpoints) to a self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "trace",
        help="render an evolver thread to a self-contained HTML page",
        description="Draws the evolver graph (inline SVG + Mermaid source) and every node's "
        "inputs, outputs, measurements and the final decisions of one thread.",
    )
    p.add_argument("source", help="run folder (holding evolver.sqlite) or a checkpoint .sqlite file")
    p.add_argument("--thread", required=True, help="thread id (printed by `harnessrl evolve`)")
    p.add_argument("--out", default="trace.html", help="output HTML file (default trace.html)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from graphs.trace_html import write_trace

    src = Path(args.source)
    db = src / "evolver.sqlite" if src.is_dir() else src
    out = write_trace(db, args.thread, args.out)
    print(f"wrote {out}")
    return 0
