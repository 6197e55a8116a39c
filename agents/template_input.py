"""What a rule template reads (`TemplateInput`) and what it is (`Template`).

The templates themselves live per interface (`agents/sampling_templates.py`, `agents/guidance_templates.py`,
`agents/criteria_templates.py`); `agents/rule_templates.py` orders them per failure type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.rollout_signals import RolloutSignals
from harness.types import (
    Criterion,
    FailureEvent,
    HarnessState,
    HarnessUpdate,
    Task,
)

MIN_SIGNAL_ROLLOUTS = 4  # fewer cached rollouts than one group: the sized templates do not apply


@dataclass
class TemplateInput:
    """What a template reads: the event, the harness and its task, the attempts so far (with the critic's verdicts)."""

    event: FailureEvent
    state: HarnessState
    task: Task
    step: int
    attempts: list[dict[str, Any]]
    unmet: list[str] = field(default_factory=list)
    label: str | None = None  # a template that picks among options names the one it used here
    constraint: str | None = None  # re-rendering "variant:<name>" for another task: that constraint, no other
    signals: RolloutSignals = field(default_factory=RolloutSignals)  # what the task's cached rollouts show

    @property
    def last_numbers(self) -> dict[str, Any]:
        for a in reversed(self.attempts):
            if a.get("critique"):
                return a["critique"].get("numbers", {})
        return {}

    @property
    def last_reasons(self) -> str:
        for a in reversed(self.attempts):
            if a.get("critique"):
                return " ".join(a["critique"].get("reasons", []))
        return ""

    @property
    def taken_ids(self) -> set[str]:
        return {c.id for c in self.task.criteria}

    @property
    def sized(self) -> bool:
        """Enough cached rollouts of the task to size a number from (`MIN_SIGNAL_ROLLOUTS`)."""
        return self.signals.n >= MIN_SIGNAL_ROLLOUTS and self.signals.length_median is not None

    def targets(self, kinds: tuple[str, ...]) -> list[Criterion]:
        """The task's positive criteria of these kinds that the rollouts left unmet (all of them when none is)."""
        pos = [c for c in self.task.criteria if c.weight > 0 and c.kind in kinds]
        return [c for c in pos if c.id in self.unmet] or pos

    def update(self, interface: str, ops: list[Any], rationale: str, effect: str) -> HarnessUpdate:
        return HarnessUpdate(
            interface=interface,
            ops=ops,
            rationale=rationale,
            event_id=self.event.id,  # type: ignore[arg-type]
            predicted_effect=effect,
        )


Template = Callable[[TemplateInput], HarnessUpdate | None]
