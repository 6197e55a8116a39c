"""One line of a run's `metrics.jsonl` as its readers see it (the console, the report, the benchmarks).

The line is written per training step by the reward (`trainer/reward.py`: rewards and their parts, dead share, groups,
the judge's counts and flags), the step's timing (`trainer/grpo.py`), DAPO's dynamic sampling (`ds_*`,
`trainer/dynamic_sampling.py`) and the callback (`trainer/callback.py`: pause, time, the harness version after the
pause, the memory server's outage, the judge's drift probe at a pause). Every field has a default, so lines of older
runs (without the later keys) still read; a value that was never written is None where "absent" and "zero" differ
(a step's time, DAPO's counts).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DriftLine(BaseModel):
    """The `judge_drift` field of a metrics.jsonl line (a pause's step)."""

    model_config = ConfigDict(extra="forbid")

    items: int = 0  # probe items asked
    n: int = 0  # items decided now and at the first judging (the agreement's denominator)
    failed: int = 0  # items the judge gave no verdict on now
    agreement: float | None = None  # share of the n whose verdict equals the first judging's
    met_rate: float | None = None  # share of the items decided now that were met
    first_met_rate: float | None = None  # the same at the first judging
    check_agreement: float | None = None  # share agreeing with the check, over decided items that have one
    first: bool = False  # this judging is the first (the set was judged now, as its reference)
    seconds: float = 0.0
    error: str | None = None  # why the probe could not run (then nothing else is set)


class StepMetrics(BaseModel):
    # The judge's counts per kind ("judge/malformed", "judge/errors", ...) are written only when non-zero: kept as
    # extra keys, read by no one here.
    model_config = ConfigDict(extra="allow")

    step: int = 0
    reward: float | None = None
    reward_std: float | None = None
    dead_share: float | None = None
    n_groups: int = 0
    harness_version: int | None = None
    harness_versions: list[int] = Field(default_factory=list)
    harness_version_after: int | None = None
    hinted_share: float | None = None
    # Per group, in batch order: which task, its mean and std.
    tasks: list[str] = Field(default_factory=list)
    group_means: list[float] = Field(default_factory=list)
    group_stds: list[float] | None = None  # None: a line written before stds were
    judge_warnings: int = 0
    judge_left_out: int = 0
    judge_left_out_share: float = 0.0
    judge_flagged: bool = False
    unscoreable: int = 0
    unscoreable_flagged: bool = False
    criteria_skipped: int = 0
    skipped_flagged: bool = False
    # Reward parts beside the rubric (train.rewards; None / empty: the run had none): `reward` is then the combined
    # reward, these the step's mean rubric score and each part's mean value (unweighted).
    reward_rubric: float | None = None
    reward_parts: dict[str, float] = Field(default_factory=dict)
    # Timing: the step's start and its line's time (wall clock), its training and the harness's own seconds.
    step_started: float | None = None
    time: float | None = None
    train_step_s: float | None = None
    harness_overhead_s: float | None = None
    sampler_s: float = 0.0
    reward_overhead_s: float = 0.0
    pause_s: float = 0.0
    # DAPO dynamic sampling (None: the run did not use it).
    ds_groups_generated: int | None = None
    ds_groups_kept: int | None = None
    ds_groups_dead: int | None = None
    ds_kept_dead: int = 0
    ds_short: int = 0
    ds_rollouts_generated: int | None = None
    ds_rollouts_trained: int | None = None
    # The memory server's outage (memory/outage.py), written by the callback only while there is one: records waiting
    # for the server at the step's end, and queued records written during the step once it answered again.
    memory_queued: int = 0
    memory_flushed: int = 0
    # The judge's drift probe (trainer/judge_drift.py), written at pause steps of runs with an LLM judge.
    judge_drift: DriftLine | None = None

    @property
    def harness_version_now(self) -> int | None:
        """The harness version after the step's pause (lines before it was written: the version the step drew)."""
        return self.harness_version if self.harness_version_after is None else self.harness_version_after
