"""Benchmark vocabulary shared by run, collect and render: the arms, the presets and the job record.

Part of `benchmarks/compare.py` (the CLI); the modules in `benchmarks/` import each other by plain name
(the folder is on `sys.path` when compare.py runs, and tests put it there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository (or, in a worker, the frozen code snapshot)

# -- arms --------------------------------------------------------------------------------------------------
_FULL = ["harness.evolver=true", "harness.interfaces=[sampling,guidance,criteria]", "harness.memory=true",
         "harness.critic=true"]


@dataclass(frozen=True)
class Arm:
    name: str
    label: str
    overrides: tuple[str, ...]
    key: bool  # key arms run with every seed


ARMS: dict[str, Arm] = {a.name: a for a in [
    Arm("fixed", "1 fixed harness", ("harness.evolver=false",), True),
    Arm("dynfilter", "2 fixed + dynamic filtering", ("harness.evolver=false", "harness.dynamic_filtering=true"), True),
    Arm("harnessrl", "3 HarnessRL (rules, all)", tuple(_FULL), True),
    Arm("no-sampling", "4a HarnessRL - sampling", (*_FULL, "harness.interfaces=[guidance,criteria]"), False),
    Arm("no-guidance", "4b HarnessRL - guidance", (*_FULL, "harness.interfaces=[sampling,criteria]"), False),
    Arm("no-criteria", "4c HarnessRL - criteria", (*_FULL, "harness.interfaces=[sampling,guidance]"), False),
    Arm("no-memory", "4d HarnessRL - memory", (*_FULL, "harness.memory=false"), False),
    Arm("no-critic", "4e HarnessRL - critic", (*_FULL, "harness.critic=false"), False),
]}
KEY_ARMS = [a for a in ARMS if ARMS[a].key]
SPURIOUS_EVENTS = ("spurious_length", "spurious_audit", "stuffing", "guidance_leak")


# -- presets -----------------------------------------------------------------------------------------------
# -- presets -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    config: str  # a file in configs/
    steps: int
    batch: int
    group: int
    evolve_every: int
    eval_every: int  # held-out eval of the checkpoints at multiples of this (and the last step)
    eval_per_domain: int  # held-out tasks per domain in the fixed eval subset
    eval_k: int
    max_tokens: int
    train_per_domain: int = 0  # training pool: this many train tasks per domain (0 = every train task)
    extra: tuple[str, ...] = ()  # preset-specific overrides applied to every arm


PRESETS: dict[str, Preset] = {
    # SmolLM2-135M-Instruct + LoRA (configs/cpu-demo.yaml): the real benchmark.
    # Sized for about an hour for all arms on a *shared* 2-core box, where one step took 40-100 s.
    # The training pool is small (2 tasks per domain) so that tasks are *revisited* within the budget: with all
    # 255 train tasks, 16 groups per run almost never revisit a task, so no per-task repair can act (measured).
    "smollm2": Preset("configs/cpu-demo.yaml", steps=8, batch=8, group=4, evolve_every=2, eval_every=4,
                      eval_per_domain=2, eval_k=4, max_tokens=48, train_per_domain=2,
                      extra=("harness.max_events=3",)),
    # Random tiny model (configs/tiny.yaml): exercises every code path in seconds; numbers are meaningless.
    "tiny": Preset("configs/tiny.yaml", steps=2, batch=8, group=4, evolve_every=1, eval_every=1,
                   eval_per_domain=1, eval_k=2, max_tokens=16, train_per_domain=2,
                   extra=("harness.max_events=2", "harness.sample_k=2", "harness.max_revisions=0")),
}


@dataclass
class Job:
    """One unit of work for a worker: the base-model eval or one (arm, seed) run. JSON-serialisable."""

    kind: str  # "base" | "arm"
    name: str  # folder name under <out>/runs
    config: str
    overrides: list[str]
    run_dir: str
    eval_tasks: list[str]
    eval_k: int
    max_tokens: int
    eval_seed: int
    eval_every: int = 1
    arm: str = ""
    seed: int = 0
    model: str = ""  # base job only: the policy name
