"""The one decision room: accept, revise, fall back, reject, confirm and revert, each with its numbers.

Nothing else decides. The graph asks `after_critique` in `route_after_critique` (graphs/evolver.py; the critique
node keeps the same `Decision` in the attempt, so the trace shows it) and `batch_accept` in `route_after_generalise`;
the trainer asks `grade` for every provisional update at each pause (trainer/provisional.py) and commits the
revert `revert_update` builds.

Decisions and their rules:

- accept / revise / fallback: accept: the critic's rule held (`measured_ok`), no veto, valid. Else revise while
  the *charged* attempts are at most `max_revisions` and the proposer has something left; else fallback. An
  attempt whose critique says `no_effect` (a criteria candidate that changes no rollout's score) or `over_budget`
  (its probes could exceed the lane's share of the round's probe budget) is refused for free: not charged, at most
  `FREE_RETRIES` of them per event
- batch accept / reject: the batch critique (`critic.judge_batch`: guards on every target, rule on a strict
  majority, the sequential test on the lead target) held and no veto
- confirm / revert / wait: on the first `window` training groups of the graded task after the commit: revert when
  the target failure persists (below) or a guard shows harm; confirm otherwise; wait while fewer groups exist;
  `superseded` when another update changed the task first

**Provisional updates.** Every accepted update that changes what a visit of its task sees (guidance, criteria,
a harder variant) is provisional: `provisional_meta` writes its graded targets into the store record's meta.
Pure reweights, retirements and fallbacks are not graded (they change how often a task is drawn, not its
groups). The target failure persists when, over the window:

- collapse_low, collapse_high, flat: every group is dead (std < eps); for a guidance update only hinted groups
  count
- spurious_length: Spearman(length, reward) pooled over the groups >= `length_corr`
- spurious_audit: rollouts the audit fails are still credited: their mean reward >= that of audit-passing ones
  (> `tau_lo` when none passes)
- stuffing: rewarded rollouts that repeat a phrase >= `stuffing_repeat` times are still >= `stuffing_share` of
  the rewarded
- blind_criterion: the criterion and every criterion the update added are still met by all or by none in every
  group
- guidance_leak: hinted rollouts copying the hint are still >= `leak_share` of the hinted

Guards (guidance and criteria updates): the audit mean, and the reward of audit-passing rollouts (not for
collapse_high, whose repair lowers the reward on purpose), fall below the task's groups before the commit by more
than `max_audit_drop` / `max_mean_drop` plus `GUARD_Z` standard errors (a one-sided non-inferiority bound on the
pooled rollouts, so a few noisy rollouts cannot revert a repair). A hint on a dead task is guarded on its signal
instead of its audit level: it is reverted when its hinted rollouts that the audit fails earn more than those it
passes by over `GUARD_Z` standard errors, or when none passes where some did before (`_revived_signal_harm`).

**False-revert rate.** A true dead-group repair with per-rollout hit rate p at group size G leaves a group dead with
probability (1-p)^G + p^G (a rollout hits or misses; partial credit only makes a dead group rarer), so the dead rule
reverts it with probability ((1-p)^G + p^G)^W (tests/test_provisional.py checks it on this code). At the default
W = 2 (`confirm_window`): p = 0.33 -> 0.046 at G = 4, 0.0017 at G = 8; p = 0.25 -> 0.10 at G = 4 (W = 3: 0.010 and
0.033 at G = 4). Each guard adds at most 2.5 % (z = 1.96, one-sided) when nothing really changed. A no-op (p = 0.06)
is reverted with probability 0.61 at G = 4, W = 2 (0.37 at G = 8): the window catches most useless accepts without
sampling anything beyond training. For spurious_length, a repair that removed the correlation entirely is still
reverted with probability about 0.11 (a Spearman over 8 pooled rollouts reaches 0.5 by chance that often; G = 4,
W = 2), 0.03 at G = 8. The detector forgets a task's window when an update changes it (`Detector.reset_task`), and
W = 2 is also its `min_hits`: a repair that left the task dead raises its next collapse event just as the window
closes; the revert, committed before the round takes its events, makes that event stale (trainer/round_events.py drops
events about a task changed since), so the revert answers it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from agents.context import EvolverContext
from agents.schemas import Critique, Proposal
from harness.detector import DetectorConfig, GroupStats
from harness.types import (
    AddCriterion,
    AddPitfall,
    AddVariant,
    FailureEvent,
    HarnessState,
    HarnessUpdate,
    RestoreCriteria,
    RestoreGuidance,
    RestoreSampling,
    SplitCriterion,
)

Verdict = Literal["accept", "revise", "fallback", "reject", "confirm", "revert", "wait", "superseded"]
FREE_RETRIES = 3  # no-effect or over-budget candidates an event may get refused for free, beyond its charged ones
GUARD_Z = 1.96  # standard errors a guard's drop must exceed beyond its margin (one-sided 2.5 %)
DEAD_TYPES = ("collapse_low", "collapse_high", "flat")


@dataclass(frozen=True)
class Decision:
    """A verdict, why, and the numbers it rests on (kept in the trace, rounds.jsonl, memory and the report)."""

    verdict: Verdict
    reasons: tuple[str, ...] = ()
    numbers: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons), "numbers": dict(self.numbers)}

    def line(self, subject: str) -> str:
        """`med-3 v4 (collapse_low): revert: 2 of 2 groups still dead (std 0.00, 0.00)` — a console line."""
        why = "; ".join(self.reasons[:2])
        return f"{subject}: {self.verdict}" + (f": {why}" if why else "")


def readable(reason: str) -> str:
    """A reason as a person reads it: a number that could not be computed reads "n/a", never "None"."""
    return re.sub(r"\bNone\b", "n/a", reason)


def _why(critique: Critique, default: str) -> tuple[str, ...]:
    """The two reasons that decided: for a refusal the failing guard or rule first, then the rule's numbers."""
    reasons = [readable(r) for r in critique.reasons if not r.startswith("focus group")]
    if critique.veto:
        return ("vetoed by the critic's review", *reasons[:1])
    if critique.measured_ok and not critique.invalid:
        return tuple(r for r in reasons if not r.startswith("PASS"))[:2] or (default,)
    failing = [r for r in reasons if r.startswith(("guard failed", "FAIL", "invalid"))]
    rest = [r for r in reasons if r not in failing and not r.startswith("PASS")]
    return tuple([*failing, *rest][:2]) or (default,)


