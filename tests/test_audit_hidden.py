"""The audit stays hidden from every LLM role: tools, prompts and memory documents.

A real small run (store, ephemeral Chroma memory, the real judge, detector, measurement and critic)
whose task carries audit criteria with a unique marker string in their ids and texts, and audit scores
that are distinctive numbers (3/7 per doctor-mentioning answer). Memory is filled the way training
fills it: a group summary with audit scores, a detector `spurious_audit` event, a proposal with the
critic's real (audit-based) numbers and reasons. Then every agent tool's output (sync and async), every
tool description, and every prompt an LLM brain receives (captured by a recording chat model: the
proposer and attributor with their tool loops, the critic's review, the judge) is searched for the
marker, for the audit numbers, and for JSON keys that carry audit information.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field

from agents import attributor, critic, proposer
from agents.context import EvolverContext
from agents.llm import ToolBox
from agents.schemas import Attribution
from graphs.services import RunServices
from harness.detector import Detector, GroupStats, RolloutRecord
from harness.store import HarnessStore
from harness.types import INTERFACES, Criterion, HarnessState, HarnessUpdate, Message, Task
from memory.records import AttributionRecord, EventRecord, GroupSummary, ProposalRecord
from memory.store import TrainingMemory
from tests.support.fakes.fake_chat import FunctionChatModel, ScriptedChatModel
from tools.agent_tools import make_tools
from tools.candidate import measure_candidate
from tools.judge import Judge
from tools.measure_settings import MeasureSettings

MARKER = "zqx-hidden-7731"
DOCTOR = "Drink water and rest in a dark room; see a doctor if it lasts."
STUFFED = "water water water water water rest dark"
TIGHTEN = {
    "interface": "criteria",
    "ops": [
        {
            "op": "edit_criterion",
            "task_id": "med-1",
            "criterion_id": "water",
            "check": {
                "type": "all_of",
                "checks": [
                    {"type": "contains_any", "phrases": ["water"]},
                    {"type": "max_repeated_ngram", "n": 1, "max_count": 2},
                ],
            },
        }
    ],
}


def _crit(cid: str, weight: float, phrases: list[str], text: str, kind: str = "essential") -> Criterion:
    return Criterion(id=cid, text=text, weight=weight, kind=kind, check={"type": "contains_any", "phrases": phrases})


def _task(tid: str) -> Task:
    return Task(
        id=tid,
        domain="medical",
        prompt=[Message(role="user", content="What helps a mild headache?")],
        criteria=[
            _crit("water", 5, ["water"], "Recommends drinking water"),
            Criterion(id="txt", text="Sounds caring", weight=2, kind="important"),
        ],  # no check: the LLM judge decides
        audit_criteria=[
            _crit(f"{MARKER}-doctor", 3, ["doctor"], f"{MARKER}: recommends seeing a doctor"),
            _crit(f"{MARKER}-guide", 4, ["guideline-zqx"], f"{MARKER}: cites a clinical guideline", "important"),
        ],
    )


class Policy:
    """Frozen-policy stand-in: half the group names a doctor (audit 3/7), half stuffs the keyword (audit 0)."""

    name = "audit-policy"

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        return [[DOCTOR if i % 2 == 0 else STUFFED for i in range(n)] for _ in messages_batch]


class Recording(ScriptedChatModel):
    """Scripted replies in call order; remembers every message it was sent."""

    seen: list[BaseMessage] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.extend(messages)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _calls(*calls: tuple[str, dict]) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": n, "args": a, "id": f"call-{i}"} for i, (n, a) in enumerate(calls)]
    )


def hidden_key(key: object) -> bool:
    """The test's own notion of an audit-bearing key (independent of `harness.visibility`): it names the
    audit or the gamed/honest rollout split, which audit scores define."""
    return isinstance(key, str) and re.search("audit|gamed|honest", key, re.IGNORECASE) is not None


def _numbers(obj: Any, hidden: bool, under_hidden: bool = False) -> list[float]:
    """Numbers under hidden keys (hidden=True) or under no hidden key (hidden=False), at any depth."""
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in _numbers(v, hidden, under_hidden or hidden_key(k))]
    if isinstance(obj, list | tuple):
        return [x for v in obj for x in _numbers(v, hidden, under_hidden)]
    if isinstance(obj, int | float) and not isinstance(obj, bool) and under_hidden == hidden:
        return [float(obj)]
    return []


def _hidden_keys(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        return [k for k in obj if hidden_key(k)] + [x for v in obj.values() for x in _hidden_keys(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _hidden_keys(v)]
    return []


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A run whose memory holds audit scores everywhere training puts them, and the secrets to look for."""
    root = tmp_path_factory.mktemp("audit")
    store = HarnessStore(root / "harness")
    store.init(HarnessState.from_tasks([_task("med-1"), _task("med-2")]))
    judge = Judge(FunctionChatModel(respond=lambda m: '{"met": true, "reason": "fine"}'))
    svc = RunServices(
        store=store,
        endpoint=Policy(),
        judge=judge,
        memory=TrainingMemory.ephemeral(embedding="hash"),
        seed=3,
    )
    state = store.latest()
    task = state.task("med-1")
    texts = [DOCTOR, STUFFED] * 2
    audits = judge.audit_sync(task, texts)
    assert audits[0] == pytest.approx(3 / 7) and audits[1] == 0.0  # distinctive audit scores

    # Training's records: groups with audit scores, the detector's spurious_audit event.
    detector, events = Detector(), []
    for step in (4, 8):
        scored = judge.score_sync(task.criteria, task.user_prompt, texts)
        rollouts = [
            RolloutRecord(text=t, reward=r.score, verdicts={c: v.met for c, v in r.verdicts.items()}, audit=a)
            for t, r, a in zip(texts, scored, audits)
        ]
        stats = GroupStats.from_rollouts("med-1", step, rollouts, criteria=task.criteria)
        svc.memory.add_group(GroupSummary.from_stats(stats, rollouts[0], rollouts[1], domain="medical"))
        events += detector.observe(stats)
    event = next(e for e in events if e.type == "spurious_audit")
    svc.memory.add_event(EventRecord(event=event, domain="medical"))

    # A measured candidate, judged by the critic on audit numbers, recorded like the graph records it.
    update = HarnessUpdate.model_validate(TIGHTEN)
    m = measure_candidate(state, update, svc.endpoint, judge, MeasureSettings(seed=3))
    crit = critic.judge_measurement(event, update, m, EvolverContext())
    measurement = m.compact()
    deltas = {k: float(v) for k, v in m.deltas.items() if v is not None}
    svc.memory.add_attribution(
        AttributionRecord(
            event_id=event.id,
            task_id="med-1",
            step=8,
            interface="criteria",
            diagnosis="credit without content",
            confidence=0.8,
            failure_type=event.type,
            brain="rule",
        )
    )
    for tid in ("med-1", "med-2"):  # med-2's proposal is the cross-task evidence for med-1
        svc.memory.add_proposal(
            ProposalRecord(
                proposal_id=f"{event.id}:{tid}:r0",
                event_id=event.id,
                task_id=tid,
                step=8,
                failure_type=event.type,
                interface="criteria",
                update=update if tid == "med-1" else None,
                measurements=crit.numbers,
                outcome="rejected",
                reasons=crit.reasons,
                deltas=deltas,
                domain="medical",
            )
        )
    attempt = {
        "revision": 0,
        "template": "tighten_repeat",
        "source": "rules",
        "update": update.model_dump(mode="json"),
        "error": None,
        "critique": crit.model_dump(mode="json"),
        "measurement": measurement,
    }

    sources = [event.stats, crit.numbers, measurement, deltas, {"audits": audits}]
    secret = set(_numbers(sources, hidden=True)) - set(_numbers(sources, hidden=False)) - {0.0, 0.5, 1.0}
    secret.add(3 / 7)
    patterns = {f"{v:.4f}" for v in secret} | {f"{v:.3f}" for v in secret} | {repr(v) for v in secret}
    # Sanity: the secrets really are in what training stored (so the test can fail).
    assert any(p in json.dumps(crit.numbers) for p in patterns) and any(k for k in _hidden_keys(event.stats))
    assert any("audit" in r for r in crit.reasons)
    yield {"svc": svc, "event": event, "update": update, "critique": crit, "attempt": attempt, "patterns": patterns}
    svc.memory.close()


