"""Wiring: config -> model, harness run, sampler dataset, reward, callbacks -> TRL `GRPOTrainer`.

`train(cfg, resume=None)` is what `harnessrl train` calls. It first takes the run folder's lock
(`trainer.run_lock`: one writer per run folder, before anything in it is touched, also for `--overwrite`
and `--resume`). With `resume`, the run folder is first rolled back to the checkpoint
(`trainer.checkpoint.prepare_resume` + `restore`: harness version, memory, detector, sampler, logs) and
TRL resumes model/optimizer/scheduler/rng state from the same folder. TRL's data skipping is off
(`ignore_data_skip`): it would replay the sampler; ours restores its rng instead. A run whose checkpoint
is already at `train.max_steps` is finished: `--resume` says so and changes nothing (it only rebuilds a
missing `final/` from that checkpoint, an exact copy of its model files).

`HarnessGRPOTrainer` is TRL's `GRPOTrainer` with one public override, `training_step`: it swaps the
dataset's placeholder rows for groups the sampler draws at that step, so an update committed by the
evolver round at step s reaches the prompts of step s+1 (why, and the rejected alternatives:
`trainer.sampler`). `check_one_generation_per_step` refuses TRL settings whose generation buffer spans
optimizer steps (they would train step s+1 on prompts drawn before the round).
"""

from __future__ import annotations

import logging
import time
from functools import cache
from pathlib import Path
from typing import Any

from trainer.config import RunConfig
from trainer.config_loader import save_config

log = logging.getLogger(__name__)


