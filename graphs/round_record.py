"""The record of an evolver round, typed: what the graph reports per event and what `rounds.jsonl` keeps.

Two levels, each built once:

- `EventReport`: one event's report, built by the graph's `record` node (graphs/nodes.py) from the lane's state
  (attribution, every candidate with its critique and measurement, fallback, batched repair, tool calls). The graph
  state is plain JSON, so it travels as `EventReport.model_dump(mode="json")` and is read back with
  `EventReport.model_validate` (the trainer's summary, `harnessrl evolve RUN --step N`'s comparison).
- `RoundRecord`: one line of `rounds.jsonl`, the trainer's record of a pause (trainer/evolver_round.py): the events it
  took and why, the grading of earlier provisional updates, the pre-flight probes, the round's outcome and one
  `EventLine` per event (the report's essentials: full attempts live in evolver.sqlite and memory).

Every field of a line has a default, so a line written by an older version still reads (keys it lacks take the
default; keys no longer written are ignored). A line is written with `RoundRecord.dump`: the keys that were set,
so a key that only some rounds carry (`live_dropped`, `preflight`, a failed round's `traceback`) stays absent
from the others, as before the type existed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.schemas import Attribution, Critique
from harness.types import FailureEvent

LLM_FAILED = "LLM failed: "  # how the attributor notes an LLM answer the rule brain replaced (agents/attributor.py)


class _Line(BaseModel):
    # Read tolerantly: `rounds.jsonl` lines and graph outputs of older versions lack new keys and may hold dropped ones.
    model_config = ConfigDict(extra="ignore")


class DecisionRecord(_Line):
    """`agents.decisions.Decision.as_dict`: a verdict with the reasons and numbers that decided it."""

    verdict: str = ""
    reasons: list[str] = Field(default_factory=list)
    numbers: dict[str, Any] = Field(default_factory=dict)


class Attempt(_Line):
    """One candidate of an event as the graph keeps it (graphs/nodes.py `critique`)."""

    revision: int = 0
    template: str | None = None
    source: str | None = None  # the proposer's brain: rules, llm, llm_fallback
    llm_error: str | None = None
    critic_source: str | None = None
    evidence_used: list[str] = Field(default_factory=list)
    update: dict[str, Any] | None = None  # HarnessUpdate JSON
    error: str | None = None
    critique: Critique
    measurement: dict[str, Any] | None = None  # tools.candidate.Measurement.compact
    decision: DecisionRecord | None = None

    def line(self) -> AttemptLine:
        return AttemptLine(
            template=self.template,
            numbers=dict(self.critique.numbers),
            reasons=list(self.critique.reasons),
            evidence_used=self.evidence_used,
            decision=self.decision,
        )


class Generalised(_Line):
    """An accepted repair's batched update for similar tasks (graphs/nodes.py `generalise`, agents/generalise.py)."""

    decision: str = "none"  # none | pending | accepted | rejected | rejected_stale
    note: str | None = None
    proposal_id: str = ""
    template: str | None = None
    # None when no batch was built (memory off, require_approval): the batch's fields are absent then.
    targets: list[str] | None = None
    seen_in: dict[str, str] | None = None
    skipped: list[str] | None = None
    signature: str | None = None
    signatures: dict[str, str] = Field(default_factory=dict)
    critique: Critique | None = None
    measurement: dict[str, Any] | None = None
    version: int | None = None
    events: dict[str, FailureEvent] = Field(default_factory=dict)
    per_task: dict[str, dict[str, Any]] = Field(default_factory=dict)  # target -> HarnessUpdate JSON
    update: dict[str, Any] | None = None
    verdict: DecisionRecord | None = None

    def line(self) -> GeneralisedLine:
        return GeneralisedLine(
            decision=self.decision,
            targets=self.targets,
            skipped=self.skipped,
            signature=self.signature,
            version=self.version,
            note=self.note,
            verdict=self.verdict,
            numbers=None if self.critique is None else dict(self.critique.numbers),
        )


