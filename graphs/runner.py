"""Running the evolver graph: in process with a SQLite checkpointer, or on a LangGraph server (Studio).

This is the one place that runs a round; the trainer's pause (`trainer/evolver_round.py`) and
`harnessrl evolve` both call it. Both paths take the same input (`EvolverInput`) and context
(`EvolverContext`) and return the graph's output (`EvolverOutput`).

- `run_in_process`: `graphs.evolver.builder` compiled with an `AsyncSqliteSaver` and run with `ainvoke`
  under `asyncio.run` (the caller, e.g. the trainer's callback thread, has no running loop). Every node
  is synchronous; under an event loop LangGraph runs sync nodes in worker threads, as a LangGraph server
  does, so a round executes the same way in process and on a server, and the parallel task lanes each
  get their own thread. `timeout_s` bounds the round: when it is spent the graph task is cancelled (no further
  node starts), the node already running in its worker thread finishes (a thread cannot be interrupted; the
  return waits for it, so nothing of the round runs afterwards) and `RoundTimeout` is raised: the caller rolls
  back what the round committed, as after a server run it gave up on.
- `run_on_server`: `langgraph_sdk` against a `langgraph dev` / LangGraph server. The server merges a run's
  `context` over its assistant's, so a run sends only the run-specific values (`RUN_CONTEXT_KEYS`) and the
  assistant chooses models, limits and thresholds: an assistant made in Studio wins. Given a graph id instead
  of an assistant, the caller's own context becomes an assistant first (`server_assistant`). `timeout_s`
  bounds the wait (the SDK's default read timeout, 300 s, is shorter than a long CPU pause),
  `on_disconnect="cancel"` stops the server's run when we stop waiting (a caller that gives up and rolls the
  harness back must not see the server commit afterwards), and a failed run raises.

Approval interrupts are answered by `approve(payload) -> bool`, each interrupt by its id (several lanes
may wait at once); with no callback a run that reaches an interrupt stops and returns
`{"__interrupt__": [...]}` so the caller can resume later with the same thread id. On a server,
`run_on_server(..., thread_id=T)` of a thread waiting at interrupts answers them without starting a new run (how
`harnessrl evolve --server URL --thread T --approve` answers a trainer's round), and `person_deadline_s` (the
trainer's `evolver.require_approval`) makes the caller wait, polling the thread, for a person to resume it (Studio
or that command) until the deadline; then every interrupt still waiting is resumed with a rejection (an unanswered
approval is never an accept), and a person's resume still running then is cancelled and `ApprovalTimeout` raised
(the caller rolls back). `ServerRun.approvals` says who answered each interrupt.

A snapshot (what `harnessrl evolve` reads) is a folder with `events.json`
(`{"events": [FailureEvent...], "harness_version": n, "step": s}`; an event may be a line copied from a run's
`events.jsonl`) and `harness/` (a `HarnessStore`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from agents.context import EvolverContext
from graphs.evolver import builder
from harness.store import HarnessStore
from harness.types import FailureEvent

Approver = Callable[[dict[str, Any]], bool]


class RoundTimeout(TimeoutError):
    """An in-process round outlasted its `timeout_s` and was cancelled."""


class ApprovalTimeout(TimeoutError):
    """A server round's approval deadline passed while a resumed run was still running; that run was cancelled."""


class LangGraphServerDown(ConnectionError):
    """The LangGraph server could not be reached, or stopped answering, during a round (it died or restarted)."""


# How long a round waits for a lock on its SQLite checkpoint db before failing (s).
SQLITE_BUSY_S = 60.0
# How often a round waiting for a person reads its thread (s).
APPROVAL_POLL_S = 1.0
UNANSWERED_NOTE = "unanswered within the pause budget: rejected"

