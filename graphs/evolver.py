"""The harness evolver as a LangGraph graph (SYSTEM.md §6). Exports `builder` and `graph`.

Topology::

    START -> fan_out --Send(per task)--> task_lane -> finalize -> END
                    \\--(no events)------------------^

    task_lane (one task's events, one after the other):
    gather_evidence -> attribute -> propose -> validate -> critique
        critique --route_after_critique--> approve (require_approval) | commit | revise -> propose | fallback
        approve -> commit | record      commit -> record      fallback -> record
        record -> gather_evidence (next event) | END

`route_after_critique` is the only place that accepts or rejects a candidate. `graph` is compiled
without a checkpointer (the LangGraph server supplies one); in-process callers compile `builder`
with a `SqliteSaver` (see `trainer/commands/evolve.py`). Live infrastructure (store, memory,
endpoint, judge) comes from `tools.services`, selected by the plain values of `EvolverContext`.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send, interrupt

from agents import attributor, critic, proposer
from agents.context import EvolverContext
from agents.llm import ToolBox
from agents.models import brain_model, load_chat_model
from agents.schemas import Attribution, Critique, Proposal
from graphs.state import EvolverInput, EvolverOutput, EvolverState, LaneInput, LaneOutput, LaneState
from harness.ops import UpdateRejected, validate as validate_update
from harness.types import FailureEvent, HarnessState, HarnessUpdate
from memory.records import AttributionRecord, EventRecord, GroupSummary, ProposalRecord
from tools.agent_tools import make_tools
from tools.measure import measure_candidate
from tools.services import Services, get_services

log = logging.getLogger(__name__)

MAX_OPS = 8


def _ctx(runtime: Runtime[EvolverContext]) -> EvolverContext:
    return EvolverContext.from_any(runtime.context)


def _services(ctx: EvolverContext) -> Services:
    """Live services: registered in-process under `services_key`, else built once from the plain settings."""
    if ctx.services_key:
        return get_services(ctx.services_key)
    return get_services(ctx.to_dict(), chat_model_factory=load_chat_model)


def _toolbox(ctx: EvolverContext, svc: Services, role: str, step: int) -> ToolBox:
    """The LLM brain's tools for `role`; memory tools only when memory is on and used (ablation)."""
    return ToolBox.for_role(role, make_tools(svc, step), use_memory=ctx.use_memory and svc.memory is not None,
                            max_rounds=ctx.max_tool_rounds)


def _tool_log(state: LaneState, agent: str, box: ToolBox) -> list[dict[str, Any]]:
    """The event's tool calls so far plus `box`'s, tagged with agent and revision (trace and Studio)."""
    rev = state.get("revision", 0)
    return [*state.get("tool_calls", []), *({"agent": agent, "revision": rev, **c} for c in box.calls)]


def _event(state: LaneState) -> FailureEvent:
    return FailureEvent.model_validate(state["events"][state["cursor"]])


