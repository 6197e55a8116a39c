"""A group's metrics: one side's scored rollouts of one task, summarised the way the critic reads them.

`score_rows` scores rollouts of one visit prompt with the `Judge` (training criteria and the hidden audit)
and flags hint leaks; `group_metrics` turns the scored rollouts of a side's strata (one per visit prompt,
weighted by the probability that a visit sees it) into a `GroupMetrics`: mean, expected within-visit
std, dead / in-band, length correlation, audit mean, pass rates and expected leak hits per group;
`summarise` weighs the groups of one side into a `Summary`. `tools.candidate` builds the strata, and
`tools.sequential` re-runs `group_metrics` on bootstrap resamples (`resample`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.checks import max_ngram_repeats, words
from harness.detector import REPEAT_NGRAM, DetectorConfig, hint_overlap
from harness.guidance import hint_leaks_reference
from harness.types import Hint, Task
from tools.judge import Judge
from tools.reward_parts import RewardPart, combined_reward

EXAMPLE_CHARS = 300


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupMetrics(_Model):
    """One side's rollouts of one task under one harness.

    Raw per-rollout numbers and the visit-weighted summary (one stratum: plain group statistics; two: see the
    module docstring of `tools.candidate`).
    """

    task_id: str
    harness_version: int
    n: int  # rollouts scored, all strata together
    rewards: list[float]
    lengths: list[int]  # words per rollout
    audits: list[float | None]
    mean: float
    std: float  # expected within-visit std
    min: float
    max: float
    dead: bool  # std < eps: zero advantage, the group teaches nothing
    in_band: bool  # tau_lo < mean < tau_hi
    length_corr: float | None  # Spearman(length, reward) within a visit; None when either side is constant
    audit_mean: float | None
    leak_hits: (
        float  # expected hinted rollouts per group that copy a hint (>= leak_overlap of its 4-grams) or the reference
    )
    pass_rates: dict[str, float]
    hinted: bool
    max_repeat: int
    examples: list[str] = Field(default_factory=list)  # best and worst rollout, truncated
    verdicts: list[dict[str, bool]] = Field(default_factory=list)  # per rollout
    leaks: list[bool] = Field(default_factory=list)  # per rollout
    strata: list[int] = Field(default_factory=list)  # per rollout: index of its visit prompt in `stratum_weights`
    stratum_weights: list[float] = Field(default_factory=lambda: [1.0])  # probability of each visit prompt


class Summary(_Model):
    """Weighted summary of one side over the affected groups.

    Weights: see the module docstring of `tools.candidate`.
    """

    n_groups: int
    weight: float
    mean: float | None
    mean_std: float | None
    dead_share: float | None
    band_share: float | None
    length_corr: float | None
    audit_mean: float | None
    leak_hits: float
    dead_weight: float  # sampling mass on dead groups (absolute, comparable across sides)
    band_weight: float  # sampling mass on in-band groups


@dataclass(frozen=True)
class Row:
    """One scored rollout."""

    text: str
    reward: float
    length: int
    audit: float | None
    verdicts: dict[str, bool]
    leak: bool
    repeat: int
    parts: dict[str, float] = field(default_factory=dict)  # value of each reward part beside the rubric (unweighted)


def _avg_ranks(x: Sequence[float]) -> list[float]:
    """0-based ranks, ties sharing their average (plain Python: groups are a few dozen rollouts at most)."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for t in order[i : j + 1]:
            ranks[t] = (i + j) / 2.0
        i = j + 1
    return ranks


