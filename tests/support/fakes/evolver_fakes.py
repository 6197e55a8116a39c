"""Helpers for the evolver tests: a scripted frozen policy, a small harness and a registered run.

The frozen policy is the one thing faked here (it is an LLM): `PromptPolicy` answers from the prompt
text, so a test can make hints or a variant's added constraint change what the "policy" writes and
check the critic's verdict on exact numbers. The store, memory (Chroma, hash embedding), judge and
measurement are the real ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

from graphs.services import RunServices, register_services
from harness.store import HarnessStore
from harness.types import Criterion, HarnessState, Message, Task
from memory.store import TrainingMemory
from tools.judge import Judge

_keys = itertools.count()


class PromptPolicy:
    """Frozen-policy stand-in: `reply(prompt_text, i)` gives completion i of a group; records calls."""

    name = "prompt-policy"

    def __init__(self, reply: Callable[[str, int], str]):
        self.reply = reply
        self.calls = 0

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        self.calls += 1
        return [[self.reply(conv[-1]["content"], i) for i in range(n)] for conv in messages_batch]


def crit(cid: str, weight: float, check: dict | None, kind: str | None = None, text: str | None = None) -> Criterion:
    return Criterion(
        id=cid,
        text=text or f"criterion {cid}",
        weight=weight,
        kind=kind or ("pitfall" if weight < 0 else "essential"),
        check=check,
    )


def suite() -> list[Task]:
    """Two headache tasks and a capital-city task with a reference answer; all with audit criteria."""
    audit = [crit("a-doctor", 5, {"type": "contains_any", "phrases": ["doctor"]})]
    return [
        Task(
            id="med-1",
            domain="medical",
            prompt=[Message(role="user", content="What helps a mild headache?")],
            criteria=[
                crit(
                    "water",
                    5,
                    {"type": "contains_any", "phrases": ["water", "hydrate"]},
                    text="Recommends drinking water",
                ),
                crit(
                    "rest",
                    3,
                    {"type": "contains_all", "phrases": ["rest", "dark"]},
                    "important",
                    text="Suggests rest in a dark room",
                ),
                crit("len", 1, {"type": "word_count", "min": 3}, "optional", text="Gives a real answer"),
            ],
            audit_criteria=audit,
        ),
        Task(
            id="med-2",
            domain="medical",
            prompt=[Message(role="user", content="How do I treat a small burn?")],
            criteria=[
                crit("cool", 5, {"type": "contains_any", "phrases": ["cool", "cold"]}, text="Says to cool the burn"),
                crit("ends", 2, {"type": "ends_with", "text": "?"}, "important", text="Ends with a question"),
            ],
            audit_criteria=audit,
        ),
        Task(
            id="geo-1",
            domain="science",
            prompt=[Message(role="user", content="What is the capital of France?")],
            criteria=[crit("paris", 5, {"type": "contains_any", "phrases": ["Paris"]}, text="Names the capital city")],
            reference_answer="Paris",
            audit_criteria=[crit("a-paris", 5, {"type": "contains_any", "phrases": ["Paris"]})],
        ),
    ]


def make_run(root: Path, policy, *, memory: bool = True) -> tuple[str, RunServices]:
    """An initialised store under root/harness plus registered services; returns (services key, services)."""
    store = HarnessStore(root / "harness")
    store.init(HarnessState.from_tasks(suite()))
    svc = RunServices(
        store=store,
        endpoint=policy,
        judge=Judge(None),
        memory=TrainingMemory.ephemeral(embedding="hash") if memory else None,
    )
    key = f"evolver-test-{next(_keys)}"
    register_services(key, svc)
    return key, svc


def event(eid: str, etype: str, task_id: str, criterion_id: str | None = None, step: int = 10, **stats) -> dict:
    return {
        "id": eid,
        "type": etype,
        "task_id": task_id,
        "step": step,
        "stats": stats,
        "window": [step - 2, step],
        "criterion_id": criterion_id,
    }
