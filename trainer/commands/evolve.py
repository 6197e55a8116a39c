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
  recorded) and writes it as `comparison.html` linking each set's trace page (`trainer/replay.py`).
- a snapshot folder (`events.json` + `harness/`, no `--step`): one brain set, in process with a SQLite
  checkpointer at `<run-dir>/evolver.sqlite`, so a run can be resumed by its thread id (`--thread`) and
  rendered with `harnessrl trace`; with `--server URL` the run goes to a LangGraph server (`langgraph dev`)
  and shows up in Studio: it sends only the run folder, memory, policy and `--approve`, and the assistant
  (`--assistant` id or name, e.g. made in Studio; default one made from the flags) chooses the rest. Both
  run through `graphs/runner.py`, as the trainer's rounds do. A snapshot's `harness_version` must be its
  store's latest (a round commits on top of the latest version): use a fresh `--run-dir` per run.

Each LLM role may have its own server and key variable (`--proposer-base-url URL`, `--judge-api-key-env VAR`,
...; default `--base-url` / `--api-key-env`), as `harness.<role>_base_url` in a training config.

The knobs a training config also sets have its names: `--sample-k`, `--critic/--no-critic`,
`--memory/--no-memory`, `--interfaces`, `--seed` (`harness.sample_k`, ..., `train.seed`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agents.context import LLM_ROLES
from harness.store import atomic_write_text
from harness.types import INTERFACES

# Snapshot-mode defaults; a replay takes these knobs from the run's config unless a flag is given.
SNAPSHOT_DEFAULTS = {"sample_k": 8, "sample_k_max": 16, "critic_alpha": 0.1, "max_tokens": 48, "max_revisions": 2, "seed": 0, "critic": True, "memory": True,
                     "interfaces": list(INTERFACES), "judge_model": "rules"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "evolve", help="run the evolver on a snapshot, or replay a training run's round with other brains",
        description="Replay the evolver round that ran at step N of a training run (SOURCE = run folder, --step N) "
                    "once per brain set, or run the evolver on a snapshot folder holding events.json and harness/.",
        epilog="Brain sets: the cartesian product of the models given per role, e.g. `--proposer-model "
               "rules,openai:Qwen/Qwen3-8B --critic-model rules,openai:Qwen/Qwen3-8B` runs 4 sets. "
               "Example: harnessrl evolve runs/cpu-demo --step 4 --proposer-model rules "
               "--proposer-model openai:Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1")
    p.add_argument("source", help="a training run folder (with --step), or a snapshot folder with events.json "
                                  "({events, harness_version, step}; events may be lines copied from a run's "
                                  "events.jsonl) and harness/")
    p.add_argument("--step", type=int, default=None,
                   help="replay the round that ran at this step of the training run SOURCE")
    p.add_argument("--out", default=None, help="replay: scratch folder for the brain sets' runs and comparison.html "
                                               "(default replays/<run name>-step-N under the current directory; "
                                               "never inside the run)")
    p.add_argument("--run-dir", default=None,
                   help="snapshot: run folder (required): harness/ is copied here once; evolver.sqlite lives here")
    p.add_argument("--policy", default=None, help="frozen policy: local:<model folder> or openai:<base_url>#<model> "
                                                  "(snapshot: required; replay: default checkpoint-N of the run)")
    p.add_argument("--memory-location", default="none", help="snapshot: Chroma folder, http://host:port, or none (default)")
    p.add_argument("--memory-embedding", default="minilm", choices=["minilm", "hash"], help="snapshot: memory embedding")
    for role in ("attributor", "proposer", "critic"):
        p.add_argument(f"--{role}-model", action="append", default=None, metavar="MODEL",
                       help=f"'rules' (default) or provider:model for the {role}; repeat or comma-separate to "
                            f"compare several (replay)")
    p.add_argument("--judge-model", default=None, help="'rules' or provider:model for the judge "
                                                      "(snapshot: default rules; replay: the run's judge)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible base URL for the brain/judge models "
                                                   "(replay: default the run's harness.llm_base_url)")
    p.add_argument("--api-key-env", default=None, help="environment variable holding the LLMs' API key "
                                                      "(default OPENAI_API_KEY; replay: the run's llm_api_key_env)")
    for role in LLM_ROLES:
        p.add_argument(f"--{role}-base-url", default=None, metavar="URL",
                       help=f"the {role}'s own OpenAI-compatible base URL (default --base-url)")
        p.add_argument(f"--{role}-api-key-env", default=None, metavar="VAR",
                       help=f"the {role}'s API-key variable (default --api-key-env)")
    p.add_argument("--sample-k", type=int, default=None, help="rollouts per affected task for candidate and control "
                                                             "(snapshot default 8; replay: the run's)")
    p.add_argument("--sample-k-max", type=int, default=None,
                   help="cap: the critic's groups double from --sample-k up to this while its test is undecided "
                        "(snapshot default 16, at least --sample-k; replay: the run's); equal to --sample-k: fixed budget")
    p.add_argument("--critic-alpha", type=float, default=None,
                   help="error rate of the critic's sequential test (snapshot default 0.1; replay: the run's)")
    p.add_argument("--max-tokens", type=int, default=None, help="max new tokens per rollout (snapshot default 48; "
                                                               "replay: the run's max_completion_length)")
    p.add_argument("--max-revisions", type=int, default=None, help="R: revisions of a rejected candidate "
                                                                  "(snapshot default 2; replay: the run's)")
    p.add_argument("--seed", type=int, default=None, help="seed of the frozen-policy rollouts (critic and agent tools; "
                                                         "snapshot default 0; replay: the run's)")
    p.add_argument("--critic", action=argparse.BooleanOptionalAction, default=None,
                   help="measure candidates (--no-critic: accept every valid proposal unmeasured)")
    p.add_argument("--memory", action=argparse.BooleanOptionalAction, default=None,
                   help="use memory evidence (--no-memory: ignore it; events are still recorded)")
    p.add_argument("--interfaces", nargs="+", choices=INTERFACES, default=None, metavar="INTERFACE",
                   help=f"interfaces the evolver may update (snapshot default: all of {' '.join(INTERFACES)})")
    p.add_argument("--approve", action="store_true", help="snapshot: ask for approval (y/n) before each commit")
    p.add_argument("--thread", default=None, help="snapshot: thread id; an existing unfinished thread is resumed")
    p.add_argument("--server", default=None, help="snapshot: LangGraph server URL (e.g. http://127.0.0.1:2124): "
                                                  "run there, visible in Studio")
    p.add_argument("--assistant", default=None,
                   help="with --server: an assistant id or name (e.g. made in Studio) whose context chooses models, "
                        "limits and thresholds (the run sends only run dir, memory, policy and --approve; model and "
                        "knob flags are then refused). Default: the graph 'evolver', with an assistant made from "
                        "the flags")
    p.add_argument("--json", dest="json_out", default=None, help="also write the full output (replay: the comparison) "
                                                                 "as JSON here")
    p.set_defaults(func=run)


def _ask(payload: dict) -> bool:
    prop, crit = payload.get("proposal") or {}, payload.get("critique") or {}
    print(json.dumps({"update": prop.get("update"), "numbers": crit.get("numbers"), "reasons": crit.get("reasons")}, indent=1))
    if not sys.stdin.isatty():
        print("approval needed but stdin is not a terminal: rejecting", file=sys.stderr)
        return False
    return input("commit this update? [y/N] ").strip().lower() in ("y", "yes")


def print_results(out: dict, thread_id: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"evolver thread {thread_id}: harness v{out.get('harness_version')}", show_lines=True)
    for col in ("event", "task", "type", "interface", "rev", "candidate", "std ctrl→cand", "mean ctrl→cand", "rule", "decision"):
        table.add_column(col)

    def f(x: object) -> str:
        return "–" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))

    for r in out.get("reports", []):
        attempts = r.get("attempts") or [None]
        for a in attempts:
            crit = (a or {}).get("critique") or {}
            n = crit.get("numbers") or {}
            ops = ", ".join(op["op"] for op in ((a or {}).get("update") or {}).get("ops", [])) or ((a or {}).get("error") or "–")
            last = a is attempts[-1]
            decision = (r["decision"] + (f" (v{r['committed_version']})" if r.get("committed_version") else "")) if last else "rejected"
            table.add_row(r["event_id"], r["task_id"], r["failure_type"], f(r.get("interface")), f((a or {}).get("revision")),
                          f"{(a or {}).get('template', '')}: {ops}"[:60],
                          f"{f(n.get('control_std'))}→{f(n.get('candidate_std'))}",
                          f"{f(n.get('control_mean'))}→{f(n.get('candidate_mean'))}",
                          ("pass" if crit.get("measured_ok") else "fail") + f" {crit.get('primary', '')}", decision)
        if r.get("note"):
            table.add_row(r["event_id"], r["task_id"], r["failure_type"], "–", "–", r["note"], "", "", "", r["decision"])
    console = Console(width=200)
    console.print(table)
    console.print(f"accepted: {len(out.get('accepted', []))} update(s); reports: {len(out.get('reports', []))}")


