"""HarnessRL inside your own TRL script: the dataset, the reward, the callback and the trainer class.

`harness_parts` builds the pieces `harnessrl train` wires (trainer/grpo.py) from one run config: a YAML file,
a `RunConfig`, or plain keyword arguments naming config fields (`max_steps=8`, or `evolver__sample_k=8` for a
name that several sections share). `attach` refuses `GRPOConfig` settings that would make the harness wrong,
each named with both values, and a trainer whose `reward_funcs` hold anything besides HarnessRL's reward (or whose
`reward_weights` are set): other rewards are reward parts in the config (`train.rewards`, `tools/reward_parts.py`),
summed inside HarnessRL's one reward so that the advantages are computed on what the harness sees;
`harness.dynamic_sampling` wraps the reward in
`trainer.dynamic_sampling.DynamicSamplingReward`, handed to the trainer class by `trainer_kwargs`. A run folder
that already holds a harness is opened at its latest version, as a new run on that harness. Usage, what
`attach` refuses and why resuming is not supported on this path: see README.md, section "Use it from your own
TRL script", and docs/DESIGN.md, section 12; `examples/own_trl_script.py` is a complete script.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from trainer.config import SECTIONS, SET_BY_TRAINER, ConfigError, RunConfig
from trainer.config_loader import load_config, save_config
from trainer.harness_run import HarnessRun


def _override(name: str, value: Any) -> str:
    """`max_steps=8` -> "train.max_steps=8"; `evolver__sample_k=8` -> "evolver.sample_k=8"; `run_dir=...`."""
    import json

    if "__" in name:
        section, key = name.split("__", 1)
        path = f"{section}.{key}"
    elif name == "run_dir":
        path = "run_dir"
    else:
        # The context fields the trainer fills are no `evolver` settings (`seed` is train's).
        owners = [
            s
            for s, cls in SECTIONS.items()
            if name in {f.name for f in fields(cls)} and not (s == "evolver" and name in SET_BY_TRAINER)
        ]
        if len(owners) != 1:
            where = f"in {owners}" if owners else "in no section"
            raise ConfigError(
                f"harness_parts({name}=...): the config field {name!r} is {where}; "
                f"write section__{name}=... (sections: {', '.join(SECTIONS)})"
            )
        path = f"{owners[0]}.{name}"
    return f"{path}={json.dumps(value) if not isinstance(value, str) else value}"


@dataclass
class HarnessParts:
    """What a TRL script adds to its `GRPOTrainer`; `run` is the live run (harness store, memory, detector)."""

    cfg: RunConfig
    run: HarnessRun
    sampler: Any
    dataset: Any
    reward: Any
    callback: Any
    trainer_class: type
    dynamic_sampling: Any = None  # DynamicSamplingReward / LiveNormReward (also `reward`) when either knob is on

    def trainer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `trainer_class(...)` besides your model, tokenizer and args."""
        return {
            "train_dataset": self.dataset,
            "reward_funcs": [self.reward],
            "callbacks": [self.callback],
            "harness_sampler": self.sampler,
            "dynamic_sampling": self.dynamic_sampling,
        }

    def attach(self, trainer: Any) -> None:
        """Hand the trainer to the callback (the frozen policy is its live model) after checking its args."""
        args = trainer.args
        t = self.cfg.train
        problems = []
        if args.num_generations != t.num_generations:
            problems.append(
                f"num_generations={args.num_generations} but the run's reward groups are "
                f"train.num_generations={t.num_generations}"
            )
        if args.shuffle_dataset:
            problems.append("shuffle_dataset=True would pre-read rows and hide harness updates; set it to False")
        if args.max_steps != t.max_steps:
            problems.append(
                f"max_steps={args.max_steps} but train.max_steps={t.max_steps} (the dataset never ends: "
                f"TRL needs max_steps, and the evolver's schedule uses the run's)"
            )
        if (
            self.cfg.harness.evolver
            and args.save_strategy == "steps"
            and self.cfg.harness.evolve_every % args.save_steps
        ):
            problems.append(
                f"save_steps={args.save_steps} must divide harness.evolve_every="
                f"{self.cfg.harness.evolve_every} (the checkpoint after a round carries its harness)"
            )
        problems += generation_mismatches(args, self.cfg)
        problems += reward_mismatches(trainer, self.reward)
        if problems:
            raise ConfigError("GRPOConfig does not fit the HarnessRL run: " + "; ".join(problems))
        self.callback.trainer = trainer

    def close(self) -> None:
        self.run.close()


ADD_AS_PART = (
    "GRPO would add it to the advantages while the detector, the critic and training's grading see HarnessRL's "
    "reward only; pass it as a reward part instead: train.rewards: [{name: ..., weight: ..., kind: python, "
    "function: 'your_module:your_function'}] (README, 'Other rewards beside the rubric')"
)


