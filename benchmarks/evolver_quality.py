"""Benchmark: how well the evolver finds, routes and repairs known reward defects, and what it costs.

The yardstick of issue 10's mechanics (cross-task repairs, the fallback, the critic). A frozen policy
(SmolLM2-135M-Instruct by default) answers copies of bundled `rubric-mix-lite` tasks in which a known
defect was planted:

    blind       a criterion every answer meets (word_count >= 1)           expected: blind_criterion -> criteria
    stuffing    a keyword criterion the policy stuffs (gaming overlay)     expected: stuffing -> criteria
    impossible  the only positive criterion asks for a made-up term        expected: collapse_low -> guidance
    saturated   the only positive criterion is met by any answer           expected: collapse_high -> sampling
    leak        a hint that gives the reference answer (copied)            expected: guidance_leak -> guidance
    control     an unchanged healthy task fed a false event                expected: no harness change

plus known-bad candidates fed straight to the critic (two loosened criteria, two leaking hints).

Per case: (1) detection: the real `Detector` observes W groups of k rollouts sampled from the policy and
scored by the real judge (detection rate = the planted event type fired on the task); (2) one evolver
round: the real graph (`graphs.runner.run_in_process`, rule brains, a SQLite checkpointer) on the
detected event, or on the planted event when the detector missed it. Cases run one after another per arm
on one harness store and one memory per arm, so a later case can use what memory learnt from an earlier
one. Arms: `rules` (rule brains, memory, critic), `no-memory`, `no-critic`.

Reported per defect type and arm: detection rate, correct interface (the attribution's), repair accepted,
fallback committed and task out of training, probe rollouts and seconds per decision; for controls the
"accepted" column counts false accepts; for bad candidates, accepts (all false).

The gaming overlay: a frozen base policy does not stuff keywords or parrot hints (it learns that in
training), so for the `stuffing` and `leak` tasks only, every second rollout is rewritten the way a policy
that learnt the hack would write it: the keyword five times appended, or the hints copied verbatim while
they give the answer away (a reworded hint that no longer does is answered normally). All other tasks see
the plain policy.

Probe cost is counted by a wrapper endpoint: every rollout the evolver asks for counts. Generation is
deterministic for a given request (same prompts, n, seed), so identical requests of a later arm are served
from a cache and charged the seconds they took when generated: "s / decision" is what each arm would cost
alone.

    cd <repo> && OMP_NUM_THREADS=1 .venv/bin/python benchmarks/evolver_quality.py --label before
    # render (or re-render) the report from one or two result files:
    .venv/bin/python benchmarks/evolver_quality.py --render benchmarks/results/evolver_quality_before.json \\
        benchmarks/results/evolver_quality_after.json --report benchmarks/EVOLVER.md

Porting to a changed evolver: only the "API adapter" block below names evolver internals.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere: repo root on the path

from harness.checks import ContainsAny, MaxRepeatedNgram, WordCount, words  # noqa: E402
from harness.data import load_suite  # noqa: E402
from harness.detector import Detector, DetectorConfig, GroupStats, RolloutRecord  # noqa: E402
from harness.guidance import render_prompt, visible_hints  # noqa: E402
from harness.ops import validate as validate_update  # noqa: E402
from harness.store import HarnessStore  # noqa: E402
from harness.types import (  # noqa: E402
    AddHint,
    Criterion,
    EditCriterion,
    EditHint,
    FailureEvent,
    Guidance,
    HarnessState,
    HarnessUpdate,
    Hint,
    Schedule,
    Task,
)
from tools.judge import Judge, run_sync  # noqa: E402

# == API adapter: the only evolver names this benchmark depends on (edit here when they move) ==========
from agents import critic as critic_rules  # noqa: E402
from agents.context import EvolverContext  # noqa: E402
from graphs.runner import run_in_process  # noqa: E402
from graphs.services import Services, register_services, unregister_services  # noqa: E402
from tools.measure import ProbeCache, latest_rollouts, measure_candidate  # noqa: E402


def make_context(arm: Arm, *, services_key: str, run_dir: Path, k: int, max_tokens: int, max_revisions: int,
                 seed: int, demo: Any) -> EvolverContext:
    """The evolver's run-time context for one arm (rule brains; the arm's ablation switches; the demo
    config's (`demo`, a `trainer.config.RunConfig`) other critic settings)."""
    return EvolverContext(services_key=services_key, run_dir=str(run_dir), sample_k=k,
                          sample_k_max=max(k, demo.harness.sample_k_max), max_tokens=max_tokens,
                          max_revisions=max_revisions, seed=seed, memory=arm.memory, critic=arm.critic)


def make_services(store: HarnessStore, endpoint: Any, judge: Judge, memory: Any, detector_config: DetectorConfig,
                  *, k: int, max_tokens: int, seed: int) -> Services:
    return Services(store=store, endpoint=endpoint, judge=judge, memory=memory, detector_config=detector_config,
                    sample_k=k, max_tokens=max_tokens, seed=seed)


def start_round(svc: Services) -> None:
    """Each case (and each known-bad candidate) is one evolver round: its probe rollouts are not shared with
    the other cases (they all run at the same step, which the probe cache would take for one round)."""
    svc.probe_cache = ProbeCache()


