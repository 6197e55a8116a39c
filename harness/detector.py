"""Reward-failure detector: per-group statistics -> typed `FailureEvent`s (docs/DESIGN.md §5).

Pipeline: the reward function builds one `GroupStats` per GRPO group (one visit of a task) from its
`RolloutRecord`s; `Detector.observe(stats)` keeps a per-task window of the last W visits and returns
the failure events this visit supports. Defaults are documented in docs/DESIGN.md §5.

Event rules (thresholds on `DetectorConfig`; "zero variance" means std < eps, so a std of 1e-4 is
dead while 0.06 is not):

- collapse_low: per visit, zero variance and max <= tau_lo; fires when >= min_hits of last W visits, or first visit
- collapse_high: per visit, zero variance and min >= tau_hi; fires when (same as collapse_low)
- flat: per visit, zero variance and tau_lo < mean < tau_hi (constant partial credit); fires when >= min_hits of
  last W visits
- spurious_length: per visit, Spearman(length, reward) pooled over the window >= length_corr; fires when pooled
  n >= min_corr_n
- spurious_audit: per visit, train-audit gap > audit_gap, or train up >= audit_rise while audit change <=
  audit_flat over the window; fires when audit scores present
- stuffing: per visit, share of rewarded rollouts repeating a required phrase (or a word 3-gram) >=
  stuffing_repeat times; fires when share >= stuffing_share
- blind_criterion: per visit, a positive criterion with pass rate exactly 0 or 1 on each of the last W visits,
  group not dead; fires when window full
- guidance_leak: per visit, share of hinted rollouts whose response copies >= leak_overlap of the hint's word
  4-grams; fires when share >= leak_share

With reward parts beside the rubric (`train.rewards`) a group's `rewards` are the combined reward GRPO's advantages
see: zero variance is read on them, while the max/min/mean of the three dead rules are the rubric's
(`GroupStats.rubric_levels`), the scale tau_lo/tau_hi are set in; criterion-level rules read the rubric's verdicts.

Spurious events (spurious_length, spurious_audit, stuffing) fire only when the window holds a rollout the
hidden audit fails (audit < `audit_pass`) while the reward credits it (reward above tau_lo and no lower, by
more than eps, than the audit-passing rollouts' mean): that is what the critic's rule needs to act on, and
without it a length or repetition signal is not gaming. Stats without per-rollout audit scores (a suite
with no audit criteria) skip that requirement.

Confirmation: every event carries `window_hits`, how many distinct groups in the task's window show the
failure on their own (the per-visit condition above; for the pooled length correlation, a group's own
Spearman >= length_corr; for spurious types, a group that also holds a credited gamed rollout; an audit
*trend* alone counts no group: it spans visits by construction), and `confirmed` when that is at
least `confirm_hits` (>= 2). Single groups of a few rollouts are noisy: an event may fire on one, but
only a confirmed event may change a task's sampling in the fallback (agents/fallback.py).

Flood control: an event key (type, task, criterion) that fired is muted for the next W-1 visits of
the task unless the task's harness version changed (a new harness is new evidence).

`Detector.batch` gives the batch-level dead-group share (EvoTrainer's warning level: 30%).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.checks import MAX_SCAN_CHARS, AllOf, AnyOf, ContainsAll, ContainsAny, max_ngram_repeats, words
from harness.types import MIN_CONFIRM_HITS, Criterion, FailureEvent

REPEAT_NGRAM = 3  # word 3-grams: repeating a short phrase, not a stop word, is the stuffing signal
LEAK_NGRAM = 4


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DetectorConfig(_Model):
    eps: float = Field(default=0.05, ge=0.0)
    tau_lo: float = Field(default=0.1, ge=0.0, le=1.0)
    tau_hi: float = Field(default=0.9, ge=0.0, le=1.0)
    window: int = Field(default=3, ge=1)
    min_hits: int = Field(default=2, ge=1)
    first_visit: bool = True
    length_corr: float = Field(default=0.5, ge=-1.0, le=1.0)
    min_corr_n: int = Field(default=6, ge=3)  # a rank correlation over fewer points is noise
    audit_gap: float = Field(default=0.25, ge=0.0, le=1.0)
    audit_rise: float = Field(default=0.1, ge=0.0, le=1.0)
    audit_flat: float = Field(default=0.02, ge=0.0, le=1.0)
    stuffing_repeat: int = Field(default=4, ge=2)
    stuffing_share: float = Field(default=0.5, ge=0.0, le=1.0)
    leak_overlap: float = Field(default=0.5, ge=0.0, le=1.0)
    leak_share: float = Field(default=0.25, ge=0.0, le=1.0)
    dead_share_warn: float = Field(default=0.3, ge=0.0, le=1.0)
    confirm_hits: int = Field(default=MIN_CONFIRM_HITS, ge=MIN_CONFIRM_HITS)  # groups that confirm a failure
    # A rollout whose hidden audit score is below this is "gamed" (the critic's split uses the same level): a
    # spurious event needs gamed rollouts that the reward credits, the thing a repair can take credit away from.
    audit_pass: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _confirmable(self) -> DetectorConfig:
        if self.confirm_hits > self.window:
            raise ValueError(
                f"confirm_hits ({self.confirm_hits}) exceeds window ({self.window}): no failure could "
                "ever be confirmed, so the sampling fallback could never act"
            )
        return self


class RolloutRecord(_Model):
    text: str
    reward: float
    verdicts: dict[str, bool] = Field(default_factory=dict)
    audit: float | None = None
    hinted: bool = False
    hint_texts: list[str] = Field(default_factory=list)
    # With reward parts beside the rubric (tools/reward_parts.py) `reward` is the combined reward GRPO sees; these
    # keep its rubric score and each part's value (unweighted).
    rubric: float | None = None
    parts: dict[str, float] = Field(default_factory=dict)


def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (ties averaged); None when either side is constant or n < 3."""
    if len(x) < 3 or len(x) != len(y):
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    order = np.argsort(arr, kind="mergesort")
    ranks = np.empty(len(arr))
    sorted_vals = arr[order]
    i = 0
    while i < len(arr):
        j = i
        while j + 1 < len(arr) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