def _assert_hidden(text: str, world: dict, where: str) -> None:
    assert MARKER.lower() not in text.lower(), f"{where}: shows the audit criteria"
    leaked = sorted(p for p in world["patterns"] if re.search(rf"(?<![\d.]){re.escape(p)}(?!\d)", text))
    assert not leaked, f"{where}: shows audit scores {leaked}"


def _assert_hidden_json(text: str, world: dict, where: str) -> None:
    _assert_hidden(text, world, where)
    if not text.startswith("error:"):
        assert not _hidden_keys(json.loads(text)), f"{where}: has audit keys {_hidden_keys(json.loads(text))}"


TOOL_CALLS = [
    ("task_history", {"task_id": "med-1", "last_n": 50}),
    ("similar_cases", {"query": "spurious_audit on a medical task", "k": 20}),
    ("similar_cases", {"query": "stuffing", "failure_type": "spurious_audit", "interface": "criteria"}),
    ("current_harness", {"task_id": "med-1"}),
    ("sample_policy", {"task_id": "med-1", "n": 4}),
    ("score_responses", {"task_id": "med-1", "responses": [DOCTOR, STUFFED]}),
]


@pytest.mark.parametrize(("name", "args"), TOOL_CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(TOOL_CALLS)])
def test_no_tool_output_carries_the_audit(world, name, args):
    tool = {t.name: t for t in make_tools(world["svc"])}[name]
    out = tool.invoke(args)
    assert not out.startswith("error:"), out
    _assert_hidden_json(out, world, f"{name} (sync)")
    _assert_hidden_json(asyncio.run(tool.ainvoke(args)), world, f"{name} (async)")


