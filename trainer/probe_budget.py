"""The run's probe budget: how much generation the evolver may add to training (`harness.max_extra_generation`).

The evolver generates on the frozen policy beyond what training trains on: the pre-flight's probe groups
(trainer/preflight.py) and the critic's probes (candidates, fresh controls, batched repairs, fallback reproduction
probes). With `harness.max_extra_generation = s` they may draw at most `floor(s x planned)` rollouts in all, where
`planned` is the run's training rollouts: `train.max_steps x train.batch_size` per process.

The budget is spent greedily, as the work comes: a dead task repaired early buys more informative groups than one
repaired late, so nothing is held back for later rounds.
- The pre-flight probes a seeded sample of the pool that fits the budget (named in the log and in rounds.jsonl).
- Each round gets what is left (`EvolverContext.probe_budget`), dealt to its lanes in event order
  (`graphs.evolver.lane_budgets`). A candidate whose probes could exceed its lane's share is refused before it
  draws anything, uncharged (`agents.critic.over_budget_critique`): criteria candidates re-scored on cached
  rollouts cost nothing and still run.

What was spent is read back from rounds.jsonl (`preflight.rollouts` and each round's `probe_rollouts`), so a resumed
run keeps its budget (resume truncates rounds.jsonl after its checkpoint, so a round run again counts once). A replay
of a round (`harnessrl evolve RUN --step N`) gets the budget it had. The LLM brains' own policy-tool samples
(tools/agent_tools.py) are not counted: the budget bounds what the critic measures.
"""

from __future__ import annotations

import logging
from pathlib import Path

from trainer.config import RunConfig
from trainer.run_logs import read_rounds

log = logging.getLogger(__name__)


def planned_rollouts(cfg: RunConfig, processes: int = 1) -> int:
    """The rollouts training will generate: `train.max_steps x train.batch_size` on each process."""
    return cfg.train.max_steps * cfg.train.batch_size * processes


def allowed(cfg: RunConfig, processes: int = 1) -> int | None:
    """The run's whole probe budget in rollouts (None: `harness.max_extra_generation` is unset)."""
    share = cfg.harness.max_extra_generation
    return None if share is None else int(share * planned_rollouts(cfg, processes))


def spent(rounds_path: Path) -> int:
    """Probe rollouts the run's rounds generated so far, pre-flight included (rounds.jsonl)."""
    return sum((r.preflight.rollouts if r.preflight else 0) + r.probe_rollouts for r in read_rounds(rounds_path))


def left(cfg: RunConfig, rounds_path: Path, processes: int = 1, pending: int = 0) -> int | None:
    """What is left of the budget for the next round (None: no bound).

    `pending`: spent but not yet in rounds.jsonl (the pre-flight's own probes, before its round's line is written)."""
    total = allowed(cfg, processes)
    return None if total is None else max(0, total - spent(rounds_path) - pending)