def _required_phrases(criteria: Iterable[Criterion]) -> list[tuple[str, str]]:
    """(criterion id, phrase) for every phrase a positive criterion rewards (contains_any/all)."""
    out: list[tuple[str, str]] = []

    def walk(cid: str, check: Any) -> None:
        if isinstance(check, (ContainsAny, ContainsAll)):
            out.extend((cid, p) for p in check.phrases)
        elif isinstance(check, (AllOf, AnyOf)):
            for sub in check.checks:
                walk(cid, sub)
        # `not` and other checks reward absence or form, not a phrase: nothing to stuff.

    for c in criteria:
        if c.weight > 0 and c.check is not None:
            walk(c.id, c.check)
    return out


def _phrase_count(text: str, phrase: str) -> int:
    t = unicodedata.normalize("NFC", text[:MAX_SCAN_CHARS]).casefold()
    p = unicodedata.normalize("NFC", phrase).casefold()
    return len(re.findall(r"(?<!\w)" + re.escape(p), t))


def _grams(text: str, n: int) -> set[tuple[str, ...]]:
    toks = [w.casefold() for w in words(text)]
    return {tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)}


def hint_overlap(response: str, hint_texts: Sequence[str]) -> float:
    """Share of the hints' word 4-grams that the response reproduces (0 when hints are shorter)."""
    hint_grams: set[tuple[str, ...]] = set()
    for h in hint_texts:
        hint_grams |= _grams(h, LEAK_NGRAM)
    if not hint_grams:
        return 0.0
    return len(hint_grams & _grams(response, LEAK_NGRAM)) / len(hint_grams)