def _knobs(args: argparse.Namespace) -> dict:
    """The knobs given on the command line (None: not given)."""
    return {k: getattr(args, k) for k in SNAPSHOT_DEFAULTS}


ENDPOINT_FLAGS = ("api_key_env", *(f"{role}_{part}" for role in LLM_ROLES for part in ("base_url", "api_key_env")))


def _endpoints(args: argparse.Namespace) -> dict:
    """The per-role endpoint flags given (the shared --base-url aside); EvolverContext field names."""
    return {k: getattr(args, k) for k in ENDPOINT_FLAGS if getattr(args, k) is not None}


def _assistant_chooses(args: argparse.Namespace) -> list[str]:
    """Flags given for what a named assistant's context chooses: a server run would not send them."""
    given = [k for k, v in _knobs(args).items() if v is not None] + list(_endpoints(args))
    given += [k for k in ("attributor_model", "proposer_model", "critic_model", "base_url") if getattr(args, k)]
    return ["--" + k.replace("_", "-") for k in given]


def run(args: argparse.Namespace) -> int:
    from trainer.progress import quiet_library_warnings
    from trainer.replay import brain_sets, split_models

    quiet_library_warnings()

    sets = brain_sets(split_models(args.attributor_model), split_models(args.proposer_model),
                      split_models(args.critic_model))
    if args.step is not None:
        bad = [f for f, v in (("--run-dir", args.run_dir), ("--thread", args.thread), ("--server", args.server),
                              ("--assistant", args.assistant), ("--approve", args.approve)) if v]
        if bad:
            print(f"evolve --step replays in process in a scratch folder (--out); {', '.join(bad)} only apply to a "
                  f"snapshot", file=sys.stderr)
            return 2
        try:
            return run_replay(args, sets)
        except (FileNotFoundError, ValueError) as e:  # a missing or corrupt run file: one line, not a traceback
            print(f"error: {e}", file=sys.stderr)
            return 1
    if (Path(args.source) / "rounds.jsonl").is_file() and not (Path(args.source) / "events.json").is_file():
        print(f"{args.source} is a training run: pass --step N to replay the round that ran at step N",
              file=sys.stderr)
        return 2
    if len(sets) != 1:
        print(f"a snapshot runs one brain set; got {len(sets)} (several models per role compare brains on a training "
              f"run's round: SOURCE = run folder and --step N)", file=sys.stderr)
        return 2
    if args.assistant and not args.server:
        print("--assistant names an assistant on a LangGraph server: pass --server URL too", file=sys.stderr)
        return 2
    if args.assistant and (chosen := _assistant_chooses(args)):
        print(f"--assistant {args.assistant}: its context chooses models, limits and thresholds; drop "
              f"{', '.join(chosen)} (or edit the assistant in Studio)", file=sys.stderr)
        return 2
    missing = [f for f, v in (("--run-dir", args.run_dir), ("--policy", args.policy)) if not v]
    if missing:
        print(f"evolve on a snapshot needs {' and '.join(missing)}", file=sys.stderr)
        return 2
    return run_snapshot(args, sets[0])


