"""Benchmark: how well the evolver finds, routes and repairs planted reward defects, and whether the repairs hold.

The yardstick of issue 10's mechanics (cross-task repairs, the fallback, the critic) and of issue 19's (a critic
that screens, training that confirms). A frozen policy (SmolLM2-135M-Instruct by default) answers copies of
bundled `rubric-mix-lite` tasks in which a known defect was planted (4 source tasks per defect, `SOURCES`):

    blind            a criterion every answer meets (word_count >= 1)        expected: blind_criterion -> criteria
    stuffing         a keyword criterion the policy stuffs (gaming overlay)  expected: stuffing -> criteria
    impossible       the only positive criterion asks for a made-up term     expected: collapse_low -> guidance
    saturated        the only positive criterion is met by any answer        expected: collapse_high -> sampling
    leak             a hint that gives the reference answer (copied)         expected: guidance_leak -> guidance
    flat             two equal criteria, one any answer meets, one none does expected: flat -> criteria
    spurious_length  a criterion crediting >= 60 words (gaming overlay pads;
                     the hidden audit fails padded answers)                 expected: spurious_length -> criteria
    spurious_audit   a criterion crediting a claim of peer-reviewed evidence,
                     weighted above the task's own criteria (gaming overlay
                     answers a content-free citation; the audit fails it)    expected: spurious_audit -> criteria
    control          an unchanged healthy task fed a false event (false on    expected: no harness change
                     its own detection groups: `evq_detect.false_event_case`)

plus known-bad candidates fed straight to the critic (three loosened criteria, two leaking hints, more weight on
the length criterion, less weight on the content beside the citation cue). These are the detector's failure types
that a copied task can carry.

Per case: (1) detection: the real `Detector` observes W groups of k rollouts sampled from the policy and
scored by the real judge (detection rate = the planted event type fired on the task); (2) an evolver round: the
real graph (`graphs.runner.run_in_process`, rule brains, a SQLite checkpointer) on the detected event, or on
the planted event when the detector missed it; (3) grading: when the round accepted an update that training
groups can grade (a provisional one: guidance, criteria, a harder variant), W follow-up training-like groups of
the graded task are sampled on the frozen policy under the committed harness (`evq_detect.follow_up`, the code
path of the detection visits), recorded in memory as the trainer records groups, and the trainer's pause-time
rule (`trainer.provisional.review`, which applies `agents.decisions.grade`) confirms the update or commits its
revert. "Repaired" = accepted, then confirmed. (4) Two-round cases (the last `--two-round` of each type): when
round 1 leaves no confirmed repair and the task in training, W more groups of the task under the harness as it
then is (after the revert, the fallback or nothing) go through a fresh detector window, and a second round
answers the event seen again (or the planted one), with everything memory kept from round 1 (its proposals,
their verdicts, the groups), graded the same way. Cases run one after another per arm on one harness store and
one memory per arm, so a later case can use what memory learnt from an earlier one. Arms: `rules` (rule brains,
memory, critic), `no-memory` (grading still reads a memory of its own that the evolver never sees),
`no-critic`.

Reported per defect type and arm, per case: detection rate, correct interface (the attribution's), repair
accepted, confirmed and reverted, fallback committed and task out of training, other tasks changed; probe
rollouts and seconds per decision (one round = one decision); the two-round cases on their own; for controls
the "accepted" column counts false accepts; for bad candidates, accepts (all false); and the issue-19 targets
per arm (repaired >= 80% of planted defects, false accepts <= 5% of controls plus known-bad candidates).

The gaming overlay: a frozen base policy does not stuff keywords, parrot hints, pad or cite evidence it does not
have (it learns that in training), so for the `stuffing`, `leak`, `spurious_length` and `spurious_audit` tasks
only, rollouts are rewritten the way a policy that learnt the hack would write them: every second one with the
keyword five times appended, the hints copied verbatim while they give the answer away (a reworded hint that no
longer does is answered normally), or a 67-word filler paragraph appended; three in four replaced by a 7-word claim
of peer-reviewed evidence (the detector's spurious_audit rule is a mean train-audit gap, which a half share of
honest rollouts closes). All other tasks see the plain policy.

Probe cost is counted by a wrapper endpoint: every rollout the evolver asks for counts. Generation is
deterministic for a given request (same prompts, n, seed), so identical requests of a later arm are served
from a cache and charged the seconds they took when generated: "s / decision" is what each arm would cost
alone. Follow-up groups are counted apart (they stand for training steps, not for the evolver's pause).

    cd <repo> && OMP_NUM_THREADS=1 .venv/bin/python benchmarks/evolver_quality.py --label issue19 --arms rules
    # render (or re-render) the report from one or two result files (before, after):
    .venv/bin/python benchmarks/evolver_quality.py --render benchmarks/results/evolver_quality_after.json \\
        benchmarks/results/evolver_quality_issue19.json --report benchmarks/EVOLVER.md

The result file is rewritten after every arm (`complete` says whether all arms finished). The parts:
`benchmarks/evq_cases.py` (planted defects, the gaming overlay, known-bad candidates), `benchmarks/evq_detect.py`
(the detection visits and the follow-up groups), `benchmarks/evq_grade.py` (grading on follow-up groups, the
two-round cases, a case's row), `benchmarks/evq_probes.py` (the policy endpoint that counts probe rollouts and
serves repeated requests from a cache), `benchmarks/evq_report.py` (summary, targets and EVOLVER.md); this file is
the CLI and the driver (arms, rounds). They import each other by plain name.

Porting to a changed evolver: only the "API adapter" blocks (below, and the grading half in `evq_grade.py`) name
evolver internals.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # run from anywhere: repo root on the path
if str(HERE) not in sys.path:
    sys.path.insert(1, str(HERE))  # the benchmark's own modules, imported by plain name

from evq_cases import DEFECTS, STEP, Case, GamingOverlay, build_cases, initial_state, known_bad  # noqa: E402
from evq_detect import Detection, detect, false_event_case, matching_event, planted_event, raised  # noqa: E402
from evq_grade import case_row, grade_round, in_training, no_second_round, record_visits, seen_again  # noqa: E402
from evq_probes import ProbeEndpoint  # noqa: E402
from evq_report import render_markdown, summarise, write_report  # noqa: E402

# == API adapter: the evolver names this benchmark depends on (edit here and in evq_grade.py when they move) ==
from agents import critic as critic_rules  # noqa: E402
from agents.context import EvolverContext  # noqa: E402
from agents.repair_ladder import climb_of  # noqa: E402
from graphs.runner import run_in_process  # noqa: E402
from graphs.services import RunServices, register_services, unregister_services  # noqa: E402
from harness.atomic import atomic_write_text  # noqa: E402
from harness.data import load_suite  # noqa: E402
from harness.detector import DetectorConfig  # noqa: E402
from harness.ops import validate as validate_update  # noqa: E402
from harness.store import HarnessStore  # noqa: E402
from harness.types import FailureEvent, HarnessState, HarnessUpdate  # noqa: E402
from tools.candidate import measure_candidate  # noqa: E402
from tools.judge import Judge  # noqa: E402
from tools.probes import ProbeCache, prompt_rollouts, task_rollouts  # noqa: E402


def make_context(
    arm: Arm, *, services_key: str, run_dir: Path, k: int, max_tokens: int, max_revisions: int, seed: int, demo: Any
) -> EvolverContext:
    """The evolver's run-time context for one arm: the demo config's (`demo`, a `trainer.config.RunConfig`) whole
    `evolver:` section, the shipped screen (its critic_alpha, sample_k_max, generalise_max_tasks, brains), with the
    benchmark's own budget flags and the arm's ablation switches over it."""
    return replace(
        demo.evolver,
        services_key=services_key,
        run_dir=str(run_dir),
        sample_k=k,
        sample_k_max=max(k, demo.evolver.sample_k_max),
        max_tokens=max_tokens,
        max_revisions=max_revisions,
        seed=seed,
        memory=arm.memory,
        critic=arm.critic,
    )


def make_services(
    store: HarnessStore,
    endpoint: Any,
    judge: Judge,
    memory: Any,
    detector_config: DetectorConfig,
    *,
    max_tokens: int,
    seed: int,
) -> RunServices:
    return RunServices(
        store=store,
        endpoint=endpoint,
        judge=judge,
        memory=memory,
        detector_config=detector_config,
        max_tokens=max_tokens,
        seed=seed,
    )


def start_round(svc: RunServices) -> None:
    """Each case (and each known-bad candidate) is one evolver round: its probe rollouts are not shared with
    the other cases (they all run at the same step, which the probe cache would take for one round)."""
    svc.probe_cache = ProbeCache()


def run_round(inp: dict[str, Any], ctx: EvolverContext, db: Path, thread_id: str) -> dict[str, Any]:
    """One evolver round in process; returns the graph output (accepted, reports, harness_version)."""
    return run_in_process(inp, ctx, db, thread_id)


def critic_verdict(
    state: HarnessState, event: FailureEvent, update: HarnessUpdate, ctx: EvolverContext, svc: RunServices, step: int
) -> dict[str, Any]:
    """The graph's validate + critique nodes for one candidate (mirror graphs/nodes.py `critique`, its `_measure`
    and `_cached_rollouts`), decided by `agents.decisions.after_critique` as the graph routes it: accepted (bool),
    invalid, reasons, numbers."""
    errors = validate_update(state, update)
    if errors:
        crit = critic_rules.invalid_critique(event, errors)
    elif not ctx.critic:
        crit = critic_rules.unmeasured_critique(event)
    else:
        prior = history = None
        if svc.memory is not None and ctx.history_rollouts > 0:
            if update.interface == "criteria":
                prior = task_rollouts(svc.memory, update.task_ids, ctx.history_rollouts)
            else:
                history = prompt_rollouts(svc.memory, state, update.task_ids, ctx.history_rollouts)
        m = measure_candidate(
            state,
            update,
            svc.endpoint,
            svc.judge,
            critic_rules.measure_settings(ctx, step, svc.detector_config),
            rule=critic_rules.stop_rule(event, update, ctx),
            prior_rollouts=prior,
            control_history=history,
            probe_cache=svc.probe_cache,
        )
        crit = critic_rules.judge_measurement(event, update, m, ctx)
    accepted = bool(crit.measured_ok and not crit.veto and not crit.invalid)
    return {"accepted": accepted, "invalid": crit.invalid, "reasons": crit.reasons, "numbers": crit.numbers}


# == end of the API adapter ==============================================================================


DEMO_CONFIG = ROOT / "configs" / "cpu-demo.yaml"  # the evolver settings the benchmark uses by default


@dataclass(frozen=True)
class Arm:
    name: str
    memory: bool
    critic: bool


ARMS: dict[str, Arm] = {
    a.name: a for a in (Arm("rules", True, True), Arm("no-memory", False, True), Arm("no-critic", True, False))
}


# -- one arm ------------------------------------------------------------------------------------------------
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


def _round(
    arm: Arm,
    c: Case,
    ev: FailureEvent,
    step: int,
    rnd: int,
    store: HarnessStore,
    svc: RunServices,
    ctx: EvolverContext,
    endpoint: ProbeEndpoint,
    run_dir: Path,
) -> dict[str, Any]:
    """One evolver round on one event: the graph's decision, what it changed and what it cost."""
    before = store.latest()
    start_round(svc)
    probes0 = endpoint.count.snapshot()
    t0 = time.perf_counter()
    out = run_round(
        {"events": [ev.model_dump(mode="json")], "harness_version": before.version, "step": step},
        ctx,
        run_dir / "evolver.sqlite",
        f"{arm.name}-{c.case_id}-r{rnd}",
    )
    wall = time.perf_counter() - t0
    probes1 = endpoint.count.snapshot()
    after = store.latest()
    # The event's report, then its climbs up the repair ladder in this round (`<id>:hop<k>`): the last part decides.
    parts = [r for r in out["reports"] if climb_of(r["event_id"])[0] == ev.id]
    assert parts and parts[0]["event_id"] == ev.id, [r["event_id"] for r in out["reports"]]
    report = parts[-1]
    attempts = [a for r in parts for a in r["attempts"]]
    touched = _touched(before, after)
    return {
        "round": rnd,
        "step": step,
        "event_id": ev.id,
        "event_type": ev.type,
        "decision": report["decision"],
        "interface": report["interface"],
        "interfaces": [r["interface"] for r in parts],
        "climbs": len(parts) - 1,
        "templates": [a["template"] for a in attempts],
        "attempts": len(attempts),
        "accepted": report["decision"] == "accepted",
        "fallback": report["decision"] == "fallback",
        "harness_changed": after.version != before.version,
        "version_before": before.version,
        "version_after": after.version,
        "touched_tasks": touched,
        "other_tasks_touched": [t for t in touched if t != c.task.id],
        "in_training_after": in_training(after, c.task.id),
        "probe_rollouts": probes1["requested"] - probes0["requested"],
        "generated_rollouts": probes1["generated"] - probes0["generated"],
        "seconds": round(wall + probes1["charged_seconds"] - probes0["charged_seconds"], 3),
        "wall_seconds": round(wall, 3),
        "last_reasons": attempts[-1]["critique"]["reasons"] if attempts else [report.get("note")],
        "numbers": [a["critique"]["numbers"] for a in attempts],
    }