class GroupStats(_Model):
    """Statistics of one GRPO group (one visit of one task).

    Per-rollout lists keep thresholds in the detector config, so stats recorded once can be re-judged under other
    settings.
    """

    task_id: str
    step: int
    harness_version: int | None = None
    n: int
    mean: float
    std: float
    min: float
    max: float
    rewards: list[float]
    pass_rates: dict[str, float] = Field(default_factory=dict)
    pitfall_ids: list[str] = Field(default_factory=list)  # from `criteria`; blind-criterion skips these
    lengths: list[int] = Field(default_factory=list)  # words per rollout
    length_corr: float | None = None  # Spearman(length, reward) within the group
    max_repeat: int = 0  # highest word 3-gram repeat count over the group
    repeats: list[int] = Field(default_factory=list)  # per rollout: max word 3-gram repeat count
    phrase_repeats: list[int] = Field(default_factory=list)  # per rollout: max count of one required phrase
    stuffed_criteria: list[str | None] = Field(default_factory=list)  # per rollout: criterion of that phrase
    leak_overlaps: list[float | None] = Field(default_factory=list)  # per rollout; None when unhinted
    leak_overlap: float | None = None  # mean over hinted rollouts
    audit_mean: float | None = None
    audits: list[float | None] = Field(default_factory=list)  # per rollout; empty in stats recorded before it existed
    verdicts: list[dict[str, bool]] = Field(default_factory=list)  # per rollout: criterion id -> met (same caveat)
    hinted: bool = False
    hinted_share: float = 0.0
    # `harness.guidance.prompt_digest` of the messages the group was sampled with; None in stats recorded before it
    # existed (a measurement then re-uses such a group only as its task's unhinted prompt, from `hinted`).
    prompt_digest: str | None = None
    # Only with reward parts beside the rubric (`rewards` is then the combined reward): per rollout the rubric score
    # and each part's value. Empty without parts: the rubric is then `rewards` itself.
    rubric: list[float] = Field(default_factory=list)
    parts: dict[str, list[float]] = Field(default_factory=dict)

    @classmethod
    def from_rollouts(
        cls,
        task_id: str,
        step: int,
        rollouts: Sequence[RolloutRecord],
        *,
        criteria: Sequence[Criterion] = (),
        harness_version: int | None = None,
        prompt_digest: str | None = None,
    ) -> GroupStats:
        """Summarise a group.

        `criteria` (the task's current ones) enable the stuffing statistics; `prompt_digest` fingerprints the messages
        the group was sampled with (`harness.guidance.prompt_digest`).
        """
        if not rollouts:
            raise ValueError(f"group for task {task_id!r} at step {step} has no rollouts")
        rewards = np.array([r.reward for r in rollouts], dtype=float)
        lengths = [len(words(r.text)) for r in rollouts]
        ids: list[str] = []
        for r in rollouts:
            ids.extend(k for k in r.verdicts if k not in ids)
        pass_rates = {cid: float(np.mean([r.verdicts[cid] for r in rollouts if cid in r.verdicts])) for cid in ids}
        phrases = _required_phrases(criteria)
        repeats, phrase_repeats, stuffed = [], [], []
        for r in rollouts:
            repeats.append(max_ngram_repeats(r.text, REPEAT_NGRAM))
            best, best_cid = 0, None
            for cid, p in phrases:
                k = _phrase_count(r.text, p)
                if k > best:
                    best, best_cid = k, cid
            phrase_repeats.append(best)
            stuffed.append(best_cid)
        overlaps = [hint_overlap(r.text, r.hint_texts) if r.hinted else None for r in rollouts]
        hinted = [o for o in overlaps if o is not None]
        audits = [r.audit for r in rollouts if r.audit is not None]
        with_parts = any(r.parts for r in rollouts)
        return cls(
            task_id=task_id,
            step=step,
            harness_version=harness_version,
            n=len(rollouts),
            mean=float(rewards.mean()),
            std=float(rewards.std()),
            min=float(rewards.min()),
            max=float(rewards.max()),
            rewards=[float(x) for x in rewards],
            pass_rates=pass_rates,
            pitfall_ids=[c.id for c in criteria if c.weight < 0],
            lengths=lengths,
            length_corr=_spearman(lengths, rewards.tolist()),
            max_repeat=max(repeats),
            repeats=repeats,
            phrase_repeats=phrase_repeats,
            stuffed_criteria=stuffed,
            leak_overlaps=overlaps,
            leak_overlap=float(np.mean(hinted)) if hinted else None,
            audit_mean=float(np.mean(audits)) if audits else None,
            audits=[r.audit for r in rollouts],
            verdicts=[dict(r.verdicts) for r in rollouts],
            hinted=bool(hinted),
            hinted_share=len(hinted) / len(rollouts),
            prompt_digest=prompt_digest,
            rubric=[r.reward if r.rubric is None else r.rubric for r in rollouts] if with_parts else [],
            parts={k: [r.parts.get(k, 0.0) for r in rollouts] for k in rollouts[0].parts} if with_parts else {},
        )

    def rubric_levels(self) -> tuple[float, float, float]:
        """(min, mean, max) of the rubric scores: with reward parts the combined reward's differ."""
        if not self.rubric:
            return self.min, self.mean, self.max
        return min(self.rubric), float(np.mean(self.rubric)), max(self.rubric)

    def summary(self) -> dict[str, Any]:
        """The scalar part, for event payloads and logs."""
        return {
            k: getattr(self, k)
            for k in (
                "n",
                "mean",
                "std",
                "min",
                "max",
                "length_corr",
                "max_repeat",
                "leak_overlap",
                "audit_mean",
                "hinted_share",
                "harness_version",
            )
        }