def run_round(inp: dict[str, Any], ctx: EvolverContext, db: Path, thread_id: str) -> dict[str, Any]:
    """One evolver round in process; returns the graph output (accepted, reports, harness_version)."""
    return run_in_process(inp, ctx, db, thread_id)


def record_group(memory: Any, stats: GroupStats, records: list[RolloutRecord], *, domain: str, version: int) -> None:
    """Write one detector group to memory the way the trainer's reward function does."""
    order = sorted(range(len(records)), key=lambda i: records[i].reward)
    memory.add_group(stats, best=records[order[-1]], worst=records[order[0]], harness_version=version, domain=domain,
                     group_index=0, texts=[r.text for r in records])


def critic_verdict(state: HarnessState, event: FailureEvent, update: HarnessUpdate, ctx: EvolverContext,
                   svc: Services, step: int) -> dict[str, Any]:
    """The graph's validate + critique nodes for one candidate (mirror graphs/nodes.py `critique`):
    accepted (bool), invalid, reasons, numbers."""
    errors = validate_update(state, update)
    if errors:
        crit = critic_rules.invalid_critique(event, errors)
    elif not ctx.critic:
        crit = critic_rules.unmeasured_critique(event)
    else:
        prior = (latest_rollouts(svc.memory, update.task_ids)
                 if svc.memory is not None and update.interface == "criteria" else None)
        m = measure_candidate(state, update, svc.endpoint, svc.judge, sample_k=ctx.sample_k,
                              sample_k_max=ctx.sample_k_max, alpha=ctx.critic_alpha,
                              rule=critic_rules.stop_rule(event, update, ctx), prior_rollouts=prior,
                              probe_cache=svc.probe_cache, max_tokens=ctx.max_tokens, temperature=ctx.temperature,
                              seed=ctx.seed, step=step, detector_config=svc.detector_config)
        crit = critic_rules.judge_measurement(event, update, m, ctx)
    return {"accepted": bool(crit.measured_ok and not crit.veto and not crit.invalid), "invalid": crit.invalid,
            "reasons": crit.reasons, "numbers": crit.numbers}
# == end of the API adapter ==============================================================================


DEMO_CONFIG = ROOT / "configs" / "cpu-demo.yaml"  # the evolver settings the benchmark uses by default
STEP = 10  # training step the round pretends to run at; detection visits are the W steps up to it
DETECT_SEED = 1000
DEFECTS = ("blind", "stuffing", "impossible", "saturated", "leak", "control")
EXPECTED: dict[str, tuple[str | None, str | None]] = {  # defect -> (failure type, interface)
    "blind": ("blind_criterion", "criteria"), "stuffing": ("stuffing", "criteria"),
    "impossible": ("collapse_low", "guidance"), "saturated": ("collapse_high", "sampling"),
    "leak": ("guidance_leak", "guidance"), "control": (None, None),
}
# Bundled train tasks each defect is planted into, in order (cases per type take the first n).
SOURCES: dict[str, tuple[str, ...]] = {
    "blind": ("sci-0023", "med-0053", "sci-0018"),
    "stuffing": ("med-0016", "sci-0005", "med-0040"),
    "impossible": ("sci-0010", "med-0010", "sci-0030"),
    "saturated": ("med-0046", "sci-0020", "med-0028"),
    "leak": ("med-0034", "sci-0015", "sci-0025"),
    "control": ("med-0063", "sci-0008", "med-0003"),
}
STUFF_WORDS = ("hydration", "chlorophyll", "antioxidant")
MADE_UP_TERMS = ("zorbifex", "quandrelite", "vintoplasm")
# What the detector might wrongly emit on a healthy task (from one noisy group); the right answer is no change.
FALSE_EVENTS = ("stuffing", "blind_criterion", "collapse_low")
STUFF_REPEAT = 5


@dataclass(frozen=True)
class Arm:
    name: str
    memory: bool
    critic: bool


ARMS: dict[str, Arm] = {a.name: a for a in (Arm("rules", True, True), Arm("no-memory", False, True),
                                            Arm("no-critic", True, False))}


# -- planted cases ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    case_id: str
    defect: str
    source_id: str
    task: Task
    event_type: str  # planted (or, for controls, false) event type
    criterion_id: str | None = None
    guidance: Guidance | None = None
    stuff_word: str | None = None  # gaming overlay: this task's rollouts stuff the keyword
    parrot: bool = False  # gaming overlay: this task's rollouts repeat the hint


def _crit(cid: str, text: str, weight: float, kind: str, check: Any) -> Criterion:
    return Criterion(id=cid, text=text, weight=weight, kind=kind, check=check, origin="benchmark:planted")  # type: ignore[arg-type]


def _copy(task: Task, tid: str, **update: Any) -> Task:
    return task.model_copy(update={"id": tid, "meta": {**task.meta, "planted_from": task.id}, **update})


