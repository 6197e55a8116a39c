"""The pause: everything between "step N ended" and "harness vN+1 is live", on the trainer's side.

`HarnessCallback.on_step_end` (trainer/callback.py) calls `EvolverPause.evolve` every `harness.evolve_every` steps
(a multiple of `save_steps`, so the checkpoint written right after carries the new harness). One pause, in order
(docs/DESIGN.md, "One training step, from draw to commit"): grade earlier provisional updates (`review_run`), take
the round's events (trainer/round_events.py), publish the frozen policy (trainer/frozen.py), build the context
(`evolver_context`: the one place config knobs become graph context), run the round (`run_round`), re-read the
harness the graph committed and broadcast it to the other ranks (`EvolverPause.sync_state`; they wait there, so
`ddp_timeout` must exceed the pause), and record the round in rounds.jsonl (one
`graphs.round_record.RoundRecord`, its events condensed by `graphs.round_record.summarize`).

A round is all-or-nothing: if the evolver raises (judge or endpoint down, server unreachable) or outlasts
`harness.max_pause_s`, the error goes to rounds.jsonl, versions committed during the round are moved aside
(`HarnessStore.abandon_versions_after`), the events go back to the pending list, and training continues on the
unchanged harness. After `harness.max_failed_rounds` failed rounds in a row (0: never) the pause sets
`stop_reason`, the callback stops training once the step's checkpoint is written, and `trainer.grpo.train` raises
`EvolverStopped` with the cause and how to resume: a run whose evolver never ran is not a HarnessRL run.

The graph runs in process (default: `graphs.runner.run_in_process` on `run_dir/evolver.sqlite`, one thread per
round, the live objects handed over through `graphs.services.register_services` under a per-run key named in the
context) or on a LangGraph server (`harness.langgraph_url`: `graphs.runner.run_on_server`, a thread per round on
the assistant `harness.langgraph_assistant`). A server round sends only the run-specific context
(`graphs.runner.RUN_CONTEXT_KEYS`); models, limits and thresholds are the assistant's (an assistant made in Studio
wins over the config's `evolver:` section; its id goes to rounds.jsonl). The server builds its services from plain
values, so it must see the run folder, the frozen policy is an HTTP endpoint or a folder saved by
`trainer.frozen.save_frozen_policy`, and the memory a Chroma server (`harness.memory_url`) or off (README,
"Watching the evolver in LangGraph Studio").
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agents.context import EvolverContext
from graphs.round_record import Provisional, RoundRecord, summarize
from graphs.runner import run_in_process, run_on_server, split_context
from graphs.services import live_services, register_services, unregister_services
from harness.detector import DetectorConfig
from harness.types import FailureEvent, HarnessState
from tools.reward_parts import parts_to_json
from trainer import frozen, probe_budget, provisional
from trainer.config import RunConfig
from trainer.frozen import MemoEndpoint
from trainer.io import append_jsonl
from trainer.progress import round_lines
from trainer.round_events import RoundEvents, live_check, repair_values, stale_check, take_events

if TYPE_CHECKING:
    from accelerate import Accelerator
    from transformers import Trainer

    from tools.judge import Judge
    from trainer.harness_run import HarnessRun

log = logging.getLogger(__name__)

# (config, events, harness version, step, context, thread id) -> the graph's output: `run_round`, or a test's fake.
RoundRunner = Callable[[RunConfig, list[FailureEvent], int, int, EvolverContext, str], dict[str, Any]]


class EvolverStopped(RuntimeError):
    """Training was stopped because `harness.max_failed_rounds` evolver rounds in a row failed.

    The message says why and how to resume.
    """


class EvolverPause:
    """The pauses of one training run: `evolve(step)` runs one, on every rank; the counters span the run."""

    def __init__(
        self, run: HarnessRun, trainer: Trainer | None = None, *, run_graph: RoundRunner | None = None
    ) -> None:
        self.run = run
        self.cfg = run.cfg
        self.trainer = trainer  # set after the trainer is built (callbacks do not receive it)
        # Injection point for tests and alternative runners; default picks in-process or server.
        self._run_graph = run_graph
        self.pause_s_total = 0.0
        self._evolver_judge: Judge | None = None  # built at the first in-process round
        self.failed_in_a_row = 0  # evolver rounds that failed since the last one that ran (main process)
        self.stop_reason: str | None = None  # set when those reach harness.max_failed_rounds
        self._server_settings_named = False  # the first server round names what the server does not take

    # -- distributed helpers ------------------------------------------------------------------------------
    def accelerator(self) -> Accelerator | None:
        # The trainer's accelerator is third-party: a trainer without one (a test's stand-in) runs one process.
        return getattr(self.trainer, "accelerator", None) if self.trainer is not None else None

    def is_main(self) -> bool:
        acc = self.accelerator()
        return acc is None or acc.is_main_process

    def num_processes(self) -> int:
        acc = self.accelerator()
        return 1 if acc is None else acc.num_processes

    def broadcast(self, value: Any) -> Any:
        """The main process's `value` on every rank (a collective: every rank calls it); `value` itself alone."""
        if self.num_processes() == 1:
            return value
        from accelerate.utils import broadcast_object_list

        payload = [value]
        broadcast_object_list(payload, from_process=0)
        return payload[0]

    # -- the pause ------------------------------------------------------------------------------------
    def evolve(self, step: int, *, preflight: dict[str, Any] | None = None) -> float:
        """One pause after `step` (every rank calls it); returns its seconds.

        `preflight`: this is the pre-flight round (step 0), with its probes' summary, whose seconds count in the
        pause."""
        t0 = time.monotonic() - (preflight["probe_s"] if preflight else 0.0)
        run = self.run
        start = before = run.state.version
        # Grade the provisional updates first: a revert is committed before the round takes its events, so events
        # about a reverted task are stale (the revert answered them) and the round starts from the latest version.
        graded = self._review_provisional(step) if self.is_main() else None
        if graded is not None and graded.revert_versions:
            before = run.store.latest().version
        # Only the main process holds events (trainer.harness_run.HarnessRun.add_events) and reads the store here: the
        # others wait in `sync_state` and must not read files the round is writing.
        events, superseded, stale, live, values = (
            take_events(
                run,
                # The pre-flight repairs every task it found dead (its purpose); other events share max_events.
                max(self.cfg.harness.max_events, len(preflight["dead"])) if preflight else self.cfg.harness.max_events,
                is_stale=stale_check(run.store),
                is_live=live_check(run.memory, run.store, run.detector.config.eps, self.cfg.evolver.history_rollouts),
                values=lambda evs: repair_values(run, evs, step, self.num_processes()),
            )
            if self.is_main()
            else RoundEvents([], [], [], [])
        )
        self.push_weights_to_training_server()  # collective: every rank, before rank 0's round
        # The fields of the round's rounds.jsonl line (graphs.round_record.RoundRecord), built once below; a key only
        # some rounds carry is set only then. `event_ids`: the round's exact input (full events in events.jsonl), for
        # `harnessrl evolve RUN --step N`.
        info: dict[str, Any] = {
            "step": step,
            "version_before": before,
            "n_events": len(events),
            "event_ids": [e.id for e in events],
            "event_types": sorted({e.type for e in events}),
            # Why each event got its slot: the dead groups its repair could make informative (trainer.round_events).
            "event_values": {e.id: values[e.id].as_record() for e in events if e.id in values},
            "n_stale": len(stale),
            "n_superseded": len(superseded),
            "n_live": len(live),
            **({"live_dropped": [e.id for e in live]} if live else {}),
            "n_waiting": len(run.pending_events),
            **({"provisional": graded} if graded is not None else {}),
            **({"preflight": preflight} if preflight is not None else {}),
        }
        if self.is_main():
            budget = probe_budget.left(
                self.cfg, run.paths.rounds, self.num_processes(), pending=preflight["rollouts"] if preflight else 0
            )
            if budget is not None:
                info["probe_budget"] = budget
            if not events:
                info.update(
                    n_accepted=0,
                    skipped="no failure events to repair since the last round"
                    if live
                    else "no failure events since the last round",
                )
            else:
                if budget is not None:
                    log.info(
                        "round at step %d: %d probe rollouts left of %d (harness.max_extra_generation=%g)",
                        step,
                        budget,
                        probe_budget.allowed(self.cfg, self.num_processes()),
                        self.cfg.harness.max_extra_generation,
                    )
                info.update(self._run_round(step, events, before, budget))
        new_state = self.sync_state()
        pause = time.monotonic() - t0
        self.pause_s_total += pause
        info.update(version_after=new_state.version, pause_s=pause)
        record = RoundRecord(**info)
        if self.is_main():
            append_jsonl(run.paths.rounds, record.dump())
        run.rounds_done.append(
            {
                "step": record.step,
                "thread_id": record.thread_id,
                "version_before": record.version_before,
                "version_after": record.version_after,
            }
        )
        self.count_failure(step, record, new_state.version)
        if self.is_main():
            # One readable summary per round: what happened to each event, on which task, and why.
            for line in round_lines(step, record, start, new_state.version, pause, len(events)):
                log.info("%s", line)
        return pause

    def count_failure(self, step: int, record: RoundRecord, version: int) -> None:
        """Count failed rounds in a row; at `harness.max_failed_rounds` set `stop_reason` (on every rank)."""
        limit = self.cfg.harness.max_failed_rounds
        reason: str | None = None
        if self.is_main():
            if record.error:
                self.failed_in_a_row += 1
            elif not record.skipped:
                self.failed_in_a_row = 0
            if limit and self.failed_in_a_row >= limit:
                reason = (
                    f"{self.failed_in_a_row} evolver rounds in a row failed (harness.max_failed_rounds={limit}); "
                    f"the last, after step {step}: {record.error}. Training stopped after step {step} on "
                    f"harness v{version}, which the failed rounds left unchanged; the step's checkpoint keeps "
                    f"their events. Fix the cause (the LLM, judge or policy endpoint, or the LangGraph server: "
                    f"see rounds.jsonl), then continue the run with `harnessrl train --config <your config> "
                    f"--resume`; harness.max_failed_rounds=0 trains on without stopping."
                )
        reason = self.broadcast(reason)  # every rank stops together, or the others hang
        if reason is not None:
            self.stop_reason = reason
            if self.is_main():
                log.error("%s", reason)

    def _review_provisional(self, step: int) -> Provisional | None:
        """`review_run`, which must not stop training (None: grading is off).

        If it fails (memory or store unreachable), the error goes to rounds.jsonl and the console like a failed
        round's, training goes on, and the updates are graded at the next pause.
        """
        try:
            graded = review_run(self.run, step)
        except Exception as e:  # noqa: BLE001 - grading is not worth a training run; logged in full
            log.error("grading provisional updates at step %d failed (they stay provisional): %s", step, e)
            return Provisional(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(limit=8))
        return Provisional.model_validate(graded) if graded else None

    def _run_round(self, step: int, events: list[FailureEvent], before: int, budget: int | None) -> dict[str, Any]:
        """Publish the policy, build the context, run the round and summarise it; roll back a round that raises.

        `budget`: the probe rollouts the round may generate (`trainer.probe_budget.left`; None: no bound).

        Returns the round's fields of its rounds.jsonl line (`RoundRecord`)."""
        run = self.run
        thread_id = thread_id_for(self.cfg, step)
        key = f"harnessrl:{run.paths.root.resolve()}"
        on_server = self.cfg.harness.langgraph_url is not None
        try:
            t0 = time.monotonic()
            endpoint, spec = self.publish_policy(step)
            publish_s = time.monotonic() - t0
            # A server builds its services from the plain settings: a services key would point it at a
            # registry that exists only in this process.
            context = replace(
                evolver_context(self.cfg, services_key=None if on_server else key, policy_spec=spec),
                probe_budget=budget,
            )
            if not on_server:
                self._register_services(key, endpoint, context)
            runner = self._run_graph or run_round
            out = runner(self.cfg, events, before, step, context, thread_id)
            stats = endpoint.stats() if isinstance(endpoint, MemoEndpoint) else {}
            if on_server and not self._server_settings_named:
                self._server_settings_named = True
                for note in out.get("server_settings") or []:
                    log.warning("LangGraph server round: %s", note)
            return {
                "thread_id": out.get("thread_id", thread_id),
                "policy": spec,
                "publish_s": round(publish_s, 2),
                **stats,
                **summarize(out),
            }
        except Exception as e:  # noqa: BLE001 - a failed round must not kill training; it is logged in full
            log.error("evolver round at step %d failed; harness left at v%d: %s", step, before, e)
            aside = run.paths.abandoned / f"failed-round-step{step}-{time.time_ns() % 10**6:06d}"
            moved = run.store.abandon_versions_after(before, aside)
            run.put_back_events(events)
            return {
                "thread_id": thread_id,
                "n_accepted": 0,
                "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=8),
                "rolled_back_versions": moved,
            }
        finally:
            # The frozen policy and its memo belong to this round only.
            unregister_services(key)

    def sync_state(self) -> HarnessState:
        """The harness after the round, the same on every rank.

        Rank 0 reads the store (the graph committed there) and broadcasts the new version with the tasks its
        updates changed; every rank forgets those tasks' detector windows, so that old visits do not re-trigger
        events about a harness that is gone (the detectors stay identical: every rank observes every group,
        trainer.reward).
        """
        run = self.run
        before = run.state.version  # the round commits to the store only; run.state is still the old version
        state: HarnessState | None = None
        changed: list[str] = []
        if self.is_main():
            state = run.store.latest()
            changed = sorted(
                {
                    tid
                    for rec in run.store.history()
                    if rec.version > before and rec.update is not None
                    for tid in rec.update.task_ids
                }
            )
        if self.num_processes() > 1:
            # The other ranks wait here for the whole round: train.ddp_timeout bounds the pause.
            payload = self.broadcast((state.model_dump_json(), changed) if state is not None else None)
            state, changed = HarnessState.model_validate_json(payload[0]), payload[1]
        if state is None:
            raise RuntimeError(
                "EvolverPause.sync_state: no harness state (neither read on the main process nor received by broadcast)"
            )
        run.set_state(state)
        for tid in changed:
            run.detector.reset_task(tid)
            run.liveness.reset(tid)
        return run.state

    def _register_services(self, key: str, endpoint: MemoEndpoint | None, context: EvolverContext) -> None:
        """Hand the live objects to an in-process round.

        The sampling numbers come from `context`, so the agents' tools sample exactly as the critic measures.
        """
        run, h = self.run, self.cfg.harness
        if self._evolver_judge is None:
            # Own judge for the evolver: its stats must not leak into the training-reward metrics.
            self._evolver_judge = run.new_judge()
        register_services(
            key,
            live_services(
                context,
                store=run.store,
                memory=run.memory if self.cfg.evolver.memory else None,
                endpoint=endpoint,
                judge=self._evolver_judge,
                detector_config=DetectorConfig(**h.detector),
            ),
        )

    # -- the frozen policy (trainer/frozen.py) ------------------------------------------------------------
    def push_weights_to_training_server(self) -> bool:
        """`trainer.frozen.push_weights_to_training_server` with the run's trainer (collective: every rank)."""
        return frozen.push_weights_to_training_server(self.cfg, self.trainer)

    def publish_policy(self, step: int) -> tuple[MemoEndpoint | None, str]:
        """`trainer.frozen.publish_policy` with the run's trainer, on rank 0."""
        return frozen.publish_policy(self.cfg, self.trainer, step)


