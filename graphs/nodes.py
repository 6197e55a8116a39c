"""The evolver's node bodies: what each step of `graphs/evolver.py` does.

Each node reads the run-time choices from `EvolverContext` and the live infrastructure (store, memory,
endpoint, judge) from `graphs.services`, calls the agent that does the thinking (evidence, attributor, proposer,
critic, fallback), and returns a partial `LaneState`/`EvolverState` update of plain JSON. No node accepts: the routes
(`route_after_critique` for the lane's candidate, `route_after_generalise` for the batch, `route_after_fallback` for
the fallback's update) live with the wiring in `graphs/evolver.py` and ask `agents/decisions.py` (the fallback's
`agents/fallback.py`); `commit` is the one node that commits, and every accepted candidate's commit carries the
meta that makes it provisional (`decisions.provisional_meta`: the trainer confirms or reverts it later).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from agents import attributor, critic, decisions, evidence, gates, proposer, repair_ladder
from agents import fallback as fallback_rule
from agents import generalise as gen
from agents.chat_models import brain_model, judge_settings, load_chat_model
from agents.context import EvolverContext
from agents.llm import ToolBox
from agents.rollout_signals import RolloutSignals
from agents.schemas import Attribution, Proposal
from graphs.round_record import Attempt, EventReport, Generalised
from graphs.services import RunServices, get_services
from graphs.state import EvolverState, LaneState
from harness.ops import UpdateRejected
from harness.ops import validate as validate_update
from harness.store import HarnessStore
from harness.types import FailureEvent, HarnessState, HarnessUpdate
from memory.records import AttributionRecord, EventRecord, ProposalRecord
from tools.agent_tools import make_tools
from tools.candidate import Measurement, measure_candidate
from tools.probes import ProbeBudgetSpent, prompt_rollouts, task_rollouts
from tools.sequential import StopRule


def _ctx(runtime: Runtime[EvolverContext]) -> EvolverContext:
    return EvolverContext.from_any(runtime.context)


def _services(ctx: EvolverContext) -> RunServices:
    """Live services: registered in-process under `services_key`, else built once from the plain settings."""
    if ctx.services_key:
        return get_services(ctx.services_key)
    # The judge's own endpoint, when the context names one, replaces the shared base URL in the settings.
    return get_services({**ctx.to_dict(), **judge_settings(ctx)}, chat_model_factory=load_chat_model)


def _toolbox(ctx: EvolverContext, svc: RunServices, role: str) -> ToolBox:
    """The LLM brain's tools for `role`; memory tools only when memory is on and used (ablation)."""
    return ToolBox.for_role(
        role, make_tools(svc), use_memory=ctx.memory and svc.memory is not None, max_rounds=ctx.max_tool_rounds
    )


ANSWER = "(answer)"  # a tool-log entry holding the model's raw answer rather than a tool call


def _tool_log(state: LaneState, agent: str, box: ToolBox) -> list[dict[str, Any]]:
    """The event's tool calls so far plus `box`'s tool calls and the model's raw answers.

    Each is tagged with agent and revision (trace and Studio): what an LLM role said is kept even when its answer was
    unusable.
    """
    rev = state.get("revision", 0)
    return [
        *state.get("tool_calls", []),
        *({"agent": agent, "revision": rev, **c} for c in box.calls),
        *(
            {
                "agent": agent,
                "revision": rev,
                "round": r["round"],
                "name": ANSWER,
                "args": {},
                "result": r["text"],
                "error": not r["used"],
            }
            for r in box.replies
        ),
    ]


def _event(state: LaneState) -> FailureEvent:
    return FailureEvent.model_validate(state["events"][state["cursor"]])


def _harness(state: LaneState, svc: RunServices) -> HarnessState:
    """The harness this lane works on: the version the round was given, advanced by the lane's own commits.

    Not `store.latest()`: a store holding versions the round did not write (a copied run folder) must not
    leak them into the round; `check_given_version` refuses such a round before any lane starts."""
    return svc.store.load(state["harness_version"])