class Brains(_Line):
    """Which brain made each decision of one event: "rules", "llm" or "llm_fallback".

    "llm_fallback": the LLM could not answer validly, the rule brain did. The attributor's, then per attempt the
    proposer's and the critic's; `llm_errors`: why, for each fallback.
    """

    attributor: str | None = None
    proposer: list[str | None] = Field(default_factory=list)
    critic: list[str | None] = Field(default_factory=list)
    llm_errors: list[str] = Field(default_factory=list)


class EventReport(_Line):
    """One event's report: the graph's `record` node builds it, the lane's state is its only source."""

    event_id: str
    task_id: str
    failure_type: str
    decision: str  # accepted | rejected | rejected_stale | rejected_by_human | fallback | skipped
    interface: str | None = None
    attribution: Attribution | None = None
    revisions: int = 0
    committed_version: int | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    fallback: dict[str, Any] | None = None  # {applied, reason, update, version}
    note: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    generalised: Generalised | None = None

    def probe_rollouts(self) -> int:
        """Rollouts this event's measurements generated: its candidates, its batched repair, its fallback's probe."""
        measured = [a.measurement for a in self.attempts]
        measured.append(None if self.generalised is None else self.generalised.measurement)
        n = sum(int(((m or {}).get("cost") or {}).get("probe_rollouts") or 0) for m in measured)
        return n + int((self.fallback or {}).get("probe_rollouts") or 0)

    def brains(self) -> Brains:
        att = self.attribution
        errors = [
            n.removeprefix(LLM_FAILED)
            for n in (att.notes if att is not None else [])
            if att is not None and att.source == "llm_fallback" and n.startswith(LLM_FAILED)
        ]
        errors += [a.llm_error for a in self.attempts if a.llm_error]
        errors += [a.critique.review for a in self.attempts if a.critic_source == "llm_fallback"]
        return Brains(
            attributor=None if att is None else att.source,
            proposer=[a.source for a in self.attempts],
            critic=[a.critic_source for a in self.attempts],
            llm_errors=errors,
        )

    def line(self) -> EventLine:
        """The event as rounds.jsonl keeps it."""
        return EventLine(
            event_id=self.event_id,
            task_id=self.task_id,
            failure_type=self.failure_type,
            decision=self.decision,
            interface=self.interface,
            revisions=self.revisions,
            committed_version=self.committed_version,
            note=self.note,
            generalised=None if self.generalised is None else self.generalised.line(),
            brains=self.brains(),
            attempts=[a.line() for a in self.attempts],
        )


class AttemptLine(_Line):
    """One candidate in rounds.jsonl: its template, the critic's numbers and reasons, the decision taken on it."""

    template: str | None = None
    numbers: dict[str, Any] | None = None
    reasons: list[str] | None = None
    evidence_used: list[str] = Field(default_factory=list)
    decision: DecisionRecord | None = None


class GeneralisedLine(_Line):
    """The batched repair in rounds.jsonl: targets, skips, decision, the batch's numbers."""

    decision: str | None = None
    targets: list[str] | None = None
    skipped: list[str] | None = None
    signature: str | None = None
    version: int | None = None
    note: str | None = None
    verdict: DecisionRecord | None = None
    numbers: dict[str, Any] | None = None


class EventLine(_Line):
    """One event of a round in rounds.jsonl (`EventReport.line`); None: a key the report lacked when written."""

    event_id: str | None = None
    task_id: str | None = None
    failure_type: str | None = None
    decision: str | None = None
    interface: str | None = None
    revisions: int | None = None
    committed_version: int | None = None
    note: str | None = None
    generalised: GeneralisedLine | None = None
    brains: Brains = Field(default_factory=Brains)
    attempts: list[AttemptLine] = Field(default_factory=list)


class GradedVerdict(_Line):
    """Training's verdict on one target of a provisional update (trainer/provisional.py `review`)."""

    version: int
    task_id: str = ""
    graded_on: str = ""
    failure_type: str = ""
    interface: str | None = None
    template: str = ""
    source: str = ""
    verdict: str = ""  # confirm | revert | superseded
    reasons: list[str] = Field(default_factory=list)
    numbers: dict[str, Any] = Field(default_factory=dict)
    revert_version: int | None = None
    line: str = ""