def review_run(run: HarnessRun, step: int) -> dict[str, Any]:
    """`trainer.provisional.review` on a run at the pause after `step`, with the run's own thresholds.

    {} when grading is off (`harness.confirm_window=0`, or no memory to read groups from).
    """
    h = run.cfg.harness
    if h.confirm_window <= 0 or run.memory is None:
        return {}
    return provisional.review(
        run.store,
        run.memory,
        step,
        window=h.confirm_window,
        ctx=evolver_context(run.cfg, services_key=None),
        detector=run.detector.config,
    )


def evolver_context(cfg: RunConfig, *, services_key: str | None, policy_spec: str = "") -> EvolverContext:
    """The round's `EvolverContext`: the config's `evolver:` section plus what the trainer fills per round.

    The one place config knobs become graph context; the filled fields are `trainer.config.SET_BY_TRAINER`."""
    memory_location = "none"
    if cfg.harness.memory_url:
        memory_location = cfg.harness.memory_url
    elif cfg.evolver.memory:
        memory_location = str(cfg.run_path / "memory")
    # run_dir absolute: a LangGraph server resolves paths against its own working directory.
    return replace(
        cfg.evolver,
        run_dir=str(cfg.run_path.resolve()),
        memory_location=memory_location,
        policy=policy_spec,
        services_key=services_key,
        max_tokens=cfg.train.max_completion_length,
        temperature=cfg.train.temperature,
        seed=cfg.train.seed,
        reward_parts=parts_to_json(cfg.train.rewards),
    )


