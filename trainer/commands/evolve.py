"""`harnessrl evolve`: run the harness evolver on a saved snapshot, or replay a training run's round with other brains.

Two sources:

- a training run and `--step N` (`harnessrl evolve runs/cpu-demo --step 4 --proposer-model rules
  --proposer-model openai:Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1`): the round that ran at step N
  is rebuilt from the run (checkpoint-N's policy, the harness version the round started from, the memory
  as of that round, the round's events) in a scratch folder (`--out`, default `replays/<run>-step-N/` under
  the current directory; never inside the run, which is only read) and run once per brain set. Brain sets
  are the cartesian product of the models given per role (`--attributor-model`, `--proposer-model`,
  `--critic-model`, each repeatable or a comma list; `rules` is one choice). The run's own config supplies
  every other knob unless a flag overrides it. Prints a side-by-side table per event (next to what the run
  recorded) and writes it as `comparison.html` linking each set's trace page (`trainer/replay.py` replays,
  `trainer/replay_page.py` compares).
- a snapshot folder (`events.json` + `harness/`, no `--step`): one brain set, in process with a SQLite
  checkpointer at `<run-dir>/evolver.sqlite`, so a run can be resumed by its thread id (`--thread`) and
  rendered with `harnessrl trace`; with `--server URL` the run goes to a LangGraph server (`langgraph dev`)
  and shows up in Studio: it sends only the run folder, memory, policy and `--approve`, and the assistant
  (`--assistant` id or name, e.g. made in Studio; default one made from the flags) chooses the rest. Both
  run through `graphs/runner.py`, as the trainer's rounds do. A snapshot's `harness_version` must be its
  store's latest (a round commits on top of the latest version): use a fresh `--run-dir` per run.

Each LLM role may have its own server and key variable (`--proposer-base-url URL`, `--judge-api-key-env VAR`,
...; default `--base-url` / `--api-key-env`), as `evolver.<role>_base_url` in a training config.

Every other flag is a field of `agents.context.EvolverContext`, built from it with its type, default and
description (`add_context_flags`), so a flag, a config's `evolver.<field>` and Studio's context show one
default and one help text: `--sample-k` is `evolver.sample_k`, `--no-critic` is `evolver.critic=false`, ...
(`--max-tokens`, `--temperature` and `--seed` are the run's `train.max_completion_length`, `train.temperature`
and `train.seed`). A replay takes the run's values for the flags not given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import types
import typing
from pathlib import Path

from agents.context import LLM_ROLES, PER_RUN, EvolverContext
from harness.atomic import atomic_write_text
from harness.types import INTERFACES

# Context fields with a flag of their own: the brains take several models (brain sets), the shared base URL is passed
# to the replay apart, and require_approval is `--approve` (a person answers on this terminal).
BRAIN_FLAGS = ("attributor_model", "proposer_model", "critic_model")
ENDPOINT_FLAGS = ("api_key_env", *(f"{role}_{part}" for role in LLM_ROLES for part in ("base_url", "api_key_env")))
NOT_KNOBS = (*PER_RUN, *BRAIN_FLAGS, *ENDPOINT_FLAGS, "base_url", "require_approval")


def add_context_flags(p: argparse.ArgumentParser) -> None:
    """Add one flag per `EvolverContext` field but the per-run ones, with the field's type and description.

    A flag not given is None: a snapshot takes the field's default, a replay the run's config."""
    hints = typing.get_type_hints(EvolverContext)
    for f in dataclasses.fields(EvolverContext):
        if f.name in PER_RUN or f.name == "require_approval":
            continue
        flag, help_ = "--" + f.name.replace("_", "-"), f.metadata["description"]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if f.name in BRAIN_FLAGS:
            p.add_argument(
                flag,
                action="append",
                default=None,
                metavar="MODEL",
                help=f"{help_} (default {default}); repeat or comma-separate to compare several (replay)",
            )
            continue
        kind = _flag_kind(hints[f.name])
        help_ = f"{help_} (default {' '.join(default) if isinstance(default, list) else default}; replay: the run's)"
        if kind is bool:
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help_)
        elif kind is list:
            p.add_argument(flag, nargs="+", choices=INTERFACES, default=None, metavar="INTERFACE", help=help_)
        elif isinstance(kind, tuple):
            p.add_argument(flag, choices=kind, default=None, help=help_)
        else:
            p.add_argument(flag, type=kind, default=None, help=help_)


def _flag_kind(annotation: object) -> object:
    """bool, list, a tuple of choices (Literal) or the scalar type of an optional/plain annotation."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return args
    if origin is list:
        return list
    if origin in (typing.Union, types.UnionType):
        return next(a for a in args if a is not type(None))
    return annotation


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "evolve",
        help="run the evolver on a snapshot, or replay a training run's round with other brains",
        description="Replay the evolver round that ran at step N of a training run (SOURCE = run folder, --step N) "
        "once per brain set, or run the evolver on a snapshot folder holding events.json and harness/.",
        epilog="Brain sets: the cartesian product of the models given per role, e.g. `--proposer-model "
        "rules,openai:Qwen/Qwen3-8B --critic-model rules,openai:Qwen/Qwen3-8B` runs 4 sets. "
        "Example: harnessrl evolve runs/cpu-demo --step 4 --proposer-model rules "
        "--proposer-model openai:Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1",
    )
    p.add_argument(
        "source",
        help="a training run folder (with --step), or a snapshot folder with events.json "
        "({events, harness_version, step}; events may be lines copied from a run's "
        "events.jsonl) and harness/",
    )
    p.add_argument(
        "--step", type=int, default=None, help="replay the round that ran at this step of the training run SOURCE"
    )
    p.add_argument(
        "--out",
        default=None,
        help="replay: scratch folder for the brain sets' runs and comparison.html "
        "(default replays/<run name>-step-N under the current directory; "
        "never inside the run)",
    )
    p.add_argument(
        "--run-dir",
        default=None,
        help="snapshot: run folder (required): harness/ is copied here once; evolver.sqlite lives here",
    )
    p.add_argument(
        "--policy",
        default=None,
        help="frozen policy: local:<model folder> or openai:<base_url>#<model> "
        "(snapshot: required; replay: default checkpoint-N of the run)",
    )
    p.add_argument(
        "--memory-location", default="none", help="snapshot: Chroma folder, http://host:port, or none (default)"
    )
    add_context_flags(p)
    p.add_argument("--approve", action="store_true", help="snapshot: ask for approval (y/n) before each commit")
    p.add_argument("--thread", default=None, help="snapshot: thread id; an existing unfinished thread is resumed")
    p.add_argument(
        "--server",
        default=None,
        help="snapshot: LangGraph server URL (e.g. http://127.0.0.1:2124): run there, visible in Studio",
    )
    p.add_argument(
        "--assistant",
        default=None,
        help="with --server: an assistant id or name (e.g. made in Studio) whose context chooses models, "
        "limits and thresholds (the run sends only run dir, memory, policy and --approve; model and "
        "knob flags are then refused). Default: the graph 'evolver', with an assistant made from "
        "the flags",
    )
    p.add_argument(
        "--json", dest="json_out", default=None, help="also write the full output (replay: the comparison) as JSON here"
    )
    p.set_defaults(func=run)


