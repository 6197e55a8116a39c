"""The `plain` arm: a plain TRL GRPO run with the same policy, GRPO settings, prompts and reward function as
the fixed-harness arm, and no harness code in the loop (no harness sampler, no reward bookkeeping, detector,
memory or callback): a map-style dataset of the pool's prompts (uniform, seeded) and a reward callable that
scores with the judge directly (`tools.judge.Judge.score`: programmatic checks + `harness.scoring`).

Its step time is the reference for the harness's overhead. It writes `metrics.jsonl` lines with the fields
`bench_collect.collect_run` reads (step, wall-clock start and end, step time, groups, zero-variance share) and
resumes from its last checkpoint like the other arms.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from trainer.io import append_jsonl, read_jsonl


class PlainReward:
    """Rubric score of each completion with the judge, nothing else (no audit, no detector, no memory)."""

    __name__ = "rubric"

    def __init__(self, tasks: dict[str, Any], judge: Any, num_generations: int) -> None:
        self.tasks, self.judge, self.g = tasks, judge, num_generations
        self.last: dict[str, Any] = {}

    async def __call__(self, *, completions: list, task_id: list[str], **_: Any) -> list[float]:
        from trainer.reward import completion_text

        texts = [completion_text(c) for c in completions]
        rewards: list[float] = []
        dead = 0
        for s in range(0, len(texts), self.g):
            task = self.tasks[task_id[s]]
            scores = [r.score for r in await self.judge.score(task.criteria, task.user_prompt, texts[s : s + self.g])]
            dead += max(scores) - min(scores) <= 1e-9
            rewards += [float(x) for x in scores]
        n_groups = len(texts) // self.g
        self.last = {"n_groups": n_groups, "dead_share": dead / n_groups, "reward": sum(rewards) / len(rewards)}
        return rewards


class PlainMetrics(TrainerCallback):
    """One metrics.jsonl line per step (benchmark bookkeeping outside the training loop's work)."""

    def __init__(self, path: Path, reward: PlainReward) -> None:
        self.path, self.reward = path, reward
        self._t0 = self._wall0 = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0, self._wall0 = time.perf_counter(), time.time()
        return control

    def on_step_end(self, args, state, control, **kwargs):
        append_jsonl(
            self.path,
            {
                "step": state.global_step,
                "train_step_s": time.perf_counter() - self._t0,
                "step_started": self._wall0,
                "time": time.time(),
                "pause_s": 0.0,
                **self.reward.last,
            },
        )
        return control


def train_plain(cfg: Any) -> dict[str, Any]:
    """Train the plain arm of `cfg` (its run_dir, seed, pool and budget); resumes from the last checkpoint."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    from harness.guidance import render_prompt
    from trainer.grpo import grpo_args, load_policy
    from trainer.harness_run import load_train_tasks, make_judge

    torch.set_num_threads(cfg.train.torch_threads)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tasks = {t.id: t for t in load_train_tasks(cfg) if t.split == "train"}
    ids = sorted(tasks)
    rng = random.Random(cfg.train.seed)
    prompts_needed = cfg.train.max_steps * cfg.train.batch_size // cfg.train.num_generations
    rows = [rng.choice(ids) for _ in range(prompts_needed)]
    data = Dataset.from_list([{"prompt": render_prompt(tasks[t], []), "task_id": t} for t in rows])
    model, tokenizer, _ = load_policy(cfg)
    args = grpo_args(cfg)
    reward = PlainReward(tasks, make_judge(cfg.evolver.judge_model, cfg.evolver.base_url), cfg.train.num_generations)
    peft_config = None
    if cfg.model.lora:
        peft_config = LoraConfig(
            r=cfg.model.lora_r,
            lora_alpha=cfg.model.lora_alpha,
            lora_dropout=cfg.model.lora_dropout,
            target_modules=list(cfg.model.lora_targets),
            task_type="CAUSAL_LM",
        )
    metrics = run_dir / "metrics.jsonl"
    ckpts = sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    resume = ckpts[-1] if ckpts else None
    if metrics.is_file():  # keep the lines up to the checkpoint resumed from (a fresh start keeps none)
        keep = [m for m in read_jsonl(metrics) if resume is not None and m["step"] <= int(resume.name.split("-")[1])]
        metrics.unlink()
        for m in keep:
            append_jsonl(metrics, m)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[reward],
        args=args,
        train_dataset=data,
        peft_config=peft_config,
        callbacks=[PlainMetrics(metrics, reward)],
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    return {"run_dir": str(run_dir), "steps": trainer.state.global_step, "harness_version": 0, "pause_s": 0.0}