# -- accept / revise / fallback ---------------------------------------------------------------------------
def _free(attempt: dict[str, Any]) -> bool:
    crit = attempt.get("critique") or {}
    return crit.get("no_effect") is True or crit.get("over_budget") is True


def after_critique(
    critique: Critique, proposal: Proposal, attempts: Sequence[dict[str, Any]], ctx: EvolverContext
) -> Decision:
    """The lane's decision after a critique (`attempts` includes the one just critiqued)."""
    charged = sum(not _free(a) for a in attempts)
    free = len(attempts) - charged
    nums: dict[str, float | None] = {
        "attempts": float(len(attempts)),
        "charged": float(charged),
        "max_revisions": float(ctx.max_revisions),
    }
    if critique.primary:
        nums[critique.primary] = critique.numbers.get(critique.primary)
    if critique.measured_ok and not critique.veto and not critique.invalid:
        return Decision("accept", _why(critique, "the critic's rule held"), nums)
    why = _why(critique, "rule did not hold")
    if proposal.update is None and proposal.source in ("rules", "llm_fallback"):  # the rule brain has no template left
        return Decision("fallback", (*why, "no rule template left"), nums)
    if charged <= ctx.max_revisions and free <= FREE_RETRIES:
        last = (attempts[-1].get("critique") or {}) if attempts else {}
        note = (
            "no score changed: not charged"
            if last.get("no_effect") is True
            else "over the probe budget: not charged"
            if last.get("over_budget") is True
            else f"revision {charged} of {ctx.max_revisions}"
        )
        return Decision("revise", (*why, note), nums)
    return Decision("fallback", (*why, f"{charged} charged attempt(s), R = {ctx.max_revisions}"), nums)


