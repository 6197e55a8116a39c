"""`HarnessCallback`: the TRL hooks of a HarnessRL run; the pause itself is `trainer.evolver_round.EvolverPause`.

TRL/transformers callbacks have no "pause" flag; blocking inside a hook *is* the pause. With `harness.preflight`,
`on_train_begin` of a run at step 0 runs the pre-flight round (`trainer.preflight.run_preflight`). Every
`harness.evolve_every` steps `on_step_end` runs `EvolverPause.evolve` and stops training when the pause says so
(`stop_reason`); every step it writes the step's metrics line (with the memory server's outage, when there is one:
records queued and flushed; at a pause step, the judge's drift probe, `trainer.judge_drift.JudgeDrift`). `on_save`
adds the harness state to each TRL checkpoint (`trainer.checkpoint.write_checkpoint_state`), then prunes the
complete checkpoints beyond `train.save_total_limit` (`trainer.disk.prune_checkpoints`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from trainer.checkpoint import write_checkpoint_state
from trainer.disk import prune_checkpoints
from trainer.evolver_round import EvolverPause, RoundRunner
from trainer.io import append_jsonl
from trainer.judge_drift import JudgeDrift
from trainer.preflight import run_preflight

if TYPE_CHECKING:
    from transformers import Trainer

    from trainer.harness_run import HarnessRun


class HarnessCallback(TrainerCallback):
    def __init__(
        self, run: HarnessRun, trainer: Trainer | None = None, *, run_graph: RoundRunner | None = None
    ) -> None:
        self.run = run
        self.cfg = run.cfg
        self.pause = EvolverPause(run, trainer, run_graph=run_graph)
        self.drift = JudgeDrift(run)  # the judge's drift line (off without an LLM judge)
        self._flushed_seen = 0  # the memory's flushed count at the last step's line

    @property
    def trainer(self) -> Trainer | None:
        """The trainer whose live model is the frozen policy: set after it is built (callbacks do not receive it)."""
        return self.pause.trainer

    @trainer.setter
    def trainer(self, trainer: Trainer | None) -> None:
        self.pause.trainer = trainer

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> TrainerControl:
        if self.run.sampler is not None:
            self.run.sampler.step = state.global_step
        if self.pause.is_main():
            self.drift.begin(state.global_step)  # the probe set's first judging (a resumed run keeps its own)
        h = self.cfg.harness
        # Only a run that starts at step 0: a resumed one holds its pre-flight in harness and memory already.
        if h.evolver and h.preflight and state.global_step == 0:
            run_preflight(self.pause)
            if self.pause.stop_reason is not None:
                control.should_training_stop = True
        return control

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> TrainerControl:
        step = state.global_step
        if self.run.sampler is not None:
            self.run.sampler.step = step
        record = self.run.pop_step(step)
        pause = 0.0
        h = self.cfg.harness
        if h.evolver and step % h.evolve_every == 0 and step < state.max_steps:
            pause = self.pause.evolve(step)
            if self.pause.stop_reason is not None:
                # The checkpoint of this step (evolve_every is a multiple of save_steps) is still written.
                control.should_training_stop = True
        record.update(
            {
                "step": step,
                "pause_s": pause,
                "harness_version_after": self.run.state.version,
                "time": time.time(),
                "harness_overhead_s": record.get("sampler_s", 0.0) + record.get("reward_overhead_s", 0.0),
            }
        )
        record.update(self._memory_outage())
        if self.pause.is_main():
            record.update(self.drift.at_pause(step, state.max_steps))
        self.run.last_record = record
        if self.pause.is_main():
            append_jsonl(self.run.paths.metrics, record)
        return control

    def _memory_outage(self) -> dict[str, int]:
        """The memory server's outage at the step's end, for metrics.jsonl (written only when there is one).

        `memory_queued`: records waiting for the server now; `memory_flushed`: queued records written during the
        step, once it answered again (`memory/outage.py`).
        """
        if self.run.memory is None:
            return {}
        counts = self.run.memory.queue_counts()
        flushed = counts["flushed"] - self._flushed_seen
        self._flushed_seen = counts["flushed"]
        return {k: v for k, v in (("memory_queued", counts["queued"]), ("memory_flushed", flushed)) if v}

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: object
    ) -> TrainerControl:
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        acc = self.pause.accelerator()
        if acc is not None and acc.num_processes > 1:
            # The state file marks the checkpoint complete: every rank's part (its rng_state_N.pth) must be
            # written before it, or a kill in between leaves a "complete" checkpoint that cannot resume.
            acc.wait_for_everyone()
        # Pruning counts complete checkpoints only; one the memory server's outage left incomplete prunes nothing.
        if self.pause.is_main() and ckpt.is_dir() and write_checkpoint_state(ckpt, self.run, state.global_step):
            prune_checkpoints(Path(args.output_dir).parent, self.cfg.train.save_total_limit)  # only once it is complete
        return control
