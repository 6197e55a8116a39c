"""Pure application of `HarnessUpdate`s to a `HarnessState`, with validation.

`apply(state, update)` deep-copies the state, applies the ops in order (op i sees the effect of ops
0..i-1) and returns a new state with `version = old + 1` and `parent_version = old`. The input is
never mutated. Any invalid op raises `UpdateRejected` naming the op index, op, field and reason, e.g.

    ops[1] (remove_criterion).criterion_id: 'c9' is not a criterion of task 'med-003'

Decisions worth knowing:

- Criteria ops write the task's *full* current list into `state.criteria_overrides[task_id]`, for
  base tasks and variants alike (a variant's own `criteria` are its seed list, never edited in
  place), so `state.task(id)` is the single way to read current criteria and `diff` sees every edit.
- Held-out (`split == "test"`) tasks are refused by every op: they have no sampling entry, and
  letting the evolver edit their hints or criteria would let it move the evaluation yardstick.
- Ops on retired tasks and on variants are allowed (e.g. re-hint a task before reviving it).
- Idempotent sampling ops (retiring a retired task) are allowed; edits that change nothing are not.
- `quarantine` skips a task in sampling until a later step (it must end after the commit step, and
  the task must be active); `revive` also ends a quarantine. No sampling op may leave training with no
  task to draw at the commit step (active, positive weight, not quarantined).
- `restore_sampling` / `restore_guidance` / `restore_criteria` put one task's part back as an earlier version
  had it (the revert of a provisional update, agents/decisions.py); the op carries that entry, so `apply`
  needs no store. A variant the reverted update added is retired, never deleted (rows drawn under it still
  score); a restore that changes nothing is refused like any edit.
- A variant inherits the parent's `reference_answer` (so the hint-leak guard keeps working on it)
  and `audit_criteria` (so its true quality stays measurable); `meta["lineage"]` lists its
  ancestors, root first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from harness.guidance import hint_leaks_reference
from harness.types import (
    MAX_ABS_WEIGHT,
    AddCriterion,
    AddHint,
    AddPitfall,
    AddVariant,
    Criterion,
    EditCriterion,
    EditHint,
    Guidance,
    HarnessState,
    HarnessUpdate,
    Quarantine,
    RemoveCriterion,
    RemoveHint,
    RestoreCriteria,
    RestoreGuidance,
    RestoreSampling,
    Retire,
    Revive,
    Reweight,
    ReweightCriterion,
    SetSchedule,
    SplitCriterion,
    Task,
    TaskSampling,
)


class UpdateRejected(ValueError):
    """An update op that cannot be applied. `op_index` is None for update-level problems."""

    def __init__(self, op_index: int | None, op: str, field: str, reason: str) -> None:
        self.op_index = op_index
        self.op = op
        self.field = field
        self.reason = reason
        where = f"ops[{op_index}] ({op})" if op_index is not None else f"update ({op})"
        super().__init__(f"{where}.{field}: {reason}")


class _Ctx:
    """Where we are in the update, to build errors that name the op and field.

    `now` is the training step the new version is committed at (quarantines are judged against it).
    """

    def __init__(self, index: int, op: str, now: int) -> None:
        self.index, self.op, self.now = index, op, now

    def reject(self, field: str, reason: str) -> UpdateRejected:
        return UpdateRejected(self.index, self.op, field, reason)


# -- lookups -------------------------------------------------------------------------------------
def _task(state: HarnessState, task_id: str, ctx: _Ctx, field: str = "task_id") -> Task:
    if not state.has_task(task_id):
        raise ctx.reject(field, f"unknown task {task_id!r}")
    task = state.task(task_id)
    if task.split == "test":
        raise ctx.reject(field, f"task {task_id!r} is a held-out test task; the harness never changes it")
    return task


def _sampling(state: HarnessState, task_id: str, ctx: _Ctx, field: str = "task_id") -> TaskSampling:
    _task(state, task_id, ctx, field)
    entry = state.sampling.get(task_id)
    if entry is None:  # a train task always has one; a hand-built state might not
        raise ctx.reject(field, f"task {task_id!r} has no sampling entry")
    return entry


def _criterion_index(criteria: list[Criterion], criterion_id: str, task_id: str, ctx: _Ctx) -> int:
    for i, c in enumerate(criteria):
        if c.id == criterion_id:
            return i
    known = ", ".join(repr(c.id) for c in criteria)
    raise ctx.reject("criterion_id", f"{criterion_id!r} is not a criterion of task {task_id!r} (has {known})")


def _hint_index(guidance: Guidance, hint_id: str, task_id: str, ctx: _Ctx) -> int:
    for i, h in enumerate(guidance.hints):
        if h.id == hint_id:
            return i
    raise ctx.reject("hint_id", f"{hint_id!r} is not a hint of task {task_id!r}")


def _check_weight(weight: float, kind: str, ctx: _Ctx, field: str) -> None:
    if not math.isfinite(weight) or weight == 0 or abs(weight) > MAX_ABS_WEIGHT:
        raise ctx.reject(
            field, f"weight must be non-zero and within [-{MAX_ABS_WEIGHT}, {MAX_ABS_WEIGHT}], got {weight}"
        )
    if (kind == "pitfall") != (weight < 0):
        need = "negative" if kind == "pitfall" else "positive"
        raise ctx.reject(field, f"a {kind} criterion needs a {need} weight, got {weight}")


def _set_criteria(state: HarnessState, task_id: str, criteria: list[Criterion], ctx: _Ctx, field: str) -> None:
    """Store the task's full new criteria list after the invariants every task keeps."""
    seen: set[str] = set()
    for c in criteria:
        if c.id in seen:
            raise ctx.reject(field, f"criterion id {c.id!r} already exists in task {task_id!r}")
        seen.add(c.id)
    if not any(c.weight > 0 for c in criteria):
        raise ctx.reject(field, f"task {task_id!r} would be left without a positive-weight criterion")
    state.criteria_overrides[task_id] = criteria