def run_replay(args: argparse.Namespace, sets: list) -> int:
    from trainer.replay import load_round, print_comparison, replay_round

    rr = load_round(args.source, args.step)
    out = Path(args.out) if args.out else Path("replays") / f"{rr.run_dir.resolve().name}-step-{args.step}"
    overrides = {k: v for k, v in _knobs(args).items() if v is not None} | _endpoints(args)
    if args.sample_k is not None and args.sample_k_max is None:  # a larger k lifts the run's cap with it
        overrides["sample_k_max"] = max(args.sample_k, rr.cfg.harness.sample_k_max)
    print(f"replaying the round at step {rr.step} of {rr.run_dir} (harness v{rr.version_before}, {len(rr.events)} "
          f"events from {rr.events_source}) with {len(sets)} brain set(s) in {out}")
    result = replay_round(rr, sets, out, policy=args.policy, base_url=args.base_url, overrides=overrides)
    print_comparison(result)
    if args.json_out:
        atomic_write_text(Path(args.json_out), (out / "comparison.json").read_text(encoding="utf-8"))
    return 0


def run_snapshot(args: argparse.Namespace, brains) -> int:
    from agents.context import EvolverContext
    from graphs.runner import load_snapshot, prepare_run_dir, run_in_process, run_on_server, thread_unfinished

    knobs = {k: SNAPSHOT_DEFAULTS[k] if v is None else v for k, v in _knobs(args).items()}
    if args.sample_k_max is None:  # a larger k lifts the default cap with it
        knobs["sample_k_max"] = max(knobs["sample_k"], knobs["sample_k_max"])
    inp = load_snapshot(args.source)
    run_dir = Path(args.run_dir).resolve()
    prepare_run_dir(args.source, run_dir)
    ctx = EvolverContext(
        attributor_model=brains.attributor, proposer_model=brains.proposer, critic_model=brains.critic,
        base_url=args.base_url, run_dir=str(run_dir), memory_location=args.memory_location,
        memory_embedding=args.memory_embedding, policy=args.policy, require_approval=args.approve, **knobs,
        **_endpoints(args),
    )
    approve = _ask if args.approve else None
    if args.server:
        run = run_on_server(args.server, inp, ctx, approve=approve, thread_id=args.thread,
                            assistant=args.assistant or "evolver", assistant_name=f"harnessrl evolve {run_dir.name}")
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
