"""Run configuration schema: the typed dataclasses of a run config and their own refusals.

A config has a top-level `run_dir` and five sections (`model`, `data`, `train`, `harness`, `evolver`); every field
carries a help string in its metadata (shown by `harnessrl train --help-config`, `describe`). `harness` holds what
the trainer reads around a round (evolver on/off, cadence, sampler, detector, pause budget); `evolver` is typed by
the graph's context, `agents.context.EvolverContext`, so each evolver knob is declared once, there (the fields the
trainer fills per round, `SET_BY_TRAINER`, are refused by the loader).

What a config cannot be is refused here, by the dataclasses themselves: one-field rules and cross-field rules
(`evolve_every` aligned with `save_steps`, batch divisible by the group size, `ddp_timeout` above the pause budget,
dynamic sampling only with `beta = 0` and a token-mean loss (`LOSS_TYPES`), ...) in `__post_init__`, each saying
how to fix it. Reading YAML and overrides is `trainer/config_loader.py`; old keys are
`trainer/config_migrations.py`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agents.context import PER_RUN, RULES, EvolverContext
from tools.reward_parts import parse_parts


class ConfigError(ValueError):
    """A config problem; the message names the file (when known), the field and the fix."""


# TRL losses normalised by `num_items_in_batch` (token mean over the batch): the only ones whose normaliser DAPO
# dynamic sampling can set to the kept rows (trainer/dynamic_sampling.py), so the only ones allowed with it.
LOSS_TYPES = ("dapo", "cispo", "vespo")


def _f(default: Any, help: str, **kw: Any) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class ModelConfig:
    name: str = _f(
        "smollm2",
        "Policy: 'smollm2' (SmolLM2-135M-Instruct, prepared offline), 'tiny' (random test "
        "model) or a path / HF id of a causal LM.",
    )
    lora: bool = _f(True, "Train LoRA adapters (True) or all weights (False).")
    lora_r: int = _f(16, "LoRA rank.")
    lora_alpha: int = _f(32, "LoRA alpha.")
    lora_dropout: float = _f(0.0, "LoRA dropout.")
    lora_targets: list[str] = _f(["q_proj", "k_proj", "v_proj", "o_proj"], "Module names LoRA wraps.")
    dtype: Literal["float32", "bfloat16", "float16"] = _f("float32", "Weights dtype (float32 on CPU).")

    def __post_init__(self) -> None:
        if self.lora and (self.lora_r < 1 or self.lora_alpha < 1):
            raise ConfigError(f"model.lora_r and model.lora_alpha must be >= 1 (got {self.lora_r}, {self.lora_alpha})")
        if self.lora and not self.lora_targets:
            raise ConfigError(
                "model.lora_targets is empty; list module names such as [q_proj, v_proj] or set model.lora=false"
            )


@dataclass
class DataConfig:
    suite: str = _f(
        "data/rubric-mix-lite",
        "Tasks: a folder with train.jsonl + test.jsonl (each in any supported "
        "format: ours, RaR, HealthBench), a single JSONL file, or hf:<dataset id>.",
    )
    test_share: float = _f(0.2, "Single file or hf: suites whose rows carry no split: this share is held out for eval.")
    split_seed: int = _f(0, "Seed of that held-out pick (the same file and seed always give the same split).")
    tasks: list[str] = _f([], "Train task ids to use (empty: all train tasks).")
    domains: list[str] = _f([], "Domains to keep (empty: all).")
    eval_tasks: list[str] = _f([], "Held-out task ids for `harnessrl eval` (empty: all test tasks).")


@dataclass
class TrainConfig:
    max_steps: int = _f(12, "Optimizer steps (an IterableDataset needs a fixed number).")
    batch_size: int = _f(16, "Completions per step per device (prompts per step = batch_size / num_generations).")
    num_generations: int = _f(8, "GRPO group size G.")
    max_completion_length: int = _f(48, "Tokens per completion.")
    learning_rate: float = _f(1e-4, "Learning rate.")
    lr_scheduler_type: str = _f("constant", "transformers scheduler name.")
    temperature: float = _f(1.0, "Sampling temperature for rollouts (and the evolver's probe rollouts).")
    beta: float = _f(0.0, "KL coefficient (0 = no reference model).")
    loss_type: str = _f("dapo", "TRL GRPO loss type.")
    seed: int = _f(0, "Seed for torch, the task sampler and guidance draws.")
    save_steps: int = _f(4, "Checkpoint every N steps (checkpoints carry the harness version).")
    save_total_limit: int | None = _f(
        None,
        "Keep the newest N complete checkpoints (None: all); older ones are deleted once a new one is complete, "
        "and the disk need is checked at start.",
    )
    logging_steps: int = _f(1, "TRL logging interval.")
    torch_threads: int = _f(1, "torch.set_num_threads; 1 is fastest on a shared 2-core box.")
    report_to: list[str] = _f([], "TRL/transformers report_to: [] | [tensorboard] | [wandb].")
    use_cpu: bool | None = _f(None, "Force CPU (None: CPU when no accelerator is present).")
    bf16: bool = _f(False, "bf16 mixed precision (GPU only; on CPU it is 10x slower).")
    gradient_checkpointing: bool = _f(False, "Gradient checkpointing (off on CPU; memory is not the limit).")
    use_vllm: bool = _f(False, "Generate rollouts with vLLM (TRL server or colocate mode).")
    vllm_mode: Literal["server", "colocate"] = _f("server", "TRL vLLM mode.")
    vllm_server_base_url: str | None = _f(None, "TRL vLLM server URL (server mode), e.g. http://host:8000.")
    ddp_timeout: int = _f(1800, "Collective timeout (s); must exceed the longest evolver pause on multi-GPU.")
    log_completions: bool = _f(False, "TRL completions parquet tables per step.")
    rewards: list[dict[str, Any]] = _f(
        [],
        "Reward parts beside the rubric, each {name, weight, kind, ...}: kind length (target, scale, over_only), "
        "regex (pattern), reference (match: exact|normalised|contains) or python (function: module:callable). "
        "reward = rubric + sum(weight * part); the detector, critic and grading see it (tools/reward_parts.py).",
    )

    def __post_init__(self) -> None:
        for name in (
            "max_steps",
            "batch_size",
            "num_generations",
            "max_completion_length",
            "save_steps",
            "logging_steps",
            "torch_threads",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_generations < 2:
            raise ConfigError(f"train.num_generations must be >= 2 (GRPO needs a group), got {self.num_generations}")
        if self.batch_size % self.num_generations:
            fix = self.num_generations * max(1, round(self.batch_size / self.num_generations))
            raise ConfigError(
                f"train.batch_size ({self.batch_size}) must be a multiple of train.num_generations "
                f"({self.num_generations}); set train.batch_size={fix}"
            )
        try:
            parse_parts(self.rewards, "train.rewards")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if self.use_vllm and self.vllm_mode == "server" and not self.vllm_server_base_url:
            raise ConfigError(
                "train.use_vllm with vllm_mode=server needs train.vllm_server_base_url (e.g. http://localhost:8000)"
            )


@dataclass
class HarnessConfig:
    evolver: bool = _f(True, "Run the harness evolver at checkpoints (False: fixed harness baseline).")
    evolve_every: int = _f(
        4,
        "Steps between evolver rounds; a multiple of train.save_steps. The step right after "
        "a round trains on the harness it committed (prompts are drawn at step time).",
    )
    preflight: bool = _f(
        False,
        "Before step 1, probe each pool task on the initial policy (memory's first cached groups) and run "
        "one evolver round on the dead tasks it finds (trainer/preflight.py).",
    )
    preflight_max_tasks: int = _f(
        64, "Pre-flight: probe at most this many pool tasks (a seeded uniform sample of a larger pool, logged)."
    )
    preflight_groups: int = _f(
        1,
        "Pre-flight: probe groups per task (each train.num_generations rollouts). One group flags a task at its "
        "dead rate; more estimate that rate from all of the task's rollouts (harness.liveness), at that many times "
        "the cost.",
    )
    max_extra_generation: float | None = _f(
        None,
        "Bound the generation the evolver adds to training: pre-flight and critic probes draw at most this share of "
        "the run's planned training rollouts (train.max_steps x train.batch_size per process), e.g. 0.1. The "
        "pre-flight probes a seeded sample of the pool that fits; each round gets what is left, and a candidate "
        "whose probes could exceed it is refused unmeasured (trainer/probe_budget.py). None: no bound.",
    )
    dynamic_filtering: bool = _f(False, "DAPO-style baseline: down-weight tasks whose recent groups had zero variance.")
    liveness_weighting: bool = _f(
        False,
        "Draw each task in proportion to its estimated live rate (1 - its dead rate, harness/liveness.py) while it "
        "waits for a repair; an edited task returns at full weight (trainer/sampler.py). Not with dynamic_filtering.",
    )
    df_window: int = _f(
        1,
        "Dynamic filtering: a task is down-weighted when its last N groups all had zero variance "
        "(1 = DAPO-like, act on the latest group).",
    )
    df_multiplier: float = _f(0.2, "Dynamic filtering: weight multiplier of a task whose recent visits were all dead.")
    dynamic_sampling: int = _f(
        0,
        "DAPO dynamic sampling (over-sample, drop zero-variance groups, refill): generate "
        "this many times train.batch_size rollouts per step and train on the first "
        "batch_size/G groups with reward variance (trainer/dynamic_sampling.py); 0 = off.",
    )
    live_token_norm: bool = _f(
        False,
        "Normalise the token-mean loss over the rows of groups with reward variance only: the rows of a "
        "zero-variance group (advantage 0) leave the normaliser, as dynamic sampling's dropped rows do, without "
        "over-sampling (the benchmark's fixed-norm arm; trainer/dynamic_sampling.py). Needs train.beta=0, a "
        "token-mean loss and one process; not with dynamic_sampling, which normalises over its kept rows already.",
    )
    skip_dead: bool = _f(
        False,
        "Skip tasks predicted dead before generating (no LLM, no evolver; the benchmark's skip arm, "
        "harness/skip.py): a task whose last z groups were all dead is drawn with probability max(p^z, skip_floor), "
        "p adapting each step towards skip_target. Not with the evolver, dynamic_filtering or liveness_weighting.",
    )
    skip_target: float = _f(
        0.25, "skip_dead: the target share of dead groups per step that the exploration probability p adapts to."
    )
    skip_floor: float = _f(
        0.05, "skip_dead: the least probability a task with a run of dead groups is still drawn (keeps exploring)."
    )
    sampler_floor: float = _f(0.1, "Uniform floor mixed into task sampling so every active task stays reachable.")
    detector: dict[str, Any] = _f({}, "harness.detector.DetectorConfig overrides (eps, tau_lo, tau_hi, window, ...).")
    confirm_window: int = _f(
        2,
        "Training groups on its task that grade each accepted (provisional) update: it is "
        "reverted at the next pause when its failure persists on all of them, else confirmed "
        "(agents/decisions.py). 0: accepted updates are final.",
    )
    max_events: int = _f(
        8,
        "Events handed to one evolver round: one per task, confirmed before one-group events, "
        "dead groups before hacks before blind criteria, then most groups, then most recent first "
        "(each costs the critic fresh rollouts: this bounds the pause).",
    )
    max_judge_failure_share: float = _f(
        0.2,
        "Flag a step (metrics.jsonl judge_flagged, a console warning) when more "
        "than this share of its verdicts were left out because the judge failed; "
        "the same share of responses that could not be scored "
        "(unscoreable_flagged) or of verdicts skipped for want of a judge "
        "(skipped_flagged) flags it too.",
    )
    memory_url: str | None = _f(None, "Chroma server URL (scale-out); None: local folder in the run.")
    langgraph_url: str | None = _f(
        None, "Run the evolver on a LangGraph server at this URL (Studio) instead of in process."
    )
    langgraph_assistant: str = _f(
        "evolver",
        "With langgraph_url: the assistant whose context chooses the evolver's "
        "models, limits and thresholds (rounds send only run folder, memory and "
        "frozen policy). A graph id ('evolver'): an assistant made from this "
        "config; an assistant id or name (e.g. made in Studio): its context wins "
        "over the config's evolver.* settings.",
    )
    policy_endpoint: str = _f(
        "local",
        "Frozen policy for the critic: 'local' (the paused model; with langgraph_url "
        "it is saved to run_dir/frozen/ at each pause and loaded by the server) or "
        "an OpenAI-compatible base URL (vLLM).",
    )
    policy_model: str | None = _f(None, "Model name served at policy_endpoint (defaults to the adapter/model name).")
    allow_unjudged_criteria: bool = _f(
        False,
        "Train although train tasks have text-only criteria (no programmatic "
        "check) and no evolver.judge_model: those criteria are skipped, never "
        "scored. "
        "Off: such a run is refused at start, with the count.",
    )
    max_pause_s: int = _f(
        900,
        "Budget for one evolver pause (s); train.ddp_timeout must exceed it. A round that "
        "overruns it is cancelled and rolled back (in process and on a server).",
    )
    max_failed_rounds: int = _f(
        3,
        "Stop training (after the step's checkpoint, non-zero exit) when this many "
        "evolver rounds in a row failed (endpoint or server down); 0: never stop.",
    )
    judge_drift: bool | None = _f(
        None,
        "Re-judge a fixed probe set (judge_probe.json, drawn at the start) at every evolve_every steps and write "
        "the judge's drift (agreement with the first judging, met rate) to metrics.jsonl and the report "
        "(trainer/judge_drift.py). None: on when evolver.judge_model is an LLM (checks cannot drift).",
    )
    judge_drift_items: int = _f(16, "Probe items of the judge's drift line (judge calls per pause).")

    def __post_init__(self) -> None:
        if self.evolve_every < 1:
            raise ConfigError(f"harness.evolve_every must be >= 1, got {self.evolve_every}")
        if self.preflight_max_tasks < 1:
            raise ConfigError(f"harness.preflight_max_tasks must be >= 1, got {self.preflight_max_tasks}")
        if self.preflight_groups < 1:
            raise ConfigError(f"harness.preflight_groups must be >= 1, got {self.preflight_groups}")
        if self.max_extra_generation is not None and not self.max_extra_generation > 0.0:
            raise ConfigError(
                f"harness.max_extra_generation must be > 0 (a share of the training rollouts, e.g. 0.1) or unset, "
                f"got {self.max_extra_generation}"
            )
        if self.dynamic_sampling < 0:
            raise ConfigError(
                f"harness.dynamic_sampling must be >= 0 (0 = off, N = generate N x batch_size), "
                f"got {self.dynamic_sampling}"
            )
        if not 0.0 <= self.df_multiplier <= 1.0:
            raise ConfigError(f"harness.df_multiplier must be in [0, 1], got {self.df_multiplier}")
        if self.dynamic_filtering and self.liveness_weighting:
            raise ConfigError(
                "harness.dynamic_filtering and harness.liveness_weighting both set the sampler's task multipliers: "
                "choose one"
            )
        if not 0.0 <= self.sampler_floor <= 1.0:
            raise ConfigError(f"harness.sampler_floor must be in [0, 1], got {self.sampler_floor}")
        if not 0.0 <= self.skip_target <= 1.0:
            raise ConfigError(f"harness.skip_target must be in [0, 1], got {self.skip_target}")
        if not 0.0 < self.skip_floor <= 1.0:
            raise ConfigError(f"harness.skip_floor must be in (0, 1], got {self.skip_floor}")
        if self.skip_dead and (self.dynamic_filtering or self.liveness_weighting):
            other = "dynamic_filtering" if self.dynamic_filtering else "liveness_weighting"
            raise ConfigError(
                f"harness.skip_dead and harness.{other} both set the sampler's task multipliers: choose one"
            )
        if self.skip_dead and self.evolver:
            # The control must not use the evolver; with it, a repaired task would keep the dead run of the harness
            # it had before (liveness_weighting is the evolver's own predictive sampler, reset by each update).
            raise ConfigError(
                "harness.skip_dead is the zero-LLM control of a fixed harness: set harness.evolver=false (a repaired "
                "task would keep the dead run of its old harness; with the evolver use harness.liveness_weighting)"
            )
        if self.live_token_norm and self.dynamic_sampling:
            raise ConfigError(
                f"harness.live_token_norm with harness.dynamic_sampling={self.dynamic_sampling}: dynamic sampling "
                f"already normalises the loss over its kept (live) rows; set one of them"
            )
        if not 0.0 <= self.max_judge_failure_share <= 1.0:
            raise ConfigError(f"harness.max_judge_failure_share must be in [0, 1], got {self.max_judge_failure_share}")
        if self.judge_drift_items < 1:
            raise ConfigError(f"harness.judge_drift_items must be >= 1, got {self.judge_drift_items}")
        if self.max_failed_rounds < 0:
            raise ConfigError(f"harness.max_failed_rounds must be >= 0 (0 never stops), got {self.max_failed_rounds}")
        if self.confirm_window < 0:
            raise ConfigError(
                f"harness.confirm_window must be >= 0 (0: accepted updates are final), got {self.confirm_window}"
            )
        if self.detector:
            from harness.detector import DetectorConfig

            try:
                DetectorConfig(**self.detector)
            except Exception as e:  # pydantic names the field; we name the section
                raise ConfigError(f"harness.detector: {e}") from e


@dataclass
class RunConfig:
    run_dir: str = _f("runs/demo", "Run folder (config, harness versions, logs, memory, checkpoints, report).")
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    evolver: EvolverContext = field(default_factory=EvolverContext)

    def __post_init__(self) -> None:
        h, t, e = self.harness, self.train, self.evolver
        if e.require_approval and not h.langgraph_url:
            raise ConfigError(
                "evolver.require_approval needs harness.langgraph_url: only a round on a LangGraph "
                "server can wait for a person (Studio or `harnessrl evolve --server URL --thread T "
                "--approve`)"
            )
        if h.langgraph_url and e.memory and not h.memory_url:
            # The trainer holds the exclusive lock of run_dir/memory (one Chroma writer per folder), so the
            # LangGraph server process could not open it: both must talk to one Chroma server instead.
            raise ConfigError(
                "harness.langgraph_url with evolver.memory=true needs a Chroma server both the trainer "
                "and the LangGraph server can reach (the trainer locks run_dir/memory): start "
                "`chroma run --path <folder> --port 8000` and set "
                "harness.memory_url=http://127.0.0.1:8000, or set evolver.memory=false"
            )
        if h.judge_drift and e.judge_model == RULES:
            raise ConfigError(
                "harness.judge_drift=true needs an LLM judge: with evolver.judge_model=rules the checks decide every "
                "criterion and cannot drift; set evolver.judge_model=provider:model or harness.judge_drift=null"
            )
        if h.evolver and h.evolve_every % t.save_steps:
            raise ConfigError(
                f"harness.evolve_every ({h.evolve_every}) must be a multiple of train.save_steps ({t.save_steps}) so "
                f"every evolver round is followed by a checkpoint carrying the new harness; "
                f"set train.save_steps={_largest_divisor(h.evolve_every, t.save_steps)}"
            )
        if h.evolver and t.ddp_timeout <= h.max_pause_s:
            raise ConfigError(
                f"train.ddp_timeout ({t.ddp_timeout}s) must exceed harness.max_pause_s ({h.max_pause_s}s) "
                f"or other ranks time out while rank 0 runs the evolver; set train.ddp_timeout="
                f"{h.max_pause_s * 2}"
            )
        if h.live_token_norm:
            # The same correction as dynamic sampling's (trainer/dynamic_sampling.py): only a token-mean normaliser
            # can leave the zero-advantage rows out; a KL term would still act on them.
            if t.beta != 0.0:
                raise ConfigError(
                    f"harness.live_token_norm needs train.beta=0 (got {t.beta}): the KL term acts on the rows the "
                    f"normaliser leaves out; set train.beta=0 or harness.live_token_norm=false"
                )
            if t.loss_type not in LOSS_TYPES:
                raise ConfigError(
                    f"harness.live_token_norm needs a token-mean train.loss_type ({' / '.join(LOSS_TYPES)}; got "
                    f"{t.loss_type!r}): only its normaliser can leave rows out; set train.loss_type=dapo"
                )
        if h.dynamic_sampling:
            # TRL shuffles the generation batch before the loss (private `_prepare_inputs`), so the loss cannot
            # tell a dropped row from a kept one whose advantage is 0: only the token-mean normaliser can be
            # corrected (trainer/dynamic_sampling.py), not a per-row term.
            if t.beta != 0.0:
                raise ConfigError(
                    f"harness.dynamic_sampling={h.dynamic_sampling} needs train.beta=0 (got {t.beta}): the "
                    f"KL term would still act on the rows dynamic sampling drops (the loss cannot tell "
                    f"them apart); set train.beta=0 or harness.dynamic_sampling=0"
                )
            if t.loss_type not in LOSS_TYPES:
                raise ConfigError(
                    f"harness.dynamic_sampling={h.dynamic_sampling} needs a token-mean train.loss_type "
                    f"({' / '.join(LOSS_TYPES)}; got {t.loss_type!r}): only its normaliser is set to the "
                    f"kept rows, other losses would average the dropped rows in; set train.loss_type=dapo"
                )
        if h.policy_endpoint != "local" and not h.policy_endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"harness.policy_endpoint must be 'local' or an http(s) URL, got {h.policy_endpoint!r}")
        if self.frozen_policy_source is None:
            why = (
                "train.use_vllm=false"
                if not t.use_vllm
                else "train.vllm_mode=colocate (no server to push to)"
                if t.vllm_mode != "server"
                else f"it is not the training server train.vllm_server_base_url={t.vllm_server_base_url}"
            )
            raise ConfigError(
                f"harness.policy_endpoint={h.policy_endpoint} is a frozen policy nothing keeps in sync with the "
                f"trained weights (model.lora=false, so no adapter to hot-load; {why}): the critic would measure the "
                f"base model. Set harness.policy_endpoint=local, or model.lora=true (each round hot-loads the step's "
                f"adapter there), or train.use_vllm=true with train.vllm_mode=server and "
                f"harness.policy_endpoint=train.vllm_server_base_url (each round pushes the weights there)"
            )

    @property
    def frozen_policy_source(self) -> Literal["local", "training_server", "lora_adapter"] | None:
        """How the critic's frozen policy follows the trained weights (None: it would not; refused above).

        'local': the paused model itself; 'training_server': the policy endpoint is TRL's vLLM server, whose
        weights are pushed before each round (LoRA merged, or full weights); 'lora_adapter': any other server,
        into which each round hot-loads the step's adapter."""
        h, t = self.harness, self.train
        if h.policy_endpoint == "local":
            return "local"
        if t.use_vllm and t.vllm_mode == "server" and same_server(h.policy_endpoint, t.vllm_server_base_url):
            return "training_server"
        return "lora_adapter" if self.model.lora else None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["evolver"] = {k: v for k, v in d["evolver"].items() if k not in SET_BY_TRAINER}
        return d

    @property
    def run_path(self) -> Path:
        return Path(self.run_dir)


