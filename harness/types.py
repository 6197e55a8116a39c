"""Typed harness state: tasks, criteria, the three interfaces, update ops and failure events.

Everything here is a pydantic v2 model that round-trips through JSON. The harness is the training
configuration that co-evolves with the policy:

- task sampling  -> `HarnessState.sampling` (weight, status and an expiring quarantine per task) and
  `HarnessState.variants`
- rollout guidance -> `HarnessState.guidance` (hints plus a reveal schedule per task)
- rubric criteria -> `HarnessState.criteria_overrides` (the full criteria list of a task once edited)

Base tasks live in `HarnessState.tasks` and never change; every edit goes through `harness.ops.apply`.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.checks import MAX_NESTING, Check, check_depth

Interface = Literal["sampling", "guidance", "criteria"]
INTERFACES: tuple[Interface, ...] = ("sampling", "guidance", "criteria")
CriterionKind = Literal["essential", "important", "optional", "pitfall"]
# RaR convention: category -> default integer weight. Pitfalls are negative.
DEFAULT_WEIGHTS: dict[str, float] = {"essential": 5.0, "important": 3.0, "optional": 1.0, "pitfall": -3.0}
MAX_ABS_WEIGHT = 10.0
MIN_CONFIRM_HITS = 2  # a failure is confirmed by at least this many groups, never by one
FailureType = Literal[
    "collapse_low",
    "collapse_high",
    "flat",
    "spurious_length",
    "spurious_audit",
    "stuffing",
    "blind_criterion",
    "guidance_leak",
]
FAILURE_TYPES: tuple[str, ...] = (
    "collapse_low",
    "collapse_high",
    "flat",
    "spurious_length",
    "spurious_audit",
    "stuffing",
    "blind_criterion",
    "guidance_leak",
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Message(_Model):
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class Criterion(_Model):
    """One rubric item. `check` makes it programmatic; without one an LLM judge decides it."""

    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    text: str = Field(min_length=1, max_length=500)
    weight: float
    kind: CriterionKind
    check: Check | None = None
    origin: str = "seed"

    @field_validator("weight")
    @classmethod
    def _weight_bounds(cls, v: float) -> float:
        if not math.isfinite(v) or v == 0 or abs(v) > MAX_ABS_WEIGHT:
            raise ValueError(f"weight must be non-zero and within [-{MAX_ABS_WEIGHT}, {MAX_ABS_WEIGHT}], got {v}")
        return v

    @model_validator(mode="after")
    def _sign_matches_kind(self) -> Criterion:
        if (self.kind == "pitfall") != (self.weight < 0):
            raise ValueError(
                f"kind {self.kind!r} needs a {'negative' if self.kind == 'pitfall' else 'positive'} weight"
            )
        if self.check is not None and check_depth(self.check) > MAX_NESTING + 1:
            raise ValueError(f"check nested deeper than {MAX_NESTING} levels")
        return self


class Task(_Model):
    id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    domain: str = Field(min_length=1)
    split: Literal["train", "test"] = "train"
    prompt: list[Message] = Field(min_length=1)
    criteria: list[Criterion] = Field(min_length=1)
    reference_answer: str | None = None
    # Hidden criteria: never part of the training reward; they measure true quality for evaluation
    # and for spurious-reward detection.
    audit_criteria: list[Criterion] = Field(default_factory=list)
    parent_id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _criteria_ok(self) -> Task:
        for name in ("criteria", "audit_criteria"):
            ids = [c.id for c in getattr(self, name)]
            dup = {i for i in ids if ids.count(i) > 1}
            if dup:
                raise ValueError(f"{name}: duplicate criterion ids {sorted(dup)}")
        if not any(c.weight > 0 for c in self.criteria):
            raise ValueError("criteria: at least one criterion must have a positive weight")
        if self.prompt[-1].role != "user":
            raise ValueError("prompt: the last message must be a user turn")
        return self

    @property
    def user_prompt(self) -> str:
        return self.prompt[-1].content


class Hint(_Model):
    id: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1, max_length=400)
    source: str = ""  # e.g. "criterion:c2" for hints derived from an unmet essential criterion


class Schedule(_Model):
    """How much guidance a visit of the task sees at a training step.

    The reveal fraction is 1 before `start_step`, then decays to `floor` by `end_step` (`linear`) or
    along a sigmoid centred between them (`sigmoid`); `constant` keeps it at 1. Within that
    fraction, each visit shows the first ceil(fraction * len(hints)) hints, and a visit is hinted at
    all with probability `hinted_share` — mixing hinted and unhinted groups is the fade-out plan
    the SmolLM2 spike asked for.
    """

    mode: Literal["constant", "linear", "sigmoid"] = "linear"
    start_step: int = Field(default=0, ge=0)
    end_step: int = Field(default=100, ge=1)
    floor: float = Field(default=0.0, ge=0.0, le=1.0)
    hinted_share: float = Field(default=1.0, ge=0.0, le=1.0)
    placement: Literal["user", "system"] = "user"

    @model_validator(mode="after")
    def _order(self) -> Schedule:
        if self.end_step <= self.start_step:
            raise ValueError(f"end_step ({self.end_step}) must be after start_step ({self.start_step})")
        return self


class Guidance(_Model):
    hints: list[Hint] = Field(default_factory=list)
    schedule: Schedule = Field(default_factory=Schedule)


class TaskSampling(_Model):
    """How training draws one task.

    A quarantined task stays active (still part of training) but the sampler skips it until step
    `quarantined_until`, when it is drawn again with no further update: a quarantine always ends, unlike weight 0
    or retirement.
    """

    weight: float = Field(default=1.0, ge=0.0, le=100.0)
    status: Literal["active", "retired"] = "active"
    quarantined_until: int | None = Field(default=None, ge=1)

    def drawable(self, step: int) -> bool:
        """Whether the sampler may draw this task at training step `step`."""
        return (
            self.status == "active"
            and self.weight > 0
            and (self.quarantined_until is None or step >= self.quarantined_until)
        )


class HarnessState(_Model):
    """One immutable version of the harness. Build new versions with `harness.ops.apply`."""

    version: int = Field(default=0, ge=0)
    parent_version: int | None = None
    step: int = 0  # training step at which this version was committed
    tasks: dict[str, Task] = Field(default_factory=dict)  # base suite, fixed for the run
    sampling: dict[str, TaskSampling] = Field(default_factory=dict)
    guidance: dict[str, Guidance] = Field(default_factory=dict)
    criteria_overrides: dict[str, list[Criterion]] = Field(default_factory=dict)
    variants: dict[str, Task] = Field(default_factory=dict)  # derived tasks, each with parent_id

    @classmethod
    def from_tasks(cls, tasks: list[Task]) -> HarnessState:
        """Version 0: every train task active with weight 1, no guidance, seed criteria."""
        by_id: dict[str, Task] = {}
        for t in tasks:
            if t.id in by_id:
                raise ValueError(f"duplicate task id {t.id!r}")
            by_id[t.id] = t
        return cls(tasks=by_id, sampling={t.id: TaskSampling() for t in tasks if t.split == "train"})

    # -- read-only views --------------------------------------------------------------------
    def has_task(self, task_id: str) -> bool:
        return task_id in self.tasks or task_id in self.variants

    def task(self, task_id: str) -> Task:
        """The task as training sees it now: base or variant, with the current criteria."""
        base = self.tasks.get(task_id) or self.variants.get(task_id)
        if base is None:
            raise KeyError(f"unknown task id {task_id!r}")
        if task_id in self.criteria_overrides:
            return base.model_copy(update={"criteria": self.criteria_overrides[task_id]})
        return base

    def criteria(self, task_id: str) -> list[Criterion]:
        return self.task(task_id).criteria

    def active_task_ids(self) -> list[str]:
        """Training tasks (base and variants) in a stable order: active with a positive weight.

        A quarantined task counts (it returns on its own); `drawable_task_ids` is what a step may draw.
        """
        return sorted(t for t, s in self.sampling.items() if s.status == "active" and s.weight > 0)

    def drawable_task_ids(self, step: int | None = None) -> list[str]:
        """Active tasks the sampler may draw at training step `step` (quarantines not yet over are skipped).

        Without a step, quarantines are judged at the step this version was committed.
        """
        at = self.step if step is None else step
        return sorted(t for t, s in self.sampling.items() if s.drawable(at))

    def harder_variants(self, task_id: str) -> list[str]:
        """Variants derived from `task_id` (at any depth) that training still samples (active, weight > 0).

        A variant is its parent's prompt plus one added constraint, so each is a harder version of it.
        """
        return sorted(
            v.id
            for v in self.variants.values()
            if task_id in v.meta.get("lineage", [v.parent_id])
            and v.id in self.sampling
            and self.sampling[v.id].status == "active"
            and self.sampling[v.id].weight > 0
        )

    def guidance_for(self, task_id: str) -> Guidance:
        return self.guidance.get(task_id, Guidance())


# -- update ops (docs/DESIGN.md §4). Each op names the task it touches. -------------------------------
class _Op(_Model):
    task_id: str


class Reweight(_Op):
    op: Literal["reweight"] = "reweight"
    weight: float = Field(ge=0.0, le=100.0)


class Retire(_Op):
    op: Literal["retire"] = "retire"


class Revive(_Op):
    """Back to active; also ends a quarantine, so the task is drawn again from the next step."""

    op: Literal["revive"] = "revive"


class Quarantine(_Op):
    """Skip the task in sampling until training step `until_step`, after which it is drawn again.

    The task stays active with its weight: a quarantine is a pause with an end, never a removal."""

    op: Literal["quarantine"] = "quarantine"
    until_step: int = Field(ge=1)


class AddVariant(_Op):
    """Derive a new task from `task_id` (the parent).

    `criteria` replace the parent's current ones when given; `extra_criteria` are appended to them. The variant
    starts active with `weight`.
    """

    op: Literal["add_variant"] = "add_variant"
    variant_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    prompt: list[Message] = Field(min_length=1)
    criteria: list[Criterion] | None = None
    extra_criteria: list[Criterion] = Field(default_factory=list)
    weight: float = Field(default=1.0, ge=0.0, le=100.0)
    parent_weight: float | None = Field(default=None, ge=0.0, le=100.0)


class AddHint(_Op):
    op: Literal["add_hint"] = "add_hint"
    hint: Hint


class EditHint(_Op):
    op: Literal["edit_hint"] = "edit_hint"
    hint_id: str
    text: str = Field(min_length=1, max_length=400)


class RemoveHint(_Op):
    op: Literal["remove_hint"] = "remove_hint"
    hint_id: str


class SetSchedule(_Op):
    op: Literal["set_schedule"] = "set_schedule"
    schedule: Schedule


class AddCriterion(_Op):
    op: Literal["add_criterion"] = "add_criterion"
    criterion: Criterion


class EditCriterion(_Op):
    """Change text and/or check of one criterion (weight via `reweight_criterion`)."""

    op: Literal["edit_criterion"] = "edit_criterion"
    criterion_id: str
    text: str | None = Field(default=None, min_length=1, max_length=500)
    check: Check | None = None
    clear_check: bool = False


class SplitCriterion(_Op):
    op: Literal["split_criterion"] = "split_criterion"
    criterion_id: str
    into: list[Criterion] = Field(min_length=2, max_length=6)


class RemoveCriterion(_Op):
    op: Literal["remove_criterion"] = "remove_criterion"
    criterion_id: str


class ReweightCriterion(_Op):
    op: Literal["reweight_criterion"] = "reweight_criterion"
    criterion_id: str
    weight: float


class AddPitfall(_Op):
    op: Literal["add_pitfall"] = "add_pitfall"
    criterion: Criterion


# -- restore ops: a revert (agents/decisions.py) puts one task's part back as version `from_version` had it. They
# carry the parent's entry itself, so `harness.ops.apply` stays pure (no store lookup) and the log is self-contained.
class RestoreSampling(_Op):
    """The task's sampling entry as in `from_version`.

    `sampling=None` (the task did not exist there: a variant the reverted update added) retires it. The variant
    stays defined, so rows drawn under it still score.
    """

    op: Literal["restore_sampling"] = "restore_sampling"
    from_version: int = Field(ge=0)
    sampling: TaskSampling | None = None


class RestoreGuidance(_Op):
    """The task's hints and schedule as in `from_version` (`guidance=None`: it had none)."""

    op: Literal["restore_guidance"] = "restore_guidance"
    from_version: int = Field(ge=0)
    guidance: Guidance | None = None