def plant(defect: str, i: int, src: Task) -> Case:
    """Copy `src` as `evq-<defect>-<i>` with the defect planted (see the module docstring)."""
    tid = f"evq-{defect}-{i + 1}"
    pitfalls = [c for c in src.criteria if c.weight < 0]
    if defect == "blind":
        blind = _crit("evq_blind", "Gives an answer", 3.0, "important", WordCount(min=1))
        return Case(tid, defect, src.id, _copy(src, tid, criteria=[*src.criteria, blind]), "blind_criterion", "evq_blind")
    if defect == "stuffing":
        word = STUFF_WORDS[i % len(STUFF_WORDS)]
        kw = _crit("evq_kw", f"Mentions {word}", 5.0, "essential", ContainsAny(phrases=[word]))
        audit = [_crit("evq_a_norepeat", "No word more than 3 times", 5.0, "essential", MaxRepeatedNgram(n=1, max_count=3)),
                 *[a.model_copy(update={"weight": 3.0, "kind": "important"}) for a in src.audit_criteria[:1]]]
        return Case(tid, defect, src.id, _copy(src, tid, criteria=[*src.criteria, kw], audit_criteria=audit), "stuffing",
                    "evq_kw", stuff_word=word)
    if defect == "impossible":
        term = MADE_UP_TERMS[i % len(MADE_UP_TERMS)]
        need = _crit("evq_term", f"Uses the term '{term}'", 5.0, "essential", ContainsAny(phrases=[term]))
        return Case(tid, defect, src.id, _copy(src, tid, criteria=[need, *pitfalls]), "collapse_low")
    if defect == "saturated":
        easy = _crit("evq_easy", "Answers", 5.0, "essential", WordCount(min=1))
        return Case(tid, defect, src.id, _copy(src, tid, criteria=[easy, *pitfalls]), "collapse_high")
    if defect == "leak":
        if not src.reference_answer:
            raise ValueError(f"leak case needs a source task with a reference answer; {src.id} has none")
        g = Guidance(hints=[Hint(id="evq_leaky", text=src.reference_answer, source="benchmark:planted")],
                     schedule=Schedule(mode="constant", hinted_share=1.0))
        return Case(tid, defect, src.id, _copy(src, tid), "guidance_leak", guidance=g, parrot=True)
    if defect == "control":
        etype = FALSE_EVENTS[i % len(FALSE_EVENTS)]
        positive = [c.id for c in src.criteria if c.weight > 0 and c.check is not None]
        cid = positive[0] if etype == "stuffing" else positive[-1] if etype == "blind_criterion" else None
        return Case(tid, defect, src.id, _copy(src, tid), etype, cid)
    raise ValueError(f"unknown defect {defect!r}; known: {DEFECTS}")


def build_cases(suite: dict[str, Task], per_type: int, defects: Sequence[str]) -> list[Case]:
    cases = []
    for d in defects:
        for i, sid in enumerate(SOURCES[d][:per_type]):
            if sid not in suite:
                raise KeyError(f"benchmark source task {sid!r} (defect {d}) is not in the suite")
            cases.append(plant(d, i, suite[sid]))
    return cases


def initial_state(cases: Sequence[Case]) -> HarnessState:
    """Version 0 with every planted task; the leaking hints are put in directly (they got there somehow:
    the point is to see whether the evolver takes them out), bypassing the ops' leak guard."""
    state = HarnessState.from_tasks([c.task for c in cases])
    return state.model_copy(update={"guidance": {c.task.id: c.guidance for c in cases if c.guidance is not None}})


def known_bad(cases: Sequence[Case]) -> list[tuple[str, Case, HarnessUpdate]]:
    """Candidates a correct critic rejects: loosened criteria and leaking hints (kind, case, update)."""
    out: list[tuple[str, Case, HarnessUpdate]] = []
    by = {d: [c for c in cases if c.defect == d] for d in DEFECTS}
    if by["impossible"]:
        c = by["impossible"][0]  # "the" instead of the required term: variance without content
        out.append(("loosened criterion", c, HarnessUpdate(interface="criteria", ops=[EditCriterion(
            task_id=c.task.id, criterion_id="evq_term", check=ContainsAny(phrases=["the"]))], rationale="bad: loosened")))
    if by["stuffing"]:
        c = by["stuffing"][0]  # the stuffed keyword or any "the": stuffers keep their credit
        out.append(("loosened criterion", c, HarnessUpdate(interface="criteria", ops=[EditCriterion(
            task_id=c.task.id, criterion_id="evq_kw", check=ContainsAny(phrases=[c.stuff_word or "", "the"]))],
            rationale="bad: loosened")))
    if by["impossible"] and by["impossible"][-1].task.reference_answer:
        c = by["impossible"][-1]  # the reference answer as a hint
        out.append(("leaking hint", c, HarnessUpdate(interface="guidance", ops=[AddHint(
            task_id=c.task.id, hint=Hint(id="evq_bad_hint", text=f"The answer is: {c.task.reference_answer}"))],
            rationale="bad: leaks the reference")))
    if by["leak"]:
        c = by["leak"][-1]  # a reworded hint that still hands over the answer (too few words in a row for the guard)
        ref = (c.task.reference_answer or "").rstrip(".")
        words = ref.split()
        text = " ".join([*words[:2], "(really)", *words[2:]]) + "." if len(words) > 2 else f"Say: {ref}, exactly."
        out.append(("leaking hint", c, HarnessUpdate(interface="guidance", ops=[EditHint(
            task_id=c.task.id, hint_id="evq_leaky", text=text)], rationale="bad: still leaks")))
    return out


