"""`HarnessCallback`: pause training at checkpoints, let the evolver repair the harness, resume.

TRL/transformers callbacks have no "pause" flag; blocking inside `on_step_end` *is* the pause
(verified: training resumes normally afterwards). Every `evolve_every` steps (a multiple of
`save_steps`, so the checkpoint written right after the round carries the new harness):

1. publish the frozen policy: by default a `LocalEndpoint` over the live model (the endpoint samples
   under `no_grad` in eval mode and restores train mode), memoising repeated seeded requests within
   the round (`trainer/frozen.py`); when the evolver runs on a LangGraph server (a separate process that
   cannot see the live model), the policy is saved atomically to `run_dir/frozen/step-N-<id>/` (a LoRA
   adapter plus the tokenizer, or the full model when training all weights; the last two are kept) and
   the server loads `local:<that folder>` once per round; with an HTTP endpoint that is TRL's vLLM
   server, every rank first pushes the weights there (`push_weights_to_training_server`); with another
   HTTP endpoint and LoRA, the step's adapter is saved to `run_dir/adapters/step-N-<id>/` and hot-loaded
   into that vLLM server under that name (the config refuses an HTTP policy that neither keeps in sync);
   before that, on the main process, grade the provisional updates of earlier rounds on their tasks' training
   groups and commit a revert for each that failed (`trainer/provisional.py`);
2. run the evolver (`trainer/evolver_round.py` -> `graphs/runner.py`: in process with a SQLite
   checkpointer, or on a LangGraph server);
3. re-read the latest harness version (the graph commits accepted updates to the store itself);
   on several processes rank 0 does 1-3 (the weight push in 1 excepted: every rank takes part) and
   broadcasts the version and the tasks it changed (`accelerate.utils.broadcast_object_list`), while the
   other ranks wait in that broadcast; `ddp_timeout` must exceed the pause (config checks it);
4. record the round and its pause time. The sampler and reward read `run.state`, so the next sampled
   prompts, hints and rewards follow the new version.

A round is all-or-nothing: if the evolver raises (judge or endpoint down, server unreachable), the
error is logged to rounds.jsonl, any version committed during the failed round is moved aside, the
events go back to the pending list, and training continues on the unchanged harness. A round that outlasts
`harness.max_pause_s` fails the same way (in process `graphs.runner.run_in_process` cancels it; on a server the
run is cancelled when the wait gives up). After `harness.max_failed_rounds` failed rounds in a row (0: never) the
callback stops training once the step's checkpoint is written, and `trainer.grpo.train` raises `EvolverStopped`
with the cause and how to resume (`harnessrl train` exits non-zero): a run whose evolver never ran is not a
HarnessRL run.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from agents.context import EvolverContext
from graphs.services import live_services, register_services, unregister_services
from harness.detector import DetectorConfig
from harness.types import HarnessState
from trainer import evolver_round, provisional
from trainer.checkpoint import abandon_versions_after, write_checkpoint_state
from trainer.frozen import MemoEndpoint
from trainer.io import append_jsonl
from trainer.progress import round_lines
from trainer.harness_run import make_judge

log = logging.getLogger(__name__)


class EvolverStopped(RuntimeError):
    """Training was stopped because `harness.max_failed_rounds` evolver rounds in a row failed; the message says
    why and how to resume."""


class HarnessCallback(TrainerCallback):
    def __init__(self, run: Any, trainer: Any = None, *, run_graph: Any = None) -> None:
        self.run = run
        self.cfg = run.cfg
        self.trainer = trainer  # set after the trainer is built (callbacks do not receive it)
        # Injection point for tests and alternative runners; default picks in-process or server.
        self._run_graph = run_graph
        self.pause_s_total = 0.0
        self._evolver_judge: Any = None  # built at the first in-process round
        self.failed_in_a_row = 0  # evolver rounds that failed since the last one that ran (main process)
        self.stop_reason: str | None = None  # set when those reach harness.max_failed_rounds
        self._server_settings_named = False  # the first server round names what the server does not take

    # -- distributed helpers ------------------------------------------------------------------------------
    def _accelerator(self) -> Any:
        return getattr(self.trainer, "accelerator", None) if self.trainer is not None else None

    def _is_main(self) -> bool:
        acc = self._accelerator()
        return acc is None or acc.is_main_process

    def _num_processes(self) -> int:
        acc = self._accelerator()
        return 1 if acc is None else acc.num_processes

    # -- events ---------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        if self.run.sampler is not None:
            self.run.sampler.step = state.global_step
        return control

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if self.run.sampler is not None:
            self.run.sampler.step = step
        record = self.run.pop_step(step)
        pause = 0.0
        h = self.cfg.harness
        if h.evolver and step % h.evolve_every == 0 and step < state.max_steps:
            pause = self.evolve(step)
            if self.stop_reason is not None:
                # The checkpoint of this step (evolve_every is a multiple of save_steps) is still written.
                control.should_training_stop = True
        record.update({"step": step, "pause_s": pause, "harness_version_after": self.run.state.version,
                       "time": time.time(),
                       "harness_overhead_s": record.get("sampler_s", 0.0) + record.get("reward_overhead_s", 0.0)})
        self.run.last_record = record
        if self._is_main():
            append_jsonl(self.run.paths.metrics, record)
        return control

    def on_save(self, args, state, control, **kwargs):
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if self._num_processes() > 1:
            # The state file marks the checkpoint complete: every rank's part (its rng_state_N.pth) must be
            # written before it, or a kill in between leaves a "complete" checkpoint that cannot resume.
            self._accelerator().wait_for_everyone()
        if self._is_main() and ckpt.is_dir():
            write_checkpoint_state(ckpt, self.run, state.global_step)
        return control

    # -- the pause ------------------------------------------------------------------------------------
    def evolve(self, step: int) -> float:
        t0 = time.monotonic()
        run = self.run
        start = before = run.state.version
        # Grade the provisional updates first (trainer/provisional.py): a revert is committed before the round takes
        # its events, so events about a reverted task are stale (the revert answered them) and the round starts
        # from the latest version.
        graded = self._review_provisional(step) if self._is_main() else {}
        if graded.get("revert_versions"):
            before = run.store.latest().version
        # Only the main process holds events (trainer.harness_run.HarnessRun.add_events) and reads the store here: the
        # others wait in `_sync_state` and must not read files the round is writing.
        events, superseded, stale = (run.take_events(self.cfg.harness.max_events, is_stale=self._stale_check())
                                     if self._is_main() else ([], [], []))
        self.push_weights_to_training_server()  # collective: every rank, before rank 0's round
        # `event_ids`: the round's exact input (full events in events.jsonl), for `harnessrl evolve RUN --step N`.
        info: dict[str, Any] = {"step": step, "version_before": before, "n_events": len(events),
                                "event_ids": [e.id for e in events],
                                "event_types": sorted({e.type for e in events}), "n_stale": len(stale),
                                "n_superseded": len(superseded), "n_waiting": len(run.pending_events),
                                **({"provisional": graded} if graded else {})}
        if self._is_main():
            if not events:
                info.update(n_accepted=0, skipped="no failure events since the last round")
            else:
                info.update(self._run_round(step, events, before))
        new_state = self._sync_state()
        pause = time.monotonic() - t0
        self.pause_s_total += pause
        info.update(version_after=new_state.version, pause_s=pause)
        if self._is_main():
            append_jsonl(run.paths.rounds, {k: v for k, v in info.items() if k != "reports"} |
                         {"reports": info.get("reports", [])})
        run.rounds_done.append({k: info.get(k) for k in ("step", "thread_id", "version_before", "version_after")})
        self._count_failure(step, info, new_state.version)
        if self._is_main():
            # One readable summary per round: what happened to each event, on which task, and why.
            for line in round_lines(step, info, start, new_state.version, pause, len(events)):
                log.info("%s", line)
        return pause

    def _count_failure(self, step: int, info: dict[str, Any], version: int) -> None:
        """Count failed rounds in a row; at `harness.max_failed_rounds` set `stop_reason` (on every rank)."""
        limit = self.cfg.harness.max_failed_rounds
        reason: str | None = None
        if self._is_main():
            if info.get("error"):
                self.failed_in_a_row += 1
            elif not info.get("skipped"):
                self.failed_in_a_row = 0
            if limit and self.failed_in_a_row >= limit:
                reason = (f"{self.failed_in_a_row} evolver rounds in a row failed (harness.max_failed_rounds={limit}); "
                          f"the last, after step {step}: {info['error']}. Training stopped after step {step} on "
                          f"harness v{version}, which the failed rounds left unchanged; the step's checkpoint keeps "
                          f"their events. Fix the cause (the LLM, judge or policy endpoint, or the LangGraph server: "
                          f"see rounds.jsonl), then continue the run with `harnessrl train --config <your config> "
                          f"--resume`; harness.max_failed_rounds=0 trains on without stopping.")
        if self._num_processes() > 1:
            from accelerate.utils import broadcast_object_list

            payload = [reason]
            broadcast_object_list(payload, from_process=0)  # every rank stops together, or the others hang
            reason = payload[0]
        if reason is not None:
            self.stop_reason = reason
            if self._is_main():
                log.error("%s", reason)

    def _review_provisional(self, step: int) -> dict[str, Any]:
        """`trainer.provisional.review_run`; if it fails (memory or store unreachable), the error goes to rounds.jsonl
        and the console like a failed round's, training goes on, and the updates are graded at the next pause."""
        try:
            return provisional.review_run(self.run, step)
        except Exception as e:  # noqa: BLE001 - grading is not worth a training run; logged in full
            log.error("grading provisional updates at step %d failed (they stay provisional): %s", step, e)
            return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=8)}

    def _stale_check(self) -> Any:
        """A predicate for events about a harness that is gone: rows sampled before an update (the dataloader
        prefetches one batch) still report the old failure of a task the update already changed."""
        touched: dict[str, int] = {}  # task -> newest version whose update touched it
        for rec in self.run.store.history():
            if rec.update is not None:
                for tid in rec.update.task_ids:
                    touched[tid] = max(touched.get(tid, 0), rec.version)

        def is_stale(e: Any) -> bool:
            v = e.stats.get("harness_version")
            return v is not None and touched.get(e.task_id, -1) > int(v)

        return is_stale

    def _run_round(self, step: int, events: list, before: int) -> dict[str, Any]:
        run = self.run
        thread_id = evolver_round.thread_id_for(self.cfg, step)
        key = f"harnessrl:{run.paths.root.resolve()}"
        on_server = self.cfg.harness.langgraph_url is not None
        try:
            t0 = time.monotonic()
            endpoint, spec = self.publish_policy(step)
            publish_s = time.monotonic() - t0
            # A server builds its services from the plain settings: a services key would point it at a
            # registry that exists only in this process.
            context = evolver_round.evolver_context(self.cfg, services_key=None if on_server else key,
                                                    policy_spec=spec)
            if not on_server:
                self._register_services(key, endpoint, context)
            runner = self._run_graph or evolver_round.run_round
            out = runner(self.cfg, events, before, step, context, thread_id)
            stats = endpoint.stats() if isinstance(endpoint, MemoEndpoint) else {}
            if on_server and not self._server_settings_named:
                self._server_settings_named = True
                for note in out.get("server_settings") or []:
                    log.warning("LangGraph server round: %s", note)
            return {"thread_id": out.get("thread_id", thread_id), "policy": spec, "publish_s": round(publish_s, 2), **stats,
                    **evolver_round.summarize(out)}
        except Exception as e:  # noqa: BLE001 - a failed round must not kill training; it is logged in full
            log.error("evolver round at step %d failed; harness left at v%d: %s", step, before, e)
            aside = run.paths.abandoned / f"failed-round-step{step}-{time.time_ns() % 10**6:06d}"
            moved = abandon_versions_after(run.store, before, aside)
            run.put_back_events(events)
            return {"thread_id": thread_id, "n_accepted": 0, "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc(limit=8), "rolled_back_versions": moved}
        finally:
            # The frozen policy and its memo belong to this round only.
            unregister_services(key)

    def _sync_state(self) -> Any:
        """The harness after the round, the same on every rank: rank 0 reads the store (the graph committed
        there) and broadcasts the new version with the tasks its updates changed; every rank forgets those
        tasks' detector windows, so that old visits do not re-trigger events about a harness that is gone (the
        detectors stay identical: every rank observes every group, trainer.reward)."""
        run = self.run
        before = run.state.version  # the round commits to the store only; run.state is still the old version
        state: HarnessState | None = None
        changed: list[str] = []
        if self._is_main():
            state = run.store.latest()
            changed = sorted({tid for rec in run.store.history() if rec.version > before and rec.update is not None
                              for tid in rec.update.task_ids})
        if self._num_processes() > 1:
            from accelerate.utils import broadcast_object_list

            payload = [(state.model_dump_json(), changed) if state is not None else None]
            # The other ranks wait here for the whole round: train.ddp_timeout bounds the pause.
            broadcast_object_list(payload, from_process=0)
            state, changed = HarnessState.model_validate_json(payload[0][0]), payload[0][1]
        if state is None:
            raise RuntimeError("HarnessCallback._sync_state: no harness state (neither read on the main process nor "
                               "received by broadcast)")
        run.set_state(state)
        for tid in changed:
            run.detector.reset_task(tid)
        return run.state

    def _register_services(self, key: str, endpoint: Any, context: EvolverContext) -> None:
        """Hand the live objects to an in-process round; the sampling numbers come from `context`, so the
        agents' tools sample exactly as the critic measures."""
        run, h = self.run, self.cfg.harness
        if self._evolver_judge is None:
            # Own judge for the evolver: its stats must not leak into the training-reward metrics.
            self._evolver_judge = make_judge(self.cfg.evolver.judge_model, *evolver_round.judge_endpoint(self.cfg))
        register_services(key, live_services(
            context, store=run.store, memory=run.memory if self.cfg.evolver.memory else None, endpoint=endpoint,
            judge=self._evolver_judge, detector_config=DetectorConfig(**h.detector)))

    # -- frozen policy ----------------------------------------------------------------------------------
    def push_weights_to_training_server(self) -> bool:
        """Collective, on EVERY rank: push the trained weights into TRL's vLLM server when the critic samples it.

        TRL pushes lazily, before the next generation, so at a pause its server still holds the weights of the
        step's start. Public TRL surface only: `trainer.vllm_generation.sync_weights()` is one call for LoRA
        (merged, pushed, unmerged) and full weights, and it gathers parameters with collectives under
        ZeRO-3/FSDP, so every rank must call it (rank 0 alone deadlocks). TRL's record of the last pushed step
        is private and is not written: TRL pushes the same weights again before the next step's generation
        (one redundant push per round). Not run in CI (no GPU vLLM); LoRA hot-loading is (test_http_frozen_policy)."""
        if self.cfg.frozen_policy_source != "training_server":
            return False
        if self.trainer is None:
            raise RuntimeError("the training-server frozen policy needs the trainer (HarnessCallback.trainer is None)")
        self.trainer.vllm_generation.sync_weights()
        return True

    def publish_policy(self, step: int) -> tuple[Any, str]:
        """(endpoint object for in-process use, endpoint spec string for a LangGraph server), on rank 0.

        With `harness.langgraph_url` and the local policy there is no in-process endpoint (None): the policy
        is saved to disk and the spec names that folder. How an HTTP policy follows the trained weights is
        `RunConfig.frozen_policy_source` (the config refuses one that would not)."""
        h = self.cfg.harness
        trainer = self.trainer
        source = self.cfg.frozen_policy_source
        if source == "local":
            if trainer is None:
                raise RuntimeError("local frozen policy needs the trainer (HarnessCallback.trainer is None)")
            from measure.local_endpoint import LocalEndpoint

            model = trainer.accelerator.unwrap_model(trainer.model)
            if h.langgraph_url is not None:
                folder = save_frozen_policy(model, trainer.processing_class, self.run.paths.root / "frozen", step)
                return None, f"local:{folder}"
            return MemoEndpoint(LocalEndpoint(model, trainer.processing_class, name=f"local:step-{step}")), "local"
        from measure.openai_endpoint import OpenAIEndpoint

        base = h.policy_endpoint
        name = h.policy_model or self.cfg.model.name
        endpoint = OpenAIEndpoint(base_url=base, model=name)
        # "training_server": `push_weights_to_training_server` ran on every rank before this round.
        if source == "lora_adapter":
            if trainer is None:
                raise RuntimeError("hot-loading the step's LoRA adapter needs the trainer (HarnessCallback.trainer is None)")
            # Hot-load exactly this step's adapter under a new name and folder per publish: vLLM caches by
            # path, and a resumed run that repeats step N must not collide with the adapter loaded the first time.
            name = f"step-{step}-{time.time_ns() % 10**6:06d}"
            adapter_dir = self.run.paths.root / "adapters" / name
            trainer.accelerator.unwrap_model(trainer.model).save_pretrained(str(adapter_dir))
            endpoint.load_lora_adapter(name, adapter_dir)
            endpoint = endpoint.with_model(name)
        return MemoEndpoint(endpoint), f"openai:{base}#{name}"


# -- the frozen policy on disk (for a LangGraph server process) ---------------------------------------------
KEEP_FROZEN = 2


def save_frozen_policy(model: Any, tokenizer: Any, root: Path, step: int, keep: int = KEEP_FROZEN) -> Path:
    """Save the paused policy to a new folder under `root` atomically and return its absolute path.

    A PEFT model saves only its adapter (a few MB for SmolLM2-135M at r=16, written in milliseconds, no copy
    of the live model) and the server merges it into its base once at load; merging here instead would mean
    copying the model (merge is in place) and writing ~0.5 GB per round. A plain model (the tiny preset)
    saves its weights. The tokenizer goes along so the server samples with the trainer's pad token and
    chat template. The folder name is unique per save (`step-N-<id>`): a server caches models by folder, and
    a resumed run that repeats step N must not be answered by the model cached for the first attempt.
    The newest `keep` folders stay (the last rounds' policies, for inspection); older ones are deleted.
    """
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}-{time.time_ns() % 10**9:09d}"
    tmp = root / f".{final.name}.tmp"
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        adapter_cfg = tmp / "adapter_config.json"
        if adapter_cfg.is_file():
            # The server may run in another working directory: record the base model as an absolute folder.
            data = json.loads(adapter_cfg.read_text())
            base = data.get("base_model_name_or_path")
            if base and Path(base).is_dir():
                data["base_model_name_or_path"] = str(Path(base).resolve())
                adapter_cfg.write_text(json.dumps(data, indent=2))
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    saved = sorted((p for p in root.glob("step-*") if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)
    for old in saved[:-max(1, keep)]:  # never the folder just saved: the round is about to load it
        shutil.rmtree(old)
    for stale in root.glob(".step-*.tmp"):  # a save killed before its rename
        shutil.rmtree(stale)
    return final