def _ask(payload: dict) -> bool:
    prop, crit = payload.get("proposal") or {}, payload.get("critique") or {}
    print(
        json.dumps(
            {"update": prop.get("update"), "numbers": crit.get("numbers"), "reasons": crit.get("reasons")}, indent=1
        )
    )
    if not sys.stdin.isatty():
        print("approval needed but stdin is not a terminal: rejecting", file=sys.stderr)
        return False
    return input("commit this update? [y/N] ").strip().lower() in ("y", "yes")


def print_results(out: dict, thread_id: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"evolver thread {thread_id}: harness v{out.get('harness_version')}", show_lines=True)
    for col in (
        "event",
        "task",
        "type",
        "interface",
        "rev",
        "candidate",
        "std ctrl→cand",
        "mean ctrl→cand",
        "rule",
        "decision",
    ):
        table.add_column(col)

    def f(x: object) -> str:
        return "–" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))

    for r in out.get("reports", []):
        attempts = r.get("attempts") or [None]
        for a in attempts:
            crit = (a or {}).get("critique") or {}
            n = crit.get("numbers") or {}
            ops = ", ".join(op["op"] for op in ((a or {}).get("update") or {}).get("ops", [])) or (
                (a or {}).get("error") or "–"
            )
            last = a is attempts[-1]
            decision = (
                (r["decision"] + (f" (v{r['committed_version']})" if r.get("committed_version") else ""))
                if last
                else "rejected"
            )
            table.add_row(
                r["event_id"],
                r["task_id"],
                r["failure_type"],
                f(r.get("interface")),
                f((a or {}).get("revision")),
                f"{(a or {}).get('template', '')}: {ops}"[:60],
                f"{f(n.get('control_std'))}→{f(n.get('candidate_std'))}",
                f"{f(n.get('control_mean'))}→{f(n.get('candidate_mean'))}",
                ("pass" if crit.get("measured_ok") else "fail") + f" {crit.get('primary', '')}",
                decision,
            )
        if r.get("note"):
            table.add_row(
                r["event_id"], r["task_id"], r["failure_type"], "–", "–", r["note"], "", "", "", r["decision"]
            )
    console = Console(width=200)
    console.print(table)
    console.print(f"accepted: {len(out.get('accepted', []))} update(s); reports: {len(out.get('reports', []))}")


