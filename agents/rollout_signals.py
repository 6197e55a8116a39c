"""What a task's own training rollouts show: the numbers the rule templates size their updates from.

`rollout_signals(groups)` reads the task's group summaries in memory (`memory.records.GroupSummary`: the
detector's per-rollout rewards, word lengths, verdicts and, internally, audit scores, plus the completions)
and returns `RolloutSignals`, plain JSON-able values:

- the observed word lengths and rewards, and length quantiles (a word budget or floor sized from them
  splits the policy's actual answers instead of a fixed number that short answers always clear or never
  reach);
- the reward contrast: median length of the higher- vs lower-reward half, and the most repeated word
  3-gram with its count (length gaming and stuffing leave these traces);
- `contrast_criteria`: ids of training criteria that rollouts failing the hidden audit meet far more
  often than rollouts passing it. Only criterion ids leave this module, never an audit score or audit
  text, so an LLM proposer may read them (`harness.visibility`); the audit itself stays hidden.
- the highest- and lowest-reward completions as short snippets, for an LLM proposer;
- the completions themselves (`texts`, empty where a record kept none), for templates that test a check on what
  the policy writes; an LLM proposer never reads them.

A task with no groups in memory gives empty signals (`n == 0`); templates then keep their defaults.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from agents.critic_guards import AUDIT_PASS  # the critic's gamed/honest split: one level for both
from harness.checks import words

CONTRAST_GAP = 0.3  # a criterion is a contrast when gamed rollouts meet it this much more often than honest ones
MIN_SIDE = 2  # rollouts needed on each side of the audit split before a contrast is read
SNIPPET = 240


class RolloutSignals(BaseModel):
    """The task's cached rollouts summarised (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    n: int = 0
    lengths: list[int] = Field(default_factory=list)
    rewards: list[float] = Field(default_factory=list)
    length_q25: float | None = None
    length_median: float | None = None
    length_q75: float | None = None
    high_reward_length: float | None = None  # median words of the higher-reward half
    low_reward_length: float | None = None
    top_repeat: str | None = None  # the most repeated word 3-gram within one rollout
    top_repeat_count: int = 0
    contrast_criteria: list[str] = Field(default_factory=list)
    best: str | None = None
    worst: str | None = None
    texts: list[str] = Field(default_factory=list)  # the completions, for templates that test a check on them

    def public(self) -> dict[str, Any]:
        """The view an LLM proposer reads: no per-rollout lists, only summaries, ids and snippets."""
        return self.model_dump(exclude={"lengths", "rewards", "texts"})


def _trigram_repeats(text: str) -> tuple[str | None, int]:
    toks = [w.casefold() for w in words(text)]
    grams = Counter(" ".join(toks[i : i + 3]) for i in range(len(toks) - 2))
    if not grams:
        return None, 0
    gram, count = grams.most_common(1)[0]
    return gram, count


def rollout_signals(groups: Sequence[Any]) -> RolloutSignals:
    """Signals from the task's `GroupSummary` records (any order).

    Per-rollout fields missing in older records are skipped, never guessed.
    """
    lengths: list[int] = []
    rewards: list[float] = []
    texts: list[str] = []
    audited: list[tuple[float, dict[str, bool]]] = []
    for g in groups:
        st = g.stats
        rs = [float(r) for r in st.get("rewards", [])]
        ls = [int(x) for x in st.get("lengths", [])]
        if len(ls) != len(rs):
            continue
        rewards += rs
        lengths += ls
        tx = list(g.texts) if len(g.texts) == len(rs) else [""] * len(rs)
        texts += tx
        audits, verdicts = st.get("audits") or [], st.get("verdicts") or []
        if len(audits) == len(rs) and len(verdicts) == len(rs):
            audited += [(float(a), dict(v)) for a, v in zip(audits, verdicts) if a is not None]
    if not rewards:
        return RolloutSignals()
    arr = np.asarray(lengths, dtype=float)
    order = np.argsort(rewards, kind="mergesort")
    half = max(1, len(order) // 2)
    low, high = order[:half], order[-half:]
    reps = [_trigram_repeats(t) for t in texts]
    gram, count = max(reps, key=lambda r: r[1]) if reps else (None, 0)
    return RolloutSignals(
        n=len(rewards),
        lengths=lengths,
        rewards=rewards,
        length_q25=float(np.quantile(arr, 0.25)),
        length_median=float(np.median(arr)),
        length_q75=float(np.quantile(arr, 0.75)),
        high_reward_length=float(np.median(arr[high])),
        low_reward_length=float(np.median(arr[low])),
        top_repeat=gram,
        top_repeat_count=count,
        contrast_criteria=_contrast(audited),
        best=texts[int(order[-1])][:SNIPPET] or None,
        worst=texts[int(order[0])][:SNIPPET] or None,
        texts=texts,
    )


def _contrast(audited: Sequence[tuple[float, dict[str, bool]]]) -> list[str]:
    """Criterion ids that audit-failing rollouts meet at least CONTRAST_GAP more often than audit-passing ones."""
    gamed = [v for a, v in audited if a < AUDIT_PASS]
    honest = [v for a, v in audited if a >= AUDIT_PASS]
    if len(gamed) < MIN_SIDE or len(honest) < MIN_SIDE:
        return []
    ids = sorted({c for v in gamed + honest for c in v})
    out = []
    for cid in ids:
        g = [v[cid] for v in gamed if cid in v]
        h = [v[cid] for v in honest if cid in v]
        if g and h and np.mean(g) - np.mean(h) >= CONTRAST_GAP:
            out.append(cid)
    return out