def run_case(
    arm: Arm,
    idx: int,
    c: Case,
    first_event: FailureEvent,
    store: HarnessStore,
    svc: RunServices,
    grading_memory: Any,
    ctx: EvolverContext,
    endpoint: ProbeEndpoint,
    judge: Judge,
    cfg: DetectorConfig,
    args: argparse.Namespace,
    run_dir: Path,
) -> dict[str, Any]:
    """A case's rounds: the first on the detected (or planted) event at STEP, graded on follow-up groups; for a
    two-round case, unless the first left a confirmed repair or took the task out of training, W more groups of
    the task under the harness as it now is (after a revert, a fallback or nothing), a fresh detector window on
    them, and a second round on the event seen again, with the memory of the first, graded the same way."""
    rounds: list[dict[str, Any]] = []
    ev, step, skipped = first_event, STEP, None
    for rnd in range(1, c.rounds + 1):
        if rnd > 1:
            skipped = no_second_round(rounds[-1], store.latest(), c)
            if skipped:
                break
            ev, step, seen_rollouts = seen_again(c, idx, step, store, grading_memory, endpoint, judge, cfg, args)
        row = _round(arm, c, ev, step, rnd, store, svc, ctx, endpoint, run_dir)
        row["detected"] = None if c.defect == "control" else (ev.stats.get("planted") is not True)
        row["event_rollouts"] = 0 if rnd == 1 else seen_rollouts
        step = grade_round(c, idx, row, step, store, grading_memory, endpoint, judge, cfg, ctx, args)
        rounds.append(row)
        print(
            f"  [{arm.name}] {c.case_id} r{rnd}: {ev.type} -> {row['interface']} {row['templates']} "
            f"=> {row['decision']}"
            f" ({row['probe_rollouts']} rollouts, {row['seconds']:.1f}s)"
            + (
                f"; graded on {row['followup_rollouts']} follow-up rollouts: {row['verdict']}" if row["verdict"] else ""
            ),
            flush=True,
        )
    return case_row(arm.name, c, rounds, skipped, store.latest())


