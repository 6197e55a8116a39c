"""Typed state of the evolver graph (what changes during a run; run-time choices live in EvolverContext).

Values are plain JSON (dicts of pydantic dumps) so checkpoints, the LangGraph server and `harnessrl
trace` can read them without our classes. Two levels:

- `EvolverState`: the run. Input = failure events + harness version + step; output = accepted
  updates + one report per event + the harness version after the run.
- `LaneState`: one task's lane (a subgraph reached by `Send`), which handles that task's events one
  after the other so updates on one task are serialised while different tasks run in parallel.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict


class EvolverInput(TypedDict):
    events: list[dict[str, Any]]  # FailureEvent JSON
    harness_version: int
    step: int


class EvolverOutput(TypedDict):
    accepted: list[dict[str, Any]]
    reports: list[dict[str, Any]]
    harness_version: int


class EvolverState(TypedDict):
    events: list[dict[str, Any]]
    harness_version: int
    step: int
    accepted: Annotated[list[dict[str, Any]], operator.add]
    reports: Annotated[list[dict[str, Any]], operator.add]


class LaneInput(TypedDict):
    task_id: str
    events: list[dict[str, Any]]
    harness_version: int
    step: int
    round_tasks: list[str]  # every task with events in this round (a generalised repair leaves them to their lanes)
    probe_left: int | None  # the lane's share of the round's probe budget (graphs.evolver.lane_budgets)


class LaneOutput(TypedDict):
    accepted: Annotated[list[dict[str, Any]], operator.add]
    reports: Annotated[list[dict[str, Any]], operator.add]


class LaneState(TypedDict, total=False):
    task_id: str
    events: list[dict[str, Any]]
    harness_version: int
    step: int
    round_tasks: list[str]
    cursor: int  # index of the event being handled
    evidence: dict[str, Any]  # task view + memory evidence for the current event
    attribution: dict[str, Any] | None
    proposal: dict[str, Any] | None  # agents.schemas.Proposal
    validation: list[str]  # problems of the current candidate (empty = valid)
    critique: dict[str, Any] | None  # agents.schemas.Critique of the current candidate
    attempts: list[
        dict[str, Any]
    ]  # every candidate of the current event: critique, measurement, decision (agents/decisions.py)
    revision: int  # revisions used on the current event (<= max_revisions)
    probe_left: int | None  # the lane's share of the round's probe budget still unspent (None: no bound)
    approved: bool | None
    decision: str  # accepted | rejected | rejected_stale | rejected_by_human | fallback | skipped
    committed_version: int | None
    fallback: dict[str, Any] | None  # the report's entry: agents.fallback.Decision.report / applied / refused
    # The fallback's agents.fallback.Decision: `route_after_fallback` reads it, `commit` commits its update.
    fallback_decision: dict[str, Any] | None
    # The accepted repair's batched update for similar tasks (agents/generalise.py): built, measured and judged by
    # `generalise` (decision "pending" once the batch rule accepts it), committed by `commit`.
    generalised: dict[str, Any] | None
    tool_calls: list[
        dict[str, Any]
    ]  # LLM brains' tool calls on the current event (agent, revision, name, args, result)
    accepted: Annotated[list[dict[str, Any]], operator.add]
    reports: Annotated[list[dict[str, Any]], operator.add]
