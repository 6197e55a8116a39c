"""The evolver graph end to end: rule brains, real store/memory/judge/measurement, scripted frozen policy.

Each failure type goes through the whole graph; where the scripted policy makes the outcome certain
the test asserts the decision, and every test checks that the report carries the critic's real
numbers (the same ones the measurement produced). Also: bounded revisions with feedback, the
fallback, approval interrupts, and resuming an interrupted run from its SQLite checkpoint.
"""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from graphs.evolver import builder, graph, lane
from harness.detector import GroupStats, RolloutRecord
from harness.types import HarnessUpdate, Retire, Reweight
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."


def _run(g, events, key, thread="t", **ctx):
    context = {"services_key": key, "sample_k": 4, **ctx}
    return g.invoke(
        {"events": events, "harness_version": 0, "step": 10}, {"configurable": {"thread_id": thread}}, context=context
    )


def _check_numbers(report):
    """Every measured attempt's critique numbers are the measurement's (not invented)."""
    for a in report["attempts"]:
        m = a["measurement"]
        if m is None:
            assert not a["critique"]["measured"]
            continue
        n = a["critique"]["numbers"]
        groups = [sides["candidate"] for sides in m["per_task"].values()]
        assert any(abs(g["std"] - n["candidate_std"]) < 1e-3 for g in groups)
        # Groups start at sample_k=4 and double while the critic's test is undecided (cap 16); k rollouts per
        # visit prompt: a hinted_share below 1 adds the unhinted visit's group.
        assert n["k"] in (4, 8, 16)
        seq = m["sequential"]
        if seq is not None and seq["test"] == "exact":
            # The exact hit test counts k rollouts per changed visit prompt; an unchanged one (the unhinted visit, a
            # new variant's parent) shares the control's pool, fixed at twice the cap from the first look
            # (tools/candidate.py).
            t, c0 = seq["trials"][-1], seq["control_n"]
            assert t % n["k"] == 0 and c0 >= 16
            assert all(len(g["rewards"]) in (t, c0, t + c0) for g in groups)
        else:
            assert all(len(g["rewards"]) in (n["k"], 2 * n["k"]) for g in groups)


def _policy_hints_help(prompt, i):
    if "Hint:" in prompt:
        return HONEST if i % 2 == 0 else "I am not sure."
    return "I am not sure."


def _policy_saturated(prompt, i):
    if "bullet points" in prompt and i % 2 == 0:
        return "- drink water\n- rest in a dark room\n- see a doctor"
    return HONEST


def _policy_stuffing(prompt, i):
    return "water water water water water rest dark" if i % 2 == 0 else HONEST


def _policy_blind(prompt, i):
    return HONEST if i % 2 == 0 else "water water water water rest dark"


CASES = [
    # (event, policy, expected decision, expected first template)
    (event("e-low", "collapse_low", "med-1", mean=0.0, std=0.0), _policy_hints_help, "accepted", "hint"),
    (event("e-high", "collapse_high", "med-1", mean=1.0, std=0.0), _policy_saturated, "accepted", "variant:bullets3"),
    (event("e-stuff", "stuffing", "med-1", criterion_id="water"), _policy_stuffing, "accepted", "tighten_repeat"),
    (
        event("e-blind", "blind_criterion", "med-1", criterion_id="len", pass_rate=1.0),
        _policy_blind,
        "accepted",
        "blind_edit",
    ),
    (event("e-low2", "collapse_low", "med-1", mean=0.0, std=0.0), lambda p, i: "I am not sure.", "fallback", "hint"),
]


@pytest.mark.parametrize(("ev", "policy", "decision", "template"), CASES, ids=[c[0]["id"] for c in CASES])
def test_failure_type_decided_on_measured_numbers(tmp_path, ev, policy, decision, template):
    key, svc = make_run(tmp_path, PromptPolicy(policy))
    # A fallback case runs without the criteria interface: with it, the repair ladder defers the fallback to the
    # task's next round, which climbs to criteria (test_the_fallback_waits_while_the_ladder_has_a_rung_elsewhere).
    out = _run(graph, [ev], key, **({"interfaces": ["guidance", "sampling"]} if decision == "fallback" else {}))
    (report,) = out["reports"]
    assert report["decision"] == decision, report["attempts"][-1]["critique"]["reasons"]
    assert report["attempts"][0]["template"] == template
    _check_numbers(report)
    assert len(report["attempts"]) <= 3  # R = 2 revisions
    if decision == "accepted":
        (acc,) = out["accepted"]
        assert acc["version"] == 1 == out["harness_version"] == svc.store.latest().version
        assert svc.store.history()[-1].meta["event_id"] == ev["id"]
        assert report["attempts"][-1]["critique"]["measured_ok"] is True
    else:
        assert out["accepted"] == []
        assert [a["critique"]["measured_ok"] for a in report["attempts"]] == [False, False, False]
        assert report["revisions"] == 2
        assert report["fallback"]["applied"] is True
        assert svc.store.latest().sampling["med-1"].weight == 0.5
    outcomes = [p.outcome for p in svc.memory.proposals_for("med-1")]
    assert outcomes[-1] == ("accepted" if decision == "accepted" else "fallback")