def _knobs(args: argparse.Namespace) -> dict:
    """The context knobs given on the command line (the brains, endpoints and base URL apart)."""
    names = [f.name for f in dataclasses.fields(EvolverContext) if f.name not in NOT_KNOBS]
    return {k: getattr(args, k) for k in names if getattr(args, k) is not None}


def _endpoints(args: argparse.Namespace) -> dict:
    """The per-role endpoint flags given (the shared --base-url aside); EvolverContext field names."""
    return {k: getattr(args, k) for k in ENDPOINT_FLAGS if getattr(args, k) is not None}


def _assistant_chooses(args: argparse.Namespace) -> list[str]:
    """Flags given for what a named assistant's context chooses: a server run would not send them."""
    from graphs.runner import RUN_CONTEXT_KEYS

    given = [k for k in _knobs(args) if k not in RUN_CONTEXT_KEYS] + list(_endpoints(args))
    given += [k for k in ("attributor_model", "proposer_model", "critic_model", "base_url") if getattr(args, k)]
    return ["--" + k.replace("_", "-") for k in given]


def run(args: argparse.Namespace) -> int:
    from trainer.progress import quiet_library_warnings
    from trainer.replay import brain_sets, split_models

    quiet_library_warnings()

    sets = brain_sets(
        split_models(args.attributor_model), split_models(args.proposer_model), split_models(args.critic_model)
    )
    if args.step is not None:
        bad = [
            f
            for f, v in (
                ("--run-dir", args.run_dir),
                ("--thread", args.thread),
                ("--server", args.server),
                ("--assistant", args.assistant),
                ("--approve", args.approve),
            )
            if v
        ]
        if bad:
            print(
                f"evolve --step replays in process in a scratch folder (--out); {', '.join(bad)} only apply to a "
                f"snapshot",
                file=sys.stderr,
            )
            return 2
        try:
            return run_replay(args, sets)
        except (FileNotFoundError, ValueError) as e:  # a missing or corrupt run file: one line, not a traceback
            print(f"error: {e}", file=sys.stderr)
            return 1
    if (Path(args.source) / "rounds.jsonl").is_file() and not (Path(args.source) / "events.json").is_file():
        print(f"{args.source} is a training run: pass --step N to replay the round that ran at step N", file=sys.stderr)
        return 2
    if len(sets) != 1:
        print(
            f"a snapshot runs one brain set; got {len(sets)} (several models per role compare brains on a training "
            f"run's round: SOURCE = run folder and --step N)",
            file=sys.stderr,
        )
        return 2
    if args.assistant and not args.server:
        print("--assistant names an assistant on a LangGraph server: pass --server URL too", file=sys.stderr)
        return 2
    if args.assistant and (chosen := _assistant_chooses(args)):
        print(
            f"--assistant {args.assistant}: its context chooses models, limits and thresholds; drop "
            f"{', '.join(chosen)} (or edit the assistant in Studio)",
            file=sys.stderr,
        )
        return 2
    missing = [f for f, v in (("--run-dir", args.run_dir), ("--policy", args.policy)) if not v]
    if missing:
        print(f"evolve on a snapshot needs {' and '.join(missing)}", file=sys.stderr)
        return 2
    return run_snapshot(args, sets[0])


