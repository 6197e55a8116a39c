"""Benchmark vocabulary shared by run, collect and render: the arms, the presets and the job record.

Part of `benchmarks/compare.py` (the CLI); the modules in `benchmarks/` import each other by plain name
(the folder is on `sys.path` when compare.py runs, and tests put it there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository (or, in a worker, the frozen code snapshot)

# -- arms --------------------------------------------------------------------------------------------------
_FULL = [
    "harness.evolver=true",
    "evolver.interfaces=[sampling,guidance,criteria]",
    "evolver.memory=true",
    "evolver.critic=true",
    # Repair the tasks the initial policy leaves dead before step 1, with one probe group per task (the default).
    # Two flag a mostly-dead task more often (0.84 against 0.66, results/preflight/POWER.md) but cost 12.5% of this
    # protocol's generation on their own; with one, the tasks the probe misses are found by the step-8 round from
    # training's groups; at four seeds the chronic tasks' late groups varied no less often than with two
    # (results/revive/RESULTS.md, sixth sitting).
    "harness.preflight=true",
    "harness.liveness_weighting=true",  # draw predicted-dead tasks less until a repair resets them
]
DAPO_OVERSAMPLE = 2  # DAPO arm: generate 2 x batch rollouts a step, train on batch of them (verl's gen_batch_size)


@dataclass(frozen=True)
class Arm:
    name: str
    label: str
    overrides: tuple[str, ...]
    key: bool  # key arms run with every seed
    runner: str = "harness"  # "harness": trainer.grpo.train; "plain": plain TRL GRPO, no harness code (bench_plain)


ARMS: dict[str, Arm] = {
    a.name: a
    for a in [
        Arm("fixed", "1 fixed harness", ("harness.evolver=false",), True),
        Arm(
            "dapo",
            "2 DAPO dynamic sampling (over-sample x2, drop, refill)",
            ("harness.evolver=false", f"harness.dynamic_sampling={DAPO_OVERSAMPLE}"),
            True,
        ),
        Arm("harnessrl", "3 HarnessRL (rules, all)", tuple(_FULL), True),
        # HarnessRL on top of DAPO: the evolver with dynamic sampling on. The detector, memory and provisional grading
        # see every generated group (the dropped dead groups are the evidence of dead groups); only the loss sees the
        # kept ones (trainer/dynamic_sampling.py).
        Arm(
            "harnessrl-dapo",
            "3+2 HarnessRL + DAPO dynamic sampling (evolver, over-sample x2)",
            (*_FULL, f"harness.dynamic_sampling={DAPO_OVERSAMPLE}"),
            True,
        ),
        Arm(
            "dynfilter",
            "4 fixed + down-weighting filter",
            ("harness.evolver=false", "harness.dynamic_filtering=true"),
            False,
        ),
        Arm("no-sampling", "5a HarnessRL - sampling", (*_FULL, "evolver.interfaces=[guidance,criteria]"), False),
        Arm("no-guidance", "5b HarnessRL - guidance", (*_FULL, "evolver.interfaces=[sampling,criteria]"), False),
        Arm("no-criteria", "5c HarnessRL - criteria", (*_FULL, "evolver.interfaces=[sampling,guidance]"), False),
        Arm("no-memory", "5d HarnessRL - memory", (*_FULL, "evolver.memory=false"), False),
        Arm("no-critic", "5e HarnessRL - critic", (*_FULL, "evolver.critic=false"), False),
        # Without training's grade: every accepted update is final, none is confirmed or reverted on the task's
        # next training groups (trainer/provisional.py).
        Arm("no-confirm", "5f HarnessRL - confirm/revert", (*_FULL, "harness.confirm_window=0"), False),
        # Without the pre-flight round: the first repairs come at the first evolver round (step evolve_every), and
        # the dead tasks are found from training's groups only.
        Arm("no-preflight", "5g HarnessRL - pre-flight round", (*_FULL, "harness.preflight=false"), False),
        Arm("plain", "6 plain TRL GRPO (same reward, no harness code)", ("harness.evolver=false",), False, "plain"),
        # The two controls HarnessRL has to beat (issue 32), with every seed. fixed-norm: DAPO's loss normaliser
        # (zero-advantage rows out of it) without its over-sampling; skip: a zero-LLM predictive sampler that skips
        # tasks after runs of dead groups (harness/skip.py), at the config's dead-share target (harness.skip_target).
        Arm(
            "fixed-norm",
            "7a fixed, zero-advantage rows out of the loss normaliser",
            ("harness.evolver=false", "harness.live_token_norm=true"),
            True,
        ),
        Arm(
            "skip",
            "7b fixed + skip predicted-dead tasks (no LLM)",
            ("harness.evolver=false", "harness.skip_dead=true"),
            True,
        ),
    ]
}
KEY_ARMS = [a for a in ARMS if ARMS[a].key]
SPURIOUS_EVENTS = ("spurious_length", "spurious_audit", "stuffing", "guidance_leak")


# -- presets -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    config: str  # a file in configs/
    steps: int
    batch: int
    group: int
    evolve_every: int
    eval_every: int  # held-out eval of the checkpoints at multiples of this (and the last step)
    eval_per_domain: int  # held-out tasks per domain in the fixed eval subset (0 = every held-out task)
    eval_k: int
    max_tokens: int
    train_per_domain: int = 0  # training pool: this many train tasks per domain (0 = every train task)
    extra: tuple[str, ...] = ()  # preset-specific overrides applied to every arm
    greedy: bool = True  # also evaluate every checkpoint with greedy decoding (one response per task)
    noise_seed: int | None = None  # also evaluate the last checkpoint with this second eval seed (eval noise)
    jobs: int = 1  # default --jobs
    note: str = ""
    # The external yardstick (tools/ifeval.py): greedy answers of this many tokens to data/ifeval-heldout, scored by
    # IFEval's own checkers, for the base model and every run's last checkpoint (0 = off).
    ifeval_max_tokens: int = 128
    # Seeds past the first this many evaluate only the base (step 0) and the final checkpoint: the curves and "steps
    # to fixed's best" come from the seeds with full curves (issue 32). 0 = every seed has a full curve.
    full_curve_seeds: int = 2
    # The second held-out set: the suite's train-split tasks that no arm's pool contains, at this k (0 = off); the
    # same generator as the test tasks, so beside them, never pooled with them.
    train_heldout_k: int = 2
    train_heldout_per_domain: int = 0  # of the second held-out set, this many per domain (0 = every one)
    report_name: str = "RESULTS.md"  # the report's default file name in the --out folder


PRESETS: dict[str, Preset] = {
    # SmolLM2-135M-Instruct + LoRA (configs/cpu-demo.yaml), the first, underpowered sitting (8 steps).
    # The training pool is small (2 tasks per domain) so that tasks are *revisited* within the budget: with all
    # 255 train tasks, 16 groups per run almost never revisit a task, so no per-task repair can act (measured).
    "smollm2": Preset(
        "configs/cpu-demo.yaml",
        steps=8,
        batch=8,
        group=4,
        evolve_every=2,
        eval_every=4,
        eval_per_domain=2,
        eval_k=4,
        max_tokens=48,
        train_per_domain=2,
        extra=("harness.max_events=3",),
        greedy=False,
        jobs=2,
    ),
    # The protocol (issue 13): >= 40 steps of 16 rollouts (4 prompts x G=4), a 10-task pool (each task ~16
    # visits), evolver rounds every 8 steps, checkpoints evaluated every 8 steps on ALL 65 held-out tasks
    # (greedy + Avg@4, the same eval seed for every model). Resumable: run it in several sittings.
    "smollm2-40": Preset(
        "configs/cpu-demo.yaml",
        steps=40,
        batch=16,
        group=4,
        evolve_every=8,
        eval_every=8,
        eval_per_domain=0,
        eval_k=4,
        max_tokens=48,
        train_per_domain=2,
        # The critic as the config's screen (cap 4, alpha 0.5) that training's grade backs: pilot 4 of
        # benchmarks/results/pilot-issue22/PILOT.md against the cap of 16 that pilots 1-3 ran. The evolver's
        # probes (pre-flight and critic) may add at most 10% to training's generation, the bound the revive
        # yardsticks are judged at (benchmarks/results/revive/RESULTS.md); arms without an evolver draw none.
        extra=("harness.max_events=3", "harness.max_extra_generation=0.1"),
        jobs=2,
    ),
    # The pilot behind the power calculation: short runs, same eval (k=2), a second eval seed for eval noise.
    "pilot": Preset(
        "configs/cpu-demo.yaml",
        steps=6,
        batch=16,
        group=4,
        evolve_every=3,
        eval_every=6,
        eval_per_domain=0,
        eval_k=2,
        max_tokens=48,
        train_per_domain=2,
        extra=("harness.max_events=2",),
        noise_seed=4321,
        jobs=2,
    ),
    # The same protocol on one GPU (never run in CI): every job a concurrent process on the one device, bf16,
    # >= 100 steps per arm. Sized for < 8 min on one H200 (estimated, not measured: see RESULTS.md).
    "gpu": Preset(
        "configs/cpu-demo.yaml",
        steps=100,
        batch=16,
        group=4,
        evolve_every=10,
        eval_every=20,
        eval_per_domain=0,
        eval_k=8,
        max_tokens=48,
        train_per_domain=2,
        extra=(
            "harness.max_events=3",
            "harness.max_extra_generation=0.1",
            "train.use_cpu=false",
            "train.bf16=true",
            "train.torch_threads=1",
        ),
        jobs=16,
        note="GPU only; not run in CI",
    ),
    # Qwen3-4B + LoRA on one GPU (configs/gpu-4b.yaml: TRL's vLLM server for rollouts, an LLM judge and brains on a
    # second vLLM server, started as its header says). GPU only, never run in CI; its report is RESULTS-gpu.md.
    "gpu-4b": Preset(
        "configs/gpu-4b.yaml",
        steps=100,
        batch=16,
        group=4,
        evolve_every=10,
        eval_every=20,
        eval_per_domain=0,
        eval_k=4,
        max_tokens=256,
        train_per_domain=2,
        # LoRA: every evaluated checkpoint is kept (train.save_total_limit=null), and full 4B checkpoints with their
        # optimizer state would fill the disk; the adapter is pushed to TRL's vLLM server before each round.
        # One job at a time: every arm's rollouts go to the one vLLM server of the config.
        extra=("harness.max_events=3", "model.lora=true"),
        jobs=1,
        note="GPU only (configs/gpu-4b.yaml); not run in CI; report RESULTS-gpu.md",
        ifeval_max_tokens=256,
        report_name="RESULTS-gpu.md",
    ),
    # Random tiny model (configs/tiny.yaml): exercises every code path in seconds; numbers are meaningless.
    "tiny": Preset(
        "configs/tiny.yaml",
        steps=2,
        batch=8,
        group=4,
        evolve_every=1,
        eval_every=1,
        eval_per_domain=1,
        eval_k=2,
        max_tokens=16,
        train_per_domain=2,
        extra=("harness.max_events=2", "evolver.sample_k=2", "evolver.max_revisions=0"),
        noise_seed=99,
        jobs=0,
        ifeval_max_tokens=8,
        train_heldout_per_domain=1,  # 5 train tasks outside the pool: the code path, in seconds
    ),
}


@dataclass
class Job:
    """One unit of work for a worker: the base-model eval or one (arm, seed) run. JSON-serialisable."""

    kind: str  # "base" | "arm"
    name: str  # the job's name: its summary is <results>/<name>.json
    config: str
    overrides: list[str]
    run_dir: str  # the trainer's run folder (resumed when interrupted)
    eval_tasks: list[str]
    eval_k: int
    max_tokens: int
    eval_seed: int
    eval_every: int = 1
    arm: str = ""
    seed: int = 0
    model: str = ""  # base job only: the policy name
    preset: str = ""
    summary_path: str = ""  # where the worker writes the job's summary (JSON)
    greedy: bool = True
    noise_seed: int | None = None
    runner: str = "harness"
    code: dict = field(default_factory=dict)  # commit, dirty, code_hash of the code the job runs
    overrides_arm: list[str] = field(default_factory=list)  # the arm's own overrides (for the summary)
    ifeval_max_tokens: int = 0  # the external yardstick on the base and the last checkpoint (0 = off)
    # False: a seed past the preset's full_curve_seeds, evaluated at step 0 (the base job) and its final step only.
    full_curve: bool = True
    # The second held-out set (train-split tasks in no arm's pool), evaluated at k = train_heldout_k (0 = off).
    train_heldout_tasks: list[str] = field(default_factory=list)
    train_heldout_k: int = 0
