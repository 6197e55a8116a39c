"""The evolver-quality benchmark's detection phase: the real detector on W groups of k rollouts per case.

`detect` samples every case's visits from the policy and scores them with the real judge, observed by the
real `Detector` as the trainer's reward function does it; `matching_event` picks the detector's event for a
planted defect and `planted_event` makes the one it would emit when it missed it. Part of
`benchmarks/evolver_quality.py` (modules in `benchmarks/` import each other by plain name).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evq_cases import STEP, Case
from harness.detector import Detector, DetectorConfig, GroupStats, RolloutRecord
from harness.guidance import render_prompt, visible_hints
from harness.types import FailureEvent, HarnessState
from tools.judge import Judge, run_sync

DETECT_SEED = 1000


@dataclass
class Visit:
    stats: GroupStats
    records: list[RolloutRecord]


@dataclass
class Detection:
    events: dict[str, list[FailureEvent]] = field(default_factory=dict)  # task id -> events over the window
    visits: dict[str, list[Visit]] = field(default_factory=dict)
    seconds: float = 0.0
    rollouts: int = 0


def detect(state: HarnessState, cases: Sequence[Case], endpoint: Any, judge: Judge, cfg: DetectorConfig, *, k: int,
           max_tokens: int, temperature: float) -> Detection:
    """W visits per task at steps STEP-W+1..STEP, each one batched sample call over all tasks, observed by the
    real detector exactly as the trainer's reward function does it."""
    det, out = Detector(cfg), Detection()
    t0 = time.perf_counter()
    rng = random.Random(DETECT_SEED)
    for v in range(cfg.window):
        step = STEP - cfg.window + 1 + v
        hinted = {c.task.id: visible_hints(state.guidance_for(c.task.id), step, rng) for c in cases}
        batch = [render_prompt(c.task, hinted[c.task.id], state.guidance_for(c.task.id).schedule.placement) for c in cases]
        texts = endpoint.sample(batch, n=k, max_tokens=max_tokens, temperature=temperature, seed=DETECT_SEED + v)
        out.rollouts += k * len(cases)
        for c, group in zip(cases, texts):
            task = state.task(c.task.id)
            scores = run_sync(judge.score(task.criteria, task.user_prompt, group))
            audits = run_sync(judge.audit(task, group))
            hint_texts = [h.text for h in hinted[c.task.id]]
            records = [RolloutRecord(text=t, reward=s.score, audit=a, hinted=bool(hint_texts), hint_texts=hint_texts,
                                     verdicts={cid: vd.met for cid, vd in s.verdicts.items() if vd.source != "skipped"})
                       for t, s, a in zip(group, scores, audits)]
            stats = GroupStats.from_rollouts(task.id, step, records, criteria=task.criteria, harness_version=state.version)
            out.visits.setdefault(task.id, []).append(Visit(stats, records))
            out.events.setdefault(task.id, []).extend(det.observe(stats))
    out.seconds = time.perf_counter() - t0
    return out


def matching_event(case: Case, events: Sequence[FailureEvent]) -> FailureEvent | None:
    """The detector's event for the planted defect: its type, and its criterion when one was planted."""
    if case.defect == "control":
        return None
    for ev in events:
        if ev.type == case.event_type and (case.criterion_id is None or ev.criterion_id == case.criterion_id):
            return ev
    return None


def planted_event(case: Case, visits: Sequence[Visit]) -> FailureEvent:
    """The event the detector would emit for the planted defect (controls: the false one), with the last
    visit's real numbers."""
    last = visits[-1].stats
    stats: dict[str, Any] = {**last.summary(), "planted": True}
    if case.criterion_id is not None:
        stats["pass_rate"] = last.pass_rates.get(case.criterion_id, 1.0)
    suffix = f":{case.criterion_id}" if case.criterion_id else ""
    return FailureEvent(id=f"{case.event_type}:{case.task.id}:{STEP}{suffix}", type=case.event_type, task_id=case.task.id,  # type: ignore[arg-type]
                        step=STEP, stats=stats, window=[v.stats.step for v in visits], criterion_id=case.criterion_id)