class BatchStats(_Model):
    n_groups: int
    dead_share: float  # share of groups with std < eps (zero advantage: they teach nothing)
    mean_std: float
    warn: bool  # dead_share above the configured warning level


class _Emitted(_Model):
    visit: int
    harness_version: int | None = None


class Detector:
    """Stateful per-task detector; `state_dict()` / `load_state_dict()` survive a training resume."""

    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.config = config or DetectorConfig()
        self._windows: dict[str, deque[GroupStats]] = {}
        self._visits: dict[str, int] = {}
        self._emitted: dict[tuple[str, str, str | None], _Emitted] = {}

    # -- per-visit classification -----------------------------------------------------------------
    def is_dead(self, s: GroupStats) -> bool:
        return s.std < self.config.eps

    # Dead or not is the combined reward's (what the advantage sees); which dead kind is the rubric's level, on the
    # scale tau_lo/tau_hi are set in and the repairs act on (a constant reward part would turn collapse_low to flat).
    def _low(self, s: GroupStats) -> bool:
        return self.is_dead(s) and s.rubric_levels()[2] <= self.config.tau_lo

    def _high(self, s: GroupStats) -> bool:
        return self.is_dead(s) and s.rubric_levels()[0] >= self.config.tau_hi

    def _flat(self, s: GroupStats) -> bool:
        return self.is_dead(s) and self.config.tau_lo < s.rubric_levels()[1] < self.config.tau_hi

    def _length_hit(self, s: GroupStats) -> bool:
        return s.length_corr is not None and s.length_corr >= self.config.length_corr

    def _gap_hit(self, s: GroupStats) -> bool:
        return s.audit_mean is not None and s.mean - s.audit_mean > self.config.audit_gap

    def _stuffing(self, s: GroupStats) -> tuple[float, str | None, int] | None:
        """Return (share of rewarded rollouts that stuff, the most stuffed criterion, rewarded count).

        None when the group does not stuff.
        """
        cfg = self.config
        rewarded = [i for i, r in enumerate(s.rewards) if r > 0]
        if not rewarded or len(s.phrase_repeats) != s.n or len(s.repeats) != s.n:
            return None
        stuffers = [
            i for i in rewarded if s.phrase_repeats[i] >= cfg.stuffing_repeat or s.repeats[i] >= cfg.stuffing_repeat
        ]
        share = len(stuffers) / len(rewarded)
        if not stuffers or share < cfg.stuffing_share:
            return None
        cids = Counter(
            s.stuffed_criteria[i]
            for i in stuffers
            if s.phrase_repeats[i] >= cfg.stuffing_repeat and s.stuffed_criteria[i]
        )
        return share, (cids.most_common(1)[0][0] if cids else None), len(rewarded)

    def _credited(self, rollouts: list[tuple[float, float]]) -> int:
        """How many (reward, audit) pairs are gamed rollouts the reward credits.

        Gamed and credited: audit below `audit_pass`, reward above tau_lo and no lower (by more than eps) than the
        mean reward of the audit-passing ones.
        """
        cfg = self.config
        honest = [r for r, a in rollouts if a >= cfg.audit_pass]
        bar = max(cfg.tau_lo, (sum(honest) / len(honest) - cfg.eps) if honest else cfg.tau_lo)
        return sum(1 for r, a in rollouts if a < cfg.audit_pass and r > cfg.tau_lo and r >= bar)

    @staticmethod
    def _pairs(visits: Sequence[GroupStats]) -> list[tuple[float, float]] | None:
        pairs = [(r, a) for s in visits if len(s.audits) == s.n for r, a in zip(s.rewards, s.audits) if a is not None]
        return pairs if pairs else None

    def _credited_gamed(self, visits: Sequence[GroupStats]) -> int | None:
        """Credited gamed rollouts in the window (`_credited`).

        None when no visit has per-rollout audit scores (a suite without audit criteria, or stats recorded before
        they were kept): then nothing is required.
        """
        pairs = self._pairs(visits)
        return None if pairs is None else self._credited(pairs)

    def _group_credits_gamed(self, s: GroupStats) -> bool:
        """One group shows gaming on its own: it holds a credited gamed rollout (or has no per-rollout audits)."""
        pairs = self._pairs([s])
        return pairs is None or self._credited(pairs) > 0

    def _leak(self, s: GroupStats) -> float | None:
        """Share of hinted rollouts that copy the hint, or None when the group does not leak."""
        hinted = [o for o in s.leak_overlaps if o is not None]
        if not hinted:
            return None
        share = sum(o >= self.config.leak_overlap for o in hinted) / len(hinted)
        return share if share >= self.config.leak_share else None

    # -- main entry ---------------------------------------------------------------------------------
    def observe(self, stats: GroupStats, *, probe: bool = False) -> list[FailureEvent]:
        """The events this visit supports.

        `probe`: the group is a pre-flight probe of the initial policy (trainer/preflight.py), the task's first
        evidence before any training: on a first visit every dead kind fires, flat included, because the round
        that follows exists to repair dead tasks before training spends groups on them.
        """
        cfg = self.config
        win = self._windows.setdefault(stats.task_id, deque(maxlen=cfg.window))
        win.append(stats)
        visit = self._visits[stats.task_id] = self._visits.get(stats.task_id, 0) + 1
        visits = list(win)
        # (type, criterion, supporting visits, extra stats, groups in the window showing the failure)
        candidates: list[tuple[str, str | None, list[GroupStats], dict[str, Any], int]] = []

        for kind, pred in (("collapse_low", self._low), ("collapse_high", self._high), ("flat", self._flat)):
            if not pred(stats):
                continue
            hits = [s for s in visits if pred(s)]
            first = (probe or kind != "flat") and cfg.first_visit and visit == 1
            if len(hits) >= cfg.min_hits or first:
                candidates.append((kind, None, hits, {"hits": len(hits), "first_visit": first}, len(hits)))

        # A spurious event needs what a repair can act on: rollouts the audit fails that the reward credits. Where
        # the window carries per-rollout audit scores and holds none, a length or stuffing signal is not gaming.
        gamed = self._credited_gamed(visits)
        spurious_ok = gamed is None or gamed > 0
        lengths = [x for s in visits for x in s.lengths]
        rewards = [x for s in visits for x in s.rewards]
        if spurious_ok and len(lengths) == len(rewards) and len(lengths) >= cfg.min_corr_n:
            rho = _spearman(lengths, rewards)
            if rho is not None and rho >= cfg.length_corr:
                candidates.append(
                    (
                        "spurious_length",
                        None,
                        visits,
                        {"pooled_length_corr": rho, "pooled_n": len(rewards)},
                        sum(self._length_hit(s) and self._group_credits_gamed(s) for s in visits),
                    )
                )

        audited = [s for s in visits if s.audit_mean is not None]
        if audited and spurious_ok:
            gap = float(np.mean([s.mean - s.audit_mean for s in audited]))  # type: ignore[operator]
            rise = audited[-1].mean - audited[0].mean if len(audited) >= 2 else 0.0
            audit_change = audited[-1].audit_mean - audited[0].audit_mean if len(audited) >= 2 else 0.0  # type: ignore[operator]
            trend = len(audited) >= 2 and rise >= cfg.audit_rise and audit_change <= cfg.audit_flat
            if gap > cfg.audit_gap or trend:
                # Confirmation counts groups that show the gap on their own: a trend spans visits by construction,
                # so it never confirms (two visits of a rising mean are one signal, not two groups).
                hits = sum(self._gap_hit(s) and self._group_credits_gamed(s) for s in audited)
                candidates.append(
                    (
                        "spurious_audit",
                        None,
                        audited,
                        {
                            "train_audit_gap": gap,
                            "train_rise": rise,
                            "audit_change": audit_change,
                            "credited_gamed": gamed,
                        },
                        hits,
                    )
                )

        if spurious_ok and (stuffed := self._stuffing(stats)) is not None:
            share, cid, n_rewarded = stuffed
            candidates.append(
                (
                    "stuffing",
                    cid,
                    [stats],
                    {"stuffing_share": share, "rewarded": n_rewarded},
                    sum(self._stuffing(s) is not None and self._group_credits_gamed(s) for s in visits),
                )
            )

        if len(visits) == cfg.window and not self.is_dead(stats):
            for cid, rate in stats.pass_rates.items():
                if cid in stats.pitfall_ids:
                    continue  # a pitfall nobody triggers is the goal, not a blind spot
                rates = [s.pass_rates.get(cid) for s in visits]
                if all(r == 0.0 for r in rates) or all(r == 1.0 for r in rates):
                    candidates.append(("blind_criterion", cid, visits, {"pass_rate": rate}, len(visits)))

        if (leak := self._leak(stats)) is not None:
            candidates.append(
                ("guidance_leak", None, [stats], {"leak_share": leak}, sum(self._leak(s) is not None for s in visits))
            )

        events = []
        for kind, cid, support, extra, hits in candidates:
            if self._muted(kind, stats.task_id, cid, visit, stats.harness_version):
                continue
            self._emitted[(kind, stats.task_id, cid)] = _Emitted(visit=visit, harness_version=stats.harness_version)
            suffix = f":{cid}" if cid else ""
            events.append(
                FailureEvent(
                    id=f"{kind}:{stats.task_id}:{stats.step}{suffix}",
                    type=kind,
                    task_id=stats.task_id,
                    step=stats.step,
                    stats={**stats.summary(), **extra},
                    window=[s.step for s in support],
                    criterion_id=cid,
                    window_hits=hits,
                    confirmed=hits >= cfg.confirm_hits,
                )
            )
        return events

    def _muted(self, kind: str, task_id: str, cid: str | None, visit: int, version: int | None) -> bool:
        prev = self._emitted.get((kind, task_id, cid))
        if prev is None:
            return False
        if version is not None and prev.harness_version is not None and version != prev.harness_version:
            return False  # the harness changed since: the same failure again is new evidence
        return visit - prev.visit < self.config.window

    # -- batch level ----------------------------------------------------------------------------------
    def batch(self, stats_list: Sequence[GroupStats]) -> BatchStats:
        if not stats_list:
            return BatchStats(n_groups=0, dead_share=0.0, mean_std=0.0, warn=False)
        dead = sum(self.is_dead(s) for s in stats_list) / len(stats_list)
        return BatchStats(
            n_groups=len(stats_list),
            dead_share=dead,
            mean_std=float(np.mean([s.std for s in stats_list])),
            warn=dead > self.config.dead_share_warn,
        )

    # -- lifecycle ------------------------------------------------------------------------------------
    def reset_task(self, task_id: str) -> None:
        """Forget a task's window (call after an update changed it, so old visits do not re-trigger)."""
        self._windows.pop(task_id, None)

    def window(self, task_id: str) -> list[GroupStats]:
        return list(self._windows.get(task_id, ()))

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(),
            "windows": {t: [s.model_dump() for s in w] for t, w in self._windows.items()},
            "visits": dict(self._visits),
            "emitted": [
                {"type": k[0], "task_id": k[1], "criterion_id": k[2], **v.model_dump()}
                for k, v in self._emitted.items()
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore windows and flood-control memory. The detector keeps its own (current) config."""
        self._windows = {
            t: deque((GroupStats.model_validate(s) for s in w), maxlen=self.config.window)
            for t, w in state["windows"].items()
        }
        self._visits = {t: int(n) for t, n in state["visits"].items()}
        self._emitted = {
            (e["type"], e["task_id"], e["criterion_id"]): _Emitted(
                visit=e["visit"], harness_version=e["harness_version"]
            )
            for e in state["emitted"]
        }