def _require_active_task(state: HarnessState, ctx: _Ctx) -> None:
    if not state.drawable_task_ids(ctx.now):
        raise ctx.reject(
            "task_id",
            f"would leave no active task with a positive sampling weight that is not quarantined at step {ctx.now}",
        )


def _first_error(err: ValidationError) -> tuple[str, str]:
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "value"
    return loc, e["msg"]


# -- sampling ------------------------------------------------------------------------------------
def _reweight(state: HarnessState, op: Reweight, ctx: _Ctx) -> None:
    _sampling(state, op.task_id, ctx).weight = op.weight
    _require_active_task(state, ctx)


def _retire(state: HarnessState, op: Retire, ctx: _Ctx) -> None:
    _sampling(state, op.task_id, ctx).status = "retired"
    _require_active_task(state, ctx)


def _revive(state: HarnessState, op: Revive, ctx: _Ctx) -> None:
    entry = _sampling(state, op.task_id, ctx)
    entry.status, entry.quarantined_until = "active", None


def _quarantine(state: HarnessState, op: Quarantine, ctx: _Ctx) -> None:
    entry = _sampling(state, op.task_id, ctx)
    if op.until_step <= ctx.now:
        raise ctx.reject(
            "until_step",
            f"{op.until_step} is not after the commit step {ctx.now}: the quarantine would already be over",
        )
    if entry.status != "active":
        raise ctx.reject("task_id", f"task {op.task_id!r} is {entry.status}; only an active task can be quarantined")
    entry.quarantined_until = op.until_step
    _require_active_task(state, ctx)


def _add_variant(state: HarnessState, op: AddVariant, ctx: _Ctx) -> None:
    parent = _task(state, op.task_id, ctx)
    parent_sampling = _sampling(state, op.task_id, ctx)
    if state.has_task(op.variant_id):
        raise ctx.reject("variant_id", f"{op.variant_id!r} already exists as a task or variant")
    criteria = list(op.criteria) if op.criteria is not None else list(parent.criteria)
    criteria += op.extra_criteria
    lineage = list(parent.meta.get("lineage", [])) + [parent.id]
    data: dict[str, Any] = {
        "id": op.variant_id,
        "domain": parent.domain,
        "split": "train",
        "prompt": op.prompt,
        "criteria": criteria,
        "reference_answer": parent.reference_answer,
        "audit_criteria": parent.audit_criteria,
        "parent_id": parent.id,
        "meta": {"lineage": lineage, "root_id": lineage[0], "created_in_version": state.version + 1},
    }
    try:
        variant = Task.model_validate(data)
    except ValidationError as err:
        loc, msg = _first_error(err)
        field = "extra_criteria" if loc.startswith("criteria") and op.criteria is None else loc
        raise ctx.reject(field, msg) from None
    state.variants[variant.id] = variant
    state.sampling[variant.id] = TaskSampling(weight=op.weight)
    if op.parent_weight is not None:
        parent_sampling.weight = op.parent_weight
    _require_active_task(state, ctx)


# -- guidance ------------------------------------------------------------------------------------
def _guidance(state: HarnessState, task_id: str) -> Guidance:
    return state.guidance.setdefault(task_id, Guidance())


