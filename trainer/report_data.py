"""The numbers of a run's report, computed from its folder: what `trainer/report.py` renders.

`collect` reads the run's files (metrics, events, rounds, committed harness updates, eval.json, the detector's
eps from the saved config); the rest turns them into the summary counts, the tables' rows (events per failure
type, proposals and committed versions per interface, what measuring the proposals cost, training's verdicts,
committed updates, rounds, held-out eval) and the plots' series (per step, per update marker, per eval domain).
Rows are dicts keyed by their column headers, in column order: the renderer prints them as they come.
Reads only files; no torch, no matplotlib.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

import yaml

from graphs.round_record import EventLine, RoundRecord
from harness.store import UpdateRecord
from harness.types import INTERFACES, FailureEvent
from trainer.outcomes import graded_verdicts, update_outcome
from trainer.run_logs import read_events, read_metrics, read_rounds, read_updates
from trainer.step_metrics import StepMetrics


class RunData(TypedDict):
    """A run folder's files as `collect` reads them (each line of a JSONL file as its type, trainer/run_logs.py)."""

    metrics: list[StepMetrics]
    rounds: list[RoundRecord]
    events: list[FailureEvent]
    updates: list[UpdateRecord]  # committed versions only (version 0, the initial harness, has no update)
    eval: dict[str, Any]  # eval.json; {} before `harnessrl eval`
    dead_eps: float | None  # the run's `harness.detector.eps`; None: the detector's default


def collect(run_dir: Path) -> RunData:
    run_dir = Path(run_dir)
    if not (run_dir / "harness").is_dir():
        raise FileNotFoundError(f"{run_dir} is not a HarnessRL run folder (no harness/ inside)")
    updates = read_updates(run_dir / "harness" / "updates.jsonl")
    return {
        "metrics": read_metrics(run_dir / "metrics.jsonl"),
        "rounds": read_rounds(run_dir / "rounds.jsonl"),
        "events": read_events(run_dir / "events.jsonl"),
        "updates": [u for u in updates if u.update is not None],
        "eval": json.loads((run_dir / "eval.json").read_text()) if (run_dir / "eval.json").is_file() else {},
        "dead_eps": _detector_eps(run_dir / "config.yaml"),
    }


def _detector_eps(config: Path) -> float | None:
    """The run's `harness.detector.eps` from its saved config (None: not set there, the detector's default)."""
    if not config.is_file():
        return None
    raw = yaml.safe_load(config.read_text()) or {}
    eps = ((raw.get("harness") or {}).get("detector") or {}).get("eps")
    return None if eps is None else float(eps)


# Per-event decisions written by the evolver's `record` node; everything that is neither accepted by the
# critic nor a committed fallback (rejected, rejected_stale, rejected_by_human, skipped) left the harness as it was.
COMMITTING = ("accepted", "fallback")
ERROR_CHARS = 240  # a failed round's error as the summary quotes it (the full traceback is in rounds.jsonl)


def _reports(data: RunData) -> list[tuple[int, EventLine]]:
    """(round step, per-event report) for every report in rounds.jsonl."""
    return [(r.step, rep) for r in data["rounds"] for rep in r.reports]


def _interface(update: UpdateRecord) -> str:
    assert update.update is not None  # `collect` keeps committed versions only
    return update.update.interface


def is_fallback(update: UpdateRecord) -> bool:
    """A committed version the critic did not accept: the safe sampling change after R rejected candidates."""
    return bool(update.meta.get("fallback"))


