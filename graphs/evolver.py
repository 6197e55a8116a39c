"""The harness evolver as a LangGraph graph: state, nodes, edges and routes. Exports `builder` and `graph`.

Topology::

    START -> fan_out --Send(per task)--> task_lane -> finalize -> END
                    \\--(no events)------------------^

    task_lane (one task's events, one after the other):
    gather_evidence -> attribute -> propose -> validate -> critique
        critique --route_after_critique--> approve (require_approval) | commit | revise -> propose | fallback
        approve -> commit | record      fallback --route_after_fallback--> commit | record
        commit --route_after_commit--> generalise (the lane's commit) | record (the batch's or the fallback's)
        generalise --route_after_generalise--> commit | record
        record -> gather_evidence (next event; a dead task's climb to its ladder's next interface first) | END

`generalise` proposes an accepted repair for other tasks with the same failure signature as one batched,
measured candidate (`agents/generalise.py` states the rule). The node bodies are in `graphs/nodes.py`.
The accept site is one: every accept/reject is decided in `agents/decisions.py` and taken by a route below
(`route_after_critique` on `after_critique` for the lane's candidate, `route_after_generalise` on `batch_accept`
for the batch), and every accepted candidate goes to the one `commit` node. The fallback's sampling update goes
there too (`route_after_fallback`, on the `agents.fallback.Decision` the fallback node keeps), so `commit` is the one
node that commits. Every accepted candidate's commit is provisional: the trainer confirms or reverts it on the next
training groups (`agents.decisions.grade`); a fallback is not graded. `graph` is compiled without a checkpointer
(the LangGraph server supplies one); `graphs/runner.py` compiles `builder` with a SQLite checkpointer for in-process
runs.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from agents import decisions
from agents import fallback as fallback_rule
from agents.context import EvolverContext
from agents.schemas import Critique, Proposal
from graphs import nodes
from graphs.state import EvolverInput, EvolverOutput, EvolverState, LaneInput, LaneOutput, LaneState
from harness.types import FailureEvent


# -- routes ----------------------------------------------------------------------------------------------
def fan_out(state: EvolverState, runtime: Runtime[EvolverContext]) -> list[Send] | Literal["finalize"]:
    """One lane per task; a task's events stay together, in input order.

    Runs once, before any lane: the round must start from the store's latest version (`nodes.check_given_version`).
    """
    nodes.check_given_version(EvolverContext.from_any(runtime.context), state["harness_version"])
    by_task: dict[str, list[dict[str, Any]]] = {}
    for raw in state["events"]:
        ev = FailureEvent.model_validate(raw)  # bad input fails here, naming the field
        by_task.setdefault(ev.task_id, []).append(ev.model_dump(mode="json"))
    if not by_task:
        return "finalize"
    ctx = EvolverContext.from_any(runtime.context)
    shares = lane_budgets(ctx.probe_budget, len(by_task), 2 * ctx.sample_k)
    return [
        Send(
            "task_lane",
            {
                "task_id": t,
                "events": evs,
                "harness_version": state["harness_version"],
                "step": state["step"],
                "round_tasks": sorted(by_task),
                "probe_left": share,
            },
        )
        for (t, evs), share in zip(by_task.items(), shares)
    ]


def lane_budgets(budget: int | None, lanes: int, unit: int) -> list[int | None]:
    """Each lane's share of the round's probe budget, in lane order (the events come ranked, most valuable first).

    Dealt in units of two groups (a candidate's and a fresh control's), one unit per lane in turn, so a budget too
    small for every lane still pays for whole measurements on the first ones; what is left of a unit goes to the
    first lane. None: no bound.
    """
    if budget is None:
        return [None] * lanes
    units = budget // unit
    shares = [(units // lanes + (i < units % lanes)) * unit for i in range(lanes)]
    shares[0] += budget - units * unit
    return shares


def route_after_evidence(state: LaneState) -> Literal["attribute", "record"]:
    return "record" if "error" in state["evidence"] else "attribute"


def route_after_critique(
    state: LaneState, runtime: Runtime[EvolverContext]
) -> Literal["approve", "commit", "revise", "fallback"]:
    """The lane's accept/revise/fallback, as `agents.decisions.after_critique` decides it.

    The critique node keeps the same decision, with its numbers, in the attempt.
    """
    ctx = EvolverContext.from_any(runtime.context)
    d = decisions.after_critique(
        Critique.model_validate(state["critique"]), Proposal.model_validate(state["proposal"]), state["attempts"], ctx
    )
    if d.verdict == "accept":
        return "approve" if ctx.require_approval else "commit"
    return "revise" if d.verdict == "revise" else "fallback"


def route_after_fallback(state: LaneState) -> Literal["commit", "record"]:
    """The fallback's commit, as `agents.fallback.decide` decided it (the fallback node keeps the `Decision`)."""
    return "commit" if fallback_rule.Decision.model_validate(state["fallback_decision"]).commits else "record"