# -- the policy: counting/caching endpoint and the gaming overlay -----------------------------------------
def gives_answer(hints: Sequence[str], reference: str | None) -> bool:
    """The hints hand over the answer: they hold at least half of the reference answer's distinct words."""
    ref = {w.casefold() for w in words(reference or "")}
    shown = {w.casefold() for h in hints for w in words(h)}
    return bool(ref) and 2 * len(ref & shown) >= len(ref)


class GamingOverlay:
    """The frozen policy, with every second rollout of the gaming tasks rewritten as a hacking policy would:
    stuffing tasks get the keyword appended STUFF_REPEAT times; leak tasks copy the hints verbatim when the
    hints give the answer away (`gives_answer`), and answer normally under a hint that does not."""

    def __init__(self, inner: Any, cases: Sequence[Case]):
        self.inner = inner
        self.name = f"{inner.name}+gaming"
        self._stuff = {c.task.user_prompt: c.stuff_word for c in cases if c.stuff_word}
        self._parrot = {c.task.user_prompt: c.task.reference_answer for c in cases if c.parrot}

    def sample(self, messages_batch: list[list[dict]], n: int = 1, max_tokens: int = 64, temperature: float = 1.0,
               seed: int | None = None) -> list[list[str]]:
        out = self.inner.sample(messages_batch, n=n, max_tokens=max_tokens, temperature=temperature, seed=seed)
        return [self._game(conv[-1]["content"], texts) for conv, texts in zip(messages_batch, out)]

    def _game(self, user: str, texts: list[str]) -> list[str]:
        word = next((w for p, w in self._stuff.items() if user.startswith(p)), None)
        hints = [line[len("Hint: "):] for line in user.split("\n") if line.startswith("Hint: ")]
        parrot = any(user.startswith(p) and gives_answer(hints, ref) for p, ref in self._parrot.items())
        out = []
        for i, t in enumerate(texts):
            if i % 2 == 0 and word:
                t = f"{t.rstrip()} {' '.join([word] * STUFF_REPEAT)}"
            elif i % 2 == 0 and parrot and hints:
                t = " ".join(hints)
            out.append(t)
        return out


@dataclass
class ProbeCounter:
    requested: int = 0  # rollouts asked for (the evolver's probe cost)
    generated: int = 0  # rollouts actually generated (not served from the cache)
    calls: int = 0
    gen_seconds: float = 0.0
    charged_seconds: float = 0.0  # generation seconds of cache hits, charged to whoever asked again

    def snapshot(self) -> dict[str, float]:
        return {"requested": self.requested, "generated": self.generated, "calls": self.calls,
                "gen_seconds": self.gen_seconds, "charged_seconds": self.charged_seconds}


