"""One evolver round during a training pause: the trainer's side of running the graph.

`evolver_context` turns the run config into the graph's `EvolverContext` (the only place that does),
`run_round` hands the round to `graphs.runner` and `summarize` condenses the output for rounds.jsonl.
Two ways to run the graph (`harness.langgraph_url`):

- in process (default): `graphs.runner.run_in_process` on `run_dir/evolver.sqlite`, one thread per round
  (`thread_id` recorded in rounds.jsonl and the checkpoint), live objects (the trainer's own model as a
  `LocalEndpoint`, the run's store, memory and judge) handed over through
  `graphs.services.register_services` under a per-run key named in the context;
- on a LangGraph server (`langgraph dev` / Studio): `graphs.runner.run_on_server` creates a thread per
  round and waits for the run on the assistant `harness.langgraph_assistant`. The run sends only the
  run-specific context (`graphs.runner.RUN_CONTEXT_KEYS`: run folder, memory, frozen policy); models,
  limits and thresholds are the assistant's. The default, the graph id `evolver`, makes an assistant from
  this config (named after the run); an assistant id or name made in Studio makes its context win over the
  config's `evolver:` section. The assistant id is recorded in rounds.jsonl. The server
  builds its services from the plain context values (absolute run_dir, memory location, policy spec), so
  the server must see the run folder (same machine or shared disk), the frozen policy is either an HTTP
  endpoint or `local:<run_dir/frozen/...>` saved by the callback, and the memory is a Chroma server
  (`harness.memory_url`; config validation enforces it) or off.

Either way the graph's commit node writes accepted updates to the run's `HarnessStore`; the caller
re-reads the latest version afterwards.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from agents.context import EvolverContext
from agents.chat_models import role_endpoint
from graphs.runner import run_in_process, run_on_server, split_context
from harness.types import FailureEvent
from trainer.config import RunConfig

log = logging.getLogger(__name__)


def evolver_context(cfg: RunConfig, *, services_key: str | None, policy_spec: str = "") -> EvolverContext:
    """The round's `EvolverContext`: the config's `evolver:` section plus what the trainer fills per round.

    The one place config knobs become graph context; the filled fields are `trainer.config.SET_BY_TRAINER`."""
    memory_location = "none"
    if cfg.harness.memory_url:
        memory_location = cfg.harness.memory_url
    elif cfg.evolver.memory:
        memory_location = str(cfg.run_path / "memory")
    # run_dir absolute: a LangGraph server resolves paths against its own working directory.
    return replace(cfg.evolver, run_dir=str(cfg.run_path.resolve()), memory_location=memory_location,
                   policy=policy_spec, services_key=services_key, max_tokens=cfg.train.max_completion_length,
                   temperature=cfg.train.temperature, seed=cfg.train.seed)


def judge_endpoint(cfg: RunConfig) -> tuple[str | None, str]:
    """(base URL, API-key variable) of the run's judge, resolved by `agents.chat_models.role_endpoint`.

    `evolver.judge_base_url` / `judge_api_key_env`, else the shared `evolver.base_url` / `api_key_env`."""
    return role_endpoint(cfg.evolver, "judge")


def thread_id_for(cfg: RunConfig, step: int) -> str:
    # Unique per attempt: a resumed run that repeats the round at `step` must not continue the old thread.
    return f"{cfg.run_path.name}-step{step:06d}-{time.time_ns() % 10**12:012d}"


def run_round(cfg: RunConfig, events: list[FailureEvent], harness_version: int, step: int, context: EvolverContext,
              thread_id: str) -> dict[str, Any]:
    """Run one round through `graphs.runner`: on `harness.langgraph_url` if set, else in process.

    Returns the graph's output plus `thread_id` (a server names its own thread) and, on a server,
    `assistant_id` (whose context chose the models and limits)."""
    inp = {"events": [e.model_dump(mode="json") for e in events], "harness_version": harness_version, "step": step}
    h = cfg.harness
    if h.langgraph_url is None:
        # The pause budget bounds the round; one that overruns it is cancelled and the callback rolls it back.
        out = run_in_process(inp, context, cfg.run_path / "evolver.sqlite", thread_id, timeout_s=float(h.max_pause_s))
        return {**out, "thread_id": thread_id}
    # The pause budget bounds the wait; if we give up, the server cancels the run (see graphs.runner). With
    # require_approval an interrupt waits for a person until the same budget is spent, then is answered "no".
    run = run_on_server(h.langgraph_url, inp, context, assistant=h.langgraph_assistant,
                        assistant_name=f"harnessrl train {cfg.run_path.name}", timeout_s=float(h.max_pause_s + 60),
                        metadata={"run_dir": str(cfg.run_path), "step": step, "round": thread_id},
                        person_deadline_s=float(h.max_pause_s) if context.require_approval else None)
    log.info("evolver round at step %d: thread %s on %s, assistant %s", step, run.thread_id, h.langgraph_url,
             run.assistant_id)
    for a in run.approvals:
        if a["answer"] == "unanswered":
            log.warning("evolver round at step %d: the approval of event %s was not answered within "
                        "harness.max_pause_s=%ds (thread %s): rejected, not committed", step, a["event_id"],
                        h.max_pause_s, run.thread_id)
    return {**run.output, "thread_id": run.thread_id, "assistant_id": run.assistant_id,
            "server_settings": server_setting_notes(cfg, context, run.assistant_context),
            **({"approvals": run.approvals} if context.require_approval else {})}


def server_setting_notes(cfg: RunConfig, context: EvolverContext, assistant_context: dict[str, Any]) -> list[str]:
    """What a LangGraph server round does not take from the config, one sentence each: settings it never receives
    (`harness.detector`) and context values its assistant replaces (a key the assistant lacks takes
    `EvolverContext`'s default there)."""
    notes = []
    if cfg.harness.detector:
        notes.append(f"harness.detector {cfg.harness.detector} is not sent to the LangGraph server: its rounds "
                     f"measure with the detector defaults")
    _, mine = split_context(context)
    used = {**EvolverContext().to_dict(), **assistant_context}
    for key in sorted(mine):
        if key in used and used[key] != mine[key]:
            notes.append(f"{key}: the server's assistant uses {used[key]!r}, not the config's {mine[key]!r}")
    return notes


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
                    {"generalised": _slim_generalised(r.get("generalised"))} | {"brains": brains(r)} |
                    {"attempts": [{"template": a.get("template"), "numbers": (a.get("critique") or {}).get("numbers"),
                                   "reasons": (a.get("critique") or {}).get("reasons"),
                                   "evidence_used": a.get("evidence_used") or [], "decision": a.get("decision")}
                                  for a in r.get("attempts") or [] if isinstance(a, dict)]})
    by_event = {r.get("event_id"): r.get("interface") for r in reports}
    interfaces = [by_event.get(a.get("event_id")) for a in accepted]
    # On a server the assistant chose models and limits: record which one (absent in process).
    where = {k: out[k] for k in ("assistant_id", "server_settings", "approvals") if k in out}
    return {"n_accepted": len(accepted), "accepted_interfaces": interfaces, "outcomes": outcomes, "reports": slim,
            **where}