def route_after_commit(state: LaneState) -> Literal["generalise", "record"]:
    """After the lane's commit, its repair is batched for similar tasks; then the event is done.

    Done at once after the batch's commit or the fallback's."""
    done = state.get("generalised") is not None or state.get("fallback_decision") is not None
    return "record" if done else "generalise"


def route_after_generalise(state: LaneState) -> Literal["commit", "record"]:
    """The batch's accept, as `agents.decisions.batch_accept` decides it.

    The generalise node keeps the same decision, with its numbers, in the report; a batch that was not measured
    (none qualified, stale, generalising off) goes to record."""
    batch = state.get("generalised")
    if batch is None or batch.get("critique") is None:
        return "record"
    verdict = decisions.batch_accept(Critique.model_validate(batch["critique"])).verdict
    return "commit" if verdict == "accept" else "record"


def route_after_approve(state: LaneState) -> Literal["commit", "record"]:
    return "commit" if state["approved"] else "record"


def route_after_record(state: LaneState) -> Literal["gather_evidence", "__end__"]:
    return "gather_evidence" if state["cursor"] < len(state["events"]) else END


# -- wiring ----------------------------------------------------------------------------------------------
lane = StateGraph(LaneState, context_schema=EvolverContext, input_schema=LaneInput, output_schema=LaneOutput)
lane.add_node("start_lane", nodes.start_lane)  # cursor = 0
lane.add_node("gather_evidence", nodes.gather_evidence)  # harness view + memory evidence; records the event
lane.add_node("attribute", nodes.attribute)  # which interface (rules or LLM)
lane.add_node("propose", nodes.propose)  # candidate update (rules or LLM), revised with feedback
lane.add_node("validate", nodes.validate)  # ops.validate + scope gates
lane.add_node("critique", nodes.critique)  # measure on the frozen policy + acceptance rule
lane.add_node("revise", nodes.revise)  # count the revision, back to propose
lane.add_node("approve", nodes.approve)  # optional human approval (interrupt)
lane.add_node("commit", nodes.commit)  # new harness version: the lane's accepted candidate, the batch, or the fallback
lane.add_node("generalise", nodes.generalise)  # the accepted repair, batched for similar tasks, measured and judged
lane.add_node("fallback", nodes.fallback)  # the safe sampling change's decision after R rejections
lane.add_node("record", nodes.record)  # memory + report, next event
lane.add_edge(START, "start_lane")
lane.add_edge("start_lane", "gather_evidence")
lane.add_conditional_edges("gather_evidence", route_after_evidence)
lane.add_edge("attribute", "propose")
lane.add_edge("propose", "validate")
lane.add_edge("validate", "critique")
lane.add_conditional_edges("critique", route_after_critique)
lane.add_edge("revise", "propose")
lane.add_conditional_edges("approve", route_after_approve)
lane.add_conditional_edges("commit", route_after_commit)
lane.add_conditional_edges("generalise", route_after_generalise)
lane.add_conditional_edges("fallback", route_after_fallback)
lane.add_conditional_edges("record", route_after_record)
task_lane = lane.compile(name="task_lane")

builder = StateGraph(
    EvolverState, context_schema=EvolverContext, input_schema=EvolverInput, output_schema=EvolverOutput
)
builder.add_node("task_lane", task_lane)  # one per task (Send), events of a task serialised inside
builder.add_node("finalize", nodes.finalize)  # harness version after the run
builder.add_conditional_edges(START, fan_out, ["task_lane", "finalize"])
builder.add_edge("task_lane", "finalize")
builder.add_edge("finalize", END)
graph = builder.compile(name="evolver")