# The context keys a server run sends itself; every other key comes from the run's assistant (the server merges
# the run's context over the assistant's, so a key sent here would override what was chosen in Studio). These are
# the ones no assistant can know in advance, because they name this run's live data:
# - run_dir: the run folder (harness store, frozen policies) of this training run or snapshot;
# - memory_location, memory_embedding: the memory this run writes to, and the embedder it was built with (another
#   embedder cannot query it: the store refuses a mismatch);
# - policy: this round's frozen policy (a per-step folder or adapter name);
# - services_key: live objects registered in this process (None on a server; sent so no assistant can point
#   a run at another run's objects);
# - require_approval: whether an interrupt waits for this caller's approver (an assistant cannot know whether
#   the caller has one; the trainer has none).
# Models, base URL, sampling (k, tokens, temperature, seed), thresholds, revisions and ablation switches are
# the assistant's: choosing another assistant in Studio changes them for trainer and `evolve --server` runs.
RUN_CONTEXT_KEYS = (
    "run_dir",
    "memory_location",
    "memory_embedding",
    "policy",
    "services_key",
    "require_approval",
    "probe_budget",
)
# Namespace of the assistant ids `server_assistant` derives (fixed: the same settings give the same id).
_ASSISTANT_NAMESPACE = uuid.UUID("e3512567-36a9-41d1-b4cd-23b16f61341b")


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
    events = []
    for i, ev in enumerate(data["events"]):
        try:  # an event copied from the run's events.jsonl keeps its logged harness version: accepted, dropped
            events.append(FailureEvent.from_log_line(ev).model_dump(mode="json"))
        except ValueError as err:
            raise ValueError(f"{path}: events[{i}]: {err}") from None
    return {"events": events, "harness_version": int(data["harness_version"]), "step": int(data["step"])}


def prepare_run_dir(snapshot: str | Path, run_dir: str | Path) -> HarnessStore:
    """Copy the snapshot's harness into `run_dir/harness` once; a later run (resume) reuses it."""
    store = HarnessStore(Path(run_dir) / "harness")
    if not store.versions():
        src = Path(snapshot) / "harness"
        if not HarnessStore(src).versions():
            raise FileNotFoundError(f"snapshot {snapshot}: no harness versions under {src}")
        shutil.copytree(src, store.root, dirs_exist_ok=True)
    return store