# -- the run -----------------------------------------------------------------------------------------
def fan_out(state: EvolverState) -> list[Send] | Literal["finalize"]:
    """One lane per task; a task's events stay together, in input order."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for raw in state["events"]:
        ev = FailureEvent.model_validate(raw)  # bad input fails here, naming the field
        by_task.setdefault(ev.task_id, []).append(ev.model_dump(mode="json"))
    if not by_task:
        return "finalize"
    return [Send("task_lane", {"task_id": t, "events": evs, "harness_version": state["harness_version"], "step": state["step"]})
            for t, evs in by_task.items()]


def finalize(state: EvolverState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    return {"harness_version": _services(_ctx(runtime)).store.latest().version}


# -- one task's lane -----------------------------------------------------------------------------------
def start_lane(state: LaneState) -> dict[str, Any]:
    return {"cursor": 0}


def _records(items: list[Any]) -> list[dict[str, Any]]:
    return [{"id": r.record_id, "kind": r.kind, "document": r.document()} for r in items]


def gather_evidence(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """Current harness view of the task plus within-task history and cross-task cases from memory."""
    ctx, event = _ctx(runtime), _event(state)
    svc = _services(ctx)
    harness = svc.store.latest()
    reset = {"attempts": [], "revision": 0, "proposal": None, "critique": None, "validation": [], "approved": None,
             "decision": "", "committed_version": None, "fallback": None, "attribution": None, "tool_calls": []}
    if event.task_id == "*" or not harness.has_task(event.task_id):
        why = "batch-level event: no per-task update" if event.task_id == "*" else f"unknown task {event.task_id!r} in harness v{harness.version}"
        return {**reset, "evidence": {"error": why, "harness_version": harness.version}}
    task = harness.task(event.task_id)
    evidence: dict[str, Any] = {"harness_version": harness.version, "task": {
        "id": task.id, "domain": task.domain, "prompt": task.user_prompt,
        "criteria": [c.model_dump(mode="json", exclude={"origin"}) for c in task.criteria],
        "hints": [h.text for h in harness.guidance_for(task.id).hints],
        "sampling": harness.sampling[task.id].model_dump(mode="json") if task.id in harness.sampling else None,
    }, "history": [], "similar": [], "proposals": [], "unmet": []}
    mem = svc.memory
    if mem is not None:
        record = EventRecord(event=event, domain=task.domain, harness_version=harness.version)
        mem.add_event(record)
        if ctx.use_memory:
            history = mem.task_history(task.id, last_n=ctx.history_last_n)
            evidence["history"] = _records(history)
            evidence["proposals"] = [{"id": p.record_id, "interface": p.interface, "outcome": p.outcome, "step": p.step,
                                      "revision": p.revision} for p in mem.proposals_for(task.id)]
            evidence["similar"] = [{"id": c.id, "task_id": c.task_id, "document": c.document, "outcome": c.outcome,
                                    "deltas": c.deltas} for c in mem.similar_cases(record.document(), k=ctx.similar_k,
                                                                                   failure_type=event.type, exclude_task=task.id)]
            groups = [r for r in history if isinstance(r, GroupSummary) and r.best is not None]
            if groups:  # criteria even the best recent rollout missed: what hints should target
                evidence["unmet"] = [c for c, ok in groups[-1].best.verdicts.items() if not ok]  # type: ignore[union-attr]
    return {**reset, "evidence": evidence}


def route_after_evidence(state: LaneState) -> Literal["attribute", "record"]:
    return "record" if "error" in state["evidence"] else "attribute"


def attribute(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    ctx, event = _ctx(runtime), _event(state)
    enabled = ctx.enabled_interfaces()
    llm = brain_model(ctx, "attributor")
    svc = _services(ctx)
    out: dict[str, Any] = {}
    if llm is None:
        att = attributor.rule_attribution(event, state["evidence"], enabled, use_memory=ctx.use_memory)
    else:
        box = _toolbox(ctx, svc, "attributor", state["step"])
        att = attributor.llm_attribution(llm, event, state["evidence"], enabled, use_memory=ctx.use_memory, toolbox=box)
        out["tool_calls"] = _tool_log(state, "attributor", box)
    mem = svc.memory
    if mem is not None:
        mem.add_attribution(AttributionRecord(
            event_id=event.id, task_id=event.task_id, step=event.step, interface=att.interface, diagnosis=att.diagnosis,
            confidence=att.confidence, evidence_ids=att.evidence_ids, failure_type=event.type,
            brain="rule" if att.source == "rules" else "llm"))
    return {**out, "attribution": att.model_dump(mode="json")}


def propose(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    ctx, event = _ctx(runtime), _event(state)
    att = Attribution.model_validate(state["attribution"])
    svc = _services(ctx)
    harness = svc.store.latest()
    llm = brain_model(ctx, "proposer")
    out: dict[str, Any] = {}
    if llm is None:
        prop = proposer.rule_proposal(event, att, harness, state["attempts"], state["step"], state["evidence"].get("unmet"))
    else:
        box = _toolbox(ctx, svc, "proposer", state["step"])
        prop = proposer.llm_proposal(llm, event, att, harness, state["attempts"], toolbox=box)
        out["tool_calls"] = _tool_log(state, "proposer", box)
    return {**out, "proposal": prop.model_dump(mode="json"), "critique": None}


def _gates(update: HarnessUpdate, event: FailureEvent, att: Attribution, ctx: EvolverContext) -> list[str]:
    """Static gates beyond `harness.ops.validate`: scope, interface and size of a candidate."""
    errors = []
    if update.interface != att.interface:
        errors.append(f"update.interface: {update.interface!r} but the attribution chose {att.interface!r}")
    if update.interface not in ctx.enabled_interfaces():
        errors.append(f"update.interface: {update.interface!r} is disabled in this run")
    for i, op in enumerate(update.ops):
        if op.task_id != event.task_id:
            errors.append(f"ops[{i}] ({op.op}).task_id: {op.task_id!r} is not the event's task {event.task_id!r}")
    if len(update.ops) > MAX_OPS:
        errors.append(f"ops: {len(update.ops)} ops, at most {MAX_OPS} per update")
    return errors


def validate(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    ctx, event = _ctx(runtime), _event(state)
    prop = Proposal.model_validate(state["proposal"])
    if prop.update is None:
        return {"validation": [prop.error or "no candidate"]}
    errors = _gates(prop.update, event, Attribution.model_validate(state["attribution"]), ctx)
    errors += validate_update(_services(ctx).store.latest(), prop.update)
    return {"validation": errors}


def critique(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """Measure the candidate on the frozen policy and apply the failure type's rule (agents/critic.py).

    Synchronous on purpose: the whole graph then runs under `invoke` with a `SqliteSaver` (the trainer
    and `harnessrl evolve`) and under a server's async loop, which runs sync nodes in worker threads.
    """
    ctx, event = _ctx(runtime), _event(state)
    prop = Proposal.model_validate(state["proposal"])
    measurement: dict[str, Any] | None = None
    out: dict[str, Any] = {}
    if state["validation"] or prop.update is None:
        crit = critic.invalid_critique(event, state["validation"])
    elif not ctx.use_critic:
        crit = critic.unmeasured_critique(event)
    else:
        svc = _services(ctx)
        try:
            m = measure_candidate(
                svc.store.latest(), prop.update, svc.endpoint, svc.judge, k=ctx.samples_per_candidate,
                max_tokens=ctx.max_tokens, temperature=ctx.temperature, seed=ctx.seed, step=state["step"],
                detector_config=svc.detector_config)
        except UpdateRejected as err:  # the harness moved under us between validate and critique
            crit = critic.invalid_critique(event, [str(err)])
        else:
            measurement = m.compact()
            crit = critic.judge_measurement(event, prop.update, m, ctx)
            llm = brain_model(ctx, "critic")
            if crit.measured_ok and llm is not None:
                box = _toolbox(ctx, svc, "critic", state["step"])
                crit = critic.llm_review(llm, event, prop.update, crit, toolbox=box)
                out["tool_calls"] = _tool_log(state, "critic", box)
    attempt = {"revision": state["revision"], "template": prop.template, "source": prop.source,
               "update": None if prop.update is None else prop.update.model_dump(mode="json"),
               "error": prop.error, "critique": crit.model_dump(mode="json"), "measurement": measurement}
    return {**out, "critique": crit.model_dump(mode="json"), "attempts": [*state["attempts"], attempt]}


def route_after_critique(state: LaneState, runtime: Runtime[EvolverContext]) -> Literal["approve", "commit", "revise", "fallback"]:
    """The single accept/reject decision: measured improvement and no veto accepts; else revise up to R, then fallback."""
    ctx = _ctx(runtime)
    crit = Critique.model_validate(state["critique"])
    prop = Proposal.model_validate(state["proposal"])
    if crit.measured_ok and not crit.veto and not crit.invalid:
        return "approve" if ctx.require_approval else "commit"
    out_of_templates = prop.update is None and prop.source == "rules"
    if state["revision"] < ctx.max_revisions and not out_of_templates:
        return "revise"
    return "fallback"


def revise(state: LaneState) -> dict[str, Any]:
    return {"revision": state["revision"] + 1}


def approve(state: LaneState) -> dict[str, Any]:
    """Human approval (require_approval): resume with True/False or {"approve": bool, "note": str}."""
    answer = interrupt({"event": state["events"][state["cursor"]], "proposal": state["proposal"], "critique": state["critique"]})
    approved = answer.get("approve") is True if isinstance(answer, dict) else answer is True
    return {"approved": approved}


def route_after_approve(state: LaneState) -> Literal["commit", "record"]:
    return "commit" if state["approved"] else "record"


def commit(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """Commit on top of the latest version; the store re-validates (another lane may have committed)."""
    ctx, event = _ctx(runtime), _event(state)
    prop = Proposal.model_validate(state["proposal"])
    assert prop.update is not None  # route_after_critique only accepts a measured update
    try:
        new = _services(ctx).store.commit(prop.update, step=state["step"], meta={
            "event_id": event.id, "failure_type": event.type, "template": prop.template, "source": prop.source,
            "revision": state["revision"], "numbers": state["critique"]["numbers"]})
    except UpdateRejected as err:
        note = {**state["critique"], "reasons": [*state["critique"]["reasons"], f"stale at commit: {err}"]}
        return {"decision": "rejected_stale", "critique": note}
    return {"decision": "accepted", "committed_version": new.version}


def fallback(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """After R rejected revisions: the safe sampling change, if allowed and still valid; else no change."""
    ctx, event = _ctx(runtime), _event(state)
    store = _services(ctx).store
    harness: HarnessState = store.latest()
    update = proposer.fallback_update(event, harness) if ctx.apply_fallback and ctx.sampling_enabled else None
    if update is None:
        return {"decision": "rejected", "fallback": None}
    errors = validate_update(harness, update)
    if errors:
        return {"decision": "rejected", "fallback": {"update": update.model_dump(mode="json"), "applied": False, "errors": errors}}
    try:
        new = store.commit(update, step=state["step"], meta={"event_id": event.id, "failure_type": event.type, "fallback": True})
    except UpdateRejected as err:
        return {"decision": "rejected", "fallback": {"update": update.model_dump(mode="json"), "applied": False, "errors": [str(err)]}}
    return {"decision": "fallback", "committed_version": new.version,
            "fallback": {"update": update.model_dump(mode="json"), "applied": True, "version": new.version}}


def _outcome(attempt: dict[str, Any], last: bool, decision: str) -> str:
    if last and decision == "accepted":
        return "accepted"
    return "invalid" if attempt["critique"]["invalid"] else "rejected"


def record(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """Write every candidate (with its numbers and outcome) to memory and emit the event's report."""
    ctx, event = _ctx(runtime), _event(state)
    decision = state["decision"] or ("skipped" if "error" in state["evidence"] else "rejected_by_human")
    attempts = state["attempts"]
    att = state["attribution"]
    mem = _services(ctx).memory
    if mem is not None and att is not None:
        domain = state["evidence"].get("task", {}).get("domain", "")
        for i, a in enumerate(attempts):
            deltas = {k: float(v) for k, v in ((a.get("measurement") or {}).get("deltas") or {}).items() if v is not None}
            mem.add_proposal(ProposalRecord(
                proposal_id=f"{event.id}:r{a['revision']}", event_id=event.id, task_id=event.task_id, step=event.step,
                failure_type=event.type, interface=att["interface"],
                update=None if a["update"] is None else HarnessUpdate.model_validate(a["update"]),
                measurements=a["critique"]["numbers"], outcome=_outcome(a, i == len(attempts) - 1, decision),  # type: ignore[arg-type]
                reasons=a["critique"]["reasons"], deltas=deltas, revision=a["revision"],
                harness_version=state["evidence"].get("harness_version", 0), domain=domain))
        fb = state["fallback"]
        if fb and fb.get("applied"):
            mem.add_proposal(ProposalRecord(
                proposal_id=f"{event.id}:fallback", event_id=event.id, task_id=event.task_id, step=event.step,
                failure_type=event.type, interface="sampling", update=HarnessUpdate.model_validate(fb["update"]),
                outcome="fallback", reasons=["all candidates rejected"], revision=len(attempts),
                harness_version=fb["version"], domain=domain))
    report = {
        "event_id": event.id, "task_id": event.task_id, "failure_type": event.type, "decision": decision,
        "interface": None if att is None else att["interface"], "attribution": att,
        "revisions": state.get("revision", 0), "committed_version": state.get("committed_version"),
        "attempts": attempts, "fallback": state.get("fallback"), "note": state["evidence"].get("error"),
        "tool_calls": state.get("tool_calls", []),
    }
    accepted = []
    if decision == "accepted":
        last = attempts[-1]
        accepted.append({"event_id": event.id, "task_id": event.task_id, "version": state["committed_version"],
                         "template": last["template"], "update": last["update"], "numbers": last["critique"]["numbers"]})
    return {"reports": [report], "accepted": accepted, "cursor": state["cursor"] + 1}


