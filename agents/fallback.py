"""The safe fallback: the sampling change committed once every candidate for an event was rejected.

`decide` is where the fallback is decided, in one place, as a typed `Decision`: whether the run allows one at all
(`apply_fallback`, the sampling interface), whether the repair ladder defers it to a rung on another interface
(`next_rung_elsewhere`), which update (`fallback_decision`), whether it is valid on the harness, and the verdict of
the reproduction probe. The graph routes a `Decision` that `commits` to its one `commit` node
(`graphs/evolver.py` `route_after_fallback`), which commits `Decision.update` and reports it with `Decision.applied`
(or `Decision.refused` when another lane made it stale); any other decision is reported as `Decision.report`.

`fallback_decision` (docs/DESIGN.md §6) decides what to commit, and why, so that no task leaves training
through it: only a confirmed failure that the frozen policy reproduces changes sampling (the control group of a
measured candidate, or a probe of the fallback's own update, shows it), a batch of unusable LLM answers changes nothing,
weights are halved but never below `FALLBACK_MIN_WEIGHT`, and a quarantine lasts `QUARANTINE_STEPS`.
`probe_reproduction` measures the control group when no candidate did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agents import attributor, critic, repair_ladder
from agents.context import EvolverContext
from agents.schemas import Attribution
from harness.detector import DetectorConfig
from harness.ops import validate as validate_update
from harness.types import FailureEvent, HarnessState, HarnessUpdate, Quarantine, Retire, Reweight
from tools.candidate import measure_candidate
from tools.endpoint import PolicyEndpoint
from tools.judge import Judge
from tools.probes import ProbeBudgetSpent, ProbeCache

FALLBACK_MIN_WEIGHT = 0.05  # a fallback never sets weight 0: a weight-0 task leaves training for good
QUARANTINE_STEPS = 4  # one evolver round at the default harness.evolve_every; then the task is drawn again
# Failures of groups that still carry learning signal (the detector fires blind_criterion only on groups that are not
# dead): a quarantine or down-weight would remove that signal to answer a diagnostic, so the fallback leaves them.
TEACHING_FAILURES = frozenset({"blind_criterion"})


class Fallback(BaseModel):
    """The fallback's decision for one event.

    It holds the sampling update to commit (None: leave sampling as it is) and why, in words fit for the proposal
    record and the report.
    """

    model_config = ConfigDict(extra="forbid")

    update: HarnessUpdate | None
    reason: str
    # No measured candidate said whether its control group shows the failure on the frozen policy: the caller must
    # probe the control (`reproduces` on a measurement of `update`) and commit only when it does.
    needs_probe: bool = False


def reproduction(attempts: Sequence[dict[str, Any]] | None) -> bool | None:
    """Whether the event's failure showed on the frozen policy in a measured candidate's control group.

    The evidence is the critic's `control_reproduced` number: True if any did, False if every measured one said it
    did not, None when no attempt carries the number (nothing was measured, or the rule brain had no template).
    """
    seen = [((a.get("critique") or {}).get("numbers") or {}).get("control_reproduced") for a in attempts or ()]
    seen = [x for x in seen if x is not None]
    if not seen:
        return None
    return any(x >= 1.0 for x in seen)


def _measured(attempt: dict[str, Any]) -> bool:
    return bool((attempt.get("critique") or {}).get("measured"))


def fallback_decision(
    event: FailureEvent,
    state: HarnessState,
    attempts: Sequence[dict[str, Any]] | None = None,
    *,
    step: int | None = None,
    quarantine_steps: int = QUARANTINE_STEPS,
) -> Fallback:
    """The safe sampling change once every candidate for `event` was rejected (docs/DESIGN.md §6).

    No task leaves training through it:

    - a blind criterion changes no sampling: its group is not dead, the other criteria still teach
      (`TEACHING_FAILURES`);
    - only a *confirmed* failure (`event.confirmed`: at least two groups of the detector's window showed
      it) changes sampling; one noisy group never does;
    - and only one the frozen policy reproduces: when a measured candidate's control group did not show it
      (`reproduction` is False) nothing changes; when no candidate was measured the decision carries
      `needs_probe` and `decide` measures the fallback's own update first (`probe_reproduction`);
    - `attempts` (the event's candidates, as the graph records them) made only of LLM answers that gave
      no measurable candidate (prose, malformed JSON, a wrong interface) change nothing: a garbage answer
      is never a sampling change on its own (in the graph an unusable answer is handed to the rule brain,
      `source: llm_fallback`, so this guards callers that record raw LLM attempts);
    - collapse_high retires the task only while a harder variant of it is active; otherwise, like
      collapse_low, the weight is halved (never below FALLBACK_MIN_WEIGHT, never 0);
    - every other failure, and a collapse_low task already at the minimum weight, is quarantined until
      `step + quarantine_steps` (`step` defaults to the later of the event's and the harness's step);
      the sampler draws it again from then on with no further update.

    The reason is also the update's rationale, so a committed fallback carries it into the store's log.
    """
    tid = event.task_id
    entry = state.sampling.get(tid)
    if entry is None:
        return Fallback(
            update=None, reason=f"task {tid!r} has no sampling entry (held-out or unknown): nothing to change"
        )
    if entry.status != "active":
        return Fallback(update=None, reason=f"task {tid!r} is {entry.status}: nothing to change")
    if not event.confirmed:
        return Fallback(
            update=None,
            reason=(
                f"{event.type} seen in {event.window_hits} group(s) of the detector window, not confirmed: "
                "one noisy group never changes a task's sampling"
            ),
        )
    if event.type in TEACHING_FAILURES:
        return Fallback(
            update=None,
            reason=(
                f"{event.type}: the group is not dead, its other criteria still teach; taking the task out of training "
                "would cost that signal, so sampling stays as is"
            ),
        )
    if attempts and all(a.get("source") == "llm" and not _measured(a) for a in attempts):
        return Fallback(
            update=None,
            reason=(
                f"no candidate was measured: all {len(attempts)} LLM answer(s) were unusable; a garbage answer is "
                "never a sampling change"
            ),
        )
    reproduced = reproduction(attempts)
    if reproduced is False:
        return Fallback(
            update=None,
            reason=(
                f"{event.type} confirmed in {event.window_hits} training groups "
                "but not reproduced on the frozen policy: "
                "no measured candidate's control group shows it, so sampling stays as is"
            ),
        )
    now = step if step is not None else max(event.step, state.step)
    confirmed = f"{event.type} confirmed in {event.window_hits} groups and not repaired"
    variants = state.harder_variants(tid) if event.type == "collapse_high" else []
    half = max(FALLBACK_MIN_WEIGHT, round(entry.weight * 0.5, 3))
    op: Any
    if variants:
        op = Retire(task_id=tid)
        why = f"fallback: {confirmed}; retire the saturated task, its harder variant {variants[0]!r} is active"
    elif event.type in ("collapse_low", "collapse_high") and half < entry.weight:
        op = Reweight(task_id=tid, weight=half)
        why = (
            f"fallback: {confirmed}; halve the task's sampling weight {entry.weight:g} -> {half:g} "
            "(it stays in training)"
        )
    else:
        until = now + quarantine_steps
        op = Quarantine(task_id=tid, until_step=until)
        why = f"fallback: {confirmed}; quarantine the task until step {until}, then it is drawn again"
    update = HarnessUpdate(
        interface="sampling",
        ops=[op],
        rationale=why,
        event_id=event.id,
        predicted_effect="fewer rollouts spent on the broken task; no task leaves training",
    )
    return Fallback(update=update, reason=why, needs_probe=reproduced is None)


@dataclass(frozen=True)
class Probe:
    """What the reproduction probe found: whether the frozen policy shows the failure now.

    `reason` is the one to report (the fallback's own, extended, or why sampling stays as is); `measurement` is
    the probe's, compact."""

    reproduced: bool
    reason: str
    measurement: dict[str, Any]


def probe_reproduction(
    fb: Fallback,
    event: FailureEvent,
    state: HarnessState,
    endpoint: PolicyEndpoint,
    judge: Judge,
    ctx: EvolverContext,
    *,
    probe_cache: ProbeCache | None,
    step: int,
    detector_config: DetectorConfig | None,
    probe_left: int | None = None,
) -> Probe:
    """Probe the control group for a fallback that `needs_probe` (no candidate was measured).

    The fallback's own sampling update changes no group, so both sides are the current harness; the fallback acts
    only if the frozen policy shows the failure now (`critic.reproduces`)."""
    assert fb.update is not None  # only a fallback with an update needs a probe
    settings = critic.measure_settings(
        ctx, step, detector_config or DetectorConfig(), k=ctx.sample_k, probe_left=probe_left
    )
    m = measure_candidate(state, fb.update, endpoint, judge, settings, probe_cache=probe_cache)
    ok, why = critic.reproduces(event, m.per_task[event.task_id]["control"])
    reason = (
        f"{fb.reason} (reproduced on the frozen policy: {why})"
        if ok
        else f"not reproduced on the frozen policy ({why}): sampling stays as is"
    )
    return Probe(ok, reason, m.compact())


def next_rung_elsewhere(
    event: FailureEvent, evidence: dict[str, Any], attribution: Attribution | None, enabled: list[str]
) -> tuple[int, str, str] | None:
    """The repair ladder's next rung on an interface other than the attributed one and sampling, if any.

    A dead task with such a rung left defers its fallback: the task's next round climbs to that rung
    (`repair_ladder.rung_elsewhere`). None for a batch-level event, a skipped one or one never attributed."""
    if event.task_id == "*" or evidence.get("error") or attribution is None:
        return None
    order = repair_ladder.order_for(event.type, attributor.PREFERENCE.get(event.type, ()), evidence)
    return repair_ladder.rung_elsewhere(event.type, order, evidence, enabled, attribution.interface)


class Decision(BaseModel):
    """The fallback's decision for one event, with what the report says of it.

    `verdict`: `off` (the run allows no fallback: `apply_fallback` off or the sampling interface disabled),
    `deferred` (the repair ladder has a rung on another interface), `none` (`fallback_decision` changes nothing),
    `invalid` (its update does not validate on the harness), `not_reproduced` (the probe found the frozen policy does
    not show the failure), `over_budget` (the probe it needs could exceed the lane's share of the round's probe
    budget: nothing drawn, nothing changed), `commit` (the graph commits `update` through its `commit` node).
    `reason` is the one reported (for a commit also the update's rationale, so the store's log carries it);
    `rule_reason` is `fallback_decision`'s own, which a refused update (invalid, stale at commit) reports."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["off", "deferred", "none", "invalid", "not_reproduced", "over_budget", "commit"]
    reason: str = ""
    rule_reason: str = ""
    update: HarnessUpdate | None = None
    errors: list[str] = Field(default_factory=list)
    probe: dict[str, Any] | None = None  # the reproduction probe's measurement, compact, when it refused
    probe_rollouts: int = 0  # what the reproduction probe generated

    @property
    def commits(self) -> bool:
        return self.verdict == "commit"

    def _update(self) -> dict[str, Any]:
        assert self.update is not None  # only the verdicts that carry an update report one
        return self.update.model_dump(mode="json")

    def report(self) -> dict[str, Any] | None:
        """The report's `fallback` entry of a decision that commits nothing (None: the run allows no fallback)."""
        assert not self.commits  # a commit is reported by `applied` or `refused`
        if self.verdict == "off":
            return None
        if self.verdict in ("deferred", "none", "over_budget"):
            return {"applied": False, "reason": self.reason}
        if self.verdict == "invalid":
            return self.refused(self.errors)
        return {"update": self._update(), "applied": False, "reason": self.reason, "probe": self.probe, **self._drawn()}

    def refused(self, errors: list[str]) -> dict[str, Any]:
        """The report's `fallback` entry of an update the harness refused (invalid, or stale at commit)."""
        return {"update": self._update(), "applied": False, "errors": errors, "reason": self.rule_reason}

    def applied(self, version: int) -> dict[str, Any]:
        """The report's `fallback` entry of the committed update, now harness `version`."""
        return {"update": self._update(), "applied": True, "version": version, "reason": self.reason, **self._drawn()}

    def _drawn(self) -> dict[str, int]:
        """The reproduction probe's rollouts, when it drew any (rounds.jsonl counts them: trainer/probe_budget.py)."""
        return {"probe_rollouts": self.probe_rollouts} if self.probe_rollouts else {}


def decide(
    event: FailureEvent,
    harness: HarnessState,
    attempts: Sequence[dict[str, Any]],
    ctx: EvolverContext,
    *,
    step: int,
    evidence: dict[str, Any],
    attribution: Attribution | None,
    endpoint: PolicyEndpoint,
    judge: Judge,
    probe_cache: ProbeCache | None,
    detector_config: DetectorConfig | None,
    probe_left: int | None = None,
) -> Decision:
    """After R rejected revisions: the safe sampling change, if allowed and still valid; else no change.

    In order: a rung elsewhere on the repair ladder defers it (with the memory on, since the rungs are memory's
    proposal records); the run must allow a fallback; `fallback_decision` picks the update; the harness must accept
    it; and when no candidate was measured the frozen policy must show the failure now (`probe_reproduction`; with
    the critic off nothing is measured, and the reason says so)."""
    rung = next_rung_elsewhere(event, evidence, attribution, ctx.enabled_interfaces()) if ctx.memory else None
    if rung is not None:
        why = f"deferred: the repair ladder's next rung is {rung[1]}/{rung[2]} (agents/repair_ladder.py)"
        return Decision(verdict="deferred", reason=why)
    if not (ctx.apply_fallback and "sampling" in ctx.interfaces):
        return Decision(verdict="off")
    fb = fallback_decision(event, harness, attempts, step=step)
    if fb.update is None:
        return Decision(verdict="none", reason=fb.reason, rule_reason=fb.reason)
    errors = validate_update(harness, fb.update)
    if errors:
        return Decision(verdict="invalid", reason=fb.reason, rule_reason=fb.reason, update=fb.update, errors=errors)
    reason, drawn = fb.reason, 0
    if fb.needs_probe and ctx.critic:  # no candidate was measured: act only if the frozen policy shows the failure now
        try:
            probe = probe_reproduction(
                fb,
                event,
                harness,
                endpoint,
                judge,
                ctx,
                probe_cache=probe_cache,
                step=step,
                detector_config=detector_config,
                probe_left=probe_left,
            )
        except ProbeBudgetSpent as err:
            why = f"not probed: the reproduction probe {err}; sampling stays as is"
            return Decision(verdict="over_budget", reason=why, rule_reason=fb.reason, update=fb.update)
        drawn = int(probe.measurement.get("cost", {}).get("probe_rollouts", 0))
        if not probe.reproduced:
            return Decision(
                verdict="not_reproduced",
                reason=probe.reason,
                rule_reason=fb.reason,
                update=fb.update,
                probe=probe.measurement,
                probe_rollouts=drawn,
            )
        reason = probe.reason
    elif fb.needs_probe:
        reason = f"{reason} (critic off: not reproduced on the frozen policy first)"
    update = fb.update.model_copy(update={"rationale": reason})  # the store's log carries the reason, as reported
    return Decision(verdict="commit", reason=reason, rule_reason=fb.reason, update=update, probe_rollouts=drawn)