def thread_id_for(cfg: RunConfig, step: int) -> str:
    # Unique per attempt: a resumed run that repeats the round at `step` must not continue the old thread.
    return f"{cfg.run_path.name}-step{step:06d}-{time.time_ns() % 10**12:012d}"


def run_round(
    cfg: RunConfig, events: list[FailureEvent], harness_version: int, step: int, context: EvolverContext, thread_id: str
) -> dict[str, Any]:
    """Run one round through `graphs.runner`: on `harness.langgraph_url` if set, else in process.

    Returns the graph's output plus `thread_id` (a server names its own thread) and, on a server,
    `assistant_id` (whose context chose the models and limits)."""
    inp = {"events": [e.model_dump(mode="json") for e in events], "harness_version": harness_version, "step": step}
    h = cfg.harness
    if h.langgraph_url is None:
        # The pause budget bounds the round; one that overruns it is cancelled and the pause rolls it back.
        out = run_in_process(inp, context, cfg.run_path / "evolver.sqlite", thread_id, timeout_s=float(h.max_pause_s))
        return {**out, "thread_id": thread_id}
    # The pause budget bounds the wait; if we give up, the server cancels the run (see graphs.runner). With
    # require_approval an interrupt waits for a person until the same budget is spent, then is answered "no".
    run = run_on_server(
        h.langgraph_url,
        inp,
        context,
        assistant=h.langgraph_assistant,
        assistant_name=f"harnessrl train {cfg.run_path.name}",
        timeout_s=float(h.max_pause_s + 60),
        metadata={"run_dir": str(cfg.run_path), "step": step, "round": thread_id},
        person_deadline_s=float(h.max_pause_s) if context.require_approval else None,
    )
    log.info(
        "evolver round at step %d: thread %s on %s, assistant %s",
        step,
        run.thread_id,
        h.langgraph_url,
        run.assistant_id,
    )
    for a in run.approvals:
        if a["answer"] == "unanswered":
            log.warning(
                "evolver round at step %d: the approval of event %s was not answered within "
                "harness.max_pause_s=%ds (thread %s): rejected, not committed",
                step,
                a["event_id"],
                h.max_pause_s,
                run.thread_id,
            )
    return {
        **run.output,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "server_settings": server_setting_notes(cfg, context, run.assistant_context),
        **({"approvals": run.approvals} if context.require_approval else {}),
    }


def server_setting_notes(cfg: RunConfig, context: EvolverContext, assistant_context: dict[str, Any]) -> list[str]:
    """What a LangGraph server round does not take from the config, one sentence each.

    Settings it never receives (`harness.detector`) and context values its assistant replaces (a key the
    assistant lacks takes `EvolverContext`'s default there).
    """
    notes = []
    if cfg.harness.detector:
        notes.append(
            f"harness.detector {cfg.harness.detector} is not sent to the LangGraph server: its rounds "
            f"measure with the detector defaults"
        )
    _, mine = split_context(context)
    used = {**EvolverContext().to_dict(), **assistant_context}
    for key in sorted(mine):
        if key in used and used[key] != mine[key]:
            notes.append(f"{key}: the server's assistant uses {used[key]!r}, not the config's {mine[key]!r}")
    return notes