class Provisional(_Line):
    """rounds.jsonl `provisional`: the grading of earlier provisional updates at this pause (or why it failed)."""

    window: int = 0
    verdicts: list[GradedVerdict] = Field(default_factory=list)
    revert_versions: list[int] = Field(default_factory=list)
    n_confirmed: int = 0
    n_reverted: int = 0
    n_superseded: int = 0
    waiting: int = 0
    error: str | None = None
    traceback: str | None = None


class Preflight(_Line):
    """rounds.jsonl `preflight`: the pre-flight probes of the pool on the initial policy (trainer/preflight.py)."""

    pool_size: int | None = None
    probed: list[str] = Field(default_factory=list)
    groups_per_task: int = 0
    group_means: list[float] = Field(default_factory=list)
    group_stds: list[float] = Field(default_factory=list)
    dead_share: dict[str, float] = Field(default_factory=dict)
    dead: list[str] = Field(default_factory=list)
    dead_by_chance: list[str] = Field(default_factory=list)
    rollouts: int = 0
    probe_s: float = 0.0
    error: str | None = None
    traceback: str | None = None


class SlotValue(_Line):
    """Why an event got its slot: the dead groups its repair could revive (trainer/round_events.py `RepairValue`)."""

    dead_rate: float = 0.0
    draw_p: float = 0.0
    groups_left: float = 0.0
    value: float = 0.0


class RoundRecord(_Line):
    """One line of rounds.jsonl: a pause of training and the evolver round it ran (trainer/evolver_round.py)."""

    step: int
    version_before: int | None = None
    n_events: int = 0
    event_ids: list[str] | None = None  # None: a line written before the round's input was recorded
    event_types: list[str] = Field(default_factory=list)
    event_values: dict[str, SlotValue] = Field(default_factory=dict)
    n_stale: int = 0
    n_superseded: int = 0
    n_live: int = 0
    live_dropped: list[str] = Field(default_factory=list)
    n_waiting: int = 0
    provisional: Provisional | None = None
    preflight: Preflight | None = None
    skipped: str | None = None  # why no round ran
    thread_id: str | None = None
    policy: str | None = None
    publish_s: float | None = None
    policy_requests: int | None = None
    policy_memo_hits: int | None = None
    n_accepted: int = 0
    # Rollouts the round's measurements generated, and the round's probe budget when the run bounds it
    # (harness.max_extra_generation; trainer/probe_budget.py): the pre-flight's own probes are `preflight.rollouts`.
    probe_rollouts: int = 0
    probe_budget: int | None = None
    accepted_interfaces: list[str | None] = Field(default_factory=list)
    outcomes: dict[str, int] = Field(default_factory=dict)
    assistant_id: str | None = None  # a LangGraph server round: whose context chose models and limits
    server_settings: list[str] = Field(default_factory=list)
    approvals: list[dict[str, Any]] = Field(default_factory=list)
    error: str | None = None
    traceback: str | None = None
    rolled_back_versions: list[int] = Field(default_factory=list)
    version_after: int | None = None
    pause_s: float = 0.0
    reports: list[EventLine] = Field(default_factory=list)

    def dump(self) -> dict[str, Any]:
        """The line as written: the keys that were set (see the module docstring).

        Python mode, not JSON mode: a number that is NaN stays NaN (JSON mode would write null where a value is
        typed `Any`), as the line held before the type existed."""
        return self.model_dump(exclude_unset=True)


def summarize(out: dict[str, Any]) -> dict[str, Any]:
    """The graph's output as rounds.jsonl fields of a `RoundRecord`.

    Accepted count and interfaces, decisions counted, one `EventLine` per event, and on a LangGraph server the
    assistant, the settings it did not take and who answered the approvals (`trainer.evolver_round.run_round` adds
    them).
    """
    reports = [EventReport.model_validate(r) for r in out["reports"]]
    by_event = {r.event_id: r.interface for r in reports}
    return {
        "n_accepted": len(out["accepted"]),
        "accepted_interfaces": [by_event.get(a["event_id"]) for a in out["accepted"]],
        "outcomes": dict(Counter(r.decision for r in reports)),
        "probe_rollouts": sum(r.probe_rollouts() for r in reports),
        "reports": [r.line() for r in reports],
        **{k: out[k] for k in ("assistant_id", "server_settings", "approvals") if k in out},
    }
