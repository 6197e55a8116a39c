"""The evolver-quality benchmark's training-like groups: the real detector on W groups of k rollouts per case,
and the follow-up groups that grade an accepted update.

`sample_groups` samples groups of tasks from the policy under a harness version and scores them with the real
judge, as the trainer's reward function does it (hints at each step's reveal, the task's current criteria, the
hidden audit); `detect` runs it over the W detection visits and observes them with the real `Detector`;
`follow_up` samples the W groups after a round (the same code path) that the confirm/revert rule grades, and
`detect_again` observes them with a fresh detector (the trainer forgets a task's window when an update changed
it) for a two-round case. `matching_event` picks the detector's event for a planted defect and `planted_event`
makes the one it would emit when it missed it; `false_event_case` keeps a control's false event false on the
control's own groups. Part of `benchmarks/evolver_quality.py` (modules in
`benchmarks/` import each other by plain name).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evq_cases import STEP, Case

from harness.detector import Detector, DetectorConfig, GroupStats, RolloutRecord
from harness.guidance import prompt_digest, render_prompt, visible_hints
from harness.types import FailureEvent, HarnessState
from tools.judge import Judge, run_sync

DETECT_SEED = 1000
FOLLOW_SEED = 5000  # follow-up groups: seeds apart from the detection visits and from the critic's probes


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


def sample_groups(
    state: HarnessState,
    task_ids: Sequence[str],
    endpoint: Any,
    judge: Judge,
    *,
    steps: Sequence[int],
    k: int,
    max_tokens: int,
    temperature: float,
    seed: int,
    rng: random.Random,
) -> dict[str, list[Visit]]:
    """One group of k rollouts per task and step under `state`: per step one batched sample call over the tasks
    (seed `seed + i` at the i-th step), each group scored by the judge and summarised as the trainer does it."""
    out: dict[str, list[Visit]] = {tid: [] for tid in task_ids}
    for i, step in enumerate(steps):
        hinted = {tid: visible_hints(state.guidance_for(tid), step, rng) for tid in task_ids}
        batch = [
            render_prompt(state.task(tid), hinted[tid], state.guidance_for(tid).schedule.placement) for tid in task_ids
        ]
        texts = endpoint.sample(batch, n=k, max_tokens=max_tokens, temperature=temperature, seed=seed + i)
        for tid, group, prompt in zip(task_ids, texts, batch):
            task = state.task(tid)
            scores = run_sync(judge.score(task.criteria, task.user_prompt, group))
            audits = run_sync(judge.audit(task, group))
            hint_texts = [h.text for h in hinted[tid]]
            records = [
                RolloutRecord(
                    text=t,
                    reward=s.score,
                    audit=a,
                    hinted=bool(hint_texts),
                    hint_texts=hint_texts,
                    verdicts={cid: vd.met for cid, vd in s.verdicts.items() if vd.source != "skipped"},
                )
                for t, s, a in zip(group, scores, audits)
            ]
            stats = GroupStats.from_rollouts(
                tid,
                step,
                records,
                criteria=task.criteria,
                harness_version=state.version,
                prompt_digest=prompt_digest(prompt),
            )
            out[tid].append(Visit(stats, records))
    return out


def detect(
    state: HarnessState,
    cases: Sequence[Case],
    endpoint: Any,
    judge: Judge,
    cfg: DetectorConfig,
    *,
    k: int,
    max_tokens: int,
    temperature: float,
) -> Detection:
    """W visits per task at steps STEP-W+1..STEP, each one batched sample call over all tasks, observed by the
    real detector exactly as the trainer's reward function does it."""
    det, out = Detector(cfg), Detection()
    t0 = time.perf_counter()
    rng = random.Random(DETECT_SEED)
    ids = [c.task.id for c in cases]
    for v in range(cfg.window):
        step = STEP - cfg.window + 1 + v
        groups = sample_groups(
            state,
            ids,
            endpoint,
            judge,
            steps=[step],
            k=k,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=DETECT_SEED + v,
            rng=rng,
        )
        out.rollouts += k * len(ids)
        for tid in ids:
            (visit,) = groups[tid]
            out.visits.setdefault(tid, []).append(visit)
            out.events.setdefault(tid, []).extend(det.observe(visit.stats))
    out.seconds = time.perf_counter() - t0
    return out


def follow_up(
    state: HarnessState,
    task_id: str,
    endpoint: Any,
    judge: Judge,
    *,
    after_step: int,
    window: int,
    k: int,
    max_tokens: int,
    temperature: float,
    salt: int,
) -> list[Visit]:
    """The W training-like groups of `task_id` at steps after_step+1..after_step+W under `state` (the harness the
    round left); `salt` (the case's index) keeps the seeds of different cases apart."""
    steps = [after_step + 1 + i for i in range(window)]
    seed = FOLLOW_SEED + 100 * salt + after_step
    return sample_groups(
        state,
        [task_id],
        endpoint,
        judge,
        steps=steps,
        k=k,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        rng=random.Random(seed),
    )[task_id]


def detect_again(visits: Sequence[Visit], cfg: DetectorConfig) -> list[FailureEvent]:
    """The events a fresh detector window (the task changed since its last events) raises on `visits`."""
    det = Detector(cfg)
    return [e for v in visits for e in det.observe(v.stats)]


def matching_event(case: Case, events: Sequence[FailureEvent]) -> FailureEvent | None:
    """The detector's event for the planted defect: its type, and its criterion when one was planted."""
    if case.defect == "control":
        return None
    for ev in events:
        if ev.type == case.event_type and (case.criterion_id is None or ev.criterion_id == case.criterion_id):
            return ev
    return None


def raised(case: Case, events: Sequence[FailureEvent]) -> bool:
    """The detector raised the case's fed event itself (same type, same criterion) on the case's groups."""
    return any(e.type == case.event_type and e.criterion_id == case.criterion_id for e in events)


def false_event_case(case: Case, events: Sequence[FailureEvent]) -> Case:
    """A control whose false event is false on its own detection groups.

    A control is a healthy task fed an event it does not have. When the detector raised that very event on the
    control's groups (the frozen policy meets the "blind" criterion every time, say), the event is true there and
    an accepted repair is no false accept: a criterion-level event moves to the last positive criterion the detector
    did not flag. A case with no such criterion keeps its event (`raised` still says so in its detection row).
    """
    if case.defect != "control" or not raised(case, events) or case.criterion_id is None:
        return case
    flagged = {e.criterion_id for e in events if e.type == case.event_type}
    free = [c.id for c in case.task.criteria if c.weight > 0 and c.check is not None and c.id not in flagged]
    return replace(case, criterion_id=free[-1]) if free else case


def planted_event(case: Case, visits: Sequence[Visit], step: int = STEP) -> FailureEvent:
    """The event the detector would emit for the planted defect (controls: the false one) at `step`, with the
    last visit's real numbers."""
    last = visits[-1].stats
    stats: dict[str, Any] = {**last.summary(), "planted": True}
    if case.criterion_id is not None:
        stats["pass_rate"] = last.pass_rates.get(case.criterion_id, 1.0)
    suffix = f":{case.criterion_id}" if case.criterion_id else ""
    return FailureEvent(
        id=f"{case.event_type}:{case.task.id}:{step}{suffix}",
        type=case.event_type,
        task_id=case.task.id,  # type: ignore[arg-type]
        step=step,
        stats=stats,
        window=[v.stats.step for v in visits],
        criterion_id=case.criterion_id,
    )