def check_given_version(ctx: EvolverContext, given: int) -> None:
    """A round starts from the store's latest version.

    Commits go on top of the latest, so a round given an older version would measure one harness and commit onto
    another. The trainer always passes the latest; `harnessrl evolve RUN --step N` replays an older round in a
    scratch store cut at that round's version.
    """
    store = _services(ctx).store
    latest = store.latest().version
    if latest != given:
        raise ValueError(
            f"evolver input harness_version={given}, but the harness store {store.root} is at v{latest}: "
            f"a round must start from the latest version (its commits go on top of it); give it v{latest}, "
            f"start from a fresh store (a new --run-dir for a snapshot), or replay an older round of a "
            f"training run with `harnessrl evolve RUN_DIR --step N` (a scratch copy cut at that round)"
        )


# -- the run (fan_out, the router that starts the lanes, is in graphs/evolver.py) ---------------------
def finalize(state: EvolverState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    return {"harness_version": _services(_ctx(runtime)).store.latest().version}


# -- one task's lane -----------------------------------------------------------------------------------
def start_lane(state: LaneState) -> dict[str, Any]:
    return {"cursor": 0}


def gather_evidence(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """The event's evidence (`agents/evidence.py`), on a fresh per-event state; records the event in memory."""
    ctx, event = _ctx(runtime), _event(state)
    svc = _services(ctx)
    harness = _harness(state, svc)
    reset = {
        "attempts": [],
        "revision": 0,
        "proposal": None,
        "critique": None,
        "validation": [],
        "approved": None,
        "decision": "",
        "committed_version": None,
        "fallback": None,
        "fallback_decision": None,
        "attribution": None,
        "tool_calls": [],
        "generalised": None,
    }
    why = evidence.skip_reason(event, harness)
    if why is not None:
        return {**reset, "evidence": {"error": why, "harness_version": harness.version}}
    view = evidence.task_view(event, harness)
    if svc.memory is not None:
        record = EventRecord(event=event, domain=view["task"]["domain"], harness_version=harness.version)
        svc.memory.add_event(record)
        if ctx.memory:
            view = {**view, **evidence.from_memory(svc.memory, record, ctx)}
    return {**reset, "evidence": view}


def attribute(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    ctx, event = _ctx(runtime), _event(state)
    enabled = ctx.enabled_interfaces()
    llm = brain_model(ctx, "attributor")
    svc = _services(ctx)
    out: dict[str, Any] = {}
    if llm is None:
        att = attributor.rule_attribution(event, state["evidence"], enabled, use_memory=ctx.memory)
    else:
        box = _toolbox(ctx, svc, "attributor")
        att = attributor.llm_attribution(llm, event, state["evidence"], enabled, use_memory=ctx.memory, toolbox=box)
        out["tool_calls"] = _tool_log(state, "attributor", box)
    mem = svc.memory
    if mem is not None:
        mem.add_attribution(
            AttributionRecord(
                event_id=event.id,
                task_id=event.task_id,
                step=event.step,
                interface=att.interface,
                diagnosis=att.diagnosis,
                confidence=att.confidence,
                evidence_ids=att.evidence_ids,
                failure_type=event.type,
                brain="rule" if att.source == "rules" else "llm",
                evidence_used=att.evidence_used,
            )
        )
    return {**out, "attribution": att.model_dump(mode="json")}


def _signals(state: LaneState) -> RolloutSignals:
    return RolloutSignals.model_validate(state["evidence"].get("signals") or {})


def propose(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    ctx, event = _ctx(runtime), _event(state)
    att = Attribution.model_validate(state["attribution"])
    svc = _services(ctx)
    harness = _harness(state, svc)
    llm = brain_model(ctx, "proposer")
    out: dict[str, Any] = {}

    def rules() -> Proposal:  # the rule brain; an LLM proposer that cannot answer hands the decision to it
        return proposer.rule_proposal(
            event,
            att,
            harness,
            state["attempts"],
            state["step"],
            state["evidence"].get("unmet"),
            similar=state["evidence"].get("cross_task", []),
            signature=state["evidence"].get("signature", ""),
            signals=_signals(state),
            failed=repair_ladder.skipped_templates(event.type, state["evidence"], att.interface) if ctx.memory else [],
        )

    if llm is None:
        prop = rules()
    else:
        box = _toolbox(ctx, svc, "proposer")
        prop = proposer.llm_proposal(
            llm, event, att, harness, state["attempts"], toolbox=box, signals=_signals(state), fallback=rules
        )
        out["tool_calls"] = _tool_log(state, "proposer", box)
    return {**out, "proposal": prop.model_dump(mode="json"), "critique": None}


def validate(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    ctx, event = _ctx(runtime), _event(state)
    prop = Proposal.model_validate(state["proposal"])
    if prop.update is None:
        return {"validation": [prop.error or "no candidate"]}
    att = Attribution.model_validate(state["attribution"])
    errors = gates.scope_errors(prop.update, event, att.interface, ctx.enabled_interfaces())
    errors += validate_update(_harness(state, _services(ctx)), prop.update)
    return {"validation": errors}


def _cached_rollouts(
    svc: RunServices, harness: HarnessState, update: HarnessUpdate, ctx: EvolverContext
) -> tuple[dict[str, list[str]] | None, dict[str, list[str]] | None]:
    """The tasks' training rollouts in memory a measurement pools (no generation).

    Every cached group for the paired re-scoring of a criteria candidate; otherwise the groups keyed by the prompt
    they were sampled with (the parent's too, for a new variant) as the exact test's control pools.
    """
    # The memory ablation (`memory=false`) measures on fresh probes, also where a memory service is open (a Studio
    # or `harnessrl evolve` round given a memory location).
    if svc.memory is None or not ctx.memory or ctx.history_rollouts <= 0:
        return None, None
    if update.interface == "criteria":
        return task_rollouts(svc.memory, update.task_ids, ctx.history_rollouts), None
    return None, prompt_rollouts(svc.memory, harness, update.task_ids, ctx.history_rollouts)


def _measure(
    svc: RunServices,
    ctx: EvolverContext,
    harness: HarnessState,
    update: HarnessUpdate,
    rule: StopRule,
    step: int,
    probe_left: int | None,
) -> Measurement:
    """`measure_candidate` of a candidate (the lane's or a batch) with the run's settings and memory's rollouts.

    `probe_left`: the lane's share of the round's probe budget still unspent (None: no bound); a candidate that could
    need more raises `ProbeBudgetSpent` before drawing anything."""
    prior, history = _cached_rollouts(svc, harness, update, ctx)
    return measure_candidate(
        harness,
        update,
        svc.endpoint,
        svc.judge,
        critic.measure_settings(ctx, step, svc.detector_config, probe_left=probe_left),
        rule=rule,
        prior_rollouts=prior,
        control_history=history,
        probe_cache=svc.probe_cache,
    )


def _spend(left: int | None, drawn: int) -> dict[str, Any]:
    """The lane's `probe_left` after a measurement drew `drawn` rollouts from the frozen policy (None: no bound)."""
    return {} if left is None else {"probe_left": max(0, left - drawn)}


def critique(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """Measure the candidate on the frozen policy and apply the failure type's rule (agents/critic.py).

    Like every node, synchronous: the graph runs under an event loop (`graphs.runner`, or a LangGraph
    server), which runs sync nodes in worker threads, so `measure_candidate` can start its own loop here.
    """
    ctx, event = _ctx(runtime), _event(state)
    prop = Proposal.model_validate(state["proposal"])
    measurement: dict[str, Any] | None = None
    out: dict[str, Any] = {}
    reviewed = False  # whether the LLM critic was asked (critic.review_brain)
    if state["validation"] or prop.update is None:
        crit = critic.invalid_critique(event, state["validation"])
    elif not ctx.critic:
        crit = critic.unmeasured_critique(event)
    else:
        svc = _services(ctx)
        left = state.get("probe_left")
        try:
            rule = critic.stop_rule(event, prop.update, ctx)
            m = _measure(svc, ctx, _harness(state, svc), prop.update, rule, state["step"], left)
        except UpdateRejected as err:  # the harness moved under us between validate and critique
            crit = critic.invalid_critique(event, [str(err)])
        except ProbeBudgetSpent as err:
            crit = critic.over_budget_critique(event, err)
        else:
            out.update(_spend(left, m.cost.probe_rollouts))
            measurement = m.compact()
            crit = critic.judge_measurement(event, prop.update, m, ctx)
            llm = brain_model(ctx, "critic")
            if crit.measured_ok and llm is not None:
                box = _toolbox(ctx, svc, "critic")
                crit = critic.llm_review(llm, event, prop.update, crit, toolbox=box)
                out["tool_calls"] = _tool_log(state, "critic", box)
                reviewed = True
    attempt = {
        "revision": state["revision"],
        "template": prop.template,
        "source": prop.source,
        "llm_error": prop.llm_error,
        "critic_source": critic.review_brain(reviewed, crit),
        "evidence_used": prop.evidence_used,
        "update": None if prop.update is None else prop.update.model_dump(mode="json"),
        "error": prop.error,
        "critique": crit.model_dump(mode="json"),
        "measurement": measurement,
    }
    # The decision route_after_critique takes on this state, kept with its numbers for the trace and the report.
    attempt["decision"] = decisions.after_critique(crit, prop, [*state["attempts"], attempt], ctx).as_dict()
    return {**out, "critique": crit.model_dump(mode="json"), "attempts": [*state["attempts"], attempt]}


def revise(state: LaneState) -> dict[str, Any]:
    return {"revision": state["revision"] + 1}


def approve(state: LaneState) -> dict[str, Any]:
    """Human approval (require_approval): resume with True/False or {"approve": bool, "note": str}."""
    answer = interrupt(
        {"event": state["events"][state["cursor"]], "proposal": state["proposal"], "critique": state["critique"]}
    )
    approved = answer.get("approve") is True if isinstance(answer, dict) else answer is True
    return {"approved": approved}


BATCH_PENDING = "pending"  # a measured batch the batch rule accepted, until `commit` commits it (or finds it stale)


def commit(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """The one commit: the candidate a route accepted, or the fallback's update, on top of the latest version.

    The lane's proposal after `route_after_critique` (or approval), the batch `generalise` measured after
    `route_after_generalise`, both provisional (`decisions.provisional_meta`); the fallback's sampling update after
    `route_after_fallback`. The store re-validates: another lane may have committed meanwhile."""
    ctx, event = _ctx(runtime), _event(state)
    store = _services(ctx).store
    batch = state.get("generalised")
    if batch is not None:
        return _commit_batch(store, state, event, batch)
    fb = state.get("fallback_decision")
    if fb is not None:
        return _commit_fallback(store, state, event, fallback_rule.Decision.model_validate(fb))
    prop = Proposal.model_validate(state["proposal"])
    assert prop.update is not None  # route_after_critique only accepts a measured update
    pid = f"{event.id}:r{state['revision']}"
    try:
        new = store.commit(
            prop.update,
            step=state["step"],
            meta={
                "event_id": event.id,
                "failure_type": event.type,
                "template": prop.template,
                "source": prop.source,
                "revision": state["revision"],
                "numbers": state["critique"]["numbers"],
                "proposal_id": pid,
                **decisions.provisional_meta([event], prop.update, pid),
            },
        )
    except UpdateRejected as err:
        note = {**state["critique"], "reasons": [*state["critique"]["reasons"], f"stale at commit: {err}"]}
        return {"decision": "rejected_stale", "critique": note}
    return {"decision": "accepted", "committed_version": new.version, "harness_version": new.version}


def _commit_batch(store: HarnessStore, state: LaneState, event: FailureEvent, batch: dict[str, Any]) -> dict[str, Any]:
    """`commit` for the batch of `generalise`, with a provisional target per batched task."""
    assert batch["decision"] == BATCH_PENDING  # route_after_generalise only accepts a measured batch
    update, pid = HarnessUpdate.model_validate(batch["update"]), batch["proposal_id"]
    events = [FailureEvent.model_validate(e) for e in batch["events"].values()]
    try:
        new = store.commit(
            update,
            step=state["step"],
            meta={
                "event_id": event.id,
                "failure_type": event.type,
                "template": batch["template"],
                "source": "generalise",
                "generalised_from": pid,
                "targets": batch["targets"],
                "numbers": batch["critique"]["numbers"],
                **decisions.provisional_meta(events, update, pid),
            },
        )
    except UpdateRejected as err:
        return {"generalised": {**batch, "decision": "rejected_stale", "note": str(err)}}
    return {"generalised": {**batch, "decision": "accepted", "version": new.version}, "harness_version": new.version}


def _commit_fallback(
    store: HarnessStore, state: LaneState, event: FailureEvent, d: fallback_rule.Decision
) -> dict[str, Any]:
    """`commit` for the fallback `route_after_fallback` sends: its sampling update, not provisional (not graded)."""
    assert d.commits and d.update is not None  # route_after_fallback only sends a decision that commits
    try:
        new = store.commit(
            d.update, step=state["step"], meta={"event_id": event.id, "failure_type": event.type, "fallback": True}
        )
    except UpdateRejected as err:
        return {"decision": "rejected", "fallback": d.refused([str(err)])}
    return {
        "decision": "fallback",
        "committed_version": new.version,
        "harness_version": new.version,
        "fallback": d.applied(new.version),
    }


def generalise(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """After an accepted commit: the same repair for similar tasks, as one batched candidate, measured and judged.

    The batch holds the other tasks with the same failure signature (agents/generalise.py); the critic judges it
    (`critic.judge_batch`). The node keeps the verdict `route_after_generalise` takes (`decisions.batch_accept`);
    `commit` commits an accepted batch. Off with `generalise_max_tasks=0`, with the memory ablation (similar tasks
    are found in memory) and under `require_approval` (a batch is never committed without its source's approval)."""
    ctx, event = _ctx(runtime), _event(state)
    svc = _services(ctx)
    if state["decision"] != "accepted" or ctx.generalise_max_tasks <= 0:
        return {"generalised": None}
    if not ctx.memory or svc.memory is None or ctx.require_approval:
        why = (
            "require_approval: a batched repair is not proposed"
            if ctx.require_approval
            else "memory is off: no similar tasks to look up"
        )
        return {"generalised": {"decision": "none", "note": why}}
    prop = Proposal.model_validate(state["proposal"])
    assert prop.update is not None  # an accepted decision has a measured update
    pid = f"{event.id}:r{state['revision']}"
    source, now = svc.store.load(state["evidence"]["harness_version"]), _harness(state, svc)
    seen = gen.sightings(svc.memory, svc.detector_config, event, source.task(event.task_id).domain, now)
    busy = set(state.get("round_tasks", [])) - {event.task_id}
    batch = gen.build_batch(
        event,
        prop.update,
        prop.template,
        source,
        now,
        seen,
        max_tasks=ctx.generalise_max_tasks,
        busy=busy,
        step=state["step"],
        proposal_id=pid,
    )
    out: dict[str, Any] = {
        "proposal_id": pid,
        "template": prop.template,
        **batch.report(),
        "critique": None,
        "measurement": None,
        "version": None,
        "events": {t: e.model_dump(mode="json") for t, e in batch.events.items()},
        "per_task": {t: u.model_dump(mode="json") for t, u in batch.per_task.items()},
    }
    if batch.update is None:
        return {"generalised": {**out, "decision": "none", "note": "no similar task qualified"}}
    out["update"] = batch.update.model_dump(mode="json")
    spent: dict[str, Any] = {}  # the lane's probe_left once the batch's measurement drew
    if not ctx.critic:
        crit = critic.unmeasured_critique(event)
    else:
        left = state.get("probe_left")
        try:
            rule = critic.batch_stop_rule(batch.events, batch.update, ctx)
            m = _measure(svc, ctx, now, batch.update, rule, state["step"], left)
        except UpdateRejected as err:  # another lane committed on a target meanwhile
            return {"generalised": {**out, "decision": "rejected_stale", "note": str(err)}}
        except ProbeBudgetSpent as err:
            return {"generalised": {**out, "decision": "none", "note": f"not measured: {err}"}}
        spent = _spend(left, m.cost.probe_rollouts)
        out["measurement"] = m.compact()
        crit = critic.judge_batch(batch.events, batch.update, m, ctx)
        llm = brain_model(ctx, "critic")
        if crit.measured_ok and llm is not None:
            crit = critic.llm_review(llm, event, batch.update, crit, toolbox=_toolbox(ctx, svc, "critic"))
    out["critique"] = crit.model_dump(mode="json")
    # The decision route_after_generalise takes on this state, kept with its numbers for the trace and the report.
    verdict = decisions.batch_accept(crit)
    out["verdict"] = verdict.as_dict()
    return {**spent, "generalised": {**out, "decision": BATCH_PENDING if verdict.verdict == "accept" else "rejected"}}


def fallback(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """After R rejected revisions: the fallback's decision (`agents.fallback.decide`), kept for its route.

    A decision that commits goes to `commit` (`route_after_fallback`); any other is reported here."""
    ctx, event = _ctx(runtime), _event(state)
    svc = _services(ctx)
    att = state.get("attribution")
    d = fallback_rule.decide(
        event,
        _harness(state, svc),
        state["attempts"],
        ctx,
        step=state["step"],
        evidence=state["evidence"],
        attribution=None if att is None else Attribution.model_validate(att),
        endpoint=svc.endpoint,
        judge=svc.judge,
        probe_cache=svc.probe_cache,
        detector_config=svc.detector_config,
        probe_left=state.get("probe_left"),
    )
    out: dict[str, Any] = {"fallback_decision": d.model_dump(mode="json")}
    if d.probe_rollouts:
        out.update(_spend(state.get("probe_left"), d.probe_rollouts))
    return out if d.commits else {**out, "decision": "rejected", "fallback": d.report()}


def _outcome(attempt: Attempt, last: bool, decision: str) -> str:
    if last and decision == "accepted":
        return "accepted"
    return "invalid" if attempt.critique.invalid else "rejected"


def record(state: LaneState, runtime: Runtime[EvolverContext]) -> dict[str, Any]:
    """Write every candidate (with its numbers and outcome) to memory and emit the event's report."""
    ctx, event = _ctx(runtime), _event(state)
    decision = state["decision"] or ("skipped" if "error" in state["evidence"] else "rejected_by_human")
    attempts = [Attempt.model_validate(a) for a in state["attempts"]]
    att = None if state["attribution"] is None else Attribution.model_validate(state["attribution"])
    gen_out = None if state.get("generalised") is None else Generalised.model_validate(state["generalised"])
    mem = _services(ctx).memory
    if mem is not None and att is not None:
        domain = state["evidence"].get("task", {}).get("domain", "")
        for i, a in enumerate(attempts):
            if a.critique.no_effect or a.critique.over_budget:  # refused for free: not a failure of its template
                continue
            mem.add_proposal(
                ProposalRecord.of_attempt(
                    event,
                    revision=a.revision,
                    interface=att.interface,
                    update=None if a.update is None else HarnessUpdate.model_validate(a.update),
                    measurements=a.critique.numbers,
                    reasons=a.critique.reasons,
                    deltas=(a.measurement or {}).get("deltas") or {},
                    outcome=_outcome(a, i == len(attempts) - 1, decision),  # type: ignore[arg-type]
                    harness_version=state["evidence"].get("harness_version", 0),
                    domain=domain,
                    template=a.template,
                    signature=state["evidence"].get("signature", ""),
                    evidence_used=a.evidence_used,
                )
            )
        fb = state["fallback"]
        if fb and fb.get("applied"):
            mem.add_proposal(
                ProposalRecord.of_fallback(
                    event,
                    HarnessUpdate.model_validate(fb["update"]),
                    reason=fb["reason"],
                    version=fb["version"],
                    revision=len(attempts),
                    domain=domain,
                )
            )
        if gen_out is not None and gen_out.critique is not None:
            # One record per target: its share of the batch, the batch's verdict.
            crit = gen_out.critique
            for tid, upd in gen_out.per_task.items():
                mem.add_proposal(
                    ProposalRecord.of_generalised(
                        gen_out.events[tid],
                        HarnessUpdate.model_validate(upd),
                        source_id=gen_out.proposal_id,
                        step=event.step,
                        interface=att.interface,
                        measurements=crit.numbers,
                        reasons=crit.reasons,
                        accepted=gen_out.decision == "accepted",
                        harness_version=gen_out.version or state["harness_version"],
                        domain=domain,
                        template=gen_out.template,
                        signature=(gen_out.signatures or {}).get(tid, ""),
                    )
                )
    # A dead task's fallback deferred to a rung on another interface: the event climbs to it now, read from the memory
    # records just written (agents/repair_ladder.py). Without memory there are no rungs to read, so it waits.
    fb_decision = state.get("fallback_decision")
    nxt = repair_ladder.climb(
        event,
        deferred=fb_decision is not None and fallback_rule.Decision.model_validate(fb_decision).verdict == "deferred",
        budget=ctx.ladder_hops if mem is not None else 0,
    )
    fb_report = state.get("fallback")
    if nxt is not None and fb_report is not None:
        fb_report = {**fb_report, "climbs_to": nxt.id}
    report = EventReport(
        event_id=event.id,
        task_id=event.task_id,
        failure_type=event.type,
        decision=decision,
        interface=None if att is None else att.interface,
        attribution=att,
        revisions=state.get("revision", 0),
        committed_version=state.get("committed_version"),
        attempts=attempts,
        fallback=fb_report,
        note=state["evidence"].get("error"),
        tool_calls=state.get("tool_calls", []),
        generalised=gen_out,
    )
    accepted = []
    if decision == "accepted":
        last = attempts[-1]
        accepted.append(
            {
                "event_id": event.id,
                "task_id": event.task_id,
                "version": state["committed_version"],
                "template": last.template,
                "update": last.update,
                "numbers": last.critique.numbers,
            }
        )
    if gen_out is not None and gen_out.decision == "accepted":
        assert gen_out.critique is not None  # an accepted batch was measured and judged
        accepted.append(
            {
                "event_id": event.id,
                "task_id": event.task_id,
                "version": gen_out.version,
                "template": gen_out.template,
                "update": gen_out.update,
                "targets": gen_out.targets,
                "numbers": gen_out.critique.numbers,
                "generalised_from": gen_out.proposal_id,
            }
        )
    # The state is plain JSON: the report's keys are the ones set here (graphs/round_record.py), its values plain
    # Python as the lane held them (JSON mode would turn a NaN number typed `Any` into null).
    cursor = state["cursor"]
    out: dict[str, Any] = {
        "reports": [report.model_dump(exclude_unset=True)],
        "accepted": accepted,
        "cursor": cursor + 1,
    }
    if nxt is not None:  # handled next, before the lane's other events
        events = state["events"]
        out["events"] = [*events[: cursor + 1], nxt.model_dump(mode="json"), *events[cursor + 1 :]]
    return out