def brains(report: dict[str, Any]) -> dict[str, Any]:
    """Which brain made each decision of one event's report: the attributor's, then per attempt the proposer's and
    the critic's; each "rules", "llm" or "llm_fallback" (the LLM could not answer validly, the rule brain did).
    `llm_errors`: why, for each fallback."""
    att = report.get("attribution") or {}
    attempts = [a for a in report.get("attempts") or [] if isinstance(a, dict)]
    errors = [n.removeprefix("LLM failed: ") for n in att.get("notes") or []
              if att.get("source") == "llm_fallback" and str(n).startswith("LLM failed: ")]
    errors += [a["llm_error"] for a in attempts if a.get("llm_error")]
    errors += [(a.get("critique") or {}).get("review", "") for a in attempts if a.get("critic_source") == "llm_fallback"]
    return {"attributor": att.get("source"), "proposer": [a.get("source") for a in attempts],
            "critic": [a.get("critic_source") for a in attempts], "llm_errors": errors}


def _slim_generalised(gen: dict[str, Any] | None) -> dict[str, Any] | None:
    """The batched repair of an accepted one, as rounds.jsonl keeps it: targets, skips, decision, numbers."""
    if not gen:
        return None
    return {**{k: gen.get(k) for k in ("decision", "targets", "skipped", "signature", "version", "note", "verdict")},
            "numbers": (gen.get("critique") or {}).get("numbers")}