def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman correlation with averaged ties; None under 3 points or for a constant side (as the detector)."""
    if len(x) < 3:
        return None
    rx, ry = _avg_ranks(x), _avg_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry)) / math.sqrt(vx * vy)


def _wmean(pairs: Sequence[tuple[float | None, float]]) -> float | None:
    vals = [(v, w) for v, w in pairs if v is not None]
    tw = sum(w for _, w in vals)
    return None if tw <= 0 else sum(v * w for v, w in vals) / tw


Strata = Sequence[tuple[float, bool, Sequence[Row]]]  # per visit prompt: (probability, hinted, scored rollouts)


def group_metrics(
    task_id: str, version: int, strata: Strata, cfg: DetectorConfig, *, full: bool = True
) -> GroupMetrics:
    """Visit-weighted metrics of one side. `full=False` skips validation and examples (bootstrap resamples)."""
    stats: list[tuple[float, float, float, float | None, float | None, float, dict[str, float]]] = []
    rows_all: list[Row] = []
    index: list[int] = []
    for i, (w, _, rows) in enumerate(strata):
        rewards = [r.reward for r in rows]
        mean = sum(rewards) / len(rewards)
        std = math.sqrt(sum((x - mean) ** 2 for x in rewards) / len(rewards))
        audits = [r.audit for r in rows if r.audit is not None]
        ids: list[str] = []
        for r in rows:
            ids.extend(c for c in r.verdicts if c not in ids)
        rates = {
            c: sum(r.verdicts[c] for r in rows if c in r.verdicts) / sum(1 for r in rows if c in r.verdicts)
            for c in ids
        }
        stats.append(
            (
                w,
                mean,
                std,
                _spearman([r.length for r in rows], rewards),
                sum(audits) / len(audits) if audits else None,
                float(sum(r.leak for r in rows)),
                rates,
            )
        )
        rows_all.extend(rows)
        index.extend([i] * len(rows))
    mean = sum(w * m for w, m, *_ in stats)
    std = sum(w * s for w, _, s, *_ in stats)
    cids: list[str] = []
    for *_, rates in stats:
        cids.extend(c for c in rates if c not in cids)
    rewards_all = [r.reward for r in rows_all]
    values = dict(
        task_id=task_id,
        harness_version=version,
        n=len(rows_all),
        rewards=rewards_all,
        lengths=[r.length for r in rows_all],
        audits=[r.audit for r in rows_all],
        mean=mean,
        std=std,
        min=min(rewards_all),
        max=max(rewards_all),
        dead=std < cfg.eps,
        in_band=cfg.tau_lo < mean < cfg.tau_hi,
        length_corr=_wmean([(s[3], s[0]) for s in stats]),
        audit_mean=_wmean([(s[4], s[0]) for s in stats]),
        leak_hits=sum(w * leaks for w, _, _, _, _, leaks, _ in stats),
        pass_rates={c: _wmean([(rates.get(c), w) for w, *_, rates in stats]) for c in cids},
        hinted=any(h for w, h, _ in strata if w > 0),
        max_repeat=max(r.repeat for r in rows_all),
        verdicts=[r.verdicts for r in rows_all],
        leaks=[r.leak for r in rows_all],
        strata=index,
        stratum_weights=[w for w, _, _ in strata],
    )
    if not full:
        return GroupMetrics.model_construct(**values, examples=[])
    order = sorted(range(len(rows_all)), key=lambda i: rewards_all[i])
    examples = [rows_all[order[-1]].text[:EXAMPLE_CHARS], rows_all[order[0]].text[:EXAMPLE_CHARS]]
    return GroupMetrics(**values, examples=examples)


async def score_rows(
    task: Task,
    hints: Sequence[Hint],
    texts: Sequence[str],
    judge: Judge,
    cfg: DetectorConfig,
    *,
    parts: Sequence[RewardPart] = (),
    messages: Sequence[Mapping[str, str]] = (),
) -> list[Row]:
    """Score `texts`, rollouts of `task` under a visit prompt showing `hints`: reward, audit, verdicts, leaks.

    The reward is training's: the rubric score plus the run's `parts` (`tools.reward_parts.combined_reward`), which
    read `messages`, the visit prompt the rollouts answered."""
    scores, audits = await asyncio.gather(
        judge.score(task.criteria, task.user_prompt, list(texts)), judge.audit(task, list(texts))
    )
    combined = combined_reward(
        [s.score for s in scores], parts, task=task, prompts=[messages] * len(texts), texts=list(texts)
    )
    hint_texts = [h.text for h in hints]
    rows = []
    for j, (t, s, a) in enumerate(zip(texts, scores, audits)):
        # A hinted rollout that parrots a hint or reproduces the reference answer is credited by the hint,
        # not learnt; unhinted rollouts containing the reference are just correct, so they do not count.
        leak = bool(hint_texts) and (
            hint_overlap(t, hint_texts) >= cfg.leak_overlap or hint_leaks_reference(t, task.reference_answer)
        )
        rows.append(
            Row(
                text=t,
                reward=combined.rewards[j],
                length=len(words(t)),
                audit=a,
                leak=leak,
                verdicts={c: v.met for c, v in s.verdicts.items() if v.decided},
                repeat=max_ngram_repeats(t, REPEAT_NGRAM),
                parts={name: v[j] for name, v in combined.parts.items()},
            )
        )
    return rows


def summarise(groups: Sequence[tuple[GroupMetrics, float]]) -> Summary:
    """One side's groups weighed by their sampling weights (a group of weight 0 does not count)."""
    live = [(m, w) for m, w in groups if w > 0]
    return Summary(
        n_groups=len(live),
        weight=sum(w for _, w in live),
        mean=_wmean([(m.mean, w) for m, w in live]),
        mean_std=_wmean([(m.std, w) for m, w in live]),
        dead_share=_wmean([(float(m.dead), w) for m, w in live]),
        band_share=_wmean([(float(m.in_band), w) for m, w in live]),
        length_corr=_wmean([(m.length_corr, w) for m, w in live]),
        audit_mean=_wmean([(m.audit_mean, w) for m, w in live]),
        leak_hits=float(sum(m.leak_hits for m, _ in live)),
        dead_weight=sum(w for m, w in live if m.dead),
        band_weight=sum(w for m, w in live if m.in_band),
    )


def resample(strata: Strata, idx: Sequence[np.ndarray]) -> Strata:
    """The strata with each one's rows picked by the index array of the same position (a bootstrap draw)."""
    return [(w, h, [rows[i] for i in ix]) for (w, h, rows), ix in zip(strata, idx)]