def run_arm(
    arm: Arm,
    cases: Sequence[Case],
    events: dict[str, FailureEvent],
    detection: Detection,
    base: HarnessState,
    bad: Sequence[tuple[str, Case, HarnessUpdate]],
    endpoint: ProbeEndpoint,
    judge: Judge,
    cfg: DetectorConfig,
    args: argparse.Namespace,
    out_dir: Path,
) -> tuple[list[dict], list[dict]]:
    """The cases in order, on this arm's own store and memory; then the known-bad candidates straight to the
    critic (on the initial harness, with the arm's services). An arm without memory still grades its updates on
    a memory of its own that the evolver never reads (the confirm/revert rule reads training groups from one)."""
    run_dir = out_dir / arm.name
    if run_dir.exists():
        raise FileExistsError(f"{run_dir} exists: pass a fresh --out (runs are not resumed)")
    store = HarnessStore(run_dir / "harness")
    store.init(base)
    from memory.store import TrainingMemory

    memory = TrainingMemory.persistent(run_dir / "memory", embedding=args.memory_embedding) if arm.memory else None
    grading_memory = memory or TrainingMemory.persistent(run_dir / "grading-memory", embedding="hash")
    for c in cases:  # the training groups the detector saw, as the trainer records them
        record_visits(grading_memory, detection.visits[c.task.id], c.task.domain)
    key = f"evolver-quality-{arm.name}-{os.getpid()}"
    svc = make_services(store, endpoint, judge, memory, cfg, max_tokens=args.max_tokens, seed=args.seed)
    register_services(key, svc)
    ctx = make_context(
        arm,
        services_key=key,
        run_dir=run_dir,
        k=args.k,
        max_tokens=args.max_tokens,
        max_revisions=args.max_revisions,
        seed=args.seed,
        demo=args.demo,
    )
    rows = []
    try:
        for i, c in enumerate(cases):
            rows.append(
                run_case(
                    arm, i, c, events[c.case_id], store, svc, grading_memory, ctx, endpoint, judge, cfg, args, run_dir
                )
            )
        bad_rows = run_bad(arm, bad, events, base, svc, ctx)
    finally:
        unregister_services(key)
        grading_memory.close()
    return rows, bad_rows