class Summary(TypedDict):
    """The counts a reader wants first, in the order the report's key/value table and `--json` list them."""

    steps: int
    events: int
    event_types: dict[str, int]
    rounds: int
    rounds_failed: int
    round_errors: dict[int, str]  # step -> the failed round's error (cut to ERROR_CHARS)
    outcomes: dict[str, int]
    proposals_by_interface: dict[str, dict[str, int]]
    accepted_by_interface: dict[str, int]
    accepted_total: int
    fallback_by_interface: dict[str, int]
    fallback_total: int
    committed_by_interface: dict[str, int]
    committed_total: int
    revert_total: int
    confirmed_total: int
    reverted_total: int
    provisional_total: int
    superseded_total: int
    pause_s: float
    pause_share: float | None  # of the training's wall-clock span; None: fewer than two timed steps
    judge_warnings: int
    unscoreable: int
    criteria_skipped: int
    judge_left_out: int
    steps_flagged: int
    brains: dict[str, dict[str, int]]
    memory_outage_steps: list[int]  # steps that ended with memory writes waiting for the Chroma server
    memory_flushed: int  # records written to it after waiting
    memory_queued_at_end: int  # records still waiting at the last step (not written)
    judge_drift: dict[int, dict[str, Any]]  # pause step -> its judge drift probe (a step_metrics.DriftLine)


def summary(data: RunData) -> Summary:
    """Counts a reader wants first (and the README's demo numbers).

    `*_by_interface` of committed versions use the committed update's interface (a fallback is always a
    sampling change); `proposals_by_interface` counts per-event decisions by the attributed interface.
    """
    outcomes: Counter[str] = Counter()
    for r in data["rounds"]:
        outcomes.update(r.outcomes)
    proposals: dict[str, Counter[str]] = defaultdict(Counter)
    for _step, rep in _reports(data):
        proposals[str(rep.interface or "none")][str(rep.decision or "unknown")] += 1
    accepted: Counter[str] = Counter()
    fallback: Counter[str] = Counter()
    reverts: Counter[str] = Counter()
    committed = Counter(_interface(u) for u in data["updates"])
    for u in data["updates"]:
        # fallbacks are committed but not critic-accepted; reverts undo an accepted update training refuted
        into = fallback if is_fallback(u) else reverts if update_outcome(u, {}) == "revert" else accepted
        into[_interface(u)] += 1
    verdicts = graded_verdicts(data["rounds"])
    fates = Counter(update_outcome(u, verdicts) for u in data["updates"])
    m = data["metrics"]
    total_pause = sum(x.pause_s for x in m)
    first, last = (m[0].time, m[-1].time) if m else (None, None)
    span = last - first if len(m) > 1 and first is not None and last is not None else 0.0
    return {
        "steps": len(m),
        "events": len(data["events"]),
        "event_types": _count(e.type for e in data["events"]),
        "rounds": len(data["rounds"]),
        "rounds_failed": sum(1 for r in data["rounds"] if r.error),
        "round_errors": {r.step: _cut(r.error) for r in data["rounds"] if r.error},
        "outcomes": dict(outcomes),
        "proposals_by_interface": {i: dict(c) for i, c in proposals.items()},
        "accepted_by_interface": dict(accepted),
        "accepted_total": sum(accepted.values()),
        "fallback_by_interface": dict(fallback),
        "fallback_total": sum(fallback.values()),
        "committed_by_interface": dict(committed),
        "committed_total": len(data["updates"]),
        "revert_total": sum(reverts.values()),
        "confirmed_total": fates["confirmed"],
        "reverted_total": fates["reverted"],
        "provisional_total": fates["provisional"],
        "superseded_total": fates["superseded"],
        "pause_s": total_pause,
        "pause_share": (total_pause / span) if span > 0 else None,
        "judge_warnings": sum(x.judge_warnings for x in m),
        "unscoreable": sum(x.unscoreable for x in m),
        "criteria_skipped": sum(x.criteria_skipped for x in m),
        "judge_left_out": sum(x.judge_left_out for x in m),
        "steps_flagged": sum(1 for x in m if x.judge_flagged or x.unscoreable_flagged or x.skipped_flagged),
        "brains": brain_counts(data),
        "memory_outage_steps": [x.step for x in m if x.memory_queued],
        "memory_flushed": sum(x.memory_flushed for x in m),
        "memory_queued_at_end": m[-1].memory_queued if m else 0,
        "judge_drift": {x.step: x.judge_drift.model_dump() for x in m if x.judge_drift is not None},
    }