def batch_accept(critique: Critique) -> Decision:
    """The batched repair of `generalise`: committed only when the batch critique held and nobody vetoed it."""
    nums = {k: critique.numbers.get(k) for k in ("batch_targets", "batch_rule_held") if k in critique.numbers}
    if critique.measured_ok and not critique.veto and not critique.invalid:
        return Decision("accept", _why(critique, "the batch rule held"), nums)
    why = _why(critique, "batch rule did not hold")
    return Decision("reject", why, nums)


# -- provisional updates ----------------------------------------------------------------------------------
class Target(BaseModel):
    """One task a provisional update is graded on.

    It holds the event's task, the task whose groups grade it (the new variant of an `add_variant`), the failure
    it answered, and the tasks whose parts a revert restores.
    """

    model_config = ConfigDict(extra="forbid")

    task_id: str
    graded_on: str
    failure_type: str
    event_id: str
    criterion_id: str | None = None
    watch: list[str] = Field(default_factory=list)  # blind_criterion: the criterion and the ones the update added
    restore: list[str] = Field(default_factory=list)


def _added_criteria(update: HarnessUpdate, task_id: str) -> list[str]:
    out: list[str] = []
    for op in update.ops:
        if op.task_id != task_id:
            continue
        if isinstance(op, AddCriterion | AddPitfall):
            out.append(op.criterion.id)
        elif isinstance(op, SplitCriterion):
            out.extend(c.id for c in op.into)
    return out


def _gradeable(update: HarnessUpdate) -> bool:
    return update.interface != "sampling" or any(isinstance(op, AddVariant) for op in update.ops)


def target_for(event: FailureEvent, update: HarnessUpdate) -> Target | None:
    """How `update` (on `event`'s task) will be graded, or None when training groups cannot grade it."""
    if not _gradeable(update):
        return None
    ops = [op for op in update.ops if op.task_id == event.task_id]
    variant = next((op.variant_id for op in ops if isinstance(op, AddVariant)), None)
    restore = [event.task_id, *([variant] if variant else [])]
    watch = [c for c in [event.criterion_id, *_added_criteria(update, event.task_id)] if c]
    return Target(
        task_id=event.task_id,
        graded_on=variant or event.task_id,
        failure_type=event.type,
        event_id=event.id,
        criterion_id=event.criterion_id,
        watch=watch,
        restore=restore,
    )


def provisional_meta(events: Sequence[FailureEvent], update: HarnessUpdate, proposal_id: str) -> dict[str, Any]:
    """The store-record meta that makes a commit provisional (empty when nothing can grade it)."""
    targets = [t.model_dump(mode="json") for e in events if (t := target_for(e, update)) is not None]
    return {"provisional": {"proposal_id": proposal_id, "targets": targets}} if targets else {}


