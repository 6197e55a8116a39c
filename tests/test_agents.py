"""Agents: rule brains (routing prior, memory override, real updates for every failure type) and LLM brains
with scripted fake chat models (valid, malformed, hallucinated, code-smuggling, huge regex, timeout),
plus the ChatOpenAI path over real HTTP against the stub server."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from agents import attributor, critic, proposer
from agents.chat_models import load_chat_model
from agents.context import EvolverContext
from agents.llm import ask_structured
from agents.schemas import Attribution, Critique, parse_json_output
from graphs.evolver import route_after_critique
from harness.ops import validate
from harness.types import FAILURE_TYPES, INTERFACES, FailureEvent, HarnessState
from tests.support.fakes.evolver_fakes import event, suite
from tests.support.fakes.fake_chat import ScriptedChatModel, scripted

STATE = HarnessState.from_tasks(suite())


def _ev(etype: str, task_id: str = "med-1", criterion_id: str | None = None, **stats) -> FailureEvent:
    crit_id = criterion_id or ({"blind_criterion": "len", "stuffing": "water"}.get(etype))
    stats = stats or ({"pass_rate": 1.0} if etype == "blind_criterion" else {})
    return FailureEvent.model_validate(event(f"e-{etype}", etype, task_id, crit_id, **stats))


# -- attributor ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("etype", "interface"),
    [
        ("collapse_low", "guidance"),
        ("collapse_high", "sampling"),
        ("flat", "criteria"),
        ("spurious_length", "criteria"),
        ("spurious_audit", "criteria"),
        ("stuffing", "criteria"),
        ("blind_criterion", "criteria"),
        ("guidance_leak", "guidance"),
    ],
)
def test_rule_prior(etype, interface):
    assert attributor.rule_attribution(_ev(etype), {}, list(INTERFACES)).interface == interface


def test_memory_override_after_two_rejections_and_disabled_interfaces():
    evidence = {"proposals": [{"id": f"p{i}", "interface": "criteria", "outcome": "rejected"} for i in range(2)]}
    att = attributor.rule_attribution(_ev("stuffing"), evidence, list(INTERFACES))
    assert att.interface == "sampling" and att.evidence_ids == ["p0", "p1"]
    # A dead task climbs its repair ladder instead; an LLM proposer's failures count per interface there too.
    llm = {"proposals": [{**p, "interface": "guidance", "template": "llm"} for p in evidence["proposals"]]}
    att = attributor.rule_attribution(_ev("collapse_low"), llm, list(INTERFACES))
    assert att.interface == "criteria"
    assert (
        attributor.rule_attribution(_ev("collapse_low"), evidence, list(INTERFACES), use_memory=False).interface
        == "guidance"
    )
    assert attributor.rule_attribution(_ev("collapse_low"), {}, ["sampling", "criteria"]).interface == "criteria"


def test_llm_attributor_valid_hallucinated_malformed_disabled_timeout():
    ev, evidence = _ev("collapse_low"), {"history": [{"id": "h1", "document": "d"}]}
    good = json.dumps(
        {"interface": "criteria", "diagnosis": "c3 unsatisfiable", "confidence": 0.9, "evidence_ids": ["h1", "ghost"]}
    )
    att = attributor.llm_attribution(scripted(good), ev, evidence, list(INTERFACES))
    assert (att.interface, att.source, att.evidence_ids) == ("criteria", "llm", ["h1"])
    assert "ghost" in att.notes[-1]
    for bad in ("not json at all", json.dumps({"interface": "sampling", "diagnosis": "x"})):
        att = attributor.llm_attribution(scripted(bad), ev, evidence, ["guidance", "criteria"])
        assert (att.interface, att.source) == ("guidance", "llm_fallback")

    class Hanging(ScriptedChatModel):
        def _generate(self, *a, **k):
            raise TimeoutError("model did not answer in 60 s")

    att = attributor.llm_attribution(Hanging(messages=iter([])), ev, evidence, list(INTERFACES))
    assert att.source == "llm_fallback" and "TimeoutError" in att.notes[-1]


# -- rule proposer ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("interface", INTERFACES)
@pytest.mark.parametrize("etype", FAILURE_TYPES)
def test_rule_proposer_makes_valid_updates_for_every_type_and_interface(etype, interface):
    state = STATE
    if etype == "guidance_leak":  # a leak needs a hint to leak from
        from harness.ops import apply
        from harness.types import AddHint, HarnessUpdate, Hint

        state = apply(
            state,
            HarnessUpdate(
                interface="guidance",
                ops=[
                    AddHint(
                        task_id="med-1",
                        hint=Hint(id="h1", text="Say drink water and rest in a dark room", source="criterion:water"),
                    )
                ],
            ),
        )
    att = Attribution(interface=interface, diagnosis="d")
    attempts: list[dict] = []
    made = 0
    for _ in range(3):  # the initial candidate and R = 2 revisions: each a distinct, valid update
        prop = proposer.rule_proposal(_ev(etype), att, state, attempts, step=10)
        if prop.update is None:
            assert prop.error and "no " in prop.error
            break
        assert prop.update.interface == interface and validate(state, prop.update) == []
        attempts.append({"template": prop.template, "critique": {"numbers": {"candidate_mean": 0.5}, "reasons": []}})
        made += 1
    assert made >= 1, f"no {interface} update for {etype}"
    assert len({a["template"] for a in attempts}) == len(attempts)


def test_hints_never_contain_the_reference_answer():
    att = Attribution(interface="guidance", diagnosis="d")
    for _ in range(3):
        prop = proposer.rule_proposal(_ev("collapse_low", "geo-1"), att, STATE, [], step=0)
        texts = [op.hint.text for op in prop.update.ops if op.op == "add_hint"]
        assert texts and all("paris" not in t.lower() for t in texts)


def test_variant_adds_constraint_and_matching_check():
    prop = proposer.rule_proposal(
        _ev("collapse_high"), Attribution(interface="sampling", diagnosis="d"), STATE, [], step=0
    )
    (op,) = prop.update.ops
    assert "3 bullet points" in op.prompt[-1].content and op.extra_criteria[0].check.type == "bullets"
    assert op.parent_weight == 0.5
    # The critic said the variant came out dead-low: the next one is no harder.
    nxt = proposer.rule_proposal(
        _ev("collapse_high"),
        Attribution(interface="sampling", diagnosis="d"),
        STATE,
        [{"template": prop.template, "critique": {"numbers": {"candidate_mean": 0.0}, "reasons": []}}],
        step=0,
    )
    assert nxt.template.startswith("variant:") and nxt.template != prop.template
    assert nxt.template in ("variant:words25", "variant:question", "variant:opener")


def test_a_parent_drawn_again_gets_a_different_variant_than_the_active_one():
    """A saturated parent whose harder variant is in training gets a variant with another constraint, never
    a copy of the active one (a second identical variant changes nothing)."""
    from harness.ops import apply

    att = Attribution(interface="sampling", diagnosis="d")
    first = proposer.rule_proposal(_ev("collapse_high"), att, STATE, [], step=0)
    after = apply(STATE, first.update)
    again = proposer.rule_proposal(_ev("collapse_high"), att, after, [], step=4)
    (op,) = again.update.ops
    assert again.template.startswith("variant:") and again.template != first.template
    assert first.update.ops[0].prompt[-1].content != op.prompt[-1].content


# -- LLM proposer: data, never code ------------------------------------------------------------------------
def _proposal(ops, interface="criteria"):
    return json.dumps({"update": {"interface": interface, "ops": ops}, "rationale": "r"})


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("```json\n{not json", "no JSON object"),
        (
            _proposal([{"op": "exec", "task_id": "med-1", "code": "import os; os.system('rm -rf /')"}]),
            "ProposalOut.update.ops.0",
        ),
        (
            _proposal(
                [
                    {
                        "op": "add_criterion",
                        "task_id": "med-1",
                        "criterion": {
                            "id": "x",
                            "text": "t",
                            "weight": 1,
                            "kind": "optional",
                            "check": {"type": "python", "source": "lambda r: True"},
                        },
                    }
                ]
            ),
            "ProposalOut.update.ops.0",
        ),
        (
            _proposal(
                [
                    {
                        "op": "add_criterion",
                        "task_id": "med-1",
                        "criterion": {
                            "id": "x",
                            "text": "t",
                            "weight": 1,
                            "kind": "optional",
                            "check": {"type": "regex", "pattern": "(a+)+" + "b" * 5000},
                        },
                    }
                ]
            ),
            "regex longer",
        ),
        (
            _proposal([{"op": "reweight", "task_id": "med-1", "weight": 2}], interface="sampling"),
            "attribution is 'criteria'",
        ),
    ],
)
def test_llm_proposer_rejects_bad_output(reply, error):
    prop = proposer.llm_proposal(
        scripted(reply), _ev("stuffing"), Attribution(interface="criteria", diagnosis="d"), STATE, []
    )
    assert prop.update is None and error in prop.error


def test_llm_proposer_hallucinated_ids_fail_validation_not_the_harness():
    reply = _proposal([{"op": "reweight_criterion", "task_id": "med-1", "criterion_id": "c-ghost", "weight": 2}])
    prop = proposer.llm_proposal(
        scripted(reply), _ev("stuffing"), Attribution(interface="criteria", diagnosis="d"), STATE, []
    )
    assert prop.update is not None
    (err,) = validate(STATE, prop.update)
    assert "'c-ghost' is not a criterion of task 'med-1'" in err


def test_structured_output_tool_call_path_and_plain_json_fallback():
    from tests.support.fakes.fake_chat import tool_reply

    att = ask_structured(
        ScriptedChatModel(messages=iter([tool_reply("Attribution", {"interface": "guidance", "diagnosis": "d"})])),
        Attribution,
        "s",
        "u",
    )
    assert att.interface == "guidance"
    assert (
        parse_json_output('Sure! {"interface": "criteria", "diagnosis": "x"} hope it helps', Attribution).interface
        == "criteria"
    )


# -- critic ------------------------------------------------------------------------------------------------
def _route(crit: Critique, revision=0, **ctx):
    state = {
        "critique": crit.model_dump(),
        "proposal": {"update": None, "template": "t", "source": "llm"},
        "revision": revision,
        "attempts": [{"critique": crit.model_dump()}] * (revision + 1),
    }  # revision r: the (r+1)-th attempt
    return route_after_critique(state, SimpleNamespace(context=EvolverContext(**ctx)))


def test_llm_critic_can_veto_but_never_accept():
    ev = _ev("stuffing")
    passed = Critique(failure_type="stuffing", measured_ok=True, numbers={"gamed_drop": 0.5})
    failed = Critique(failure_type="stuffing", measured_ok=False)
    update = proposer.rule_proposal(ev, Attribution(interface="criteria", diagnosis="d"), STATE, [], 0).update
    vetoed = critic.llm_review(scripted('{"veto": true, "review": "rewards an off-task phrase"}'), ev, update, passed)
    assert vetoed.veto and _route(vetoed) == "revise" and _route(vetoed, revision=2) == "fallback"
    assert _route(passed) == "commit" and _route(passed, require_approval=True) == "approve"
    assert _route(failed) == "revise"
    broken = critic.llm_review(scripted("garbage"), ev, update, passed)
    assert not broken.veto and "LLM review failed" in broken.review and _route(broken) == "commit"


# -- ChatOpenAI over real HTTP ----------------------------------------------------------------------------
def test_chat_openai_brain_over_http(openai_stub):
    openai_stub.script(
        [
            {"interface": "criteria", "diagnosis": "stuffed keyword", "confidence": 0.8, "evidence_ids": []},
            _proposal([{"op": "reweight_criterion", "task_id": "med-1", "criterion_id": "water", "weight": 2}]),
        ]
    )
    ctx = EvolverContext(attributor_model="openai:stub", proposer_model="openai:stub", base_url=openai_stub.base_url)
    llm = load_chat_model(ctx.proposer_model, base_url=ctx.base_url, timeout_s=5)
    att = attributor.llm_attribution(llm, _ev("stuffing"), {}, list(INTERFACES))
    prop = proposer.llm_proposal(llm, _ev("stuffing"), att, STATE, [])
    assert att.source == "llm" and prop.update is not None and validate(STATE, prop.update) == []
    assert [r["model"] for r in openai_stub.requests] == ["stub", "stub"]
    assert openai_stub.requests[0]["response_format"]["type"] == "json_schema"


def test_chat_openai_timeout_is_handled(openai_stub):
    openai_stub.delay = 3.0
    llm = load_chat_model("openai:stub", base_url=openai_stub.base_url, timeout_s=0.5)
    prop = proposer.llm_proposal(llm, _ev("stuffing"), Attribution(interface="criteria", diagnosis="d"), STATE, [])
    assert prop.update is None and "LLM proposer failed" in prop.error


def test_context_rejects_bad_values():
    with pytest.raises(ValueError, match="provider:model"):
        EvolverContext(proposer_model="gpt4")
    with pytest.raises(ValueError, match="interfaces is empty"):
        EvolverContext(interfaces=[])
    with pytest.raises(ValueError, match=r"interfaces: unknown \['rubric'\]"):
        EvolverContext(interfaces=["sampling", "rubric"])
    with pytest.raises(ValueError, match="unknown fields"):
        EvolverContext.from_any({"proposer_modle": "rules"})


def test_the_attributor_never_sends_a_blind_criterion_to_sampling():
    # a blind criterion's group still teaches through its other criteria: drawing the task less gives that up
    from agents.attributor import PREFERENCE

    assert "sampling" not in PREFERENCE["blind_criterion"]
    # ... unless sampling is all the run enables: then it says so rather than failing the lane
    att = attributor.rule_attribution(_ev("blind_criterion"), {}, ["sampling"])
    assert att.interface == "sampling" and "none of the interfaces that repair blind_criterion" in " ".join(att.notes)


def test_a_blind_criterion_stays_in_the_rubric_after_rejections():
    # two rejected criteria edits would move another failure type to its next interface; a blind criterion's hint
    # would cost fresh probes on a group that already teaches, so it stays on criteria while criteria is enabled
    rejected = {"proposals": [{"id": f"p{i}", "interface": "criteria", "outcome": "rejected"} for i in range(3)]}
    att = attributor.rule_attribution(_ev("blind_criterion"), rejected, ["sampling", "guidance", "criteria"])
    assert att.interface == "criteria"
    assert any("repaired in the rubric only" in n for n in att.notes)
    # the same evidence moves a stuffing event off criteria: the narrowing is the blind criterion's alone
    assert attributor.rule_attribution(_ev("stuffing"), rejected, ["sampling", "guidance", "criteria"]).interface != (
        "criteria"
    )
    # with criteria disabled (an ablation) the hint is the repair left
    assert attributor.rule_attribution(_ev("blind_criterion"), {}, ["sampling", "guidance"]).interface == "guidance"


def test_an_llm_attributor_cannot_send_a_blind_criterion_to_guidance():
    hint = scripted(json.dumps({"interface": "guidance", "diagnosis": "d", "confidence": 0.9}))
    att = attributor.llm_attribution(hint, _ev("blind_criterion"), {}, ["sampling", "guidance", "criteria"])
    assert att.interface == "criteria" and att.source == "llm_fallback"
    assert "not one allowed for blind_criterion" in " ".join(att.notes)