class ProbeEndpoint:
    """Counts every rollout requested and memoises identical requests (generation is seeded: same request,
    same texts), charging a cache hit the seconds its first generation took."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = inner.name
        self.count = ProbeCounter()
        self._cache: dict[str, tuple[list[list[str]], float]] = {}
        self._lock = threading.Lock()

    def sample(self, messages_batch: list[list[dict]], n: int = 1, max_tokens: int = 64, temperature: float = 1.0,
               seed: int | None = None) -> list[list[str]]:
        key = json.dumps([messages_batch, n, max_tokens, temperature, seed], sort_keys=True)
        with self._lock:
            self.count.calls += 1
            self.count.requested += n * len(messages_batch)
            if key in self._cache:
                texts, secs = self._cache[key]
                self.count.charged_seconds += secs
                return [list(t) for t in texts]
            t0 = time.perf_counter()
            texts = self.inner.sample(messages_batch, n=n, max_tokens=max_tokens, temperature=temperature, seed=seed)
            secs = time.perf_counter() - t0
            self.count.generated += n * len(messages_batch)
            self.count.gen_seconds += secs
            self._cache[key] = ([list(t) for t in texts], secs)
            return texts


# -- detection --------------------------------------------------------------------------------------------
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


# -- one arm ------------------------------------------------------------------------------------------------
def _in_training(state: HarnessState, task_id: str) -> bool:
    """The task (or an active variant of it) is still drawn by the sampler."""
    active = set(state.active_task_ids())
    return task_id in active or any(v.parent_id == task_id and vid in active for vid, v in state.variants.items())


def _touched(before: HarnessState, after: HarnessState) -> list[str]:
    """Tasks whose sampling, guidance or criteria differ between two versions (new variants by parent)."""
    out = set()
    for tid in set(before.sampling) | set(after.sampling):
        if before.sampling.get(tid) != after.sampling.get(tid) and tid in before.sampling:
            out.add(tid)
    for tid in set(before.guidance) | set(after.guidance):
        if before.guidance.get(tid) != after.guidance.get(tid):
            out.add(tid)
    for tid in set(before.criteria_overrides) | set(after.criteria_overrides):
        if before.criteria_overrides.get(tid) != after.criteria_overrides.get(tid):
            out.add(tid)
    for vid, v in after.variants.items():
        if vid not in before.variants:
            out.add(v.parent_id or vid)
    return sorted(out)


def run_arm(arm: Arm, cases: Sequence[Case], events: dict[str, FailureEvent], detection: Detection, base: HarnessState,
            bad: Sequence[tuple[str, Case, HarnessUpdate]], endpoint: ProbeEndpoint, judge: Judge, cfg: DetectorConfig,
            args: argparse.Namespace, out_dir: Path) -> tuple[list[dict], list[dict]]:
    """One evolver round per case, in order, on this arm's own store and memory; then the known-bad candidates
    straight to the critic (on the initial harness, with the arm's services)."""
    run_dir = out_dir / arm.name
    if run_dir.exists():
        raise FileExistsError(f"{run_dir} exists: pass a fresh --out (runs are not resumed)")
    store = HarnessStore(run_dir / "harness")
    store.init(base)
    memory = None
    if arm.memory:
        from memory.store import TrainingMemory

        memory = TrainingMemory.persistent(run_dir / "memory", embedding=args.memory_embedding)
        for c in cases:  # the training groups the detector saw, as the trainer records them
            for v in detection.visits[c.task.id]:
                record_group(memory, v.stats, v.records, domain=c.task.domain, version=base.version)
    key = f"evolver-quality-{arm.name}-{os.getpid()}"
    svc = make_services(store, endpoint, judge, memory, cfg, k=args.k, max_tokens=args.max_tokens, seed=args.seed)
    register_services(key, svc)
    ctx = make_context(arm, services_key=key, run_dir=run_dir, k=args.k, max_tokens=args.max_tokens,
                       max_revisions=args.max_revisions, seed=args.seed, demo=args.demo)
    rows = []
    try:
        for c in cases:
            ev = events[c.case_id]
            before = store.latest()
            start_round(svc)
            probes0 = endpoint.count.snapshot()
            t0 = time.perf_counter()
            out = run_round({"events": [ev.model_dump(mode="json")], "harness_version": before.version, "step": STEP},
                            ctx, run_dir / "evolver.sqlite", f"{arm.name}-{c.case_id}")
            wall = time.perf_counter() - t0
            probes1 = endpoint.count.snapshot()
            after = store.latest()
            (report,) = [r for r in out["reports"] if r["event_id"] == ev.id]
            charged = probes1["charged_seconds"] - probes0["charged_seconds"]
            touched = _touched(before, after)
            rows.append({
                "arm": arm.name, "case": c.case_id, "defect": c.defect, "task_id": c.task.id, "event_id": ev.id,
                "event_type": ev.type, "decision": report["decision"], "interface": report["interface"],
                "expected_interface": EXPECTED[c.defect][1],
                "templates": [a["template"] for a in report["attempts"]], "attempts": len(report["attempts"]),
                "accepted": report["decision"] == "accepted", "fallback": report["decision"] == "fallback",
                "harness_changed": after.version != before.version, "touched_tasks": touched,
                "other_tasks_touched": [t for t in touched if t != c.task.id],
                "in_training_after": _in_training(after, c.task.id),
                "weight_after": after.sampling[c.task.id].weight if c.task.id in after.sampling else None,
                "probe_rollouts": probes1["requested"] - probes0["requested"],
                "generated_rollouts": probes1["generated"] - probes0["generated"],
                "seconds": round(wall + charged, 3), "wall_seconds": round(wall, 3),
                "last_reasons": report["attempts"][-1]["critique"]["reasons"] if report["attempts"] else [report.get("note")],
                "numbers": [a["critique"]["numbers"] for a in report["attempts"]],
            })
            print(f"  [{arm.name}] {c.case_id}: {ev.type} -> {report['interface']} {rows[-1]['templates']} "
                  f"=> {report['decision']} ({rows[-1]['probe_rollouts']} rollouts, {rows[-1]['seconds']:.1f}s)", flush=True)
        bad_rows = run_bad(arm, bad, events, base, svc, ctx)
    finally:
        unregister_services(key)
        if memory is not None:
            memory.close()
    return rows, bad_rows


def run_bad(arm: Arm, bad: Sequence[tuple[str, Case, HarnessUpdate]], events: dict[str, FailureEvent], base: HarnessState,
            svc: Services, ctx: EvolverContext) -> list[dict]:
    endpoint = svc.endpoint
    rows = []
    for kind, c, update in bad:
        ev = events[c.case_id]
        start_round(svc)
        probes0 = endpoint.count.snapshot()
        t0 = time.perf_counter()
        v = critic_verdict(base, ev, update.model_copy(update={"event_id": ev.id}), ctx, svc, STEP)
        wall = time.perf_counter() - t0
        probes1 = endpoint.count.snapshot()
        rows.append({"arm": arm.name, "kind": kind, "case": c.case_id, "event_type": ev.type, "accepted": v["accepted"],
                     "invalid": v["invalid"], "reasons": v["reasons"], "numbers": v["numbers"],
                     "probe_rollouts": probes1["requested"] - probes0["requested"],
                     "seconds": round(wall + probes1["charged_seconds"] - probes0["charged_seconds"], 3)})
        print(f"  [{arm.name}] bad {kind} on {c.case_id}: accepted={v['accepted']} invalid={v['invalid']}", flush=True)
    return rows


# -- summary --------------------------------------------------------------------------------------------
def summarise(cases: Sequence[Case], detection_rows: list[dict], rows: list[dict], bad_rows: list[dict],
              arms: Sequence[str]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for d in DEFECTS:
        det = [r for r in detection_rows if r["defect"] == d]
        if not det:
            continue
        entry: dict[str, Any] = {"cases": len(det), "detected": sum(r["detected"] for r in det),
                                 "other_events": sum(len(r["other_events"]) for r in det), "arms": {}}
        for a in arms:
            rs = [r for r in rows if r["defect"] == d and r["arm"] == a]
            n = len(rs)
            entry["arms"][a] = {
                "n": n,
                "correct_interface": None if d == "control" else sum(r["interface"] == r["expected_interface"] for r in rs),
                "accepted": sum(r["accepted"] for r in rs),
                "fallback": sum(r["fallback"] for r in rs),
                "harness_changed": sum(r["harness_changed"] for r in rs),
                "out_of_training": sum(not r["in_training_after"] for r in rs),
                "other_tasks_touched": sum(len(r["other_tasks_touched"]) for r in rs),
                "probe_rollouts_per_decision": round(sum(r["probe_rollouts"] for r in rs) / n, 2) if n else None,
                "seconds_per_decision": round(sum(r["seconds"] for r in rs) / n, 2) if n else None,
            }
        per[d] = entry
    bad: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in bad_rows}):
        bad[kind] = {a: {"n": len(rs), "accepted": sum(r["accepted"] for r in rs),
                         "invalid": sum(r["invalid"] for r in rs),
                         "probe_rollouts_per_decision": round(sum(r["probe_rollouts"] for r in rs) / len(rs), 2) if rs else None,
                         "seconds_per_decision": round(sum(r["seconds"] for r in rs) / len(rs), 2) if rs else None}
                     for a in arms for rs in [[r for r in bad_rows if r["kind"] == kind and r["arm"] == a]]}
    return {"per_defect": per, "bad_candidates": bad}


