"""`harnessrl eval --run RUN | --model MODEL --suite DIR [--split test] [--k 8]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="held-out evaluation: training-criteria and audit scores per domain, Avg@k",
        description="Evaluate a trained run (its final model) or any model on held-out tasks. Writes eval.json "
        "into the run folder when --run is given.",
    )
    p.add_argument("--run", help="run folder (uses its config, suite and final model)")
    p.add_argument("--model", help="model: 'smollm2', 'tiny', a model folder or a LoRA adapter folder")
    p.add_argument("--base", help="base model of a LoRA adapter (default: the run's model.name)")
    p.add_argument("--suite", help="task suite folder (default: the run's data.suite)")
    p.add_argument("--split", default="test", choices=["train", "test"])
    p.add_argument("--k", type=int, default=8, help="samples per task (Avg@k)")
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument(
        "--batch-size",
        type=int,
        default=16,
        help="tasks per generate call (batched decoding is much cheaper per sequence on a CPU; "
        "1 = one call per task, seeded seed+i)",
    )
    p.add_argument("--judge-model", default=None, help="provider:model LLM judge for criteria without a check")
    p.add_argument("--label", default=None, help="key in eval.json (default: 'trained' or the model folder name)")
    p.add_argument(
        "--no-base",
        action="store_true",
        help="with --run: skip evaluating the run's base model on the same draws (by default both are "
        "kept in eval.json, and an earlier base result with the same settings is reused)",
    )
    p.add_argument(
        "--no-ifeval",
        action="store_true",
        help="skip the external yardstick: the held-out instruction-following prompts "
        "(data/ifeval-heldout, 52 prompts) answered greedily and scored by IFEval's own checkers. On "
        "by default; it adds minutes per model: 468 s measured for SmolLM2-135M on one thread of a "
        "busy 2-core box at the default 128 tokens (with --run: for the model and the base; a base "
        "result with the same settings is reused)",
    )
    p.add_argument("--ifeval-prompts", default=None, help="IFEval-format prompts JSONL (default: the bundled file)")
    p.add_argument(
        "--ifeval-max-tokens",
        type=int,
        default=128,
        help="tokens per IFEval response (the prompts ask for short answers; default 128)",
    )
    p.add_argument(
        "--ifeval-k",
        type=int,
        default=1,
        help="responses per IFEval prompt: 1 = greedy (IFEval's protocol), more = sampled at the eval "
        "temperature, metrics averaged over them",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.run and not args.model:
        print("harnessrl eval: give --run RUN or --model MODEL", file=sys.stderr)
        return 2
    if args.k < 1 or args.batch_size < 1:
        print("harnessrl eval: --k and --batch-size must be >= 1", file=sys.stderr)
        return 2
    if args.ifeval_k < 1 or args.ifeval_max_tokens < 1:
        print("harnessrl eval: --ifeval-k and --ifeval-max-tokens must be >= 1", file=sys.stderr)
        return 2
    from trainer.evaluate import run_eval
    from trainer.progress import quiet_library_warnings

    quiet_library_warnings()

    try:
        result = run_eval(
            run_dir=args.run,
            model=args.model,
            base=args.base,
            suite=args.suite,
            split=args.split,
            k=args.k,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            seed=args.seed,
            judge_model=args.judge_model,
            label=args.label,
            progress=not args.no_progress,
            batch_size=args.batch_size,
            with_base=bool(args.run) and not args.model and not args.no_base,
            ifeval=not args.no_ifeval,
            ifeval_prompts=args.ifeval_prompts,
            ifeval_max_tokens=args.ifeval_max_tokens,
            ifeval_k=args.ifeval_k,
        )
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    summary = {k: result[k] for k in ("model", "split", "k", "n_tasks", "avg_at_k", "audit", "domains")}
    if "ifeval" in result:
        summary["ifeval"] = _ifeval_line(result["ifeval"])
    print(json.dumps(summary, indent=2))
    if args.run and not args.model and not args.no_base:
        base = json.loads((Path(args.run) / "eval.json").read_text())["base"]
        print(
            f"base model on the same draws: Avg@{args.k} {base['avg_at_k']:.3f}, audit "
            f"{base['audit'] if base['audit'] is None else round(base['audit'], 3)}"
            + (f", IFEval {_ifeval_line(base['ifeval'])}" if "ifeval" in base and not args.no_ifeval else "")
        )
    return 0


def _ifeval_line(res: dict) -> dict:
    """IFEval's four metrics of one model, rounded, with the prompt count."""
    return {
        k: round(res[k], 3) for k in ("prompt_strict", "instruction_strict", "prompt_loose", "instruction_loose")
    } | {"n_prompts": res["n_prompts"]}