def test_a_dead_group_the_frozen_policy_does_not_reproduce_changes_no_sampling(tmp_path):
    """A confirmed collapse_low from training whose task the frozen policy now answers with spread (it learned, or
    the groups were noise): every candidate is refused and the fallback probes the control before acting: not
    dead there, so sampling stays as it is."""
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: HONEST if i % 2 == 0 else "I am not sure."))
    ev = event("e-false-low", "collapse_low", "med-1", mean=0.0, std=0.0)
    out = _run(graph, [ev], key, interfaces=["guidance", "sampling"])  # no criteria rung to defer to
    (report,) = out["reports"]
    assert report["decision"] == "rejected" and out["accepted"] == []
    assert (
        report["fallback"]["applied"] is False and "not reproduced on the frozen policy" in report["fallback"]["reason"]
    )
    assert report["fallback"]["probe"]["per_task"]["med-1"]["control"]["dead"] is False
    assert svc.store.latest().version == 0


def test_a_false_blind_event_on_a_discriminating_criterion_is_not_accepted(tmp_path):
    """`len` (>= 3 words) already splits the group under the control (half the answers are one word): a
    blind_criterion event about it is false, and a candidate that leaves it discriminating repairs nothing."""
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: HONEST if i % 2 == 0 else "Rest."))
    out = _run(graph, [event("e-false-blind", "blind_criterion", "med-1", criterion_id="len", pass_rate=1.0)], key)
    (report,) = out["reports"]
    assert report["decision"] != "accepted" and out["accepted"] == []
    assert any(
        "already discriminating" in r for a in report["attempts"] for r in (a["critique"] or {}).get("reasons", [])
    )


@pytest.mark.parametrize("etype", ["flat", "spurious_length", "spurious_audit", "guidance_leak"])
def test_other_failure_types_end_with_a_decision(tmp_path, etype):
    key, svc = make_run(
        tmp_path, PromptPolicy(lambda p, i: [HONEST, "water water water", "Rest.", "no idea at all"][i % 4])
    )
    out = _run(graph, [event(f"e-{etype}", etype, "med-2")], key)
    report, *climbs = out["reports"]  # a dead (flat) task may climb its ladder within the round
    assert [r["event_id"] for r in climbs] == ([f"e-{etype}:hop1"] if climbs else [])
    for r in (report, *climbs):
        assert r["decision"] in ("accepted", "fallback", "rejected")
        assert r["attempts"], "at least one candidate was made and judged"
        _check_numbers(r)
    assert svc.store.latest().version == len(svc.store.history())


def test_the_fallback_waits_while_the_ladder_has_a_rung_elsewhere(tmp_path):
    """Without climbs (ladder_hops=0), a dead task whose guidance rungs fail this round keeps its sampling: its next
    round climbs to criteria."""
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    out = _run(graph, [event("e-low2", "collapse_low", "med-1", mean=0.0, std=0.0)], key, ladder_hops=0)
    (report,) = out["reports"]
    assert report["interface"] == "guidance" and report["decision"] == "rejected"
    assert report["fallback"] == {
        "applied": False,
        "reason": "deferred: the repair ladder's next rung is criteria/split_graded (agents/repair_ladder.py)",
    }
    assert svc.store.latest().version == 0