def route_after_record(state: LaneState) -> Literal["gather_evidence", "__end__"]:
    return "gather_evidence" if state["cursor"] < len(state["events"]) else END


# -- wiring ----------------------------------------------------------------------------------------------
lane = StateGraph(LaneState, context_schema=EvolverContext, input_schema=LaneInput, output_schema=LaneOutput)
lane.add_node("start_lane", start_lane)  # cursor = 0
lane.add_node("gather_evidence", gather_evidence)  # harness view + memory evidence; records the event
lane.add_node("attribute", attribute)  # which interface (rules or LLM)
lane.add_node("propose", propose)  # candidate update (rules or LLM), revised with feedback
lane.add_node("validate", validate)  # ops.validate + scope gates
lane.add_node("critique", critique)  # measure on the frozen policy + acceptance rule
lane.add_node("revise", revise)  # count the revision, back to propose
lane.add_node("approve", approve)  # optional human approval (interrupt)
lane.add_node("commit", commit)  # new harness version
lane.add_node("fallback", fallback)  # safe sampling change after R rejections
lane.add_node("record", record)  # memory + report, next event
lane.add_edge(START, "start_lane")
lane.add_edge("start_lane", "gather_evidence")
lane.add_conditional_edges("gather_evidence", route_after_evidence)
lane.add_edge("attribute", "propose")
lane.add_edge("propose", "validate")
lane.add_edge("validate", "critique")
lane.add_conditional_edges("critique", route_after_critique)
lane.add_edge("revise", "propose")
lane.add_conditional_edges("approve", route_after_approve)
lane.add_edge("commit", "record")
lane.add_edge("fallback", "record")
lane.add_conditional_edges("record", route_after_record)
task_lane = lane.compile(name="task_lane")

builder = StateGraph(EvolverState, context_schema=EvolverContext, input_schema=EvolverInput, output_schema=EvolverOutput)
builder.add_node("task_lane", task_lane)  # one per task (Send), events of a task serialised inside
builder.add_node("finalize", finalize)  # harness version after the run
builder.add_conditional_edges(START, fan_out, ["task_lane", "finalize"])
builder.add_edge("task_lane", "finalize")
builder.add_edge("finalize", END)
graph = builder.compile(name="evolver")