def brain_counts(data: RunData) -> dict[str, dict[str, int]]:
    """Per role, the decisions each brain made over the run's rounds (`brains` of each report in rounds.jsonl).

    The brains are "rules", "llm", "llm_fallback" (the LLM could not answer validly; the rule brain decided).
    """
    counts: dict[str, Counter[str]] = {}
    for _step, rep in _reports(data):
        b = rep.brains
        for role, seq in (("attributor", [b.attributor]), ("proposer", b.proposer), ("critic", b.critic)):
            for source in seq:
                if source is not None:
                    counts.setdefault(role, Counter())[source] += 1
    return {role: dict(c) for role, c in counts.items()}


_IFACE_COLS = ("proposals", "accepted", "fallback", "rejected", "committed (accepted)", "committed (fallback)")

# A table row keyed by its column headers (a header with a space needs the functional form).
InterfaceRow = TypedDict(
    "InterfaceRow",
    {
        "interface": str,
        "proposals": int,
        "accepted": int,
        "fallback": int,
        "rejected": int,
        "committed (accepted)": int,
        "committed (fallback)": int,
    },
)


def interface_rows(data: RunData) -> list[InterfaceRow]:
    """Per interface: events attributed to it and their decisions, and the versions committed on it.

    A fallback is counted twice on purpose: under the attributed interface as the event's decision, and
    under `sampling` as a committed version, because that is the interface the fallback changed.
    """
    rows: dict[str, dict[str, Any]] = {}

    def row(iface: str) -> dict[str, Any]:
        return rows.setdefault(iface, {"interface": iface, **dict.fromkeys(_IFACE_COLS, 0)})

    for iface in INTERFACES:
        row(iface)
    for _step, rep in _reports(data):
        r = row(str(rep.interface or "none"))  # none: skipped before attribution
        r["proposals"] += 1
        r[rep.decision if rep.decision in COMMITTING else "rejected"] += 1
    for u in data["updates"]:
        row(_interface(u))["committed (fallback)" if is_fallback(u) else "committed (accepted)"] += 1
    out: list[Any] = list(rows.values())
    out.append({"interface": "total", **{k: sum(r[k] for r in out) for k in _IFACE_COLS}})
    return out


# What each proposal's measurement cost, from the `cost_*` numbers the critic records on every attempt
# (agents/critic.py `cost_numbers`); column -> number key.
COST_COLUMNS = {
    "probe rollouts": "cost_probe_rollouts",
    "reused rollouts": "cost_reused_rollouts",
    "tokens": "cost_probe_tokens",
    "judge calls": "cost_judge_calls",
    "seconds": "cost_seconds",
}

CostRow = TypedDict(
    "CostRow",
    {
        "interface": str,
        "proposals": int,
        "probe rollouts": int,
        "reused rollouts": int,
        "tokens": int,
        "judge calls": int,
        "seconds": float,
    },
)


def cost_rows(data: RunData) -> list[CostRow]:
    """Per interface: proposals and what measuring them cost, summed over rounds.jsonl; a total row last.

    Proposals are the candidates the critic saw, every revision counted. Unmeasured attempts (invalid, critic
    off) cost 0.
    """
    rows: dict[str, dict[str, Any]] = {
        i: {"interface": i, "proposals": 0, **dict.fromkeys(COST_COLUMNS, 0.0)} for i in INTERFACES
    }
    for _step, rep in _reports(data):
        iface = str(rep.interface or "none")
        for a in rep.attempts:
            r = rows.setdefault(iface, {"interface": iface, "proposals": 0, **dict.fromkeys(COST_COLUMNS, 0.0)})
            r["proposals"] += 1
            numbers = a.numbers or {}
            for col, key in COST_COLUMNS.items():
                r[col] += float(numbers.get(key) or 0.0)
    out: list[Any] = list(rows.values())
    out.append(
        {
            "interface": "total",
            "proposals": sum(r["proposals"] for r in out),
            **{c: sum(r[c] for r in out) for c in COST_COLUMNS},
        }
    )
    for r in out:  # counts are whole numbers; only seconds keep their fraction
        for c in ("probe rollouts", "reused rollouts", "tokens", "judge calls"):
            r[c] = int(r[c])
    return out