def test_a_dead_task_climbs_to_the_next_interface_in_the_same_round(tmp_path):
    """With the default one climb, the deferred event continues on the ladder's criteria rungs in this round, under
    its own id, and the guidance rungs its first part spent stay memory records of their own."""
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    out = _run(graph, [event("e-low2", "collapse_low", "med-1", mean=0.0, std=0.0)], key)
    first, climbed = out["reports"]
    assert first["event_id"] == "e-low2" and first["interface"] == "guidance" and first["decision"] == "rejected"
    assert first["fallback"]["climbs_to"] == "e-low2:hop1" and first["fallback"]["applied"] is False
    assert climbed["event_id"] == "e-low2:hop1" and climbed["interface"] == "criteria"
    assert climbed["attempts"] and {a["template"] for a in climbed["attempts"]} & {"split_graded", "loosen_hardest"}
    # Every rung above sampling is spent now, so the climbed part's fallback acts instead of deferring.
    assert "climbs_to" not in (climbed["fallback"] or {})
    # (Its criteria candidates here re-score nothing differently: refused for free, not memory records.)
    records = {(p.event_id, p.interface, p.outcome) for p in svc.memory.proposals_for("med-1")}
    assert ("e-low2", "guidance", "rejected") in records and ("e-low2:hop1", "sampling", "fallback") in records
    assert {e for e, i, _ in records if i == "guidance"} == {"e-low2"}
    assert {e for e, i, _ in records if i == "criteria"} == {"e-low2:hop1"}


def test_the_fallback_is_committed_by_the_commit_node(tmp_path):
    """The fallback node only decides; `route_after_fallback` sends its update to `commit`, the one node that commits.

    The store's record of it carries exactly the fallback's meta, and the reported reason as the update's rationale.
    """
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    ev = event("e-low2", "collapse_low", "med-1", mean=0.0, std=0.0)
    lane_input = {"task_id": "med-1", "events": [ev], "harness_version": 0, "step": 10, "round_tasks": ["med-1"]}
    ctx = {"services_key": key, "sample_k": 4, "interfaces": ["guidance", "sampling"]}
    steps = [
        node for update in lane.compile().stream(lane_input, context=ctx, stream_mode="updates") for node in update
    ]
    assert steps[-3:] == ["fallback", "commit", "record"] and steps.count("commit") == 1
    record = svc.store.history()[-1]
    assert record.meta == {"event_id": "e-low2", "failure_type": "collapse_low", "fallback": True}
    (fallback_record,) = [p for p in svc.memory.proposals_for("med-1") if p.outcome == "fallback"]
    assert record.version == 1 and record.update.rationale == fallback_record.reasons[0]
    assert record.update.rationale.endswith("(reproduced on the frozen policy: control group dead=True (std 0.000))")


def test_a_fallback_gone_stale_before_its_commit_is_reported_refused(tmp_path):
    """Another change between the fallback's decision and its commit (here the task was retired): the store refuses
    the quarantine, nothing is committed, and the report keeps the update, the store's error and the rule's reason."""
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    low = HarnessUpdate(interface="sampling", ops=[Reweight(task_id="med-1", weight=0.05)], rationale="at the floor")
    svc.store.commit(low, step=9)  # a collapse_low task at the minimum weight is quarantined, not halved
    g = lane.compile(checkpointer=InMemorySaver(), interrupt_before=["commit"])
    cfg, ctx = (
        {"configurable": {"thread_id": "stale"}},
        {"services_key": key, "sample_k": 4, "interfaces": ["guidance", "sampling"]},
    )
    ev = event("e-q", "collapse_low", "med-1", mean=0.0, std=0.0)
    g.invoke(
        {"task_id": "med-1", "events": [ev], "harness_version": 1, "step": 10, "round_tasks": []}, cfg, context=ctx
    )
    paused = g.get_state(cfg)
    assert paused.next == ("commit",) and paused.values["fallback_decision"]["verdict"] == "commit"
    svc.store.commit(HarnessUpdate(interface="sampling", ops=[Retire(task_id="med-1")], rationale="meanwhile"), step=10)
    (report,) = g.invoke(None, cfg, context=ctx)["reports"]
    fb = report["fallback"]
    assert report["decision"] == "rejected" and report["committed_version"] is None and svc.store.latest().version == 2
    assert list(fb) == ["update", "applied", "errors", "reason"] and fb["applied"] is False
    assert fb["errors"] == [
        "ops[0] (quarantine).task_id: task 'med-1' is retired; only an active task can be quarantined"
    ]
    # The rule's own reason; the rationale the store would have logged carries the probe's verdict too.
    assert fb["reason"] == (
        "fallback: collapse_low confirmed in 2 groups and not repaired; quarantine the task until step 14, "
        "then it is drawn again"
    )
    assert fb["update"]["rationale"].startswith(fb["reason"] + " (reproduced on the frozen policy")
    assert not [p for p in svc.memory.proposals_for("med-1") if p.outcome == "fallback"]


