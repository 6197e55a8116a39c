"""The LLM path of `harnessrl data rubric`: a role model writes criteria and a held-out audit for one task.

The model (any `provider:model`, resolved by `agents.chat_models.load_chat_model`) is asked once per task, with
bounded retries, for a JSON object of draft items, decoded with the guided schema of `RubricDraft` where the server
supports it. Its answer is data: every item is validated on its own (`harness.types.Criterion`: text, kind, weight
sign and bounds, the check's schema and safety), and each one dropped comes back in `WriterAnswer.rejected` with
why, so the command lists it. Audit items must carry a programmatic check and may not repeat a training criterion's
check: the audit is held-out criteria decided by code (`harness/rubric_builder.py` says why). An answer that never
arrives or does not parse sets `WriterAnswer.error`, and `harness.rubric_builder.build_task` falls back to the rule
path for that task with a line saying so.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents import prompts
from agents.llm import BrainError, ask_structured
from agents.schemas import guided_schema
from harness.checks import Check
from harness.data import loc_to_path
from harness.rubric_builder import AUDIT_ID_PREFIX, Writer, WriterAnswer, conversation, has_criteria
from harness.types import Criterion, CriterionKind, Task

log = logging.getLogger(__name__)
LLM_ORIGIN = "rubric:llm"
MAX_ATTEMPTS = 2  # one retry: a transport hiccup or a cut answer gets a second chance, never an open loop
MAX_ITEMS = 8
MAX_REFERENCE_CHARS = 2000


class DraftCriterion(BaseModel):
    """One item as the model writes it (ids and origin are ours to give)."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=300)
    kind: CriterionKind
    weight: float
    check: Check | None = None


class RubricDraft(BaseModel):
    """The shape the server decodes with (guided); `RubricAnswer` is what is accepted before item checks."""

    model_config = ConfigDict(extra="forbid")
    criteria: list[DraftCriterion] = Field(default_factory=list, max_length=MAX_ITEMS)
    audit_criteria: list[DraftCriterion] = Field(default_factory=list, max_length=MAX_ITEMS)


class RubricAnswer(BaseModel):
    """The answer's two lists, items still unchecked: one bad item must not sink the others."""

    criteria: list[Any] = Field(default_factory=list)
    audit_criteria: list[Any] = Field(default_factory=list)


def _why(err: ValidationError) -> str:
    """The first problem as `field: message` (the item as a whole for kind-vs-weight and other item-level rules)."""
    e = err.errors(include_url=False)[0]
    return f"{loc_to_path(e['loc']) or 'kind/weight'}: {e['msg'].removeprefix('Value error, ')}"


def validate_items(
    items: list[Any], *, prefix: str, audit: bool, training: list[Criterion]
) -> tuple[list[Criterion], list[str]]:
    """(the valid criteria, one line per rejected item). Ids are `<prefix><n>`, origin `LLM_ORIGIN`."""
    part = "audit_criteria" if audit else "criteria"
    kept: list[Criterion] = []
    rejected: list[str] = []
    seen_checks = {json.dumps(c.check.model_dump(mode="json"), sort_keys=True) for c in training if c.check}
    for i, item in enumerate(items[:MAX_ITEMS]):
        where = f"{part}[{i}]"
        if not isinstance(item, dict):
            rejected.append(f"{where}: not an object ({type(item).__name__})")
            continue
        fields = {k: v for k, v in item.items() if k not in ("id", "origin")}
        try:
            c = Criterion.model_validate({**fields, "id": f"{prefix}{i + 1}", "origin": LLM_ORIGIN})
        except ValidationError as err:
            rejected.append(f"{where}.{_why(err)}")
            continue
        if audit and c.check is None:
            rejected.append(f"{where}: an audit item needs a programmatic check (the audit is decided by code)")
            continue
        key = json.dumps(c.check.model_dump(mode="json"), sort_keys=True) if c.check else None
        if audit and key in seen_checks:
            rejected.append(f"{where}: repeats a training criterion's check (the audit must be held out)")
            continue
        kept.append(c)
    rejected += [f"{part}[{i}]: over the limit of {MAX_ITEMS} items" for i in range(MAX_ITEMS, len(items))]
    return kept, rejected


def write_rubric(llm: BaseChatModel, task: Task, need_criteria: bool, need_audit: bool) -> WriterAnswer:
    """Ask `llm` for the task's criteria and/or audit; every item validated, each rejection listed."""
    shown = [c.model_dump(mode="json", exclude={"origin"}) for c in task.criteria] if has_criteria(task) else []
    system = prompts.render(
        prompts.RUBRIC_SYSTEM,
        criteria_ask=prompts.RUBRIC_CRITERIA_ASK if need_criteria else prompts.RUBRIC_NO_CRITERIA,
        audit_ask=prompts.RUBRIC_AUDIT_ASK if need_audit else prompts.RUBRIC_NO_AUDIT,
    )
    user = prompts.render(
        prompts.RUBRIC_USER,
        prompt=conversation(task),
        reference=(task.reference_answer or "(none)")[:MAX_REFERENCE_CHARS],
        criteria=json.dumps(shown, indent=1) if shown else "(none)",
    )
    errors: list[str] = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            answer = ask_structured(llm, RubricAnswer, system, user, guided=guided_schema(RubricDraft))
            break
        except BrainError as err:
            log.warning("rubric writer: task %s attempt %d/%d failed: %s", task.id, attempt, MAX_ATTEMPTS, err)
            errors.append(str(err)[:300])
    else:
        return WriterAnswer(error=f"{MAX_ATTEMPTS} attempts failed; last: {errors[-1]}")
    criteria, rejected = (
        validate_items(answer.criteria, prefix="llm_", audit=False, training=[]) if need_criteria else ([], [])
    )
    keep = [*(task.criteria if has_criteria(task) and not need_criteria else []), *criteria]
    audit, rejected_audit = (
        validate_items(answer.audit_criteria, prefix=f"{AUDIT_ID_PREFIX}llm_", audit=True, training=keep)
        if need_audit
        else ([], [])
    )
    return WriterAnswer(criteria=criteria, audit=audit, rejected=rejected + rejected_audit)


def make_writer(llm: BaseChatModel) -> Writer:
    """`write_rubric` bound to one model, in the shape `harness.rubric_builder.build_task` takes."""

    def writer(task: Task, need_criteria: bool, need_audit: bool) -> WriterAnswer:
        return write_rubric(llm, task, need_criteria, need_audit)

    return writer
