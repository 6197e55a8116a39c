"""`harnessrl evolve`: run the harness evolver on a saved snapshot and print what it accepted and rejected.

In process (default): the graph runs with a SQLite checkpointer at `<run-dir>/evolver.sqlite`, so a
run can be resumed by its thread id (`--thread`) and rendered with `harnessrl trace`. With
`--server URL` the run goes to a LangGraph server (`langgraph dev`) and shows up in Studio. Any
brain per role: `--proposer-model openai:Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1
--critic-model rules` compares LLMs on the same checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("evolve", help="run the harness evolver on a saved snapshot",
                              description="Run the evolver (attributor -> proposer -> critic) on a snapshot folder "
                                          "holding events.json and harness/.")
    p.add_argument("snapshot", help="folder with events.json ({events, harness_version, step}) and harness/")
    p.add_argument("--run-dir", required=True, help="run folder: harness/ is copied here once; evolver.sqlite lives here")
    p.add_argument("--policy", required=True, help="frozen policy: local:<model folder> or openai:<base_url>#<model>")
    p.add_argument("--memory", default="none", help="Chroma folder, http://host:port, or none (default)")
    p.add_argument("--memory-embedding", default="minilm", choices=["minilm", "hash"])
    for role in ("attributor", "proposer", "critic", "judge"):
        p.add_argument(f"--{role}-model", default="rules", help=f"'rules' (default) or provider:model for the {role}")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible base URL for the brain/judge models")
    p.add_argument("--k", type=int, default=8, help="rollouts per affected task for candidate and control (default 8)")
    p.add_argument("--max-tokens", type=int, default=48, help="max new tokens per rollout (default 48)")
    p.add_argument("--max-revisions", type=int, default=2, help="R: revisions of a rejected candidate (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--approve", action="store_true", help="ask for approval (y/n) before each commit")
    p.add_argument("--thread", default=None, help="thread id; an existing unfinished thread is resumed")
    p.add_argument("--server", default=None, help="LangGraph server URL (e.g. http://127.0.0.1:2124): run there, visible in Studio")
    p.add_argument("--json", dest="json_out", default=None, help="also write the full output as JSON here")
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


def run(args: argparse.Namespace) -> int:
    from agents.context import EvolverContext
    from graphs.runner import load_snapshot, prepare_run_dir, run_in_process, run_on_server

    inp = load_snapshot(args.snapshot)
    run_dir = Path(args.run_dir).resolve()
    prepare_run_dir(args.snapshot, run_dir)
    ctx = EvolverContext(
        attributor_model=args.attributor_model, proposer_model=args.proposer_model, critic_model=args.critic_model,
        judge_model=args.judge_model, base_url=args.base_url, run_dir=str(run_dir), memory=args.memory,
        memory_embedding=args.memory_embedding, policy=args.policy, samples_per_candidate=args.k,
        max_tokens=args.max_tokens, max_revisions=args.max_revisions, seed=args.seed, require_approval=args.approve,
    )
    approve = _ask if args.approve else None
    if args.server:
        thread_id, out = run_on_server(args.server, inp, ctx, approve=approve, thread_id=args.thread)
    else:
        thread_id = args.thread or f"evolve-{inp['step']}-{time.strftime('%Y%m%d-%H%M%S')}"
        db = run_dir / "evolver.sqlite"
        resume = args.thread is not None and _unfinished(db, thread_id)
        out = run_in_process(None if resume else inp, ctx, db, thread_id, approve=approve)
    if out.get("__interrupt__"):
        print(f"thread {thread_id} is waiting for approval; resume with --thread {thread_id} --approve")
        return 3
    print_results(out, thread_id)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"thread_id": thread_id, **out}, indent=1, default=str), encoding="utf-8")
    print(f"thread: {thread_id}  (render: harnessrl trace {run_dir} --thread {thread_id} --out trace.html)")
    return 0


def _unfinished(db: Path, thread_id: str) -> bool:
    """The thread exists in the checkpoint db and has nodes left to run (a crash or an interrupt)."""
    if not db.is_file():
        return False
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graphs.evolver import builder

    with SqliteSaver.from_conn_string(str(db)) as saver:
        snap = builder.compile(checkpointer=saver).get_state({"configurable": {"thread_id": thread_id}})
    return bool(snap.next)
