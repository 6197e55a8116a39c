"""`harnessrl` command line: one entry point, subcommands in `trainer/commands/`.

Each command module exposes `add_parser(subparsers)` and imports its heavy dependencies (torch,
TRL, Chroma) inside the function it runs, so `harnessrl --help` and `harnessrl data stats` stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Order here is the order in `--help`.
COMMAND_MODULES = ("data", "policy", "train", "eval", "report", "evolve", "trace", "export", "judge")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harnessrl",
        description="Rubric-based GRPO with a training harness that co-evolves with the policy.",
        epilog="Run `harnessrl <command> --help` for the options of one command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"trainer.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