def run_bad(
    arm: Arm,
    bad: Sequence[tuple[str, Case, HarnessUpdate]],
    events: dict[str, FailureEvent],
    base: HarnessState,
    svc: RunServices,
    ctx: EvolverContext,
) -> list[dict]:
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
        rows.append(
            {
                "arm": arm.name,
                "kind": kind,
                "case": c.case_id,
                "event_type": ev.type,
                "accepted": v["accepted"],
                "invalid": v["invalid"],
                "reasons": v["reasons"],
                "numbers": v["numbers"],
                "probe_rollouts": probes1["requested"] - probes0["requested"],
                "seconds": round(wall + probes1["charged_seconds"] - probes0["charged_seconds"], 3),
            }
        )
        print(f"  [{arm.name}] bad {kind} on {c.case_id}: accepted={v['accepted']} invalid={v['invalid']}", flush=True)
    return rows


def _loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "n/a"


# -- main -------------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--label", default="before", help="result label: benchmarks/results/evolver_quality_<label>.json")
    p.add_argument("--model", default="smollm2", help="smollm2, tiny, or a model folder (the frozen policy)")
    p.add_argument("--suite", default=str(ROOT / "data" / "rubric-mix-lite"))
    p.add_argument("--cases-per-type", type=int, default=4)
    p.add_argument(
        "--two-round",
        type=int,
        default=1,
        help="the last N cases of each type get a second round when the first leaves the failure in place",
    )
    p.add_argument(
        "--confirm-window",
        type=int,
        default=None,
        help="follow-up groups that grade an accepted update (default: the demo config's harness.confirm_window)",
    )
    p.add_argument(
        "--max-followups",
        type=int,
        default=2,
        help="follow-up windows sampled at most while the grading waits (hinted groups only count for a hint)",
    )
    p.add_argument("--defects", default=",".join(DEFECTS))
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument(
        "--k",
        type=int,
        default=None,
        help="rollouts per group, detector visits and critic probes (default: the demo config's sample_k)",
    )
    p.add_argument("--max-tokens", type=int, default=None, help="default: the demo config's max_completion_length")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--window", type=int, default=None, help="detector window W (default: the demo config's)")
    p.add_argument("--max-revisions", type=int, default=None, help="R (default: the demo config's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--memory-embedding", default="minilm", choices=["minilm", "hash"])
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument(
        "--quick", action="store_true", help="CI smoke: 1 case per type (two rounds each), k=2, 8 tokens, hash memory"
    )
    p.add_argument("--out", default=None, help="run folders (default runs/evolver_quality/<label>-<time>)")
    p.add_argument("--json", default=None, help="result file (default benchmarks/results/evolver_quality_<label>.json)")
    p.add_argument("--report", default=None, help="also write the Markdown report here (e.g. benchmarks/EVOLVER.md)")
    p.add_argument(
        "--render",
        nargs="+",
        default=None,
        metavar="JSON",
        help="only render --report from a before (and an after) result file",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.cases_per_type, args.two_round, args.k, args.max_tokens, args.memory_embedding = 1, 1, 2, 8, "hash"
    unknown = [a for a in args.arms.split(",") if a not in ARMS] + [
        d for d in args.defects.split(",") if d not in DEFECTS
    ]
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
    from trainer.config_loader import load_config
    from trainer.policy_models import resolve_model

    torch.set_num_threads(args.threads)
    model_dir = resolve_model(args.model)
    # Everything not set on the command line is what the CPU demo's evolver runs with.
    demo = args.demo = load_config(DEMO_CONFIG)
    args.k = demo.evolver.sample_k if args.k is None else args.k
    args.max_tokens = demo.train.max_completion_length if args.max_tokens is None else args.max_tokens
    args.max_revisions = demo.evolver.max_revisions if args.max_revisions is None else args.max_revisions
    cfg = DetectorConfig(**{**demo.harness.detector, **({} if args.window is None else {"window": args.window})})
    args.window = cfg.window
    args.confirm_window = demo.harness.confirm_window if args.confirm_window is None else args.confirm_window
    if args.confirm_window < 1:
        raise SystemExit(f"confirm window must be >= 1 (got {args.confirm_window}): accepted updates are graded here")
    suite = {t.id: t for t in load_suite(args.suite)}
    cases = build_cases(suite, args.cases_per_type, args.defects.split(","), args.two_round)
    base = initial_state(cases)
    endpoint = ProbeEndpoint(GamingOverlay(LocalEndpoint.from_path(model_dir), cases))
    judge = Judge(None)
    out_dir = Path(args.out or ROOT / "runs" / "evolver_quality" / f"{args.label}-{time.strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"{len(cases)} cases ({sum(c.rounds > 1 for c in cases)} with two rounds), policy {model_dir.name}, "
        f"k={args.k}, "
        f"max_tokens={args.max_tokens}, W={args.window}, confirm window {args.confirm_window}, R={args.max_revisions}; "
        f"runs in {out_dir}",
        flush=True,
    )

    detection = detect(
        base, cases, endpoint, judge, cfg, k=args.k, max_tokens=args.max_tokens, temperature=args.temperature
    )
    events: dict[str, FailureEvent] = {}
    detection_rows = []
    cases = [false_event_case(c, detection.events.get(c.task.id, [])) for c in cases]
    for c in cases:
        found = detection.events.get(c.task.id, [])
        ev = matching_event(c, found)
        events[c.case_id] = ev or planted_event(c, detection.visits[c.task.id])
        detection_rows.append(
            {
                "case": c.case_id,
                "defect": c.defect,
                "task_id": c.task.id,
                "source": c.source_id,
                "detected": ev is not None,
                "event_source": "detector" if ev else "planted",
                "fed_event": events[c.case_id].type,
                "fed_criterion": events[c.case_id].criterion_id,
                "fed_event_raised_by_detector": raised(c, found),
                "other_events": [
                    f"{e.type}:{e.criterion_id}" if e.criterion_id else e.type for e in found if e is not ev
                ],
                "group_means": [round(v.stats.mean, 3) for v in detection.visits[c.task.id]],
                "group_stds": [round(v.stats.std, 3) for v in detection.visits[c.task.id]],
            }
        )
        print(
            f"  detect {c.case_id}: detected={ev is not None} other={detection_rows[-1]['other_events']} "
            f"means={detection_rows[-1]['group_means']}",
            flush=True,
        )

    arms = args.arms.split(",")
    bad = known_bad(cases)
    rows: list[dict] = []
    bad_rows: list[dict] = []
    arm_seconds: dict[str, float] = {}
    argv_list = list(sys.argv[1:] if argv is None else argv)
    json_path = Path(args.json or ROOT / "benchmarks" / "results" / f"evolver_quality_{args.label}.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    for name in arms:
        t_arm = time.perf_counter()
        arm_rows, arm_bad = run_arm(
            ARMS[name], cases, events, detection, base, bad, endpoint, judge, cfg, args, out_dir
        )
        rows += arm_rows
        bad_rows += arm_bad
        arm_seconds[name] = round(time.perf_counter() - t_arm, 1)
        done = list(arm_seconds)
        runtime = time.perf_counter() - t_start
        result = {
            "label": args.label,
            "command": "benchmarks/evolver_quality.py " + shlex.join(argv_list),
            "complete": done == arms,
            "arms_done": ",".join(done),
            "runtime_s": round(runtime, 1),
            "arm_seconds": arm_seconds,
            "loadavg_before": load_before,
            "loadavg_after": _loadavg(),
            "machine": f"{os.cpu_count()} CPUs, torch threads {args.threads}",
            "settings": {
                "model": model_dir.name,
                "cases_per_type": args.cases_per_type,
                "two_round": args.two_round,
                "k": args.k,
                "max_tokens": args.max_tokens,
                "temperature": args.temperature,
                "window": args.window,
                "confirm_window": args.confirm_window,
                "max_revisions": args.max_revisions,
                "critic_alpha": args.demo.evolver.critic_alpha,
                "sample_k_max": max(args.k, args.demo.evolver.sample_k_max),
                "seed": args.seed,
                "memory_embedding": args.memory_embedding,
                "arms": ",".join(done),
            },
            "detection": {
                "rows": detection_rows,
                "seconds": round(detection.seconds, 1),
                "rollouts": detection.rollouts,
            },
            "probes": endpoint.count.snapshot(),
            "summary": summarise(cases, detection_rows, rows, bad_rows, done),
            "cases": rows,
            "bad_candidates": bad_rows,
        }
        # Written after every arm: a run cut short keeps the arms it finished (`complete` says whether all did).
        atomic_write_text(json_path, json.dumps(result, indent=1, default=str) + "\n")
        print(f"arm {name} done in {arm_seconds[name]:.0f}s; wrote {json_path}", flush=True)
    if args.report:
        write_report(Path(args.report), render_markdown(result, None))
    print(
        f"done in {result['runtime_s']:.0f}s; wrote {json_path}" + (f" and {args.report}" if args.report else ""),
        flush=True,
    )
    return result


if __name__ == "__main__":
    main()