def run_in_process(
    inp: dict[str, Any] | None,
    ctx: EvolverContext,
    db_path: str | Path,
    thread_id: str,
    approve: Approver | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Run (or resume, with `inp=None`) thread `thread_id` of the evolver, checkpointed in SQLite at `db_path`.

    `timeout_s` (None: unbounded) cancels the round when spent and raises `RoundTimeout` (see the module doc)."""

    async def go() -> dict[str, Any]:
        cfg = {"configurable": {"thread_id": thread_id}}
        # SQLite's default busy wait is 5 s; under load a lock taken for longer (seen once in CI, in the round after
        # a failed one, cause not found) failed the round. A longer wait turns such a lock into a delay.
        async with aiosqlite.connect(str(db_path), timeout=SQLITE_BUSY_S) as conn:
            saver = AsyncSqliteSaver(conn)
            g = builder.compile(checkpointer=saver, name="evolver")
            payload: Any = inp
            while True:
                out = dict(await g.ainvoke(payload, cfg, context=ctx))
                interrupts = out.get("__interrupt__") or []
                if not interrupts or approve is None:
                    return out
                payload = Command(resume={i.id: {"approve": approve(i.value)} for i in interrupts})

    async def bounded() -> dict[str, Any]:
        if timeout_s is None:
            return await go()
        try:
            return await asyncio.wait_for(go(), timeout_s)
        except TimeoutError:
            raise RoundTimeout(
                f"evolver thread {thread_id} outlasted its budget of {timeout_s:.0f} s and was cancelled"
            ) from None

    # asyncio.run returns only once the default executor's threads (the sync nodes) have finished.
    return asyncio.run(bounded())


def thread_unfinished(db_path: str | Path, thread_id: str) -> bool:
    """The thread exists in the checkpoint db at `db_path` and has nodes left to run (a crash or an interrupt)."""
    if not Path(db_path).is_file():
        return False

    async def go() -> bool:
        async with AsyncSqliteSaver.from_conn_string(str(db_path)) as saver:
            snap = await builder.compile(checkpointer=saver).aget_state({"configurable": {"thread_id": thread_id}})
        return bool(snap.next)

    return asyncio.run(go())


@dataclass(frozen=True)
class ServerRun:
    """What `run_on_server` returns: the server's thread, the assistant the run used, the graph's output."""

    thread_id: str
    assistant_id: str
    output: dict[str, Any]
    assistant_context: dict[str, Any] = field(default_factory=dict)  # what the assistant chose (its context)
    # One entry per approval interrupt: event_id, interrupt_id, answer ("approved" | "rejected" | "unanswered",
    # the last resumed as a rejection at the deadline) and by ("approver", "person" or "deadline").
    approvals: list[dict[str, Any]] = field(default_factory=list)


def split_context(ctx: EvolverContext) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the run-specific values a server run sends, `RUN_CONTEXT_KEYS`; the rest, which an assistant holds)."""
    values = ctx.to_dict()
    return (
        {k: v for k, v in values.items() if k in RUN_CONTEXT_KEYS},
        {k: v for k, v in values.items() if k not in RUN_CONTEXT_KEYS},
    )


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def server_assistant(client: Any, assistant: str, ctx: EvolverContext, name: str) -> str:
    """The id of the assistant a run on `client`'s server uses, from `assistant`.

    `assistant` is one of:

    - a graph id of the server (`langgraph.json`, e.g. `evolver`): an assistant on that graph holding `ctx`'s
      values other than `RUN_CONTEXT_KEYS`, named `name`, created on first use. Its id derives from the graph,
      the name and those values, so the same settings reuse it and changed settings make another (Studio lists
      each, so a reader sees which settings a run had);
    - an assistant id (a UUID, as Studio shows it): that assistant, whose context chooses models and limits;
    - otherwise the name of exactly one assistant on the server.
    """
    systems = client.assistants.search(metadata={"created_by": "system"}, limit=100)
    graphs = sorted({a["graph_id"] for a in systems})
    if assistant in graphs:
        _, values = split_context(ctx)
        key = json.dumps({"graph_id": assistant, "name": name, "context": values}, sort_keys=True)
        assistant_id = str(uuid.uuid5(_ASSISTANT_NAMESPACE, key))
        client.assistants.create(
            graph_id=assistant,
            context=values,
            assistant_id=assistant_id,
            if_exists="do_nothing",
            name=name,
            metadata={"created_by": "harnessrl"},
        )
        return assistant_id
    if _is_uuid(assistant):
        return assistant
    named = [a["assistant_id"] for a in client.assistants.search(name=assistant, limit=100) if a["name"] == assistant]
    if len(named) != 1:
        raise ValueError(
            f"LangGraph server: {assistant!r} is neither a graph ({graphs}) nor an assistant id, and "
            f"{len(named)} assistants have that name {named}; pass a graph id, an assistant id or the "
            f"name of exactly one assistant"
        )
    return named[0]


def run_on_server(
    url: str,
    inp: dict[str, Any],
    ctx: EvolverContext,
    *,
    approve: Approver | None = None,
    thread_id: str | None = None,
    assistant: str = "evolver",
    assistant_name: str = "harnessrl",
    timeout_s: float | None = None,
    metadata: dict[str, Any] | None = None,
    person_deadline_s: float | None = None,
) -> ServerRun:
    """Run on a LangGraph server, so the thread shows in Studio.

    `assistant` is a graph id, an assistant id or an assistant name (`server_assistant`; a graph id makes an
    assistant named `assistant_name` from `ctx`). The run sends only `ctx`'s `RUN_CONTEXT_KEYS`: the assistant's
    context chooses everything else. A new thread (with `metadata`) unless `thread_id` names one (one waiting at
    interrupts is answered, not run again); `timeout_s` bounds each wait (None: the SDK's default).
    `person_deadline_s` (with no `approve`): wait that long from the call for a person to answer the interrupts,
    then reject those still waiting (see the module doc).

    A server that cannot be reached or drops the connection mid-round raises `LangGraphServerDown` naming it (the
    SDK's own error says neither which server nor what to do)."""
    import httpx

    try:
        return _run_on_server(
            url, inp, ctx, approve, thread_id, assistant, assistant_name, timeout_s, metadata, person_deadline_s
        )
    except httpx.TimeoutException:
        raise  # the round outlasted `timeout_s`: the server answered too slowly, it did not go away
    except httpx.TransportError as e:
        raise LangGraphServerDown(
            f"LangGraph server at {url} unreachable or stopped answering during the round ({type(e).__name__}: {e}); "
            f"the next round tries it again"
        ) from e


def _run_on_server(
    url: str,
    inp: dict[str, Any],
    ctx: EvolverContext,
    approve: Approver | None,
    thread_id: str | None,
    assistant: str,
    assistant_name: str,
    timeout_s: float | None,
    metadata: dict[str, Any] | None,
    person_deadline_s: float | None,
) -> ServerRun:
    from langgraph_sdk import get_sync_client

    started = time.monotonic()

    client = get_sync_client(url=url, timeout=timeout_s)
    assistant_id = server_assistant(client, assistant, ctx, assistant_name)
    run_values, _ = split_context(ctx)
    given = thread_id is not None
    thread_id = thread_id or client.threads.create(metadata=metadata)["thread_id"]

    def wait(**what: Any) -> dict[str, Any]:
        out = client.runs.wait(
            thread_id, assistant_id, context=run_values, raise_error=True, on_disconnect="cancel", **what
        )
        if not isinstance(out, dict):
            raise RuntimeError(f"LangGraph server at {url} returned {type(out).__name__}, not a state")
        return out

    def pending() -> list[dict[str, Any]]:
        state = client.threads.get_state(thread_id)
        return [i for t in state.get("tasks", []) for i in t.get("interrupts", [])]

    def values() -> dict[str, Any]:
        return dict(client.threads.get_state(thread_id).get("values") or {})

    approvals: list[dict[str, Any]] = []

    def note(interrupt: dict[str, Any], answer: str, by: str) -> None:
        event = (interrupt.get("value") or {}).get("event") or {}
        approvals.append({"event_id": event.get("id"), "interrupt_id": interrupt["id"], "answer": answer, "by": by})

    out = values() if given and pending() else wait(input=inp)
    while approve is not None:
        interrupts = pending()
        if not interrupts:
            break
        answers = {i["id"]: approve(i["value"]) for i in interrupts}
        for i in interrupts:
            note(i, "approved" if answers[i["id"]] else "rejected", "approver")
        out = wait(command={"resume": {k: {"approve": v} for k, v in answers.items()}})
    if approve is None and person_deadline_s is not None:
        out = _wait_for_person(client, thread_id, started + person_deadline_s, pending, values, wait, note, out)
    chosen = client.assistants.get(assistant_id).get("context") or {}
    return ServerRun(
        thread_id=thread_id, assistant_id=assistant_id, output=out, assistant_context=dict(chosen), approvals=approvals
    )


def _wait_for_person(
    client: Any,
    thread_id: str,
    deadline: float,
    pending: Callable[[], list[dict[str, Any]]],
    values: Callable[[], dict[str, Any]],
    wait: Callable[..., dict[str, Any]],
    note: Callable[[dict[str, Any], str, str], None],
    out: dict[str, Any],
) -> dict[str, Any]:
    """Poll thread `thread_id` until no interrupt waits and no run is running.

    At `deadline` resume the waiting interrupts with a rejection (then keep going: another lane may stop at one
    later, and is rejected too).
    """
    seen: dict[str, dict[str, Any]] = {}
    rejected: set[str] = set()
    while True:
        status = client.threads.get(thread_id)["status"]
        if status == "error":
            raise RuntimeError(f"LangGraph thread {thread_id}: a run resumed at its approval failed on the server")
        waiting = pending() if status != "busy" else []
        seen.update({i["id"]: i for i in waiting})
        if status != "busy" and not waiting:
            out = values()
            break
        if time.monotonic() >= deadline:
            if status == "busy":  # a person's resume is still running: stop it, the caller rolls back
                for r in client.runs.list(thread_id, status="running"):
                    client.runs.cancel(thread_id, r["run_id"], wait=True)
                raise ApprovalTimeout(
                    f"LangGraph thread {thread_id}: the approval deadline passed while a resumed "
                    f"run was still running; it was cancelled"
                )
            for i in waiting:
                rejected.add(i["id"])
                note(i, "unanswered", "deadline")
            out = wait(command={"resume": {i["id"]: {"approve": False, "note": UNANSWERED_NOTE} for i in waiting}})
            continue
        time.sleep(APPROVAL_POLL_S)
    # The interrupts a person answered: their event's decision says how.
    decisions = {r.get("event_id"): r.get("decision") for r in out.get("reports") or []}
    for iid, i in seen.items():
        if iid not in rejected:
            event_id = ((i.get("value") or {}).get("event") or {}).get("id")
            note(i, "rejected" if decisions.get(event_id) == "rejected_by_human" else "approved", "person")
    return out
