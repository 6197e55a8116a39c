"""Per-task liveness: a decayed Beta posterior on "a group of this task has reward variance".

Deadness belongs to the task: on SmolLM2 a task's next group is dead with about the task's own dead rate, whatever
its previous group did (issue 30's replay of the benchmark draws). So one number per task summarises what the run
has seen: the posterior mean of its dead rate, `dead_rate`. It is read where a task's expected waste matters: the
round's event ranking (trainer/round_events.py: estimated dead rate x draw probability x steps left, recorded in
rounds.jsonl as why each event got its slot) and, with `harness.liveness_weighting`, the sampler, which draws a
task by its estimated live rate while it waits for a repair (trainer/sampler.py).

The model: group g of task t is dead (std < eps) with probability d_t; d_t ~ Beta(dead + b0, live + a0). Counts
decay: before each new observation of a task its counts are multiplied by `decay`, so evidence from a policy many
visits ago counts less (a weight of `decay^k` after k newer groups; 0.9 forgets half in about 7 visits). An update
that edits the task resets it to the prior (`reset`): the old groups were scored under another harness.

Training groups count one each. Probe rollouts (the pre-flight's, `observe_probe`) count by their subsets: k
rollouts of a task give `dead_subset_share`, the fraction of the C(k, G) groups of G that could be drawn from them
with zero variance (an unbiased estimate of d_t for k >= G), weighted as k / G groups. One group of G rollouts is
one draw of d_t, and that is all a probe of G says; more rollouts say more.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from math import comb
from typing import Any

import numpy as np

# Enumerate every subset up to this many (C(16, 4) = 1820); beyond it, a seeded sample of this many.
MAX_SUBSETS = 4096


def dead_subset_share(rewards: Sequence[float], group_size: int, eps: float) -> float:
    """The share of size-`group_size` subsets of `rewards` whose population std is below `eps`.

    With the rewards of k independent rollouts of one prompt this is the U-statistic estimate of the probability
    that a training group of `group_size` rollouts is dead.
    """
    k = len(rewards)
    if group_size < 2 or k < group_size:
        raise ValueError(f"dead_subset_share needs >= group_size >= 2 rewards, got {k} for group_size={group_size}")
    r = np.asarray(rewards, dtype=float)
    if comb(k, group_size) <= MAX_SUBSETS:
        subsets: Any = itertools.combinations(range(k), group_size)
    else:
        rng = random.Random(k * 1000 + group_size)
        subsets = (rng.sample(range(k), group_size) for _ in range(MAX_SUBSETS))
    dead = total = 0
    for idx in subsets:
        total += 1
        dead += float(np.std(r[list(idx)])) < eps
    return dead / total


class Liveness:
    """Per-task decayed Beta posterior on the dead rate of its groups (see the module doc)."""

    def __init__(self, *, decay: float = 0.9, prior_live: float = 1.0, prior_dead: float = 1.0) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"liveness decay must be in (0, 1], got {decay}")
        if prior_live <= 0 or prior_dead <= 0:
            raise ValueError(f"liveness prior counts must be > 0, got live={prior_live} dead={prior_dead}")
        self.decay = decay
        self.prior = (prior_live, prior_dead)
        self._counts: dict[str, list[float]] = {}  # task -> [live, dead] pseudo-counts beyond the prior

    def _add(self, task_id: str, live: float, dead: float) -> None:
        c = self._counts.setdefault(task_id, [0.0, 0.0])
        c[0] = c[0] * self.decay + live
        c[1] = c[1] * self.decay + dead

    def observe(self, task_id: str, dead: bool) -> None:
        """One training group of the task."""
        self._add(task_id, 0.0 if dead else 1.0, 1.0 if dead else 0.0)

    def observe_probe(self, task_id: str, rewards: Sequence[float], group_size: int, eps: float) -> float:
        """Probe rollouts of the task (k >= `group_size`), counted as k / `group_size` groups; returns their share."""
        share = dead_subset_share(rewards, group_size, eps)
        n = len(rewards) / group_size
        self._add(task_id, (1.0 - share) * n, share * n)
        return share

    def reset(self, task_id: str) -> None:
        """Forget the task (an update edited it: its old groups were scored under another harness)."""
        self._counts.pop(task_id, None)

    def dead_rate(self, task_id: str) -> float:
        """Posterior mean of the task's dead rate (the prior's, 0.5 by default, for a task never seen)."""
        live, dead = self._counts.get(task_id, (0.0, 0.0))
        a, b = self.prior
        return (dead + b) / (live + dead + a + b)

    def evidence(self, task_id: str) -> float:
        """How many (decayed) groups the estimate rests on."""
        return sum(self._counts.get(task_id, (0.0, 0.0)))

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "prior": list(self.prior), "counts": {t: list(c) for t, c in self._counts.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._counts = {t: [float(c[0]), float(c[1])] for t, c in state["counts"].items()}
