"""Typed records stored in the training-time memory, each with the text we embed and flat Chroma metadata.

One record type per collection:

- `GroupSummary` (a GRPO group's stats at one step, best/worst response with verdicts): collection groups,
  stable id `grp:<task>:<step>:<group_index>`
- `EventRecord` (a detector `FailureEvent`): collection events, stable id the event id
- `AttributionRecord` (which interface an event is blamed on, and why): collection attributions, stable id
  `attr:<event id>`
- `ProposalRecord` (a candidate update, the critic's numbers and the outcome): collection proposals, stable id
  the proposal id

`document()` is a compact natural-language summary: it is what the embedder sees, so cross-task search
matches on failure type, domain, interface, the ops' text and the outcome. It is also what the evolver's
LLM roles read (memory tools, evidence), so it never carries audit scores (`harness.visibility`): those
stay in the record's fields for the trainer's report and the critic. `metadata()` is flat
(str/int/float/bool, no None, finite numbers only) because Chroma filters on flat scalars; the full record
is kept as JSON in the `json` field and `record_from_metadata` rebuilds it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.types import FailureEvent, HarnessUpdate, Interface
from harness.visibility import redact, redact_reasons

Kind = Literal["groups", "events", "attributions", "proposals"]
KINDS: tuple[Kind, ...] = ("groups", "events", "attributions", "proposals")
# "confirmed" / "reverted": the training groups after an accepted (provisional) update held it or undid it;
# "superseded": another update changed the task before they could tell (agents/decisions.py). The record of that
# verdict sits next to the proposal's own "accepted" one.
Outcome = Literal["accepted", "rejected", "fallback", "invalid", "confirmed", "reverted", "superseded"]
OUTCOMES: tuple[str, ...] = ("accepted", "rejected", "fallback", "invalid", "confirmed", "reverted", "superseded")

# Rollouts are short on the embedded default; the cap bounds what one adversarially long completion can cost
# in the store (it is kept in metadata JSON and part of it in the embedded text).
MAX_RESPONSE_CHARS = 4000
_DOC_SNIPPET = 160


def _num(x: Any) -> str:
    return f"{x:+.2f}" if isinstance(x, float) else str(x)


def _snippet(text: str, n: int = _DOC_SNIPPET) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= n else one_line[: n - 1] + "…"


def _flat(meta: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """Drop what Chroma cannot filter on (None, NaN/inf, nested values): those live in the `json` field."""
    out: dict[str, str | int | float | bool] = {}
    for k, v in meta.items():
        if isinstance(v, bool | int | str):
            out[k] = v
        elif isinstance(v, float) and math.isfinite(v):
            out[k] = v
    return out


def _as_dict(obj: Any) -> dict[str, Any]:
    """A plain dict from a pydantic model, a dataclass or a mapping.

    It keeps `memory` decoupled from the detector's concrete stats class.
    """
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return dict(obj)
    raise TypeError(f"expected a pydantic model, dataclass or dict, got {type(obj).__name__}")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: ClassVar[Kind]
    step: int = 0

    @property
    def record_id(self) -> str:  # pragma: no cover - every record overrides
        raise NotImplementedError

    @property
    def task_id_for_index(self) -> str:
        return self.task_id

    def document(self) -> str:  # pragma: no cover - every record overrides
        raise NotImplementedError

    def _extra_metadata(self) -> dict[str, Any]:
        return {}

    def metadata(self) -> dict[str, str | int | float | bool]:
        base = {"kind": self.kind, "task_id": self.task_id_for_index, "step": self.step, "json": self.model_dump_json()}
        return _flat({**base, **self._extra_metadata()})


class ResponseSample(BaseModel):
    """One rollout kept as evidence: its text, reward and per-criterion verdicts."""

    model_config = ConfigDict(extra="ignore")  # a detector RolloutRecord carries more fields; we keep these
    text: str
    reward: float
    verdicts: dict[str, bool] = Field(default_factory=dict)
    audit: float | None = None

    @classmethod
    def of(cls, obj: Any) -> ResponseSample:
        if isinstance(obj, ResponseSample):
            return obj
        d = _as_dict(obj)
        d["text"] = str(d.get("text", ""))[:MAX_RESPONSE_CHARS]
        return cls.model_validate(d)

    def verdict_line(self) -> str:
        met = [c for c, ok in self.verdicts.items() if ok]
        unmet = [c for c, ok in self.verdicts.items() if not ok]
        return f"met {','.join(met) or '-'}; unmet {','.join(unmet) or '-'}"


class GroupSummary(_Record):
    kind: ClassVar[Kind] = "groups"
    task_id: str
    harness_version: int = 0
    group_index: int = 0  # a task may appear in more than one group at the same step
    domain: str = ""
    stats: dict[str, Any] = Field(default_factory=dict)  # harness.detector GroupStats as a dict
    best: ResponseSample | None = None
    worst: ResponseSample | None = None
    texts: list[str] = Field(default_factory=list)  # every completion of the group: the critic re-scores them

    @classmethod
    def from_stats(
        cls,
        stats: Any,
        best: Any = None,
        worst: Any = None,
        harness_version: int = 0,
        *,
        domain: str = "",
        group_index: int = 0,
        texts: list[str] | None = None,
    ) -> GroupSummary:
        """From a detector `GroupStats` (or its dict) plus the best and worst rollouts of the group."""
        d = _as_dict(stats)
        for field in ("task_id", "step"):
            if field not in d:
                raise ValueError(f"group stats lack {field!r}: got keys {sorted(d)}")
        return cls(
            task_id=str(d["task_id"]),
            step=int(d["step"]),
            harness_version=harness_version,
            group_index=group_index,
            domain=domain,
            stats=d,
            best=None if best is None else ResponseSample.of(best),
            worst=None if worst is None else ResponseSample.of(worst),
            texts=[str(t)[:MAX_RESPONSE_CHARS] for t in texts or []],
        )

    @property
    def record_id(self) -> str:
        return f"grp:{self.task_id}:{self.step}:{self.group_index}"

    def _stat(self, name: str) -> float | None:
        v = self.stats.get(name)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def document(self) -> str:
        nums = [f"{k} {v:.2f}" for k in ("mean", "std", "min", "max") if (v := self._stat(k)) is not None]
        where = self.task_id + (f" ({self.domain})" if self.domain else "")
        parts = [f"group on {where} at step {self.step}: " + (", ".join(nums) or "no stats")]
        if rates := self.stats.get("pass_rates"):
            low = sorted(rates, key=lambda c: rates[c])[:3]
            parts.append("hardest criteria " + ", ".join(f"{c} {rates[c]:.2f}" for c in low))
        if self.best is not None:
            parts.append(f"best ({self.best.reward:.2f}, {self.best.verdict_line()}): {_snippet(self.best.text)}")
        if self.worst is not None:
            parts.append(f"worst ({self.worst.reward:.2f}, {self.worst.verdict_line()}): {_snippet(self.worst.text)}")
        return "; ".join(parts)

    def _extra_metadata(self) -> dict[str, Any]:
        return {
            "harness_version": self.harness_version,
            "domain": self.domain,
            **{k: v for k in ("mean", "std", "min", "max", "n") if (v := self._stat(k)) is not None},
        }


class EventRecord(_Record):
    kind: ClassVar[Kind] = "events"
    event: FailureEvent
    domain: str = ""
    harness_version: int = 0

    def model_post_init(self, _: Any) -> None:
        # The event carries its own step; keep the record's ordering key in step with it.
        self.step = self.event.step

    @property
    def task_id(self) -> str:
        return self.event.task_id

    @property
    def record_id(self) -> str:
        return self.event.id

    def document(self) -> str:
        e = self.event
        where = e.task_id + (f" ({self.domain})" if self.domain else "")
        text = f"{e.type} on {where} at step {e.step}"
        if e.criterion_id:
            text += f", criterion {e.criterion_id}"
        nums = [f"{k} {v:.2f}" for k, v in redact(e.stats).items() if isinstance(v, float) and math.isfinite(v)][:6]
        if nums:
            text += ": " + ", ".join(nums)
        if e.window:
            text += f" over {len(e.window)} visits (steps {','.join(map(str, e.window))})"
        return text

    def _extra_metadata(self) -> dict[str, Any]:
        return {
            "failure_type": self.event.type,
            "domain": self.domain,
            "harness_version": self.harness_version,
            "criterion_id": self.event.criterion_id,
        }


class AttributionRecord(_Record):
    kind: ClassVar[Kind] = "attributions"
    event_id: str
    task_id: str
    interface: Interface
    diagnosis: str
    confidence: float = Field(ge=0.0, le=1.0)
    evidence_ids: list[str] = Field(default_factory=list)
    failure_type: str = ""
    brain: str = ""  # "rule" or "llm"
    evidence_used: list[str] = Field(default_factory=list)  # cross-task evidence that moved the routing off its prior

    @property
    def record_id(self) -> str:
        return f"attr:{self.event_id}"

    def document(self) -> str:
        ft = f"{self.failure_type} " if self.failure_type else ""
        return (
            f"{ft}on {self.task_id} attributed to {self.interface} (confidence {self.confidence:.2f}): "
            f"{_snippet(self.diagnosis, 300)}"
        )

    def _extra_metadata(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "interface": self.interface,
            "confidence": self.confidence,
            "failure_type": self.failure_type,
            "brain": self.brain,
        }


def _op_summary(update: HarnessUpdate) -> str:
    """One short phrase per op, with the text a reader (and the embedder) needs: hint, criterion, weight."""
    out = []
    for op in update.ops:
        d = op.model_dump()
        detail = ""
        for key in ("hint", "criterion"):
            if isinstance(d.get(key), dict):
                detail = d[key].get("text", "")
        if not detail:
            detail = d.get("text") or ""
        if not detail and d.get("weight") is not None:
            detail = f"weight {d['weight']}"
        out.append(f"{op.op}" + (f" {_snippet(str(detail), 100)}" if detail else ""))
    return "; ".join(out)


class ProposalRecord(_Record):
    kind: ClassVar[Kind] = "proposals"
    proposal_id: str
    event_id: str
    task_id: str
    failure_type: str
    interface: Interface
    update: HarnessUpdate | None = None  # a fallback may record no update at all
    measurements: dict[str, Any] = Field(default_factory=dict)  # the critic's raw numbers
    outcome: Outcome
    reasons: list[str] = Field(default_factory=list)
    deltas: dict[str, float] = Field(default_factory=dict)  # candidate minus control, e.g. {"std": 0.12}
    revision: int = 0
    harness_version: int = 0
    domain: str = ""
    template: str = ""  # the rule template's label (e.g. "hint_strong", "variant:bullets3"), "llm", or "" (fallback)
    signature: str = ""  # "<kind>/<check type>" of the event's criterion on its task ("" when it names none)
    evidence_used: list[str] = Field(default_factory=list)  # cross-task evidence that changed the template choice
    generalised_from: str = ""  # the accepted proposal this one re-targets (agents/generalise.py), else ""

    @classmethod
    def of_attempt(
        cls,
        event: FailureEvent,
        *,
        revision: int,
        interface: Interface,
        update: HarnessUpdate | None,
        measurements: dict[str, Any],
        reasons: list[str],
        deltas: dict[str, float | None],
        outcome: Outcome,
        harness_version: int,
        domain: str,
        template: str,
        signature: str,
        evidence_used: list[str],
    ) -> ProposalRecord:
        """The record of candidate `revision` for `event`: its update, the critic's numbers and the outcome.

        `deltas` are the measurement's (candidate minus control); one that could not be computed (None) is left
        out, since Chroma keeps only finite numbers."""
        return cls(
            proposal_id=f"{event.id}:r{revision}",
            event_id=event.id,
            task_id=event.task_id,
            step=event.step,
            failure_type=event.type,
            interface=interface,
            update=update,
            measurements=measurements,
            outcome=outcome,
            reasons=reasons,
            deltas={k: float(v) for k, v in deltas.items() if v is not None},
            revision=revision,
            harness_version=harness_version,
            domain=domain,
            template=template,
            signature=signature,
            evidence_used=evidence_used,
        )

    @classmethod
    def of_fallback(
        cls, event: FailureEvent, update: HarnessUpdate, *, reason: str, version: int, revision: int, domain: str
    ) -> ProposalRecord:
        """The record of the sampling fallback committed for `event` as harness `version`.

        `revision` is the number of candidates before it, so it sorts after them."""
        return cls(
            proposal_id=f"{event.id}:fallback",
            event_id=event.id,
            task_id=event.task_id,
            step=event.step,
            failure_type=event.type,
            interface="sampling",
            update=update,
            outcome="fallback",
            reasons=[reason],
            revision=revision,
            harness_version=version,
            domain=domain,
        )

    @classmethod
    def of_generalised(
        cls,
        target: FailureEvent,
        update: HarnessUpdate,
        *,
        source_id: str,
        step: int,
        interface: Interface,
        measurements: dict[str, Any],
        reasons: list[str],
        accepted: bool,
        harness_version: int,
        domain: str,
        template: str,
        signature: str,
    ) -> ProposalRecord:
        """The record of one target's share of a generalised batch (the accepted proposal `source_id` re-targeted).

        The batch's numbers, reasons and verdict are every target's; `step` and `domain` are the source event's."""
        return cls(
            proposal_id=f"{source_id}:gen:{target.task_id}",
            event_id=target.id,
            task_id=target.task_id,
            step=step,
            failure_type=target.type,
            interface=interface,
            update=update,
            measurements=measurements,
            outcome="accepted" if accepted else "rejected",
            reasons=reasons,
            revision=0,
            harness_version=harness_version,
            domain=domain,
            template=template,
            generalised_from=source_id,
            signature=signature,
        )

    @property
    def record_id(self) -> str:
        return self.proposal_id

    def document(self) -> str:
        where = self.task_id + (f" ({self.domain})" if self.domain else "")
        text = f"{self.failure_type} on {where} at step {self.step}; proposal on {self.interface}"
        if self.update is not None:
            text += f": {_op_summary(self.update)}"
        text += f"; outcome {self.outcome}"
        if deltas := redact(self.deltas):
            text += " (" + ", ".join(f"{k} {_num(float(v))}" for k, v in deltas.items()) + ")"
        if self.reasons:
            text += "; " + _snippet("; ".join(redact_reasons(self.reasons)), 200)
        return text

    def _extra_metadata(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "failure_type": self.failure_type,
            "interface": self.interface,
            "outcome": self.outcome,
            "revision": self.revision,
            "harness_version": self.harness_version,
            "domain": self.domain,
            "template": self.template,
            "signature": self.signature,
            "generalised_from": self.generalised_from,
            **{f"delta_{k}": float(v) for k, v in self.deltas.items()},
        }


Record = GroupSummary | EventRecord | AttributionRecord | ProposalRecord
RECORD_TYPES: dict[str, type[_Record]] = {
    "groups": GroupSummary,
    "events": EventRecord,
    "attributions": AttributionRecord,
    "proposals": ProposalRecord,
}


def record_from_metadata(meta: dict[str, Any]) -> Record:
    """Rebuild the typed record stored in a Chroma row's metadata."""
    kind = meta.get("kind")
    if kind not in RECORD_TYPES:
        raise ValueError(f"memory row has unknown kind {kind!r} (metadata keys {sorted(meta)})")
    return RECORD_TYPES[kind].model_validate_json(meta["json"])  # type: ignore[return-value]