class RestoreCriteria(_Op):
    """The task's criteria as in `from_version` (`criteria=None`: its seed criteria, no override)."""

    op: Literal["restore_criteria"] = "restore_criteria"
    from_version: int = Field(ge=0)
    criteria: list[Criterion] | None = None


Op = Annotated[
    Union[
        Reweight,
        Retire,
        Revive,
        Quarantine,
        AddVariant,
        AddHint,
        EditHint,
        RemoveHint,
        SetSchedule,
        AddCriterion,
        EditCriterion,
        SplitCriterion,
        RemoveCriterion,
        ReweightCriterion,
        AddPitfall,
        RestoreSampling,
        RestoreGuidance,
        RestoreCriteria,
    ],
    Field(discriminator="op"),
]
OP_INTERFACE: dict[str, Interface] = {
    "reweight": "sampling",
    "retire": "sampling",
    "revive": "sampling",
    "quarantine": "sampling",
    "add_variant": "sampling",
    "add_hint": "guidance",
    "edit_hint": "guidance",
    "remove_hint": "guidance",
    "set_schedule": "guidance",
    "add_criterion": "criteria",
    "edit_criterion": "criteria",
    "split_criterion": "criteria",
    "remove_criterion": "criteria",
    "reweight_criterion": "criteria",
    "add_pitfall": "criteria",
    "restore_sampling": "sampling",
    "restore_guidance": "guidance",
    "restore_criteria": "criteria",
}


