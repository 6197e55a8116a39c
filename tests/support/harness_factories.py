"""Small builders for harness tests (tasks, criteria, states). Not a test module."""

from __future__ import annotations

from harness.types import Criterion, HarnessState, Message, Task


def crit(
    cid: str, weight: float = 5.0, kind: str | None = None, check: dict | None = None, text: str | None = None
) -> Criterion:
    kind = kind or ("pitfall" if weight < 0 else "essential")
    return Criterion(id=cid, text=text or f"criterion {cid}", weight=weight, kind=kind, check=check)


def task(
    tid: str,
    criteria: list[Criterion] | None = None,
    split: str = "train",
    reference: str | None = None,
    domain: str = "medical",
    prompt: str = "What should I do about a mild headache?",
) -> Task:
    return Task(
        id=tid,
        domain=domain,
        split=split,
        prompt=[Message(role="user", content=prompt)],
        criteria=criteria
        or [
            crit("c1", 5, check={"type": "contains_any", "phrases": ["water", "rest"]}),
            crit("c2", 3, "important", check={"type": "word_count", "min": 10}),
            crit("p1", -3, check={"type": "contains_any", "phrases": ["guaranteed"]}),
        ],
        reference_answer=reference,
        audit_criteria=[crit("a1", 5, check={"type": "contains_all", "phrases": ["doctor"]})],
    )


def state() -> HarnessState:
    """Three train tasks (one with a reference answer), one held-out test task."""
    return HarnessState.from_tasks(
        [
            task("med-001"),
            task("med-002", criteria=[crit("only", 5, check={"type": "word_count", "max": 50})]),
            task("med-003", reference="Drink plenty of water and rest in a dark quiet room for an hour"),
            task("med-900", split="test"),
        ]
    )
