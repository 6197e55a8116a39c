"""Running the evolver: in process with a SQLite checkpointer, or on a LangGraph server (Studio).

Both paths take the same input (`EvolverInput`) and context (`EvolverContext`) and return the
graph's output (`EvolverOutput`). Approval interrupts are answered by `approve(payload) -> bool`;
with no callback a run that reaches an interrupt stops and returns `{"__interrupt__": [...]}` so
the caller can resume later with the same thread id.

A snapshot (what `harnessrl evolve` reads) is a folder with `events.json`
(`{"events": [FailureEvent...], "harness_version": n, "step": s}`) and `harness/` (a `HarnessStore`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.context import EvolverContext
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
    """Run (or resume, with `inp=None`) a thread of the evolver compiled with a `SqliteSaver` at `db_path`."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import Command

    from graphs.evolver import builder

    cfg = {"configurable": {"thread_id": thread_id}}
    with SqliteSaver.from_conn_string(str(db_path)) as saver:
        g = builder.compile(checkpointer=saver, name="evolver")
        payload: Any = inp
        while True:
            out = g.invoke(payload, cfg, context=ctx)
            interrupts = out.get("__interrupt__") or []
            if not interrupts or approve is None:
                return out
            # Several lanes may be waiting: answer each interrupt by id.
            payload = Command(resume={i.id: {"approve": approve(i.value)} for i in interrupts})


def run_on_server(url: str, inp: dict[str, Any], ctx: EvolverContext, approve: Approver | None = None,
                  thread_id: str | None = None, assistant_id: str = "evolver") -> tuple[str, dict[str, Any]]:
    """Run on a LangGraph server (`langgraph dev`), so the thread shows in Studio. Returns (thread id, output)."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url)
    thread_id = thread_id or client.threads.create()["thread_id"]
    out = client.runs.wait(thread_id, assistant_id, input=inp, context=ctx.to_dict())
    while approve is not None:
        state = client.threads.get_state(thread_id)
        interrupts = [i for t in state.get("tasks", []) for i in t.get("interrupts", [])]
        if not interrupts:
            break
        resume = {i["id"]: {"approve": approve(i["value"])} for i in interrupts}
        out = client.runs.wait(thread_id, assistant_id, command={"resume": resume}, context=ctx.to_dict())
    return thread_id, out
