"""`harnessrl export RUN --out DIR`: the harness of a run, at a step or a version, written as a task suite."""

from __future__ import annotations

import argparse
import sys

DESCRIPTION = """\
Writes the harness of a run folder as a suite folder that data.suite, `harnessrl data validate` and
`harnessrl train` read like any other:

  DIR/train.jsonl      the train tasks in this project's task format, each with its criteria as the
                       version has them (edited, split, added, reweighted) and the evolver's harder
                       variants as tasks of their own (parent_id, meta.lineage); tasks the version
                       keeps out of training (retired, weight 0) are left out and named
  DIR/test.jsonl       the held-out tasks, unchanged (the harness never edits one); audit criteria stay
                       in every row, as in any suite
  DIR/harness.json     what the task format cannot hold: each task's sampling weight and status and its
                       hints with their reveal schedule. A suite load ignores it (a run on DIR starts
                       with every task at weight 1 and no hints)
  DIR/provenance.json  per task: the version, step and update (event, proposal, template, what training
                       made of it) that created or last changed the task, each criterion, each hint,
                       the schedule and the sampling entry; version 0 is the run's suite

Which version: the latest committed one by default. --step N picks the version training drew step N
under: the newest one committed before step N (a pause after step s commits before step s+1 draws, so
checkpoint-s holds the version in force at step s+1). --version V names one. The versions are the
store's chain as training used it: provisional updates training had not graded yet are in it, and a
reverted update is undone only from its revert's version on; the command prints which are included.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export",
        help="write a run's harness (criteria, variants, hints) as a suite folder",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: harnessrl export runs/cpu-demo --step 5 --out data/cpu-demo-step5\n"
        "         harnessrl train --config configs/cpu-demo.yaml --set data.suite=data/cpu-demo-step5",
    )
    p.add_argument("run", metavar="RUN", help="run folder written by `harnessrl train`")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, default=None, metavar="N", help="the version training drew step N under")
    which.add_argument("--version", type=int, default=None, metavar="V", help="harness version V of the run's store")
    p.add_argument("--out", required=True, metavar="DIR", help="suite folder to write; must be new or empty")
    p.add_argument(
        "--force", action="store_true", help="replace DIR when it holds an earlier export (and nothing else)"
    )
    p.add_argument(
        "--include-retired",
        action="store_true",
        help="keep retired and weight-0 train tasks in train.jsonl too (harness.json records their status)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainer.export import export_run

    try:
        result = export_run(
            args.run,
            args.out,
            step=args.step,
            version=args.version,
            force=args.force,
            include_retired=args.include_retired,
        )
    # ValueError: the refusals (harness.export.ExportError), a corrupt version file or log line
    # (harness.store.StoreCorrupt), a bad config.yaml (ConfigError) or rounds.jsonl record, each naming its file.
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("\n".join(result.lines))
    return 0