def test_revisions_use_feedback_and_are_bounded(tmp_path):
    # The policy never writes bullets/numbers/...: every variant is dead, each revision tries another constraint.
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: HONEST))
    out = _run(graph, [event("e1", "collapse_high", "med-1", mean=1.0)], key, max_revisions=1)
    (report,) = out["reports"]
    templates = [a["template"] for a in report["attempts"]]
    assert len(templates) == 2 and len(set(templates)) == 2 and all(t.startswith("variant:") for t in templates)
    # No harder variant was accepted, so the saturated task is not retired: it stays in training at half weight.
    assert report["decision"] == "fallback" and svc.store.latest().sampling["med-1"].model_dump() == {
        "weight": 0.5,
        "status": "active",
        "quarantined_until": None,
    }


def _answer(n: int) -> str:
    """HONEST's point in `n` words: it meets every criterion of med-1 (water, rest in the dark, 3+ words)."""
    return " ".join(["Drink water and rest in a dark room"] + ["today"] * max(0, n - 8))


def _policy_keeps_loose_budgets(prompt, i):
    """Plain answers run 40-44 words. Under "at most B words" it writes B/2 and 7B/10 words, and two answers in four
    ignore the budget at 30 and 34 words: a budget at the plain median (42) is met every time, one at the median of
    what it writes under that budget (29) splits the group."""
    if "Answer in at most " not in prompt:
        return _answer(40 + 4 * (i % 2))
    budget = int(prompt.rsplit("Answer in at most ", 1)[1].split()[0])
    return _answer([budget // 2, budget * 7 // 10, 30, 34][i % 4])


def test_a_word_budget_every_probe_kept_to_is_resized_to_what_the_policy_writes_under_it(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(_policy_keeps_loose_budgets))
    texts = [_answer(n) for n in (40, 40, 44, 44)]
    recs = [RolloutRecord(text=t, reward=1.0) for t in texts]
    svc.memory.add_group(GroupStats.from_rollouts("med-1", 9, recs), harness_version=0, texts=texts)
    out = _run(graph, [event("e-high", "collapse_high", "med-1", mean=1.0, std=0.0)], key, max_revisions=1)
    (report,) = out["reports"]
    first, second = report["attempts"]
    assert first["template"] == "variant_sized" and "at most 42 words" in json.dumps(first["update"])
    n = first["critique"]["numbers"]
    assert n["candidate_dead"] == 1.0 and n["candidate_mean"] == 1.0 and n["candidate_length_median"] == 29.5
    assert second["template"] == "variant_resized" and "at most 29 words" in json.dumps(second["update"])
    assert report["decision"] == "accepted", second["critique"]["reasons"]
    assert second["critique"]["numbers"]["candidate_dead"] == 0.0
    (variant,) = [t for t in svc.store.latest().variants if t.startswith("med-1.")]
    assert variant.endswith("-words29")


def test_events_fan_out_per_task_and_serialise_within_a_task(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(_policy_stuffing))
    events = [
        event("a1", "stuffing", "med-1", criterion_id="water"),
        event("b1", "collapse_low", "med-2"),
        event("a2", "blind_criterion", "med-1", criterion_id="len", pass_rate=1.0),
        event("z", "flat", "nope"),
    ]
    out = _run(graph, events, key)
    by_id = {r["event_id"]: r for r in out["reports"]}
    # b1 (dead) climbs from its failed guidance rungs to criteria within the lane, right after itself.
    assert set(by_id) == {"a1", "b1", "b1:hop1", "a2", "z"}
    order = [r["event_id"] for r in out["reports"]]
    assert order.index("b1:hop1") == order.index("b1") + 1
    assert by_id["z"]["decision"] == "skipped" and "unknown task" in by_id["z"]["note"]
    # Each commit is one version on top of the latest: versions are dense and the log matches.
    versions = [r.version for r in svc.store.history()]
    assert versions == list(range(1, len(versions) + 1)) and out["harness_version"] == svc.store.latest().version


@pytest.mark.parametrize("answer, decision", [({"approve": True}, "accepted"), (False, "rejected_by_human")])
def test_approval_interrupt_and_resume(tmp_path, answer, decision):
    key, svc = make_run(tmp_path, PromptPolicy(_policy_stuffing))
    g = builder.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "approve"}}
    ctx = {"services_key": key, "sample_k": 4, "require_approval": True}
    first = g.invoke(
        {"events": [event("e1", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": 10},
        cfg,
        context=ctx,
    )
    assert "__interrupt__" in first and svc.store.latest().version == 0
    payload = first["__interrupt__"][0].value
    assert payload["critique"]["measured_ok"] is True and payload["proposal"]["template"] == "tighten_repeat"
    out = g.invoke(Command(resume=answer), cfg, context=ctx)
    assert out["reports"][0]["decision"] == decision
    assert svc.store.latest().version == (1 if decision == "accepted" else 0)


def test_critic_ablation_accepts_valid_proposals_unmeasured(tmp_path):
    policy = PromptPolicy(lambda p, i: "I am not sure.")
    key, svc = make_run(tmp_path, policy)
    out = _run(graph, [event("e1", "collapse_low", "med-1")], key, critic=False)
    assert out["reports"][0]["decision"] == "accepted" and policy.calls == 0
    assert out["reports"][0]["attempts"][0]["measurement"] is None


def test_disabled_interface_is_skipped(tmp_path):
    key, _ = make_run(tmp_path, PromptPolicy(_policy_stuffing))
    out = _run(graph, [event("e1", "collapse_low", "med-1")], key, interfaces=["sampling", "criteria"])
    report = out["reports"][0]
    assert report["interface"] == "criteria"
    assert any("disabled" in n for n in report["attribution"]["notes"])


def test_interrupted_run_resumes_from_sqlite_checkpoint(tmp_path):
    calls = {"n": 0}

    def flaky(prompt, i):
        if i == 0:
            calls["n"] += 1
            if calls["n"] == 1:
                raise ConnectionError("policy server went away")
        return _policy_stuffing(prompt, i)

    key, svc = make_run(tmp_path, PromptPolicy(flaky))
    db = tmp_path / "evolver.sqlite"
    cfg = {"configurable": {"thread_id": "run-1"}}
    ctx = {"services_key": key, "sample_k": 4}
    inp = {"events": [event("e1", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": 10}
    with SqliteSaver.from_conn_string(str(db)) as saver:
        with pytest.raises(ConnectionError):
            builder.compile(checkpointer=saver).invoke(inp, cfg, context=ctx)
    assert svc.store.latest().version == 0
    # A new process would open the same file: a new saver, resume with input None.
    with SqliteSaver.from_conn_string(str(db)) as saver:
        g = builder.compile(checkpointer=saver)
        out = g.invoke(None, cfg, context=ctx)
        history = list(g.get_state_history(cfg))
    assert out["reports"][0]["decision"] == "accepted" and svc.store.latest().version == 1
    assert len(history) >= 3


@pytest.mark.parametrize(
    "bad, why",
    [
        ("sorry, I cannot produce JSON today", "no JSON object"),
        (
            json.dumps(
                {
                    "update": {
                        "interface": "criteria",
                        "ops": [
                            {
                                "op": "edit_criterion",
                                "task_id": "med-1",
                                "criterion_id": "water",
                                "check": {"type": "python", "code": "1"},
                            }
                        ],
                    },
                    "rationale": "r",
                }
            ),
            "ProposalOut.update",
        ),
    ],
)
def test_llm_proposer_over_http_bad_outputs_fall_back_to_the_rules_not_the_harness(tmp_path, openai_stub, bad, why):
    """An LLM answer that is no valid proposal (after its retries) hands the decision to the rule brain (issue 20
    item 3): the attempt says so, costs no invalid revision, and the rule template repairs the harness."""
    key, svc = make_run(tmp_path, PromptPolicy(_policy_stuffing))
    openai_stub.script([bad] * 3)
    out = _run(
        graph,
        [event("e1", "stuffing", "med-1", criterion_id="water")],
        key,
        proposer_model="openai:stub",
        base_url=openai_stub.base_url,
        llm_timeout_s=5,
        max_tool_rounds=0,
    )
    (report,) = out["reports"]
    (attempt,) = report["attempts"]
    assert attempt["source"] == "llm_fallback" and why in attempt["llm_error"] and attempt["error"] is None
    assert attempt["template"] != "llm" and attempt["critique"]["invalid"] is False
    assert report["decision"] == "accepted" and [r.version for r in svc.store.history()] == [1]
    assert [p.outcome for p in svc.memory.proposals_for("med-1")] == ["accepted"]
    assert any("response_format" in r for r in openai_stub.requests)  # the LLM was asked first


def test_a_climb_goes_to_another_interface_not_the_rungs_left_where_it_came_from(tmp_path):
    """A flat task with R = 1: two criteria rungs are refused, a third is left there; the climb skips it for the
    guidance rungs (the criteria rung left waits for the next round), and says so in its attribution."""
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: "I am not sure."))
    out = _run(graph, [event("e-flat", "flat", "med-1", mean=0.0, std=0.0)], key, max_revisions=1)
    first, climbed = out["reports"]
    assert first["interface"] == "criteria" and len(first["attempts"]) >= 2
    assert climbed["event_id"] == "e-flat:hop1" and climbed["interface"] == "guidance"
    assert "ladder: climbing past criteria within this round" in climbed["attribution"]["notes"]