def _check_leak(task: Task, text: str, ctx: _Ctx, field: str) -> None:
    if hint_leaks_reference(text, task.reference_answer):
        raise ctx.reject(field, f"hint contains the reference answer of task {task.id!r}")


def _add_hint(state: HarnessState, op: AddHint, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    g = _guidance(state, op.task_id)
    if any(h.id == op.hint.id for h in g.hints):
        raise ctx.reject("hint.id", f"hint {op.hint.id!r} already exists for task {op.task_id!r}")
    _check_leak(task, op.hint.text, ctx, "hint.text")
    g.hints.append(op.hint)


def _edit_hint(state: HarnessState, op: EditHint, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    g = _guidance(state, op.task_id)
    i = _hint_index(g, op.hint_id, op.task_id, ctx)
    if g.hints[i].text == op.text:
        raise ctx.reject("text", "the new text equals the current text")
    _check_leak(task, op.text, ctx, "text")
    g.hints[i] = g.hints[i].model_copy(update={"text": op.text})


def _remove_hint(state: HarnessState, op: RemoveHint, ctx: _Ctx) -> None:
    _task(state, op.task_id, ctx)
    g = _guidance(state, op.task_id)
    del g.hints[_hint_index(g, op.hint_id, op.task_id, ctx)]


def _set_schedule(state: HarnessState, op: SetSchedule, ctx: _Ctx) -> None:
    _task(state, op.task_id, ctx)
    _guidance(state, op.task_id).schedule = op.schedule


# -- criteria ------------------------------------------------------------------------------------
def _add_criterion(state: HarnessState, op: AddCriterion, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    if any(c.id == op.criterion.id for c in task.criteria):
        raise ctx.reject("criterion.id", f"criterion id {op.criterion.id!r} already exists in task {op.task_id!r}")
    _set_criteria(state, op.task_id, [*task.criteria, op.criterion], ctx, "criterion")


def _add_pitfall(state: HarnessState, op: AddPitfall, ctx: _Ctx) -> None:
    if op.criterion.kind != "pitfall":
        raise ctx.reject("criterion.kind", f"add_pitfall needs kind 'pitfall', got {op.criterion.kind!r}")
    task = _task(state, op.task_id, ctx)
    if any(c.id == op.criterion.id for c in task.criteria):
        raise ctx.reject("criterion.id", f"criterion id {op.criterion.id!r} already exists in task {op.task_id!r}")
    _set_criteria(state, op.task_id, [*task.criteria, op.criterion], ctx, "criterion")


def _edit_criterion(state: HarnessState, op: EditCriterion, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    criteria = list(task.criteria)
    i = _criterion_index(criteria, op.criterion_id, op.task_id, ctx)
    if op.check is not None and op.clear_check:
        raise ctx.reject("clear_check", "set either check or clear_check, not both")
    old = criteria[i]
    new_text = op.text if op.text is not None else old.text
    new_check = None if op.clear_check else (op.check if op.check is not None else old.check)
    if new_text == old.text and new_check == old.check:
        raise ctx.reject("text", "the edit changes neither text nor check")
    try:
        criteria[i] = Criterion.model_validate(
            {**old.model_dump(exclude={"check", "text"}), "text": new_text, "check": new_check}
        )
    except ValidationError as err:
        loc, msg = _first_error(err)
        raise ctx.reject(loc, msg) from None
    _set_criteria(state, op.task_id, criteria, ctx, "criterion_id")


def _split_criterion(state: HarnessState, op: SplitCriterion, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    criteria = list(task.criteria)
    i = _criterion_index(criteria, op.criterion_id, op.task_id, ctx)
    others = {c.id for j, c in enumerate(criteria) if j != i}
    seen: set[str] = set()
    for k, part in enumerate(op.into):
        if part.id in others or part.id in seen:
            raise ctx.reject(f"into[{k}].id", f"criterion id {part.id!r} already exists in task {op.task_id!r}")
        seen.add(part.id)
    criteria[i : i + 1] = list(op.into)
    _set_criteria(state, op.task_id, criteria, ctx, "into")


def _remove_criterion(state: HarnessState, op: RemoveCriterion, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    criteria = list(task.criteria)
    i = _criterion_index(criteria, op.criterion_id, op.task_id, ctx)
    if criteria[i].weight > 0 and sum(c.weight > 0 for c in criteria) == 1:
        raise ctx.reject(
            "criterion_id", f"{op.criterion_id!r} is the last positive-weight criterion of task {op.task_id!r}"
        )
    del criteria[i]
    _set_criteria(state, op.task_id, criteria, ctx, "criterion_id")


def _reweight_criterion(state: HarnessState, op: ReweightCriterion, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    criteria = list(task.criteria)
    i = _criterion_index(criteria, op.criterion_id, op.task_id, ctx)
    _check_weight(op.weight, criteria[i].kind, ctx, "weight")
    if op.weight == criteria[i].weight:
        raise ctx.reject("weight", f"criterion {op.criterion_id!r} already has weight {op.weight}")
    criteria[i] = criteria[i].model_copy(update={"weight": float(op.weight)})
    _set_criteria(state, op.task_id, criteria, ctx, "weight")


# -- restore (a revert of a provisional update, agents/decisions.py) ------------------------------------
def _restore_sampling(state: HarnessState, op: RestoreSampling, ctx: _Ctx) -> None:
    _task(state, op.task_id, ctx)
    current = state.sampling.get(op.task_id)
    if current is None:
        raise ctx.reject("task_id", f"task {op.task_id!r} has no sampling entry")
    target = op.sampling if op.sampling is not None else current.model_copy(update={"status": "retired"})
    if target == current:
        raise ctx.reject(
            "sampling", f"task {op.task_id!r} already samples as in v{op.from_version}: nothing to restore"
        )
    state.sampling[op.task_id] = target.model_copy(deep=True)
    _require_active_task(state, ctx)


def _restore_guidance(state: HarnessState, op: RestoreGuidance, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    target = op.guidance if op.guidance is not None else Guidance()
    if target == state.guidance_for(op.task_id):
        raise ctx.reject(
            "guidance", f"task {op.task_id!r} already has the guidance of v{op.from_version}: nothing to restore"
        )
    for i, h in enumerate(target.hints):
        _check_leak(task, h.text, ctx, f"guidance.hints[{i}].text")
    if op.guidance is None:
        state.guidance.pop(op.task_id, None)
    else:
        state.guidance[op.task_id] = op.guidance.model_copy(deep=True)


def _restore_criteria(state: HarnessState, op: RestoreCriteria, ctx: _Ctx) -> None:
    task = _task(state, op.task_id, ctx)
    base = state.tasks.get(op.task_id) or state.variants[op.task_id]
    target = list(op.criteria) if op.criteria is not None else list(base.criteria)
    if target == list(task.criteria):
        raise ctx.reject(
            "criteria", f"task {op.task_id!r} already has the criteria of v{op.from_version}: nothing to restore"
        )
    if op.criteria is None:
        state.criteria_overrides.pop(op.task_id, None)
    else:
        _set_criteria(state, op.task_id, target, ctx, "criteria")


_APPLY: dict[str, Callable[[HarnessState, Any, _Ctx], None]] = {
    "reweight": _reweight,
    "retire": _retire,
    "revive": _revive,
    "quarantine": _quarantine,
    "add_variant": _add_variant,
    "add_hint": _add_hint,
    "edit_hint": _edit_hint,
    "remove_hint": _remove_hint,
    "set_schedule": _set_schedule,
    "add_criterion": _add_criterion,
    "edit_criterion": _edit_criterion,
    "split_criterion": _split_criterion,
    "remove_criterion": _remove_criterion,
    "reweight_criterion": _reweight_criterion,
    "add_pitfall": _add_pitfall,
    "restore_sampling": _restore_sampling,
    "restore_guidance": _restore_guidance,
    "restore_criteria": _restore_criteria,
}


def apply(state: HarnessState, update: HarnessUpdate, *, step: int | None = None) -> HarnessState:
    """Return the state after `update` (version + 1). Raises `UpdateRejected`; `state` is never mutated.

    `step` records the training step of the new version; by default the parent's step is kept.
    """
    if not isinstance(update, HarnessUpdate):
        raise TypeError(f"update must be a HarnessUpdate, got {type(update).__name__}")
    new = state.model_copy(deep=True)
    for i, op in enumerate(update.ops):
        _APPLY[op.op](new, op, _Ctx(i, op.op, state.step if step is None else step))
    new.version = state.version + 1
    new.parent_version = state.version
    if step is not None:
        new.step = step
    return new


def validate(state: HarnessState, update: HarnessUpdate) -> list[str]:
    """Problems that `apply` would raise (empty when the update is valid).

    Ops are sequential (a later op may depend on an earlier one), so validation stops at the first
    rejected op; the list has at most one entry.
    """
    try:
        apply(state, update)
    except UpdateRejected as err:
        return [str(err)]
    return []
