"""Just-in-time measurement of a candidate harness update on the frozen policy (the critic's numbers).

`measure_candidate(state, update, endpoint, judge)` applies the update to a copy of the harness
(`harness.ops.apply`; an invalid update raises `UpdateRejected`), samples k rollouts per affected
task from the frozen policy under the current harness (control) and under the candidate, scores
both with the `Judge` (training criteria) and the hidden audit criteria, and returns per-group
metrics plus weighted summaries and deltas (`Measurement`).

How the two sides are built, per interface:

- **criteria**: prompts do not change, so the control rollouts are re-scored under the candidate
  rubric (paired: the same texts under both rubrics, so the delta is the rubric's effect alone).
- **guidance**: control prompts carry the current hints, candidate prompts the candidate's hints,
  both with *full reveal*: the critic must see the effect of the hints themselves, not of one random
  draw of the reveal schedule (schedule-only edits therefore measure as paired/no-op).
- **sampling**: `add_variant` compares the new variant (candidate) with its parent (control);
  reweight/retire/revive do not change any group, so both sides are the same groups under the current
  rubric and the summaries differ by their sampling weights (a retired task has weight 0). Read
  `dead_weight`/`band_weight` (sampling mass on dead / in-band groups) for these: a side whose total
  weight is 0 has undefined shares.

For criteria and guidance updates every group weighs 1. Sampling is batched: one `endpoint.sample`
call per side, all affected prompts together, with the same seed on both sides (common random
numbers); a prompt sampled on the control side is reused, never resampled, on the candidate side.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from harness.detector import DetectorConfig, GroupStats, RolloutRecord, hint_overlap
from harness.guidance import hint_leaks_reference, render_prompt
from harness.ops import apply
from harness.types import HarnessState, HarnessUpdate, Hint, Task
from tools.endpoint import PolicyEndpoint
from tools.judge import Judge, run_sync

EXAMPLE_CHARS = 300


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupMetrics(_Model):
    """One group of k rollouts of one task under one harness (raw numbers included)."""

    task_id: str
    harness_version: int
    n: int
    rewards: list[float]
    lengths: list[int]  # words per rollout
    audits: list[float | None]
    mean: float
    std: float
    min: float
    max: float
    dead: bool  # std < eps: zero advantage, the group teaches nothing
    in_band: bool  # tau_lo < mean < tau_hi
    length_corr: float | None  # Spearman(length, reward); None when either side is constant
    audit_mean: float | None
    leak_hits: int  # hinted rollouts that copy a hint (>= leak_overlap of its 4-grams) or the reference
    pass_rates: dict[str, float]
    hinted: bool
    max_repeat: int
    examples: list[str] = Field(default_factory=list)  # best and worst rollout, truncated


class Summary(_Model):
    """Weighted summary of one side over the affected groups (weights: see module docstring)."""

    n_groups: int
    weight: float
    mean: float | None
    mean_std: float | None
    dead_share: float | None
    band_share: float | None
    length_corr: float | None
    audit_mean: float | None
    leak_hits: int
    dead_weight: float  # sampling mass on dead groups (absolute, comparable across sides)
    band_weight: float  # sampling mass on in-band groups


class Measurement(_Model):
    interface: str
    task_ids: list[str]
    candidate_version: int
    k: int
    seed: int
    step: int
    per_task: dict[str, dict[str, GroupMetrics]]  # task id -> {"control": ..., "candidate": ...}
    weights: dict[str, dict[str, float]]  # task id -> {"control": w, "candidate": w}
    paired: dict[str, bool]  # task id -> both sides scored the same rollouts
    control: Summary
    candidate: Summary
    deltas: dict[str, float | None]  # candidate - control
    judge_failures: int  # verdicts forced unmet because the judge kept failing during this measurement

    def compact(self) -> dict:
        """A short JSON-able view for an LLM agent: summaries, deltas, per-task headline numbers."""
        def g(m: GroupMetrics) -> dict:
            return {"mean": round(m.mean, 3), "std": round(m.std, 3), "dead": m.dead, "in_band": m.in_band,
                    "audit_mean": None if m.audit_mean is None else round(m.audit_mean, 3),
                    "length_corr": None if m.length_corr is None else round(m.length_corr, 3),
                    "leak_hits": m.leak_hits, "rewards": [round(r, 3) for r in m.rewards]}

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "interface": self.interface, "k": self.k,
            "control": {k: r(v) if isinstance(v, float) else v for k, v in self.control.model_dump().items()},
            "candidate": {k: r(v) if isinstance(v, float) else v for k, v in self.candidate.model_dump().items()},
            "deltas": {k: r(v) for k, v in self.deltas.items()},
            "per_task": {t: {side: g(m) for side, m in sides.items()} for t, sides in self.per_task.items()},
            "weights": self.weights, "judge_failures": self.judge_failures,
        }


@dataclass(frozen=True)
class _Spec:
    """A group to sample and score: a task as one harness version sees it, and its prompt."""

    task: Task
    hints: tuple[Hint, ...]
    messages: tuple[tuple[str, str], ...]
    version: int

    @property
    def prompt_key(self) -> str:
        return json.dumps(self.messages)


def _spec(state: HarnessState, task_id: str) -> _Spec:
    task = state.task(task_id)
    g = state.guidance_for(task_id)
    hints = list(g.hints)  # full reveal, see the module docstring
    msgs = render_prompt(task, hints, g.schedule.placement)
    return _Spec(task, tuple(hints), tuple((m["role"], m["content"]) for m in msgs), state.version)


def _weight(state: HarnessState, task_id: str) -> float:
    s = state.sampling.get(task_id)
    return 0.0 if s is None or s.status != "active" else float(s.weight)


def _summary(groups: Sequence[tuple[GroupMetrics, float]]) -> Summary:
    live = [(m, w) for m, w in groups if w > 0]
    total = sum(w for _, w in live)

    def wmean(values: list[tuple[float | None, float]]) -> float | None:
        vals = [(v, w) for v, w in values if v is not None]
        tw = sum(w for _, w in vals)
        return None if tw <= 0 else sum(v * w for v, w in vals) / tw

    return Summary(
        n_groups=len(live), weight=total,
        mean=wmean([(m.mean, w) for m, w in live]),
        mean_std=wmean([(m.std, w) for m, w in live]),
        dead_share=wmean([(float(m.dead), w) for m, w in live]),
        band_share=wmean([(float(m.in_band), w) for m, w in live]),
        length_corr=wmean([(m.length_corr, w) for m, w in live]),
        audit_mean=wmean([(m.audit_mean, w) for m, w in live]),
        leak_hits=sum(m.leak_hits for m, _ in live),
        dead_weight=sum(w for m, w in live if m.dead),
        band_weight=sum(w for m, w in live if m.in_band),
    )


async def _group_metrics(spec: _Spec, texts: list[str], judge: Judge, cfg: DetectorConfig, step: int) -> GroupMetrics:
    task = spec.task
    scores, audits = await asyncio.gather(judge.score(task.criteria, task.user_prompt, texts), judge.audit(task, texts))
    hint_texts = [h.text for h in spec.hints]
    records = [
        RolloutRecord(text=t, reward=s.score, verdicts={c: v.met for c, v in s.verdicts.items() if v.source != "skipped"},
                      audit=a, hinted=bool(hint_texts), hint_texts=hint_texts)
        for t, s, a in zip(texts, scores, audits)
    ]
    st = GroupStats.from_rollouts(task.id, step, records, criteria=task.criteria, harness_version=spec.version)
    # A hinted rollout that parrots a hint or reproduces the reference answer is credited by the hint,
    # not learnt; unhinted rollouts containing the reference are just correct, so they do not count.
    leaks = sum(
        1 for r in records
        if r.hinted and (hint_overlap(r.text, r.hint_texts) >= cfg.leak_overlap or hint_leaks_reference(r.text, task.reference_answer))
    )
    order = sorted(range(len(texts)), key=lambda i: st.rewards[i])
    examples = [texts[order[-1]][:EXAMPLE_CHARS], texts[order[0]][:EXAMPLE_CHARS]] if texts else []
    return GroupMetrics(
        task_id=task.id, harness_version=spec.version, n=st.n, rewards=st.rewards, lengths=st.lengths,
        audits=[r.audit for r in records], mean=st.mean, std=st.std, min=st.min, max=st.max,
        dead=st.std < cfg.eps, in_band=cfg.tau_lo < st.mean < cfg.tau_hi, length_corr=st.length_corr,
        audit_mean=st.audit_mean, leak_hits=leaks, pass_rates=st.pass_rates, hinted=st.hinted,
        max_repeat=st.max_repeat, examples=examples,
    )


async def ameasure_candidate(
    state: HarnessState,
    update: HarnessUpdate,
    endpoint: PolicyEndpoint,
    judge: Judge,
    *,
    k: int = 8,
    max_tokens: int = 48,
    temperature: float = 1.0,
    seed: int = 0,
    step: int = 0,
    detector_config: DetectorConfig | None = None,
) -> Measurement:
    """Async `measure_candidate` (the endpoint's blocking `sample` runs in a worker thread)."""
    if k < 2:
        raise ValueError(f"k must be >= 2 to measure a group's spread, got {k}")
    cfg = detector_config or DetectorConfig()
    candidate_state = apply(state, update, step=step)  # UpdateRejected propagates to the caller
    task_ids = update.task_ids
    sampling = update.interface == "sampling"

    control: dict[str, _Spec] = {}
    candidate: dict[str, _Spec] = {}
    weights: dict[str, dict[str, float]] = {}
    for tid in task_ids:
        new_variant = not state.has_task(tid)
        # A new variant has no control group of its own: its parent's group is the baseline.
        base_id = candidate_state.task(tid).parent_id if new_variant else tid
        control[tid] = _spec(state, base_id)
        candidate[tid] = _spec(candidate_state, tid)
        if sampling:
            weights[tid] = {"control": 0.0 if new_variant else _weight(state, tid), "candidate": _weight(candidate_state, tid)}
        else:
            weights[tid] = {"control": 1.0, "candidate": 1.0}

    # One sample call per side, unique prompts only; the candidate side reuses control prompts.
    texts: dict[str, list[str]] = {}
    for side in (control, candidate):
        todo: dict[str, _Spec] = {}
        for spec in side.values():
            if spec.prompt_key not in texts:
                todo.setdefault(spec.prompt_key, spec)
        if not todo:
            continue
        batch = [[{"role": r, "content": c} for r, c in spec.messages] for spec in todo.values()]
        out = await asyncio.to_thread(endpoint.sample, batch, n=k, max_tokens=max_tokens, temperature=temperature, seed=seed)
        if len(out) != len(batch) or any(len(o) != k for o in out):
            raise RuntimeError(f"endpoint returned {[len(o) for o in out]} completions for {len(batch)} prompts x n={k}")
        texts.update(zip(todo, out))

    failures_before = judge.stats.unmet_after_retries
    sides = [(tid, name, spec) for tid in task_ids for name, spec in (("control", control[tid]), ("candidate", candidate[tid]))]
    metrics = await asyncio.gather(*(_group_metrics(spec, texts[spec.prompt_key], judge, cfg, step) for _, _, spec in sides))
    per_task: dict[str, dict[str, GroupMetrics]] = {tid: {} for tid in task_ids}
    for (tid, name, _), m in zip(sides, metrics):
        per_task[tid][name] = m

    summaries = {
        name: _summary([(per_task[t][name], weights[t][name]) for t in task_ids]) for name in ("control", "candidate")
    }
    c, d = summaries["control"], summaries["candidate"]
    deltas: dict[str, float | None] = {}
    for field in ("mean", "mean_std", "dead_share", "band_share", "length_corr", "audit_mean", "leak_hits",
                  "dead_weight", "band_weight"):
        a, b = getattr(c, field), getattr(d, field)
        deltas[field] = None if a is None or b is None else float(b - a)
    return Measurement(
        interface=update.interface, task_ids=task_ids, candidate_version=candidate_state.version, k=k, seed=seed,
        step=step, per_task=per_task, weights=weights,
        paired={t: control[t].prompt_key == candidate[t].prompt_key for t in task_ids},
        control=c, candidate=d, deltas=deltas,
        judge_failures=judge.stats.unmet_after_retries - failures_before,
    )


def measure_candidate(
    state: HarnessState,
    update: HarnessUpdate,
    endpoint: PolicyEndpoint,
    judge: Judge,
    *,
    k: int = 8,
    max_tokens: int = 48,
    temperature: float = 1.0,
    seed: int = 0,
    step: int = 0,
    detector_config: DetectorConfig | None = None,
) -> Measurement:
    """Measure `update` on the frozen policy: control vs candidate (see the module docstring).

    Raises `harness.ops.UpdateRejected` for an invalid update and `RuntimeError` inside a running
    event loop (await `ameasure_candidate` there).
    """
    return run_sync(ameasure_candidate(
        state, update, endpoint, judge, k=k, max_tokens=max_tokens, temperature=temperature, seed=seed, step=step,
        detector_config=detector_config,
    ))