def _rank(xs: Sequence[float]) -> np.ndarray:
    arr = np.asarray(xs, dtype=float)
    order = np.argsort(arr, kind="mergesort")
    ranks = np.empty(len(arr))
    i = 0
    while i < len(arr):
        j = i
        while j + 1 < len(arr) and arr[order[j + 1]] == arr[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


def _spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    if len(x) < 3 or len(x) != len(y):
        return None
    rx, ry = _rank(x), _rank(y)
    return None if rx.std() == 0 or ry.std() == 0 else float(np.corrcoef(rx, ry)[0, 1])


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def _pairs(groups: Sequence[GroupStats]) -> list[tuple[float, float]]:
    """(reward, audit) of every rollout with an audit score."""
    return [(r, a) for g in groups if len(g.audits) == g.n for r, a in zip(g.rewards, g.audits) if a is not None]


def _own_pairs(groups: Sequence[GroupStats], cfg: DetectorConfig) -> list[tuple[float, float]]:
    """`_pairs` without the rollouts that copy their hint (overlap >= `leak_overlap`).

    A copied answer's audit scores the hint, not the policy, so a leak repair's guards compare the policy's own
    answers (stats recorded without per-rollout overlaps count every rollout as its own)."""
    out = []
    for g in groups:
        if len(g.audits) != g.n:
            continue
        overlaps = g.leak_overlaps if len(g.leak_overlaps) == g.n else [None] * g.n
        out += [
            (r, a)
            for r, a, o in zip(g.rewards, g.audits, overlaps)
            if a is not None and (o is None or o < cfg.leak_overlap)
        ]
    return out


def _persists(t: Target, post: Sequence[GroupStats], cfg: DetectorConfig) -> tuple[bool, str, dict[str, float | None]]:
    kind = t.failure_type
    if kind in DEAD_TYPES:
        dead = [g.std < cfg.eps for g in post]
        stds = ", ".join(f"{g.std:.2f}" for g in post)
        return all(dead), f"{sum(dead)} of {len(post)} groups dead (std {stds})", {"dead_groups": float(sum(dead))}
    if kind == "spurious_length":
        lengths = [x for g in post for x in g.lengths]
        rewards = [x for g in post for x in g.rewards]
        rho = _spearman(lengths, rewards) if len(lengths) == len(rewards) else None
        held = rho is not None and rho >= cfg.length_corr
        return (
            held,
            f"pooled corr(length, reward) {'-' if rho is None else f'{rho:.2f}'} (fires at {cfg.length_corr})",
            {"length_corr": rho},
        )
    if kind == "spurious_audit":
        pairs = _pairs(post)
        gamed = [r for r, a in pairs if a < cfg.audit_pass]
        honest = [r for r, a in pairs if a >= cfg.audit_pass]
        g, h = _mean(gamed), _mean(honest)
        still = g is not None and (g >= h if h is not None else g > cfg.tau_lo)
        return (
            still,
            (
                f"{len(gamed)} audit-failing rollouts, reward {'-' if g is None else f'{g:.2f}'} vs audit-passing "
                f"{'-' if h is None else f'{h:.2f}'}"
            ),
            {"gamed_reward": g, "honest_reward": h},
        )
    if kind == "stuffing":
        # Judged like spurious_audit, by whether stuffing still pays: W groups after the commit the policy still
        # stuffs as often (it unlearns over many steps), but a repair that works gives stuffing rollouts less
        # reward than the others, which is what turns GRPO's advantage against it.
        rows = [
            (g.rewards[i], g.phrase_repeats[i] >= cfg.stuffing_repeat or g.repeats[i] >= cfg.stuffing_repeat)
            for g in post
            if len(g.repeats) == g.n == len(g.phrase_repeats)
            for i in range(g.n)
        ]
        s, o = _mean([r for r, stuffs in rows if stuffs]), _mean([r for r, stuffs in rows if not stuffs])
        still = s is not None and (s >= o if o is not None else s > cfg.tau_lo)
        n_stuff = sum(stuffs for _, stuffs in rows)
        return (
            still,
            (
                f"{n_stuff} of {len(rows)} rollouts stuff, reward {'-' if s is None else f'{s:.2f}'} vs the others "
                f"{'-' if o is None else f'{o:.2f}'}"
            ),
            {"stuffing_reward": s, "other_reward": o},
        )
    if kind == "blind_criterion":
        watch = [c for c in t.watch if all(c in g.pass_rates for g in post)]
        if not watch:  # the criterion is gone (removed): the group must at least vary
            dead = [g.std < cfg.eps for g in post]
            return (
                all(dead),
                f"criterion gone; {sum(dead)} of {len(post)} groups dead",
                {"dead_groups": float(sum(dead))},
            )
        blind = [
            c for c in watch if all(g.pass_rates[c] == 0.0 for g in post) or all(g.pass_rates[c] == 1.0 for g in post)
        ]
        return (
            len(blind) == len(watch),
            f"{len(blind)} of {len(watch)} watched criteria still blind ({', '.join(watch)})",
            {"blind_criteria": float(len(blind))},
        )
    if kind == "guidance_leak":
        hinted = [o for g in post for o in g.leak_overlaps if o is not None]
        share = sum(o >= cfg.leak_overlap for o in hinted) / len(hinted) if hinted else None
        still = share is not None and share >= cfg.leak_share
        return (
            still,
            f"leak share {'-' if share is None else f'{share:.2f}'} of {len(hinted)} hinted rollouts",
            {"leak_share": share},
        )
    raise ValueError(f"no confirm rule for failure type {kind!r}")


def _drop(before: Sequence[float], after: Sequence[float]) -> tuple[float, float] | None:
    """(mean drop after vs before, its standard error), or None with fewer than two rollouts a side."""
    if len(before) < 2 or len(after) < 2:
        return None
    se = math.sqrt(float(np.var(before, ddof=1)) / len(before) + float(np.var(after, ddof=1)) / len(after))
    return float(np.mean(before) - np.mean(after)), se


# A criteria repair of a dead group changes the rubric that scores the groups after it, so their reward is not
# comparable with the groups' before it: a graded split of a criterion nobody met pays partial credit the old rubric
# never paid, or takes back credit everybody had (a `make demo` run reverted a flat repair that left 0 of 2 groups
# dead because "honest reward fell 0.33"). The audit, which the edit does not touch, guards it. A hack repair keeps
# the guard: there a new rubric that pays honest answers less is the harm it looks for.
RUBRIC_CHANGED = "honest reward not compared: the criteria edit changed the rubric (the audit guards it)"


def _revived_signal_harm(
    before: Sequence[tuple[float, float]],
    after: Sequence[tuple[float, float]],
    cfg: DetectorConfig,
    nums: dict[str, float | None],
) -> list[str]:
    """The audit guard of a hint on a dead task, read on its hinted groups (`critic_guards._revived_signal_guard`).

    The groups before the hint taught nothing, so the harm to look for is a signal that pays audit-failing answers
    above audit-passing ones, not a lower audit mean on hinted prompts than on plain ones.
    """
    gamed = [r for r, x in after if x < cfg.audit_pass]
    honest = [r for r, x in after if x >= cfg.audit_pass]
    if not honest:
        if gamed and any(x >= cfg.audit_pass for _, x in before):
            return [f"no hinted rollout passes the audit ({len(gamed)} fail it; some passed before the hint)"]
        return []
    d = _drop(gamed, honest)
    if d is None:
        return []
    gap, se = d
    nums["revived_gamed_gap"] = gap
    if gap > GUARD_Z * se:
        return [f"hinted rollouts the audit fails earn {gap:.2f} more than those it passes ({GUARD_Z} se {se:.2f})"]
    return []


def _harms(
    t: Target,
    pre: Sequence[GroupStats],
    post: Sequence[GroupStats],
    ctx: EvolverContext,
    cfg: DetectorConfig,
    *,
    same_rubric: bool = True,
    revived: bool = False,
) -> tuple[list[str], dict[str, float | None]]:
    reasons, nums = [], {}
    b, a = (
        (_own_pairs(pre, cfg), _own_pairs(post, cfg))
        if t.failure_type == "guidance_leak"
        else (_pairs(pre), _pairs(post))
    )
    checks = []
    if revived:
        reasons += _revived_signal_harm(b, a, cfg, nums)
    else:
        checks.append(("audit", [x for _, x in b], [x for _, x in a], ctx.max_audit_drop))
    if t.failure_type != "collapse_high" and same_rubric:
        checks.append(
            (
                "honest reward",
                [r for r, x in b if x >= cfg.audit_pass],
                [r for r, x in a if x >= cfg.audit_pass],
                ctx.max_mean_drop,
            )
        )
    for name, before, after, margin in checks:
        d = _drop(before, after)
        if d is None:
            continue
        drop, se = d
        nums[f"{name.replace(' ', '_')}_drop"] = drop
        if drop > margin + GUARD_Z * se:
            reasons.append(f"{name} fell {drop:.2f} (margin {margin:.2f} + {GUARD_Z} se {se:.2f})")
    return reasons, nums


def grade(
    t: Target,
    interface: str,
    pre: Sequence[GroupStats],
    post: Sequence[GroupStats],
    *,
    window: int,
    ctx: EvolverContext,
    detector: DetectorConfig,
    superseded_by: int | None = None,
) -> Decision:
    """Confirm, revert, wait or superseded for one target of a provisional update.

    `post`: the graded task's training groups scored under the update's version (or a later one that left the
    task alone), oldest first; `pre`: its groups before the commit (the guards' baseline)."""
    if interface == "guidance" and t.failure_type in DEAD_TYPES:
        post = [g for g in post if g.hinted]  # unhinted visits of a fade-out plan are not what the hint repairs
    nums: dict[str, float | None] = {"groups": float(len(post)), "window": float(window)}
    if len(post) < window:
        if superseded_by is not None:
            return Decision(
                "superseded", (f"v{superseded_by} changed {t.graded_on} after {len(post)} of {window} groups",), nums
            )
        return Decision("wait", (f"{len(post)} of {window} groups since the commit",), nums)
    post = list(post)[:window]
    still, why, extra = _persists(t, post, detector)
    rubric_changed = interface == "criteria" and t.failure_type in ("collapse_low", "flat")
    revived = interface == "guidance" and t.failure_type in DEAD_TYPES
    harms, harm_nums = (
        _harms(t, pre, post, ctx, detector, same_rubric=not rubric_changed, revived=revived)
        if interface in ("guidance", "criteria")
        else ([], {})
    )
    nums |= extra | harm_nums
    note = (RUBRIC_CHANGED,) if rubric_changed else ()
    if still:
        return Decision("revert", (f"{t.failure_type} persists: {why}", *harms, *note), nums)
    if harms:
        return Decision("revert", (*harms, f"{t.failure_type} repaired: {why}", *note), nums)
    return Decision("confirm", (f"{t.failure_type} held off: {why}", *note), nums)


def revert_update(
    interface: str,
    tasks: Sequence[str],
    parent: HarnessState,
    now: HarnessState,
    *,
    rationale: str,
    event_id: str | None,
) -> HarnessUpdate | None:
    """Restore `tasks`' part of `interface` from `parent` on top of `now`.

    `parent` is the reverted update's parent version. None when every part is already as the parent had it.
    """
    ops: list[Any] = []
    for tid in tasks:
        if not now.has_task(tid):
            continue
        if interface == "sampling":
            want = parent.sampling.get(tid)
            cur = now.sampling.get(tid)
            if cur is not None and (want != cur if want is not None else cur.status != "retired"):
                ops.append(RestoreSampling(task_id=tid, from_version=parent.version, sampling=want))
        elif interface == "guidance":
            if parent.guidance_for(tid) != now.guidance_for(tid):
                ops.append(RestoreGuidance(task_id=tid, from_version=parent.version, guidance=parent.guidance.get(tid)))
        elif parent.has_task(tid) and parent.criteria(tid) != now.criteria(tid):
            ops.append(
                RestoreCriteria(task_id=tid, from_version=parent.version, criteria=parent.criteria_overrides.get(tid))
            )
    return HarnessUpdate(interface=interface, ops=ops, rationale=rationale, event_id=event_id) if ops else None  # type: ignore[arg-type]
