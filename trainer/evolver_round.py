"""One evolver round during a training pause: build the context, run the graph, report what changed.

Two ways to run the graph (`harness.langgraph_url`):

- in process (default): `graphs.evolver.builder` compiled with a `SqliteSaver` on `run_dir/evolver.sqlite`,
  one thread per round (`thread_id` recorded in rounds.jsonl and the checkpoint), live objects (the
  trainer's own model as a `LocalEndpoint`, the run's store, memory and judge) handed over through
  `tools.services.register_services` under a per-run key named in the context;
- on a LangGraph server (`langgraph dev` / Studio): `langgraph_sdk` creates a thread per round and waits
  for the run; the server builds its services from the plain context values (absolute run_dir, memory,
  policy spec), so the server must see the run folder (same machine or shared disk), the frozen policy is
  either an HTTP endpoint or `local:<run_dir/frozen/...>` saved by the callback, and the memory is a
  Chroma server (`harness.memory_url`; config validation enforces it) or off.

Either way the graph's commit node writes accepted updates to the run's `HarnessStore`; the caller
re-reads the latest version afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from harness.types import FailureEvent
from trainer.config import RunConfig

log = logging.getLogger(__name__)


def evolver_context(cfg: RunConfig, *, services_key: str | None, policy_spec: str = "") -> Any:
    """Config → `agents.context.EvolverContext` (ablation switches included)."""
    from agents.context import EvolverContext

    h = cfg.harness
    memory = "none"
    if h.memory_url:
        memory = h.memory_url
    elif cfg.harness.memory:
        memory = str(cfg.run_path / "memory")
    return EvolverContext(
        attributor_model=h.attributor_model, proposer_model=h.proposer_model, critic_model=h.critic_model,
        # Absolute: a LangGraph server resolves paths against its own working directory.
        base_url=h.llm_base_url, run_dir=str(cfg.run_path.resolve()), memory=memory, memory_embedding=h.memory_embedding,
        policy=policy_spec, judge_model=h.judge_model or "rules", services_key=services_key,
        samples_per_candidate=h.sample_k, max_tokens=cfg.train.max_completion_length,
        temperature=cfg.train.temperature, seed=cfg.train.seed, max_revisions=h.max_revisions,
        use_memory=h.memory, use_critic=h.critic,
        sampling_enabled="sampling" in h.interfaces, guidance_enabled="guidance" in h.interfaces,
        criteria_enabled="criteria" in h.interfaces,
    )


def thread_id_for(cfg: RunConfig, step: int) -> str:
    # Unique per attempt: a resumed run that repeats the round at `step` must not continue the old thread.
    return f"{cfg.run_path.name}-step{step:06d}-{time.time_ns() % 10**12:012d}"


def run_in_process(cfg: RunConfig, events: list[FailureEvent], harness_version: int, step: int, context: Any,
                   thread_id: str) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from graphs.evolver import builder

    inputs = {"events": [e.model_dump(mode="json") for e in events], "harness_version": harness_version, "step": step}

    async def go() -> Any:
        # The graph has async nodes (the critic measures concurrently), so it runs under ainvoke with the
        # async SQLite saver; the callback thread has no running loop (TRL's loop lives in its own thread).
        async with AsyncSqliteSaver.from_conn_string(str(cfg.run_path / "evolver.sqlite")) as saver:
            graph = builder.compile(checkpointer=saver)
            return await graph.ainvoke(inputs, {"configurable": {"thread_id": thread_id}}, context=context)

    return dict(asyncio.run(go()))


def run_on_server(cfg: RunConfig, events: list[FailureEvent], harness_version: int, step: int, context: Any,
                  thread_id: str) -> dict[str, Any]:
    from langgraph_sdk import get_sync_client

    # The SDK's default read timeout (300 s) is shorter than a long CPU pause; the pause budget bounds the wait.
    client = get_sync_client(url=cfg.harness.langgraph_url, timeout=float(cfg.harness.max_pause_s + 60))
    thread = client.threads.create(metadata={"run_dir": str(cfg.run_path), "step": step, "round": thread_id})
    out = client.runs.wait(
        thread["thread_id"], cfg.harness.langgraph_assistant,
        input={"events": [e.model_dump(mode="json") for e in events], "harness_version": harness_version, "step": step},
        context=context.to_dict(), raise_error=True,
        # If we give up waiting (timeout), the trainer rolls the round back: the server must stop too,
        # or it could still commit to the harness after the rollback.
        on_disconnect="cancel",
    )
    if not isinstance(out, dict):
        raise RuntimeError(f"LangGraph server at {cfg.harness.langgraph_url} returned {type(out).__name__}, not a state")
    out["thread_id"] = thread["thread_id"]
    return out


def summarize(out: dict[str, Any]) -> dict[str, Any]:
    """Counts for rounds.jsonl from the graph's output (accepted updates + per-event reports)."""
    accepted = out.get("accepted") or []
    reports = out.get("reports") or []
    outcomes: dict[str, int] = {}
    slim = []
    for r in reports:
        key = str(r.get("decision", "unknown"))
        outcomes[key] = outcomes.get(key, 0) + 1
        # Keep the per-event essentials in rounds.jsonl; full attempts live in evolver.sqlite and memory.
        slim.append({k: r.get(k) for k in ("event_id", "task_id", "failure_type", "decision", "interface",
                                           "revisions", "committed_version", "note")} |
                    {"attempts": [{"template": a.get("template"), "numbers": (a.get("critique") or {}).get("numbers"),
                                   "reasons": (a.get("critique") or {}).get("reasons")}
                                  for a in r.get("attempts") or [] if isinstance(a, dict)]})
    by_event = {r.get("event_id"): r.get("interface") for r in reports}
    interfaces = [by_event.get(a.get("event_id")) for a in accepted]
    return {"n_accepted": len(accepted), "accepted_interfaces": interfaces, "outcomes": outcomes, "reports": slim}
