"""DAPO dynamic sampling (`harness.dynamic_sampling = N`): over-sample, drop zero-variance groups, refill.

verl's DAPO generates a batch, drops every group whose rewards are all equal (its advantages are zero: it
teaches nothing but still dilutes the token-mean loss), and generates more batches until `batch_size / G`
informative groups are collected; the surplus is dropped. TRL 1.16 generates, scores and computes
advantages in one private method (`_generate_and_score_completions`), so a second generation round inside
one step needs private API. The closest faithful version through public contracts, implemented here:

1. over-sample: the step draws N x `train.batch_size` rollouts (N x batch/G groups) in ONE generation call
   (`trainer.grpo.grpo_args` multiplies TRL's per-device batch; the harness sampler draws them at step time: the
   first batch/G from its main stream, the draws a run without over-sampling makes at the same seed, the surplus
   from a second stream, so the fixed arm and DAPO share their task draws at every step);
2. drop and refill: this reward wrapper (a reward function is TRL's public hook) keeps the first `batch/G`
   groups in draw order whose rewards vary and returns `None` for every other row; TRL turns `None` into an
   unscorable row whose advantage is forced to 0, so dropped rows add nothing to the policy gradient;
3. the loss is normalised over the kept rows only: `HarnessGRPOTrainer.compute_loss` (public) replaces
   TRL's `num_items_in_batch` (tokens of the whole generation batch) by the kept rows' tokens that this
   wrapper counted, so the `dapo` token-mean loss equals the one over exactly the kept groups.

Differences from verl, stated in benchmarks/RESULTS.md: one over-sampled generation per step instead of
"generate until full" (when fewer than batch/G groups vary the step trains on fewer, counted as
`ds_short`); dropped rows still pass through TRL's forward/backward with zero weight (extra compute, paid in
wall time like the over-sampling itself).

What composes with it and what is refused at start (the config itself, `trainer.config.RunConfig`, and the launch,
`check_one_process`):

- `train.beta = 0` only: TRL shuffles the generation batch before the loss (private `_prepare_inputs`), so
  the loss cannot tell a dropped row from a kept row whose advantage is 0; a KL term would act on dropped rows;
- a token-mean `train.loss_type` (`trainer.config.LOSS_TYPES`): only their normaliser (`num_items_in_batch`) is set
  to the kept rows' tokens; `grpo`/`bnpo`/`dr_grpo` would average the dropped rows in;
- one process: each rank's reward sees only its own slice, so the selection would be per rank and the kept
  token count local (refused before the model loads, and again by `HarnessGRPOTrainer`).

With the evolver (HarnessRL on top of DAPO) every generated group, kept or dropped, is scored and observed by
the harness: the detector, the memory's group summaries (so the critic's pooled control and the provisional
grading of accepted updates, `trainer.provisional`), the dynamic-filtering window and the step metrics. The
dropped groups are the zero-variance groups, i.e. the evidence of dead groups the evolver repairs: were they
hidden, a dead task would never produce a dead-group event, and a repair that left its group dead would be
graded only on the groups that varied and confirmed. Only the policy loss sees the kept groups. "Dead" for the
detector is std < `harness.detector.eps`, wider than DAPO's exact zero variance: a kept group can still be
detector-dead, counted per step as `ds_kept_dead` (the benchmark's zero-variance share of trained groups).

The normaliser alone (`harness.live_token_norm`, the benchmark's `fixed-norm` control, `LiveNormReward`): no
over-sampling and nothing dropped; every row keeps its reward (a zero-variance group's advantages are 0 anyway), and
only the token-mean normaliser counts the rows of the groups whose rewards vary, as DAPO's does. It separates DAPO's
two effects: a fixed-harness step divides its loss by every row's tokens, dead rows included, so dead groups shrink
its gradient; DAPO's step divides by the kept rows only. Refused with `beta > 0`, a non-token-mean loss, several
processes (as above) and with dynamic sampling itself. Per step it records `ln_groups_live` and `ln_tokens_live` /
`ln_tokens_all` (the share of the normaliser it kept).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from trainer.config import ConfigError, RunConfig


def check_one_process(cfg: RunConfig) -> None:
    """Refuse `harness.dynamic_sampling` or `harness.live_token_norm` under several processes, before the model loads.

    Not a schema refusal: the same config is fine in one process (a report, a replay), so it is checked at launch."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.harness.dynamic_sampling and world > 1:
        raise ConfigError(
            f"harness.dynamic_sampling={cfg.harness.dynamic_sampling} runs on one process only, but "
            f"WORLD_SIZE={world}: each rank's reward sees only its own rows, so the kept groups and the "
            f"loss normaliser would be per rank; launch one process or set harness.dynamic_sampling=0"
        )
    if cfg.harness.live_token_norm and world > 1:
        raise ConfigError(
            f"harness.live_token_norm runs on one process only, but WORLD_SIZE={world}: each rank's reward sees only "
            f"its own rows, so the live rows' token count would be per rank; launch one process or set "
            f"harness.live_token_norm=false"
        )


