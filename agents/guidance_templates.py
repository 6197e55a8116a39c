"""The rule templates of the guidance interface: hints from unmet criteria, and leak repairs.

Hints are phrased from the criteria's text and check phrases, never from the reference answer, and fade out over
`FADE_STEPS`; a leaking hint fades faster, is removed, or is reworded to the abstract requirement.
"""

from __future__ import annotations

from typing import Any

from agents import rules_bank as bank
from agents.template_input import TemplateInput
from harness.guidance import hint_leaks_reference
from harness.types import (
    AddHint,
    EditHint,
    HarnessUpdate,
    Hint,
    RemoveHint,
    Schedule,
    SetSchedule,
)

FADE_STEPS = 100


def _hints(p: TemplateInput, strong: bool, kinds: tuple[str, ...], share: float, mode: str) -> HarnessUpdate | None:
    g = p.state.guidance_for(p.task.id)
    hinted = {h.source for h in g.hints}
    taken = {h.id for h in g.hints}
    ops: list[Any] = []
    for c in p.targets(kinds):
        if not strong and f"criterion:{c.id}" in hinted:
            continue
        text = bank.safe_hint(c, p.task, strong)
        if text is None or any(h.text == text for h in g.hints):
            continue
        hid = bank.fresh_id(f"h-{c.id}"[:60], taken)
        taken.add(hid)
        ops.append(AddHint(task_id=p.task.id, hint=Hint(id=hid, text=text, source=f"criterion:{c.id}")))
        if len(ops) >= 3:
            break
    if not ops:
        return None
    # Fade-out plan (SmolLM2 spike): hints in the user turn, mixed hinted/unhinted visits, decaying.
    ops.append(
        SetSchedule(
            task_id=p.task.id,
            schedule=Schedule(
                mode=mode,
                start_step=p.step,
                end_step=p.step + FADE_STEPS,
                floor=0.0,
                hinted_share=share,
                placement="user",
            ),
        )
    )  # type: ignore[arg-type]
    return p.update(
        "guidance",
        ops,
        f"{p.event.type}: show hints for the unmet criteria, fading out",
        "some hinted rollouts meet the criteria: group std up, no leak of the reference",
    )


def t_hint(p: TemplateInput) -> HarnessUpdate | None:
    return _hints(p, strong=False, kinds=("essential",), share=0.75, mode="linear")


def t_hint_strong(p: TemplateInput) -> HarnessUpdate | None:
    return _hints(p, strong=True, kinds=("essential", "important"), share=1.0, mode="sigmoid")


def t_hint_all(p: TemplateInput) -> HarnessUpdate | None:
    return _hints(p, strong=True, kinds=("essential", "important", "optional"), share=1.0, mode="constant")


def t_leak_fade(p: TemplateInput) -> HarnessUpdate | None:
    g = p.state.guidance_for(p.task.id)
    s = g.schedule
    new = Schedule(
        mode="linear",
        start_step=p.step,
        end_step=p.step + 20,
        floor=0.0,
        hinted_share=round(min(s.hinted_share, 1.0) * 0.5, 3),
        placement=s.placement,
    )
    return p.update(
        "guidance",
        [SetSchedule(task_id=p.task.id, schedule=new)],
        "rollouts copy the hint: show it to fewer visits and fade it out fast",
        "fewer leak hits; the task keeps some signal",
    )


def t_leak_remove(p: TemplateInput) -> HarnessUpdate | None:
    hints = p.state.guidance_for(p.task.id).hints
    if not hints:
        return None
    longest = max(hints, key=lambda h: len(h.text))
    return p.update(
        "guidance",
        [RemoveHint(task_id=p.task.id, hint_id=longest.id)],
        f"rollouts copy hint {longest.id!r}: remove it",
        "no leak hits",
    )


def t_leak_abstract(p: TemplateInput) -> HarnessUpdate | None:
    ops: list[Any] = []
    by_id = {c.id: c for c in p.task.criteria}
    for h in p.state.guidance_for(p.task.id).hints:
        c = by_id.get(h.source.removeprefix("criterion:"))
        text = f"Think about this: {c.text.rstrip('.')}." if c else "Answer in your own words."
        if text != h.text and not hint_leaks_reference(text, p.task.reference_answer):
            ops.append(EditHint(task_id=p.task.id, hint_id=h.id, text=text[:400]))
    if not ops:
        return None
    return p.update(
        "guidance", ops[:8], "rollouts copy the hint: reword hints to the abstract requirement", "no leak hits"
    )
