"""`harnessrl train --config FILE [--set key=value ...] [key=value ...] [--resume [CKPT] | --overwrite]`."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="GRPO training with harness evolution at checkpoints",
        description="Train a policy with TRL GRPO while the evolver repairs the harness at checkpoints. "
        "Example: harnessrl train --config configs/cpu-demo.yaml --set train.max_steps=8",
    )
    p.add_argument("--config", help="YAML run config (see configs/)")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field, e.g. --set train.max_steps=4 (repeatable)",
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="more overrides, e.g. harness.evolver=false")
    p.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        metavar="CKPT",
        help="resume the run in run_dir from its latest complete checkpoint, or from CKPT "
        "(a checkpoint folder or a step number)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh: delete a previous run in run_dir first (only files a run writes)",
    )
    p.add_argument(
        "--fresh-memory",
        action="store_true",
        help="with --resume: when the checkpoint's memory snapshot is missing or unreadable, resume with "
        "an empty training memory instead of refusing",
    )
    p.add_argument("--help-config", action="store_true", help="list every config field with its help and exit")
    p.add_argument(
        "--no-progress", action="store_true", help="no per-step console line (rounds and errors still print)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trainer.config import ConfigError, describe
    from trainer.config_loader import load_config

    if args.help_config:
        print(describe())
        return 0
    if not args.config and not args.sets and not args.overrides:
        print("harnessrl train: give --config FILE (e.g. configs/cpu-demo.yaml)", file=sys.stderr)
        return 2
    try:
        cfg = load_config(args.config, [*args.sets, *args.overrides])
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    from trainer.progress import quiet_library_warnings

    quiet_library_warnings()
    from harness.store import StoreCorrupt
    from memory.store import MemoryStoreError
    from trainer.checkpoint import ResumeError
    from trainer.disk import DiskBudgetError, DiskFull
    from trainer.evolver_round import EvolverStopped
    from trainer.grpo import train
    from trainer.policy_models import ModelNotAvailable
    from trainer.run_lock import RunFolderLocked

    if args.overwrite and args.resume is not None:
        print(
            "harnessrl train: --overwrite deletes the run that --resume would continue; pass one of them",
            file=sys.stderr,
        )
        return 2
    if args.fresh_memory and args.resume is None:
        print(
            "harnessrl train: --fresh-memory applies to --resume only (a fresh run starts with an empty memory)",
            file=sys.stderr,
        )
        return 2
    try:
        summary = train(
            cfg,
            resume=args.resume,
            progress=not args.no_progress,
            overwrite=args.overwrite,
            fresh_memory=args.fresh_memory,
        )
    except (
        ModelNotAvailable,
        FileNotFoundError,
        FileExistsError,
        RunFolderLocked,
        ResumeError,
        StoreCorrupt,
        MemoryStoreError,
        EvolverStopped,
        ConfigError,
        DiskFull,  # an OSError: caught before the generic full-disk line below
        DiskBudgetError,
    ) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(
            f"error: the disk is full ({e}). Every log line written is complete (a half-written one is undone) and "
            f"every checkpoint with its state file is whole: free some space, then `harnessrl train --resume` "
            f"continues from the last complete checkpoint",
            file=sys.stderr,
        )
        return 1
    print(json.dumps(summary, indent=2))
    print(f"run folder: {cfg.run_dir}  (next: harnessrl eval --run {cfg.run_dir}; harnessrl report {cfg.run_dir})")
    return 0
