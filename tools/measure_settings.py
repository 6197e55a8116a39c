"""How one candidate measurement samples and when it stops (`tools.candidate`), and the budget's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.detector import DetectorConfig
from tools.reward_parts import RewardPart
from tools.sequential import ALPHA, BOOTSTRAP

# The default budget, written once: `agents.context.EvolverContext` (the knobs `evolver.sample_k` /
# `evolver.sample_k_max`, with their help) takes its defaults from here, the lowest layer that uses them.
SAMPLE_K = 4  # rollouts per visit prompt and side at the first look
SAMPLE_K_MAX = 16  # the cap the groups double up to while the sequential test is undecided


@dataclass(frozen=True)
class MeasureSettings:
    """How one measurement samples and when it stops: budget, frozen-policy sampling, step, detector thresholds.

    Fixed for a round; `agents.critic.measure_settings` builds it from the graph's context.
    """

    sample_k: int = SAMPLE_K
    sample_k_max: int = SAMPLE_K_MAX
    k: int | None = None  # a fixed budget: sample_k = sample_k_max = k
    alpha: float = ALPHA  # overall error rate of the sequential test
    resamples: int = BOOTSTRAP  # bootstrap resamples per look (the exact hit test needs none)
    max_tokens: int = 48
    temperature: float = 1.0
    seed: int = 0  # both sides sample with it (common random numbers)
    step: int = 0  # the step training paused at: prompts are rendered as the next draw, at this step, sees them
    detector_config: DetectorConfig = field(default_factory=DetectorConfig)
    # The run's parts beside the rubric: probes are scored as training scores its groups (tools.reward_parts).
    reward_parts: tuple[RewardPart, ...] = ()
    # The most rollouts this measurement may generate (the lane's share of the round's probe budget); None: no bound.
    # A measurement whose largest look could need more is refused before it draws anything (`ProbeBudgetSpent`).
    max_probe_rollouts: int | None = None

    def __post_init__(self) -> None:
        if self.k is not None:  # frozen: the fixed budget is resolved once, here
            object.__setattr__(self, "sample_k", self.k)
            object.__setattr__(self, "sample_k_max", self.k)
        if self.sample_k < 2:
            raise ValueError(f"k must be >= 2 to measure a group's spread, got sample_k={self.sample_k}")
        if self.sample_k_max < self.sample_k:
            raise ValueError(f"sample_k_max ({self.sample_k_max}) must be >= sample_k ({self.sample_k})")
        if self.max_probe_rollouts is not None and self.max_probe_rollouts < 0:
            raise ValueError(f"max_probe_rollouts must be >= 0, got {self.max_probe_rollouts}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