def same_server(a: str, b: str | None) -> bool:
    """Whether two base URLs name one server ("http://h:8000", "http://h:8000/" and "http://h:8000/v1" do)."""

    def root(u: str) -> str:
        u = u.rstrip("/")
        return u[: -len("/v1")] if u.endswith("/v1") else u

    return b is not None and root(a) == root(b)


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "data": DataConfig,
    "train": TrainConfig,
    "harness": HarnessConfig,
    "evolver": EvolverContext,
}

# Context fields the trainer fills for each round, from where (an `evolver:` key naming one is refused).
SET_BY_TRAINER = {
    "run_dir": "the top-level run_dir",
    "memory_location": "harness.memory_url (else run_dir/memory when evolver.memory)",
    "policy": "harness.policy_endpoint",
    "services_key": "the trainer itself",
    "max_tokens": "train.max_completion_length",
    "temperature": "train.temperature",
    "seed": "train.seed",
    "reward_parts": "train.rewards",
    "probe_budget": "harness.max_extra_generation (what is left of it at each round)",
}
assert set(PER_RUN) <= set(SET_BY_TRAINER)


def describe() -> str:
    """Every field with its default and help text (for `harnessrl train --help-config`)."""
    lines = ["run_dir: " + dataclasses.fields(RunConfig)[0].metadata["help"]]
    for section, cls in SECTIONS.items():
        lines.append(f"\n[{section}]")
        for f in dataclasses.fields(cls):
            if cls is EvolverContext and f.name in SET_BY_TRAINER:
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            lines.append(
                f"  {section}.{f.name} = {default!r}\n      "
                f"{f.metadata.get('help') or f.metadata.get('description', '')}"
            )
    return "\n".join(lines)