def zero_variance(rewards: list[float]) -> bool:
    """All rewards of the group equal: GRPO's advantages are zero (TRL: std close to 0)."""
    return max(rewards) - min(rewards) <= 1e-9


def select_groups(rewards: list[float], num_generations: int, keep: int) -> list[int]:
    """Indices of the kept groups: the first `keep` groups, in draw order, whose rewards vary."""
    if len(rewards) % num_generations:
        raise ValueError(f"select_groups: {len(rewards)} rewards are not groups of {num_generations}")
    groups = [rewards[i : i + num_generations] for i in range(0, len(rewards), num_generations)]
    return [g for g, rs in enumerate(groups) if not zero_variance(rs)][:keep]


class DynamicSamplingReward:
    """Wraps the rubric reward and keeps the first `keep_groups` informative groups.

    It scores every generated group (harness bookkeeping included), keeps the first `keep_groups` informative
    ones and returns None for the rows of the others.
    """

    __name__ = "rubric"  # same metric names as the plain rubric reward

    def __init__(self, inner: Any, num_generations: int, keep_groups: int) -> None:
        if keep_groups < 1:
            raise ValueError(f"DynamicSamplingReward: keep_groups must be >= 1, got {keep_groups}")
        self.inner = inner
        self.num_generations = num_generations
        self.keep_groups = keep_groups
        self.kept_tokens = 0  # completion tokens of the kept rows of the last call (the loss normaliser)

    async def __call__(
        self, *, completions: list, completion_ids: list | None = None, trainer_state: Any = None, **kwargs: Any
    ) -> list[float | None]:
        rewards = await self.inner(
            completions=completions, completion_ids=completion_ids, trainer_state=trainer_state, **kwargs
        )
        g = self.num_generations
        kept = set(select_groups(rewards, g, self.keep_groups))
        out = [r if i // g in kept else None for i, r in enumerate(rewards)]
        if completion_ids is None:
            raise ValueError("DynamicSamplingReward needs TRL's completion_ids (to normalise the loss over kept rows)")
        self.kept_tokens = sum(len(completion_ids[i]) for i in range(len(rewards)) if i // g in kept)
        n_groups = len(rewards) // g
        dead = sum(1 for s in range(0, len(rewards), g) if zero_variance(rewards[s : s + g]))
        run = self.inner.run
        eps = run.detector.config.eps  # the detector's "dead" (std < eps), as the step's dead_share counts it
        kept_dead = sum(1 for k in kept if float(np.std(rewards[k * g : (k + 1) * g])) < eps)
        step = (trainer_state.global_step if trainer_state is not None else run.sampler.step if run.sampler else 0) + 1
        run.record_step(
            step,
            {
                "ds_groups_generated": n_groups,
                "ds_groups_kept": len(kept),
                "ds_groups_dead": dead,
                "ds_kept_dead": kept_dead,
                "ds_short": self.keep_groups - len(kept),
                "ds_rollouts_generated": len(rewards),
                "ds_rollouts_trained": len(kept) * g,
            },
        )
        return out


class LiveNormReward:
    """Wraps the rubric reward and counts the tokens of the rows whose group has reward variance.

    `kept_tokens` is the loss normaliser `HarnessGRPOTrainer.compute_loss` uses; every reward is returned unchanged."""

    __name__ = "rubric"  # same metric names as the plain rubric reward

    def __init__(self, inner: Any, num_generations: int) -> None:
        self.inner = inner
        self.num_generations = num_generations
        self.kept_tokens = 0  # completion tokens of the live groups' rows in the last call (the loss normaliser)

    async def __call__(
        self, *, completions: list, completion_ids: list | None = None, trainer_state: Any = None, **kwargs: Any
    ) -> list[float]:
        rewards = await self.inner(
            completions=completions, completion_ids=completion_ids, trainer_state=trainer_state, **kwargs
        )
        if completion_ids is None:
            raise ValueError("LiveNormReward needs TRL's completion_ids (to normalise the loss over live rows)")
        g = self.num_generations
        if len(rewards) % g:
            raise ValueError(f"LiveNormReward: {len(rewards)} rewards are not groups of {g}")
        live = {s // g for s in range(0, len(rewards), g) if not zero_variance(rewards[s : s + g])}
        self.kept_tokens = sum(len(completion_ids[i]) for i in range(len(rewards)) if i // g in live)
        run = self.inner.run
        step = (trainer_state.global_step if trainer_state is not None else run.sampler.step if run.sampler else 0) + 1
        run.record_step(
            step,
            {
                "ln_groups_live": len(live),
                "ln_tokens_live": self.kept_tokens,
                "ln_tokens_all": sum(len(c) for c in completion_ids[: len(rewards)]),
            },
        )
        return list(rewards)
