"""Running the evolver graph: in process with a SQLite checkpointer, or on a LangGraph server (Studio).

This is the one place that runs a round; the trainer's callback (`trainer/evolver_round.py`) and
`harnessrl evolve` both call it. Both paths take the same input (`EvolverInput`) and context
(`EvolverContext`) and return the graph's output (`EvolverOutput`).

- `run_in_process`: `graphs.evolver.builder` compiled with an `AsyncSqliteSaver` and run with `ainvoke`
  under `asyncio.run` (the caller, e.g. the trainer's callback thread, has no running loop). Every node
  is synchronous; under an event loop LangGraph runs sync nodes in worker threads, as a LangGraph server
  does, so a round executes the same way in process and on a server, and the parallel task lanes each
  get their own thread.
- `run_on_server`: `langgraph_sdk` against a `langgraph dev` / LangGraph server. `timeout_s` bounds the
  wait (the SDK's default read timeout, 300 s, is shorter than a long CPU pause), `on_disconnect="cancel"`
  stops the server's run when we stop waiting (a caller that gives up and rolls the harness back must not
  see the server commit afterwards), and a failed run raises.

Approval interrupts are answered by `approve(payload) -> bool`, each interrupt by its id (several lanes
may wait at once); with no callback a run that reaches an interrupt stops and returns
`{"__interrupt__": [...]}` so the caller can resume later with the same thread id.

A snapshot (what `harnessrl evolve` reads) is a folder with `events.json`
(`{"events": [FailureEvent...], "harness_version": n, "step": s}`) and `harness/` (a `HarnessStore`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from agents.context import EvolverContext
from graphs.evolver import builder
from harness.store import HarnessStore
from harness.types import FailureEvent

Approver = Callable[[dict[str, Any]], bool]


def load_snapshot(snapshot: str | Path) -> dict[str, Any]:
    """Read and validate `snapshot/events.json`; returns the graph input."""
    path = Path(snapshot) / "events.json"
    if not path.is_file():
        raise FileNotFoundError(f"snapshot {snapshot}: no events.json (expected events + harness_version + step)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not JSON: {err.msg}") from None
    for key in ("events", "harness_version", "step"):
        if key not in data:
            raise ValueError(f"{path}: missing field {key!r}")
    for i, ev in enumerate(data["events"]):
        try:
            FailureEvent.model_validate(ev)
        except ValueError as err:
            raise ValueError(f"{path}: events[{i}]: {err}") from None
    return {"events": data["events"], "harness_version": int(data["harness_version"]), "step": int(data["step"])}


def prepare_run_dir(snapshot: str | Path, run_dir: str | Path) -> HarnessStore:
    """Copy the snapshot's harness into `run_dir/harness` once; a later run (resume) reuses it."""
    store = HarnessStore(Path(run_dir) / "harness")
    if not store.versions():
        src = Path(snapshot) / "harness"
        if not HarnessStore(src).versions():
            raise FileNotFoundError(f"snapshot {snapshot}: no harness versions under {src}")
        shutil.copytree(src, store.root, dirs_exist_ok=True)
    return store


def run_in_process(inp: dict[str, Any] | None, ctx: EvolverContext, db_path: str | Path, thread_id: str,
                   approve: Approver | None = None) -> dict[str, Any]:
    """Run (or resume, with `inp=None`) thread `thread_id` of the evolver, checkpointed in SQLite at `db_path`."""

    async def go() -> dict[str, Any]:
        cfg = {"configurable": {"thread_id": thread_id}}
        async with AsyncSqliteSaver.from_conn_string(str(db_path)) as saver:
            g = builder.compile(checkpointer=saver, name="evolver")
            payload: Any = inp
            while True:
                out = dict(await g.ainvoke(payload, cfg, context=ctx))
                interrupts = out.get("__interrupt__") or []
                if not interrupts or approve is None:
                    return out
                payload = Command(resume={i.id: {"approve": approve(i.value)} for i in interrupts})

    return asyncio.run(go())


def thread_unfinished(db_path: str | Path, thread_id: str) -> bool:
    """The thread exists in the checkpoint db at `db_path` and has nodes left to run (a crash or an interrupt)."""
    if not Path(db_path).is_file():
        return False

    async def go() -> bool:
        async with AsyncSqliteSaver.from_conn_string(str(db_path)) as saver:
            snap = await builder.compile(checkpointer=saver).aget_state({"configurable": {"thread_id": thread_id}})
        return bool(snap.next)

    return asyncio.run(go())


def run_on_server(url: str, inp: dict[str, Any], ctx: EvolverContext, *, approve: Approver | None = None,
                  thread_id: str | None = None, assistant_id: str = "evolver", timeout_s: float | None = None,
                  metadata: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Run on a LangGraph server, so the thread shows in Studio. Returns (thread id, output).

    A new thread (with `metadata`) unless `thread_id` names one; `timeout_s` bounds each wait (None: the
    SDK's default)."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, timeout=timeout_s)
    thread_id = thread_id or client.threads.create(metadata=metadata)["thread_id"]

    def wait(**what: Any) -> dict[str, Any]:
        out = client.runs.wait(thread_id, assistant_id, context=ctx.to_dict(), raise_error=True,
                               on_disconnect="cancel", **what)
        if not isinstance(out, dict):
            raise RuntimeError(f"LangGraph server at {url} returned {type(out).__name__}, not a state")
        return out

    out = wait(input=inp)
    while approve is not None:
        state = client.threads.get_state(thread_id)
        interrupts = [i for t in state.get("tasks", []) for i in t.get("interrupts", [])]
        if not interrupts:
            break
        out = wait(command={"resume": {i["id"]: {"approve": approve(i["value"])} for i in interrupts}})
    return thread_id, out