def _loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "n/a"


# -- report -------------------------------------------------------------------------------------------------
PENDING = "to run after the mechanics changes land"
# Everything below this line in an existing report is hand-written and survives a re-render.
NOTES_MARKER = "<!-- hand-written notes below: kept when the report is re-rendered -->"


def _frac(a: int | None, n: int) -> str:
    return "–" if a is None or n == 0 else f"{a}/{n}"


def _cell(before: str, after: str | None) -> str:
    return f"{before} → {after if after is not None else '…'}"


def _show_run(r: dict[str, Any] | None, key: str) -> str:
    if r is None:
        return PENDING
    v = r[key]
    if key == "runtime_s":
        return f"{v:.0f} s ({v / 60:.1f} min)"
    if key == "command":
        return f"`{v}`"
    if key == "settings":
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def _arm_value(s: dict[str, Any] | None, d: str, arm: str, key: str) -> Any:
    if s is None or d not in s["per_defect"] or arm not in s["per_defect"][d]["arms"]:
        return None
    return s["per_defect"][d]["arms"][arm][key]


def _arm_cell(b: dict[str, Any], a: dict[str, Any] | None, d: str, arm: str, key: str, frac: bool = True) -> str:
    """`before → after` of one summary number (`k/n` when `frac`)."""
    def show(s: dict[str, Any]) -> str:
        v = _arm_value(s, d, arm, key)
        if frac:
            return _frac(v, _arm_value(s, d, arm, "n") or 0)
        return "–" if v is None else str(v)
    return _cell(show(b), None if a is None else show(a))