def test_every_tool_is_walked_and_no_description_names_the_audit_criteria(world):
    tools = make_tools(world["svc"])
    assert {t.name for t in tools} == {n for n, _ in TOOL_CALLS}
    for t in tools:
        _assert_hidden(
            t.description + json.dumps(t.tool_call_schema.model_json_schema()), world, f"{t.name} description"
        )


def test_memory_documents_carry_no_audit(world):
    mem = world["svc"].memory
    records = mem.task_history("med-1", 50)
    assert {r.kind for r in records} >= {"groups", "events", "proposals"}
    for r in records:
        _assert_hidden(r.document(), world, f"{r.kind} document")
    for case in mem.similar_cases("spurious_audit medical", 20):
        _assert_hidden(case.document, world, "similar case document")


def _seen(llm: Recording) -> str:
    parts = []
    for m in llm.seen:
        parts.append(m.content if isinstance(m.content, str) else json.dumps(m.content))
        parts += [json.dumps(c["args"]) for c in getattr(m, "tool_calls", [])]
    return "\n".join(parts)


def test_proposer_prompts_and_tool_results_carry_no_audit(world):
    svc, event = world["svc"], world["event"]
    final = {"update": TIGHTEN, "rationale": "tighten"}
    llm = Recording(messages=iter([_calls(*TOOL_CALLS), AIMessage(json.dumps(final))]))
    box = ToolBox.for_role("proposer", make_tools(svc), use_memory=True, max_rounds=2)
    prop = proposer.llm_proposal(
        llm,
        event,
        Attribution(interface="criteria", diagnosis="d"),
        svc.store.latest(),
        [world["attempt"]],
        toolbox=box,
    )
    assert prop.update is not None, prop.error
    assert len([c for c in box.calls if not c["error"]]) == 6  # every proposer tool really ran
    text = _seen(llm)
    assert "previous_attempts_and_critic_feedback" in text and "tighten_repeat" in text  # the feedback is there
    _assert_hidden(text, world, "proposer prompt")


def test_attributor_prompts_carry_no_audit(world):
    svc, event = world["svc"], world["event"]
    mem = svc.memory
    task = svc.store.latest().task("med-1")
    evidence = {  # what the graph's gather_evidence hands the attributor
        "task": {
            "id": task.id,
            "domain": task.domain,
            "prompt": task.user_prompt,
            "criteria": [c.model_dump(mode="json", exclude={"origin"}) for c in task.criteria],
        },
        "history": [
            {"id": r.record_id, "kind": r.kind, "document": r.document()} for r in mem.task_history("med-1", 50)
        ],
        "similar": [
            {"id": c.id, "task_id": c.task_id, "document": c.document, "outcome": c.outcome, "deltas": c.deltas}
            for c in mem.similar_cases("spurious_audit", 5, exclude_task="med-1")
        ],
        "proposals": [
            {"id": p.record_id, "interface": p.interface, "outcome": p.outcome} for p in mem.proposals_for("med-1")
        ],
    }
    assert evidence["history"] and evidence["similar"]
    answer = json.dumps({"interface": "criteria", "diagnosis": "d", "confidence": 0.5, "evidence_ids": []})
    llm = Recording(
        messages=iter(
            [
                _calls(
                    ("task_history", {"task_id": "med-1"}),
                    ("similar_cases", {"query": "audit"}),
                    ("current_harness", {"task_id": "med-1"}),
                ),
                AIMessage(answer),
            ]
        )
    )
    box = ToolBox.for_role("attributor", make_tools(svc), use_memory=True, max_rounds=2)
    att = attributor.llm_attribution(llm, event, evidence, list(INTERFACES), toolbox=box)
    assert att.source == "llm"
    _assert_hidden(_seen(llm), world, "attributor prompt")


def test_critic_review_prompt_carries_no_audit(world):
    llm = Recording(messages=iter([AIMessage(json.dumps({"veto": False, "review": "fine"}))]))
    critic.llm_review(llm, world["event"], world["update"], world["critique"], toolbox=None)
    _assert_hidden(_seen(llm), world, "critic prompt")


def test_judge_prompts_for_training_scores_carry_no_audit(world):
    seen: list[str] = []

    def respond(messages):
        seen.extend(str(m.content) for m in messages)
        return '{"met": true, "reason": "fine"}'

    judge = Judge(FunctionChatModel(respond=respond))
    task = world["svc"].store.latest().task("med-1")
    judge.score_sync(task.criteria, task.user_prompt, [DOCTOR, STUFFED])
    assert seen  # the text-only criterion went to the LLM judge
    _assert_hidden("\n".join(seen), world, "judge prompt")