def reward_mismatches(trainer: Any, reward: Any) -> list[str]:
    """What in a `GRPOTrainer`'s rewards HarnessRL would not see: reward functions besides `reward`, `reward_weights`.

    Read from TRL's public contract: the trainer's `reward_funcs` (what was passed, plus any TRL added itself) with
    their `reward_func_names`, and `args.reward_weights`. An object without `reward_funcs` is no GRPOTrainer and
    adds no reward of its own."""
    funcs = getattr(trainer, "reward_funcs", None)  # TRL's trainer: duck typing on a type we do not own
    if funcs is None:
        return []
    names = list(getattr(trainer, "reward_func_names", None) or [])
    if len(names) != len(funcs):
        names = [getattr(f, "__name__", type(f).__name__) for f in funcs]
    extra = [name for f, name in zip(funcs, names) if f is not reward]
    problems = []
    if extra:
        problems.append(f"reward_funcs hold {extra} besides HarnessRL's reward: {ADD_AS_PART}")
    elif len(funcs) != 1:
        problems.append(f"reward_funcs hold HarnessRL's reward {len(funcs)} times; pass it once")
    weights = trainer.args.reward_weights
    if weights is not None and list(weights) != [1.0] * len(funcs):
        problems.append(
            f"reward_weights={list(weights)} rescale the reward GRPO sees; leave them unset and give each part "
            "its weight in train.rewards"
        )
    return problems


def generation_mismatches(args: Any, cfg: RunConfig) -> list[str]:
    """How the trainer's generation settings (a `GRPOConfig`) differ from what the critic and sampling need.

    The references are what the critic measures with and what `harness.dynamic_sampling` needs; each mismatch
    names both values.
    """
    t, ds = cfg.train, cfg.harness.dynamic_sampling
    problems = []
    if args.temperature != t.temperature:
        problems.append(
            f"temperature={args.temperature} but the critic samples the frozen policy at "
            f"train.temperature={t.temperature}"
        )
    if args.max_completion_length != t.max_completion_length:
        problems.append(
            f"max_completion_length={args.max_completion_length} but the critic's rollouts are "
            f"train.max_completion_length={t.max_completion_length} tokens"
        )
    if args.top_p != 1.0:
        problems.append(f"top_p={args.top_p} but the critic samples untruncated (top_p=1.0)")
    if args.top_k not in (None, 0):
        problems.append(f"top_k={args.top_k} but the critic samples untruncated (top_k=0)")
    if args.min_p not in (None, 0.0):
        problems.append(f"min_p={args.min_p} but the critic samples untruncated (no min_p)")
    want = t.batch_size * max(1, ds)
    if ds and args.per_device_train_batch_size != want:
        problems.append(
            f"per_device_train_batch_size={args.per_device_train_batch_size} but harness.dynamic_sampling="
            f"{ds} generates train.batch_size x {ds} = {want} rollouts per step"
        )
    if ds and args.beta != 0.0:
        problems.append(
            f"beta={args.beta} but harness.dynamic_sampling needs beta=0 (the KL term would act on the rows it drops)"
        )
    if cfg.harness.live_token_norm and args.beta != 0.0:
        problems.append(
            f"beta={args.beta} but harness.live_token_norm needs beta=0 (the KL term would act on the rows the "
            "normaliser leaves out)"
        )
    return problems


def harness_parts(
    config: str | Path | RunConfig | None = None, *, overrides: list[str] | None = None, **settings: Any
) -> HarnessParts:
    """Build the run folder, harness, sampler dataset, reward and callback for a user's `GRPOTrainer`.

    `config`: a YAML file, a `RunConfig`, or None (the defaults); `overrides`: "section.key=value" strings;
    `settings`: the same as keyword arguments (see the module docstring). A fresh run folder is created; one
    that holds a harness is opened at its latest version (not a resume: see the module docstring).

    Several processes (accelerate/torchrun): create your `GRPOConfig` first and call this inside
    `grpo_args.main_process_first(local=False)`, so the main process writes the run folder before the
    others read it (they open no memory and write nothing)."""
    from trainer.callback import HarnessCallback
    from trainer.grpo import harness_trainer_class
    from trainer.reward import RubricReward
    from trainer.sampler import HarnessSampler, make_dataset

    extra = [*(overrides or []), *(_override(k, v) for k, v in settings.items())]
    if isinstance(config, RunConfig):
        if extra:
            raise ConfigError("harness_parts: pass overrides with a config file, or edit the RunConfig yourself")
        cfg = config
    else:
        cfg = load_config(config, extra)
    run = HarnessRun(cfg)
    if run.main_process:
        save_config(cfg, run.paths.config)
    h = cfg.harness
    sampler = HarnessSampler.from_config(run)
    reward: Any = RubricReward(run, cfg.train.num_generations)
    dynamic = None
    if h.dynamic_sampling:  # as trainer.grpo.build_trainer applies it
        from trainer.dynamic_sampling import DynamicSamplingReward

        reward = dynamic = DynamicSamplingReward(
            reward, cfg.train.num_generations, cfg.train.batch_size // cfg.train.num_generations
        )
    elif h.live_token_norm:  # as trainer.grpo.build_trainer applies it: the normaliser alone
        from trainer.dynamic_sampling import LiveNormReward

        reward = dynamic = LiveNormReward(reward, cfg.train.num_generations)
    return HarnessParts(
        cfg=cfg,
        run=run,
        sampler=sampler,
        dataset=make_dataset(sampler),
        reward=reward,
        callback=HarnessCallback(run),
        trainer_class=harness_trainer_class(),
        dynamic_sampling=dynamic,
    )