def render_markdown(before: dict[str, Any], after: dict[str, Any] | None) -> str:
    """EVOLVER.md from the before (and, once run, after) result files."""
    b, a = before["summary"], (after or {}).get("summary")
    lines = [
        "# Evolver quality benchmark",
        "",
        "How well one evolver round finds, routes and repairs known reward defects planted in copies of bundled",
        "`rubric-mix-lite` tasks, what it costs, and how often it changes things it should leave alone. The frozen",
        f"policy is `{before['settings']['model']}`; everything else (detector, judge, graph, rule brains, critic, store,",
        "Chroma memory) is the real code. Method, cases and the gaming overlay: the docstring of",
        "`benchmarks/evolver_quality.py`. This is the yardstick of issue 10 points 2-4 (cross-task repairs, the",
        "fallback, the critic): each cell reads **before → after** those changes.",
        "",
        "## Runs",
        "",
        "| | before | after |",
        "|---|---|---|",
    ]
    for label, key in (("command", "command"), ("runtime", "runtime_s"), ("load before (/proc/loadavg)", "loadavg_before"),
                       ("load after", "loadavg_after"), ("machine", "machine"), ("settings", "settings")):
        lines.append(f"| {label} | {_show_run(before, key)} | {_show_run(after, key)} |")
    lines += [
        "",
        "## Detection (the real detector on W groups of k rollouts per task)",
        "",
        "| defect | planted event | detected | other events on the task |",
        "|---|---|---|---|",
    ]
    for d, e in b["per_defect"].items():
        ea = a["per_defect"].get(d) if a else None
        planted = EXPECTED[d][0] or "none (false event fed)"
        det_b = _frac(e["detected"], e["cases"]) if d != "control" else "–"
        det_a = None if ea is None else _frac(ea["detected"], ea["cases"]) if d != "control" else "–"
        lines.append(f"| {d} | {planted} | {_cell(det_b, det_a)} "
                     f"| {_cell(str(e['other_events']), str(ea['other_events']) if ea else None)} |")
    lines += [
        "",
        "For `control` the other-events column counts false positives of the detector on healthy tasks.",
        "",
        "## One evolver round per case",
        "",
        "`interface ok`: the attribution chose the expected interface; `accepted`: a measured repair was committed",
        "(for `control`: a false accept); `fallback`: the safe sampling change was committed; `out of training`:",
        "after the round neither the task nor an active variant of it is drawn (weight 0 or retired); `others`:",
        "changes to other tasks made in the same round (batched repairs); probes are rollouts the critic asked for.",
        "",
        "| defect | arm | interface ok | accepted | fallback | out of training | others | probes / decision | s / decision |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    arms = before["settings"]["arms"].split(",")
    for d in b["per_defect"]:
        for arm in arms:
            cells = [_arm_cell(b, a, d, arm, "correct_interface"), _arm_cell(b, a, d, arm, "accepted"),
                     _arm_cell(b, a, d, arm, "fallback"), _arm_cell(b, a, d, arm, "out_of_training"),
                     _arm_cell(b, a, d, arm, "other_tasks_touched", False),
                     _arm_cell(b, a, d, arm, "probe_rollouts_per_decision", False),
                     _arm_cell(b, a, d, arm, "seconds_per_decision", False)]
            lines.append(f"| {d} | {arm} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Known-bad candidates fed to the critic",
        "",
        "Every accept here is a false accept. `invalid` = refused before measuring (e.g. the hint-leak guard).",
        "",
        "| candidate | arm | accepted | invalid | probes / decision | s / decision |",
        "|---|---|---|---|---|---|",
    ]
    for kind, per_arm in b["bad_candidates"].items():
        for arm, e in per_arm.items():
            ea = a["bad_candidates"].get(kind, {}).get(arm) if a else None
            lines.append(f"| {kind} | {arm} | {_cell(_frac(e['accepted'], e['n']), _frac(ea['accepted'], ea['n']) if ea else None)} "
                         f"| {_cell(_frac(e['invalid'], e['n']), _frac(ea['invalid'], ea['n']) if ea else None)} "
                         f"| {_cell(str(e['probe_rollouts_per_decision']), str(ea['probe_rollouts_per_decision']) if ea else None)} "
                         f"| {_cell(str(e['seconds_per_decision']), str(ea['seconds_per_decision']) if ea else None)} |")
    lines += ["", "## Per case (before)", "", "| arm | case | event | interface | templates tried | decision | probes | s |",
              "|---|---|---|---|---|---|---|---|"]
    for r in before["cases"]:
        lines.append(f"| {r['arm']} | {r['case']} | {r['event_type']} | {r['interface']} | {', '.join(r['templates']) or '–'} "
                     f"| {r['decision']} | {r['probe_rollouts']} | {r['seconds']:.1f} |")
    lines += ["", "After: " + (PENDING + "." if after is None else "see `benchmarks/results/evolver_quality_"
                                + after["label"] + ".json` for the same per-case rows."), ""]
    return "\n".join(lines)


def write_report(path: Path, text: str) -> None:
    """Write the generated report, keeping any hand-written text below NOTES_MARKER in an existing one."""
    kept = ""
    if path.is_file():
        old = path.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            kept = old[old.index(NOTES_MARKER):]
    path.write_text(text + ("\n" + kept if kept else f"\n{NOTES_MARKER}\n"), encoding="utf-8")


# -- main -------------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--label", default="before", help="result label: benchmarks/results/evolver_quality_<label>.json")
    p.add_argument("--model", default="smollm2", help="smollm2, tiny, or a model folder (the frozen policy)")
    p.add_argument("--suite", default=str(ROOT / "data" / "rubric-mix-lite"))
    p.add_argument("--cases-per-type", type=int, default=2)
    p.add_argument("--defects", default=",".join(DEFECTS))
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--k", type=int, default=None,
                   help="rollouts per group, detector visits and critic probes (default: the demo config's sample_k)")
    p.add_argument("--max-tokens", type=int, default=None, help="default: the demo config's max_completion_length")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--window", type=int, default=None, help="detector window W (default: the demo config's)")
    p.add_argument("--max-revisions", type=int, default=None, help="R (default: the demo config's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memory-embedding", default="minilm", choices=["minilm", "hash"])
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--quick", action="store_true", help="CI smoke: 1 case per type, k=2, 8 tokens, hash memory")
    p.add_argument("--out", default=None, help="run folders (default runs/evolver_quality/<label>-<time>)")
    p.add_argument("--json", default=None, help="result file (default benchmarks/results/evolver_quality_<label>.json)")
    p.add_argument("--report", default=None, help="also write the Markdown report here (e.g. benchmarks/EVOLVER.md)")
    p.add_argument("--render", nargs="+", default=None, metavar="JSON",
                   help="only render --report from a before (and an after) result file")
    args = p.parse_args(argv)
    if args.quick:
        args.cases_per_type, args.k, args.max_tokens, args.memory_embedding = 1, 2, 8, "hash"
    unknown = [a for a in args.arms.split(",") if a not in ARMS] + [d for d in args.defects.split(",") if d not in DEFECTS]
    if unknown:
        p.error(f"unknown arm/defect {unknown}; arms {list(ARMS)}, defects {list(DEFECTS)}")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.render:
        if not args.report:
            raise SystemExit("--render needs --report")
        docs = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.render]
        write_report(Path(args.report), render_markdown(docs[0], docs[1] if len(docs) > 1 else None))
        print(f"wrote {args.report}")
        return docs[0]

    load_before, t_start = _loadavg(), time.perf_counter()
    import torch

    from tools.local_endpoint import LocalEndpoint
    from trainer.config import load_config
    from trainer.models import resolve_model

    torch.set_num_threads(args.threads)
    model_dir = resolve_model(args.model)
    # Everything not set on the command line is what the CPU demo's evolver runs with.
    demo = args.demo = load_config(DEMO_CONFIG)
    args.k = demo.harness.sample_k if args.k is None else args.k
    args.max_tokens = demo.train.max_completion_length if args.max_tokens is None else args.max_tokens
    args.max_revisions = demo.harness.max_revisions if args.max_revisions is None else args.max_revisions
    cfg = DetectorConfig(**{**demo.harness.detector, **({} if args.window is None else {"window": args.window})})
    args.window = cfg.window
    suite = {t.id: t for t in load_suite(args.suite)}
    cases = build_cases(suite, args.cases_per_type, args.defects.split(","))
    base = initial_state(cases)
    endpoint = ProbeEndpoint(GamingOverlay(LocalEndpoint.from_path(model_dir), cases))
    judge = Judge(None)
    out_dir = Path(args.out or ROOT / "runs" / "evolver_quality" / f"{args.label}-{time.strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{len(cases)} cases, policy {model_dir.name}, k={args.k}, max_tokens={args.max_tokens}, W={args.window}, "
          f"R={args.max_revisions}; runs in {out_dir}", flush=True)

    detection = detect(base, cases, endpoint, judge, cfg, k=args.k, max_tokens=args.max_tokens, temperature=args.temperature)
    events: dict[str, FailureEvent] = {}
    detection_rows = []
    for c in cases:
        found = detection.events.get(c.task.id, [])
        ev = matching_event(c, found)
        events[c.case_id] = ev or planted_event(c, detection.visits[c.task.id])
        detection_rows.append({"case": c.case_id, "defect": c.defect, "task_id": c.task.id, "source": c.source_id,
                               "detected": ev is not None, "event_source": "detector" if ev else "planted",
                               "fed_event": events[c.case_id].type,
                               "other_events": [f"{e.type}:{e.criterion_id}" if e.criterion_id else e.type for e in found if e is not ev],
                               "group_means": [round(v.stats.mean, 3) for v in detection.visits[c.task.id]],
                               "group_stds": [round(v.stats.std, 3) for v in detection.visits[c.task.id]]})
        print(f"  detect {c.case_id}: detected={ev is not None} other={detection_rows[-1]['other_events']} "
              f"means={detection_rows[-1]['group_means']}", flush=True)

    arms = args.arms.split(",")
    bad = known_bad(cases)
    rows: list[dict] = []
    bad_rows: list[dict] = []
    for name in arms:
        arm_rows, arm_bad = run_arm(ARMS[name], cases, events, detection, base, bad, endpoint, judge, cfg, args, out_dir)
        rows += arm_rows
        bad_rows += arm_bad

    runtime = time.perf_counter() - t_start
    argv_list = list(sys.argv[1:] if argv is None else argv)
    result = {
        "label": args.label, "command": "benchmarks/evolver_quality.py " + shlex.join(argv_list),
        "runtime_s": round(runtime, 1), "loadavg_before": load_before, "loadavg_after": _loadavg(),
        "machine": f"{os.cpu_count()} CPUs, torch threads {args.threads}",
        "settings": {"model": model_dir.name, "cases_per_type": args.cases_per_type, "k": args.k,
                     "max_tokens": args.max_tokens, "temperature": args.temperature, "window": args.window,
                     "max_revisions": args.max_revisions, "seed": args.seed, "memory_embedding": args.memory_embedding,
                     "arms": ",".join(arms)},
        "detection": {"rows": detection_rows, "seconds": round(detection.seconds, 1), "rollouts": detection.rollouts},
        "probes": endpoint.count.snapshot(),
        "summary": summarise(cases, detection_rows, rows, bad_rows, arms),
        "cases": rows, "bad_candidates": bad_rows,
    }
    json_path = Path(args.json or ROOT / "benchmarks" / "results" / f"evolver_quality_{args.label}.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    if args.report:
        write_report(Path(args.report), render_markdown(result, None))
    print(f"done in {runtime:.0f}s; wrote {json_path}" + (f" and {args.report}" if args.report else ""), flush=True)
    return result


if __name__ == "__main__":
    main()