_TYPE_COLS = ("detected", "in rounds", "accepted", "fallback", "rejected")

EventTypeRow = TypedDict(
    "EventTypeRow",
    {"type": str, "detected": int, "in rounds": int, "accepted": int, "fallback": int, "rejected": int},
)


def event_type_rows(data: RunData) -> list[EventTypeRow]:
    """Per failure type: events detected (events.jsonl) and the decisions the evolver rounds reached on them."""
    rows: dict[str, dict[str, Any]] = {}

    def row(t: str) -> dict[str, Any]:
        return rows.setdefault(t, {"type": t, **dict.fromkeys(_TYPE_COLS, 0)})

    for e in data["events"]:
        row(e.type)["detected"] += 1
    for _step, rep in _reports(data):
        r = row(str(rep.failure_type))
        r["in rounds"] += 1
        r[rep.decision if rep.decision in COMMITTING else "rejected"] += 1
    out: list[Any] = [rows[t] for t in sorted(rows)]
    if out:
        out.append({"type": "total", **{k: sum(r[k] for r in out) for k in out[0] if k != "type"}})
    return out


def _cut(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def _count(items: Any) -> dict[str, int]:
    return dict(Counter(str(i) for i in items))


class UpdatePoint(NamedTuple):
    """One marker of the updates plot."""

    step: int
    interface: str
    outcome: str  # accepted, fallback, revert, not accepted
    label: str  # "v<version>" for a committed version, "" for an event that committed nothing


def update_points(data: RunData) -> list[UpdatePoint]:
    """(step, interface, outcome, label) per marker of the updates plot.

    accepted / fallback: one per committed version, on the interface it changed (a fallback is a
    sampling change committed without the critic's acceptance); not accepted: one per event whose
    decision committed nothing, on the interface the attributor chose.
    """
    pts = [
        UpdatePoint(
            u.step,
            _interface(u),
            "fallback" if is_fallback(u) else "revert" if update_outcome(u, {}) == "revert" else "accepted",
            f"v{u.version}",
        )
        for u in data["updates"]
    ]
    pts += [
        UpdatePoint(step, rep.interface, "not accepted", "")
        for step, rep in _reports(data)
        if rep.decision not in COMMITTING and rep.interface is not None and rep.interface in INTERFACES
    ]
    return pts


@dataclass(frozen=True)
class StepSeries:
    """Per training step (metrics.jsonl), what the reward, dead-group and pause plots draw."""

    steps: list[Any]
    reward: list[Any]  # batch mean; NaN where a step has none
    reward_std: list[Any]  # within-group std; NaN where a step has none
    dead_share: list[Any]
    update_steps: list[int]  # steps that committed a harness version
    pause_steps: list[Any]  # the steps of `pause_share`: every step after the first
    pause_share: list[float]  # pause seconds / the step's wall-clock duration; [] without two timed steps
    judge_warnings: list[Any]


def step_series(data: RunData) -> StepSeries:
    m = data["metrics"]
    steps = [x.step for x in m]
    times = [x.time for x in m]
    pause_share: list[float] = []
    if len(m) > 1:
        known = [t for t in times if t is not None]
        if len(known) == len(times):
            durations = [max(1e-9, known[i] - known[i - 1]) for i in range(1, len(known))]
            pause_share = [x.pause_s / d for x, d in zip(m[1:], durations)]
    nan = float("nan")
    return StepSeries(
        steps=steps,
        reward=[nan if x.reward is None else x.reward for x in m],
        reward_std=[nan if x.reward_std is None else x.reward_std for x in m],
        dead_share=[0.0 if x.dead_share is None else x.dead_share for x in m],
        update_steps=sorted({u.step for u in data["updates"]}),
        pause_steps=steps[1:],
        pause_share=pause_share,
        judge_warnings=[x.judge_warnings for x in m],
    )


@dataclass(frozen=True)
class EvalBars:
    """Held-out Avg@k per domain for each evaluated model (eval.json), as the eval plot draws it."""

    domains: list[str]  # sorted, every domain any model was evaluated on
    criteria: dict[str, list[Any]]  # model label -> avg_at_k per domain (0 where the model lacks it)
    audit: dict[str, list[Any]]  # model label -> hidden-audit score per domain (None where there is none)


def eval_bars(data: RunData) -> EvalBars:
    domains = sorted({d for e in data["eval"].values() for d in e.get("domains", {})})
    evs = {lab: data["eval"][lab]["domains"] for lab in data["eval"]}
    return EvalBars(
        domains=domains,
        criteria={lab: [ev.get(d, {}).get("avg_at_k", 0) for d in domains] for lab, ev in evs.items()},
        audit={lab: [ev.get(d, {}).get("audit") for d in domains] for lab, ev in evs.items()},
    )


class EvalRow(TypedDict):
    model: str
    avg_at_k: Any
    audit: Any
    k: Any
    n_tasks: Any


def eval_rows(data: RunData) -> list[EvalRow]:
    """One row per evaluated model (eval.json): its overall Avg@k and audit score."""
    return [
        {"model": k, "avg_at_k": v["avg_at_k"], "audit": v["audit"], "k": v["k"], "n_tasks": v["n_tasks"]}
        for k, v in data["eval"].items()
    ]


class VerdictRow(TypedDict):
    round: Any
    version: Any
    task: Any
    failure: Any
    verdict: Any
    why: str
    revert: str


def verdict_rows(data: RunData) -> list[VerdictRow]:
    """One row per verdict training gave a provisional update (rounds.jsonl `provisional`, trainer/provisional.py)."""
    return [
        {
            "round": r.step,
            "version": v.version,
            "task": v.task_id,
            "failure": v.failure_type,
            "verdict": v.verdict,
            "why": "; ".join(v.reasons),
            "revert": f"v{v.revert_version}" if v.revert_version else "",
        }
        for r in data["rounds"]
        for v in (r.provisional.verdicts if r.provisional is not None else [])
    ]


class UpdateRow(TypedDict):
    version: int
    step: int
    interface: str
    outcome: str
    ops: str
    rationale: str


def update_rows(data: RunData) -> list[UpdateRow]:
    """One row per committed version: its interface, what became of it, its ops and the proposer's rationale."""
    verdicts = graded_verdicts(data["rounds"])
    return [
        {
            "version": u.version,
            "step": u.step,
            "interface": u.update.interface,
            "outcome": update_outcome(u, verdicts),
            "ops": ", ".join(f"{o.op}({o.task_id})" for o in u.update.ops),
            "rationale": u.update.rationale,
        }
        for u in data["updates"]
        if u.update is not None  # `collect` keeps committed versions only
    ]


# The fields of a rounds.jsonl line the rounds table shows, in its column order.
_ROUND_FIELDS = (
    "step",
    "n_events",
    "event_types",
    "outcomes",
    "n_accepted",
    "version_before",
    "version_after",
    "pause_s",
    "error",
    "thread_id",
)


def round_rows(data: RunData) -> list[dict[str, Any]]:
    """One row per evolver round: its rounds.jsonl fields (None where absent), its confirmed / reverted updates."""
    rows: list[dict[str, Any]] = []
    for r in data["rounds"]:
        line = r.dump()  # the keys the line holds: a field it lacks shows empty, not as its default
        prov = r.provisional
        rows.append(
            {
                **{k: line.get(k) for k in _ROUND_FIELDS},
                "confirmed / reverted": f"{prov.n_confirmed if prov else 0} / {prov.n_reverted if prov else 0}",
            }
        )
    return rows
