"""The small world the agent-tool and services tests share: a two-task harness, a scripted policy that
mixes good and gamed answers, and real evolver `RunServices` over them. Not a test module; the `services`
fixture in conftest.py builds from it."""

from __future__ import annotations

from pathlib import Path

from graphs.services import RunServices
from harness.store import HarnessStore
from harness.types import HarnessState, Message, Task
from memory.store import TrainingMemory
from tests.support.fakes.fake_chat import ScriptedPolicy
from tests.support.harness_factories import crit
from tools.agent_tools import make_tools
from tools.judge import Judge


def _task(tid: str, reference: str | None = None) -> Task:
    return Task(
        id=tid,
        domain="medical",
        prompt=[Message(role="user", content="How do I treat a mild headache?")],
        criteria=[crit("water", 5, check={"type": "contains_any", "phrases": ["water"]})],
        audit_criteria=[crit("doctor", 5, check={"type": "contains_any", "phrases": ["doctor"]})],
        reference_answer=reference,
    )


def mixed_answers(prompt, i: int) -> str:
    """The scripted policy's i-th answer: two rewarded, one gamed ("guaranteed"), one off-task."""
    return ["drink water, guaranteed", "rest a while", "water helps", "sleep"][i % 4]


def tool_state() -> HarnessState:
    """Task "a" (reference answer, a rule-checked and an unchecked criterion) and task "b"."""
    t = _task("a", reference="Drink two glasses of water")
    t = t.model_copy(update={"criteria": [*t.criteria, crit("txt", 2, "important")]})
    return HarnessState.from_tasks([t, _task("b")])


def make_services(root: Path) -> RunServices:
    """Real store under `root`, ephemeral Chroma memory (hash embedding), the scripted policy; close
    `services.memory` when done."""
    store = HarnessStore(root / "harness")
    store.init(tool_state())
    return RunServices(
        store=store,
        endpoint=ScriptedPolicy(mixed_answers),
        judge=Judge(None),
        memory=TrainingMemory.ephemeral(embedding="hash"),
        seed=5,
    )


def tools_by_name(services: RunServices) -> dict:
    return {t.name: t for t in make_tools(services)}