def load_policy(cfg: RunConfig) -> tuple[Any, Any, Path]:
    """(model, tokenizer, folder). Named models are prepared on first use (trainer.policy_models)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.policy_models import resolve_model

    folder = resolve_model(cfg.model.name)
    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, cfg.model.dtype))
    return model, tokenizer, folder


def grpo_args(cfg: RunConfig) -> Any:
    import torch
    from trl import GRPOConfig

    t = cfg.train
    use_cpu = t.use_cpu if t.use_cpu is not None else not torch.cuda.is_available()
    ds = cfg.harness.dynamic_sampling  # its train.beta and train.loss_type are checked by RunConfig
    kwargs: dict[str, Any] = dict(
        output_dir=str(cfg.run_path / "checkpoints"),
        # DAPO dynamic sampling generates N x batch_size rollouts and trains on batch_size of them.
        per_device_train_batch_size=t.batch_size * max(1, ds),
        num_generations=t.num_generations,
        max_completion_length=t.max_completion_length,
        max_steps=t.max_steps,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler_type,
        beta=t.beta,
        loss_type=t.loss_type,
        # Each group's advantages are scaled by its own reward std (TRL's default, stated): the critic accepts a
        # revived dead group on the hit test and "varies at least as much as before", not on its std's size
        # (agents/critic.py `_rule`).
        scale_rewards="group",
        temperature=t.temperature,
        top_k=0,
        top_p=1.0,
        seed=t.seed,
        logging_steps=t.logging_steps,
        save_strategy="steps",
        save_steps=t.save_steps,
        save_total_limit=None,  # HarnessRL prunes after a checkpoint is complete (trainer.disk.prune_checkpoints)
        report_to=list(t.report_to) or "none",
        use_cpu=use_cpu,
        bf16=t.bf16 and not use_cpu,
        gradient_checkpointing=t.gradient_checkpointing,
        shuffle_dataset=False,  # the harness sampler owns randomness; a shuffle buffer would hide updates
        dataloader_num_workers=0,
        ignore_data_skip=True,
        ddp_timeout=t.ddp_timeout,
        disable_tqdm=True,
        log_completions=t.log_completions,
        use_vllm=t.use_vllm,
        # Every parameter gets a gradient each step: skip DDP's extra graph pass and its per-run warning.
        ddp_find_unused_parameters=False,
    )
    if t.use_vllm:
        kwargs.update(vllm_mode=t.vllm_mode)
        if t.vllm_server_base_url:
            kwargs.update(vllm_server_base_url=t.vllm_server_base_url)
    args = GRPOConfig(**kwargs)
    check_one_generation_per_step(args)
    return args


def check_one_generation_per_step(args: Any) -> None:
    """Refuse TRL generation buffering that spans optimizer steps.

    TRL generates once per `steps_per_generation * num_iterations` micro-steps and reuses the buffer in
    between; with gradient accumulation a generation also covers several micro-steps. Any of them above 1
    would make a generation outlive the evolver round at the end of a step (the next step trains on
    prompts drawn before it), and `HarnessGRPOTrainer.training_step` draws once per micro-step."""
    knobs = {
        "steps_per_generation": args.steps_per_generation,
        "num_iterations": args.num_iterations,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
    }
    bad = {k: v for k, v in knobs.items() if v != 1}
    if bad:
        raise ValueError(
            f"GRPOConfig {bad}: HarnessRL needs one generation per optimizer step (all of "
            f"{sorted(knobs)} = 1) so that a harness update reaches the next step; raise "
            f"train.batch_size instead"
        )


@cache
def harness_trainer_class() -> type:
    """`GRPOTrainer` drawing its prompts at step time (built on first use: importing TRL takes seconds)."""
    from trl import GRPOTrainer

    class HarnessGRPOTrainer(GRPOTrainer):
        def __init__(self, *args: Any, harness_sampler: Any, dynamic_sampling: Any = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            check_one_generation_per_step(self.args)
            self.harness_sampler = harness_sampler
            # trainer.dynamic_sampling.DynamicSamplingReward when DAPO dynamic sampling is on, LiveNormReward with
            # harness.live_token_norm (one process only): the reward that counts the loss normaliser's tokens.
            self.dynamic_sampling = dynamic_sampling
            if dynamic_sampling is not None and self.accelerator.num_processes > 1:
                raise ValueError(
                    "harness.dynamic_sampling and harness.live_token_norm run on one process only (their group "
                    "selection sees one rank's rows)"
                )

        def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
            # `inputs` are this rank's placeholder rows (read ahead by accelerate); the draw happens now,
            # after the previous step's evolver round and checkpoint.
            t0 = time.perf_counter()
            started = time.time()
            acc = self.accelerator
            rows = self.harness_sampler.fill(
                inputs,
                num_generations=self.args.num_generations,
                step=self.state.global_step,
                process_index=acc.process_index,
                num_processes=acc.num_processes,
            )
            out = super().training_step(model, rows, num_items_in_batch)
            # Step time (generation + reward + loss + backward; not the optimizer step or the pause) and the
            # step's wall-clock start: benchmarks add up per-step wall time from it, across resumes.
            self.harness_sampler.run.record_step(
                self.state.global_step + 1, {"train_step_s": time.perf_counter() - t0, "step_started": started}
            )
            return out

        def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None):
            if self.dynamic_sampling is not None and self.model.training:
                # Normalise the token-mean loss over the rows dynamic sampling kept, or the live groups' rows
                # (trainer/dynamic_sampling.py); TRL's count spans the whole (over-sampled) generation batch.
                kept = inputs["num_items_in_batch"].new_tensor(self.dynamic_sampling.kept_tokens)
                inputs = {**inputs, "num_items_in_batch": kept}
            return super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )

    return HarnessGRPOTrainer


def build_trainer(
    cfg: RunConfig,
    *,
    resume_from: Path | None = None,
    progress: bool = True,
    run_graph: Any = None,
    judge: Any = None,
    fresh_memory: bool = False,
) -> tuple[Any, Any, Any]:
    """(trainer, run, harness_callback). `run_graph`/`judge` are injection points for tests.

    The main process holds the run folder's lock (`trainer.run_lock`) from before the folder is touched until
    `run.close()`; `fresh_memory` lets a resume start with an empty memory when the checkpoint has no
    readable memory snapshot (`trainer.checkpoint.prepare_resume`)."""
    import torch
    from peft import LoraConfig
    from transformers import PrinterCallback

    from trainer.callback import HarnessCallback
    from trainer.checkpoint import prepare_resume, restore, resume_lines
    from trainer.harness_run import HarnessRun, is_main_rank
    from trainer.progress import ConsoleProgress
    from trainer.reward import RubricReward
    from trainer.run_lock import RunLock
    from trainer.sampler import HarnessSampler, make_dataset

    torch.set_num_threads(cfg.train.torch_threads)
    model, tokenizer, _ = load_policy(cfg)  # before touching the run folder: a missing model fails first
    if is_main_rank():
        from trainer.checkpoint import run_reached
        from trainer.disk import check_budget

        check_budget(cfg, model, run_reached(resume_from) if resume_from is not None else 0)
    args = grpo_args(cfg)  # sets up the process group (with train.ddp_timeout) before anything waits on it
    # Several processes: the main one creates or rolls back the run folder first, then the others read it.
    with args.main_process_first(local=False, desc="harness run folder"):
        main = args.process_index == 0
        lock = RunLock.acquire(cfg.run_path) if main else None  # refuses a second trainer before any change
        run = None
        try:
            # Files first (a corrupt later version must not stop HarnessRun from opening the folder).
            prepared = (
                prepare_resume(cfg, resume_from, fresh_memory=fresh_memory)
                if (resume_from is not None and main)
                else None
            )
            run = HarnessRun(cfg, judge=judge, open_memory=resume_from is None, main_process=main)
            run.folder_lock = lock
            sampler = HarnessSampler.from_config(run)
            if resume_from is not None:
                summary = restore(run, resume_from, fresh_memory=fresh_memory, prepared=prepared)
                if main:
                    for line in resume_lines(summary):
                        log.warning("%s", line)
            elif run.main_process:
                save_config(cfg, run.paths.config)
        except BaseException:
            if run is not None:
                run.close()  # releases the lock it holds
            elif lock is not None:
                lock.release()
            raise
    peft_config = None
    if cfg.model.lora:
        peft_config = LoraConfig(
            r=cfg.model.lora_r,
            lora_alpha=cfg.model.lora_alpha,
            lora_dropout=cfg.model.lora_dropout,
            target_modules=list(cfg.model.lora_targets),
            task_type="CAUSAL_LM",
        )
    callback = HarnessCallback(run, run_graph=run_graph)
    reward: Any = RubricReward(run, cfg.train.num_generations)
    dynamic = None
    if cfg.harness.dynamic_sampling:
        from trainer.dynamic_sampling import DynamicSamplingReward

        reward = dynamic = DynamicSamplingReward(
            reward, cfg.train.num_generations, cfg.train.batch_size // cfg.train.num_generations
        )
    elif cfg.harness.live_token_norm:  # the normaliser of dynamic sampling without its over-sampling
        from trainer.dynamic_sampling import LiveNormReward

        reward = dynamic = LiveNormReward(reward, cfg.train.num_generations)
    trainer = harness_trainer_class()(
        harness_sampler=sampler,
        dynamic_sampling=dynamic,
        model=model,
        processing_class=tokenizer,
        reward_funcs=[reward],
        args=args,
        train_dataset=make_dataset(sampler),
        peft_config=peft_config,
        callbacks=[callback, ConsoleProgress(run, enabled=progress)],
    )
    # The console prints one readable line per step (trainer.progress); TRL's raw log dicts go to
    # metrics.jsonl and report_to only.
    trainer.remove_callback(PrinterCallback)
    callback.trainer = trainer
    return trainer, run, callback


# What `harnessrl train` writes into a run folder; `overwrite` only deletes folders made of these.
RUN_ENTRIES = {
    "config.yaml",
    "harness",
    "events.jsonl",
    "metrics.jsonl",
    "rounds.jsonl",
    "memory",
    "evolver.sqlite",
    "checkpoints",
    "abandoned",
    "adapters",
    "frozen",
    "final",
    "logs",
    "eval.json",
    "report.html",
    "traces",
    "judge_probe.json",
}


def _written_by_a_run(name: str) -> bool:
    # `<log>.jsonl.torn`: what healing a torn log tail cut off (trainer.io.heal_jsonl).
    return (
        name in RUN_ENTRIES
        or name.startswith(".")
        or (name.endswith(".jsonl.torn") and name.removesuffix(".torn") in RUN_ENTRIES)
    )


def clear_run_folder(run_dir: Path, *, keep: tuple[str, ...] = ()) -> None:
    """Delete a previous run's folder for a fresh start.

    Refuse a folder holding anything a run does not write (a mistyped run_dir such as `.` must not delete a
    checkout). With `keep` (the held lock file), the folder and those entries stay and everything else goes: the
    lock must outlive the delete, or a second trainer could take a new one in between.
    """
    import shutil

    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise FileExistsError(f"run_dir {run_dir} exists and is not a folder")
    foreign = sorted(p.name for p in run_dir.iterdir() if not _written_by_a_run(p.name))
    if foreign:
        raise FileExistsError(
            f"refusing to overwrite {run_dir}: it holds {foreign[:5]}, which a harnessrl run does not "
            f"write; delete it yourself or choose another run_dir"
        )
    if not keep:
        shutil.rmtree(run_dir)
        return
    for p in run_dir.iterdir():
        if p.name in keep:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def train(
    cfg: RunConfig,
    resume: str | None = None,
    *,
    progress: bool = True,
    run_graph: Any = None,
    judge: Any = None,
    overwrite: bool = False,
    fresh_memory: bool = False,
) -> dict[str, Any]:
    """Run GRPO with harness evolution; returns a summary (steps, versions, pause time).

    `overwrite=True` deletes a previous run in `cfg.run_dir` first (not with `resume`). The run folder's lock
    is held from before anything in it is touched (`trainer.run_lock`). A resume of a run whose checkpoint is
    at `train.max_steps` returns at once with `already_finished` (nothing trained, nothing changed)."""
    from trainer.checkpoint import find_checkpoint, run_reached
    from trainer.harness_run import is_main_rank
    from trainer.policy_models import resolve_model
    from trainer.run_lock import LOCK_NAME, RunLock

    if overwrite and resume is not None:
        raise ValueError(
            "overwrite and resume exclude each other: resume continues the run in run_dir, overwrite deletes it"
        )
    from trainer.dynamic_sampling import check_one_process

    check_one_process(cfg)  # before the model loads
    if resume is None:
        from trainer.harness_run import check_criteria_are_judged, load_train_tasks

        # A fresh run: refused before the model loads (minutes on a GPU preset) and before --overwrite deletes.
        check_criteria_are_judged(cfg, load_train_tasks(cfg))
    resolve_model(cfg.model.name)  # a missing model fails before the run folder is created or locked
    lock = RunLock.acquire(cfg.run_path) if is_main_rank() else None
    try:
        if overwrite:
            clear_run_folder(cfg.run_path, keep=(LOCK_NAME,))
        ckpt = find_checkpoint(cfg.run_path, resume) if resume is not None else None
        if ckpt is None and (cfg.run_path / "harness" / "versions").is_dir():
            # A fresh run must start from harness v0 with an empty memory; never mix two runs in one folder.
            raise FileExistsError(
                f"run folder {cfg.run_path} is already used by a run; pass --resume to continue it "
                f"from its last checkpoint, --overwrite to delete it and start afresh, or choose "
                f"another run_dir (e.g. --set run_dir={cfg.run_path}-2)"
            )
        if ckpt is not None and run_reached(ckpt) >= cfg.train.max_steps:
            return finished_summary(cfg, ckpt)
        trainer, run, callback = build_trainer(
            cfg, resume_from=ckpt, progress=progress, run_graph=run_graph, judge=judge, fresh_memory=fresh_memory
        )
        try:
            try:
                trainer.train(resume_from_checkpoint=str(ckpt) if ckpt is not None else None)
                if callback.pause.stop_reason is not None:  # failed evolver rounds stopped training: no final model
                    from trainer.evolver_round import EvolverStopped

                    raise EvolverStopped(callback.pause.stop_reason)
                final = cfg.run_path / "final"
                trainer.save_model(str(final))
            except Exception as e:
                from trainer.disk import disk_full, disk_full_error

                full = disk_full(e)
                if full is None:
                    raise
                raise disk_full_error(cfg.run_path, full) from e
            _end_process_group(trainer)
            return {
                "run_dir": str(cfg.run_path),
                "steps": trainer.state.global_step,
                "harness_version": run.state.version,
                "pause_s": callback.pause.pause_s_total,
                "final_model": str(final),
            }
        finally:
            run.close()
    finally:
        if lock is not None:
            lock.release()


def _end_process_group(trainer: Any) -> None:
    """On several processes: wait for every rank, then destroy the process group before the interpreter exits.

    A process group left to the interpreter's exit tears its communication threads down in no set order: under load
    a rank that had finished and printed its summary aborted there ("terminate called without an active
    exception", SIGABRT), failing a run that had done everything.
    """
    import torch.distributed as dist

    if trainer.accelerator.num_processes > 1 and dist.is_available() and dist.is_initialized():
        trainer.accelerator.wait_for_everyone()
        dist.destroy_process_group()


# Files of a TRL checkpoint that are training state, not the model `save_model` writes to final/.
_NOT_MODEL = ("optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json", "rng_state")


def finished_summary(cfg: RunConfig, ckpt: Path) -> dict[str, Any]:
    """A resume of a finished run: say so, train nothing.

    A missing `final/` (killed after the last checkpoint, before the final save) is rebuilt from the checkpoint's
    model files (exact: the same weights), built next to its place and renamed.
    """
    import os
    import shutil

    from trainer.checkpoint import MEMORY_FILE, STATE_FILE, read_state

    state = read_state(ckpt)
    final = cfg.run_path / "final"
    rebuilt = False
    if not final.is_dir():
        tmp = cfg.run_path / ".final.resume-tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for p in ckpt.iterdir():
            if p.is_file() and p.name not in (STATE_FILE, MEMORY_FILE) and not p.name.startswith(_NOT_MODEL):
                shutil.copy2(p, tmp / p.name)
        os.replace(tmp, final)
        rebuilt = True
    log.warning(
        "run in %s already finished: %s is at step %d and train.max_steps is %d, so --resume trains nothing "
        "and changes nothing%s. To train further, raise train.max_steps (e.g. --set train.max_steps=%d) "
        "and --resume again",
        cfg.run_path,
        ckpt.name,
        int(state["step"]),
        cfg.train.max_steps,
        f" (final/ was missing: rebuilt from {ckpt.name})" if rebuilt else "",
        2 * max(int(state["step"]), 1),
    )
    from trainer.io import read_jsonl

    # The pause total of the run as trained, from its step log (the finishing call counted only its own part).
    pause = sum(float(m.get("pause_s") or 0.0) for m in read_jsonl(cfg.run_path / "metrics.jsonl"))
    return {
        "run_dir": str(cfg.run_path),
        "steps": int(state["step"]),
        "harness_version": int(state["harness_version"]),
        "pause_s": pause,
        "final_model": str(final),
        "already_finished": True,
        "final_rebuilt": rebuilt,
    }