class HarnessUpdate(_Model):
    """A small typed diff on one interface, with why it was proposed and what it should do."""

    interface: Interface
    ops: list[Op] = Field(min_length=1, max_length=16)
    rationale: str = ""
    event_id: str | None = None  # the FailureEvent it answers
    predicted_effect: str = ""

    @model_validator(mode="after")
    def _ops_match_interface(self) -> HarnessUpdate:
        for i, op in enumerate(self.ops):
            if OP_INTERFACE[op.op] != self.interface:
                raise ValueError(
                    f"ops[{i}] ({op.op}) belongs to interface {OP_INTERFACE[op.op]!r}, not {self.interface!r}"
                )
        return self

    @property
    def task_ids(self) -> list[str]:
        """Tasks this update touches (new variants included), in first-seen order."""
        out: list[str] = []
        for op in self.ops:
            for t in (op.task_id, op.variant_id if isinstance(op, AddVariant) else None):
                if t and t not in out:
                    out.append(t)
        return out


class FailureEvent(_Model):
    """A reward failure found by the detector on one task (or `task_id="*"` for batch-level events)."""

    id: str
    type: FailureType
    task_id: str
    step: int
    stats: dict[str, Any] = Field(default_factory=dict)
    window: list[int] = Field(default_factory=list)  # steps of the visits that support the event
    criterion_id: str | None = None  # for blind_criterion / stuffing
    # How many groups in the detector's window showed this failure, and whether that is enough to act on
    # the task's sampling: the fallback answers only confirmed failures, never one noisy group of rollouts.
    # Events written before these fields existed read them from `window` (one step per supporting visit).
    window_hits: int = Field(default=1, ge=0)
    confirmed: bool = False

    @model_validator(mode="before")
    @classmethod
    def _confirmation_from_window(cls, data: Any) -> Any:
        if isinstance(data, dict) and "window_hits" not in data:
            hits = len(data.get("window") or []) or 1
            data = {**data, "window_hits": hits, "confirmed": data.get("confirmed", hits >= MIN_CONFIRM_HITS)}
        return data

    @model_validator(mode="after")
    def _confirmed_needs_groups(self) -> FailureEvent:
        if self.confirmed and self.window_hits < MIN_CONFIRM_HITS:
            raise ValueError(
                f"confirmed: a failure seen in {self.window_hits} group(s) cannot be confirmed "
                f"(needs at least {MIN_CONFIRM_HITS})"
            )
        return self

    # An `events.jsonl` line is the event with the harness version its group was scored under written in front, so a
    # reader of the log sees each line's version at a glance. The event carries that version already, in
    # `stats["harness_version"]` (the detector copies it from the group; `trainer.round_events.stale_check` reads it
    # there), so the front copy is dropped on reading (replay, `evolve SNAPSHOT`) instead of becoming a second field.
    def log_line(self, harness_version: int) -> dict[str, Any]:
        return {"harness_version": harness_version, **self.model_dump(mode="json")}

    @classmethod
    def from_log_line(cls, line: dict[str, Any]) -> FailureEvent:
        return cls.model_validate({k: v for k, v in line.items() if k != "harness_version"})