def run_replay(args: argparse.Namespace, sets: list) -> int:
    from trainer.replay import load_round, replay_round
    from trainer.replay_page import print_comparison, write_comparison

    rr = load_round(args.source, args.step)
    out = Path(args.out) if args.out else Path("replays") / f"{rr.run_dir.resolve().name}-step-{args.step}"
    overrides = _knobs(args) | _endpoints(args)
    if args.sample_k is not None and args.sample_k_max is None:  # a larger k lifts the run's cap with it
        overrides["sample_k_max"] = max(args.sample_k, rr.cfg.evolver.sample_k_max)
    print(
        f"replaying the round at step {rr.step} of {rr.run_dir} (harness v{rr.version_before}, {len(rr.events)} "
        f"events from {rr.events_source}) with {len(sets)} brain set(s) in {out}"
    )
    result = replay_round(rr, sets, out, policy=args.policy, base_url=args.base_url, overrides=overrides)
    write_comparison(result)
    print_comparison(result)
    if args.json_out:
        atomic_write_text(Path(args.json_out), (out / "comparison.json").read_text(encoding="utf-8"))
    return 0


def run_snapshot(args: argparse.Namespace, brains) -> int:
    from graphs.runner import load_snapshot, prepare_run_dir, run_in_process, run_on_server, thread_unfinished

    knobs = _knobs(args)
    if args.sample_k is not None and args.sample_k_max is None:  # a larger k lifts the default cap with it
        knobs["sample_k_max"] = max(args.sample_k, EvolverContext().sample_k_max)
    inp = load_snapshot(args.source)
    run_dir = Path(args.run_dir).resolve()
    prepare_run_dir(args.source, run_dir)
    ctx = EvolverContext(
        attributor_model=brains.attributor,
        proposer_model=brains.proposer,
        critic_model=brains.critic,
        base_url=args.base_url,
        run_dir=str(run_dir),
        memory_location=args.memory_location,
        policy=args.policy,
        require_approval=args.approve,
        **knobs,
        **_endpoints(args),
    )
    approve = _ask if args.approve else None
    if args.server:
        run = run_on_server(
            args.server,
            inp,
            ctx,
            approve=approve,
            thread_id=args.thread,
            assistant=args.assistant or "evolver",
            assistant_name=f"harnessrl evolve {run_dir.name}",
        )
        thread_id, out = run.thread_id, run.output
        print(f"LangGraph server {args.server}: thread {thread_id}, assistant {run.assistant_id}")
    else:
        thread_id = args.thread or f"evolve-{inp['step']}-{time.strftime('%Y%m%d-%H%M%S')}"
        db = run_dir / "evolver.sqlite"
        resume = args.thread is not None and thread_unfinished(db, thread_id)
        out = run_in_process(None if resume else inp, ctx, db, thread_id, approve=approve)
    if out.get("__interrupt__"):
        print(f"thread {thread_id} is waiting for approval; resume with --thread {thread_id} --approve")
        return 3
    print_results(out, thread_id)
    if args.json_out:
        atomic_write_text(Path(args.json_out), json.dumps({"thread_id": thread_id, **out}, indent=1, default=str))
    print(f"thread: {thread_id}  (render: harnessrl trace {run_dir} --thread {thread_id} --out trace.html)")
    return 0
