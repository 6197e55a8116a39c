"""What training did, for the report.

Each committed update's groups before and after it and what became of it (confirmed or reverted by training,
`update_outcome`), the base and the trained model side by side per domain, and a trace page per evolver round.
Reads only files; no torch.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from graphs.round_record import RoundRecord
from harness.detector import DetectorConfig
from harness.store import UpdateRecord
from harness.types import AddVariant
from trainer.step_metrics import StepMetrics


def graded_verdicts(rounds: list[RoundRecord]) -> dict[int, list[str]]:
    """Version -> the verdicts training gave its provisional targets.

    Read from rounds.jsonl `provisional` (see trainer/provisional.py).
    """
    out: dict[int, list[str]] = defaultdict(list)
    for r in rounds:
        for v in r.provisional.verdicts if r.provisional is not None else []:
            out[v.version].append(v.verdict)
    return dict(out)


def update_outcome(update: UpdateRecord, verdicts: dict[int, list[str]]) -> str:
    """What became of a committed version.

    Fallback, revert (a version that undid another), or for the critic's accepts: reverted (training undid it,
    on any target), confirmed (training held it on every target), superseded, provisional (still waiting for its
    groups), accepted (nothing in training can grade it).
    """
    meta = update.meta  # the commit's meta (graphs/nodes.py, agents/decisions.py provisional_meta, provisional.py)
    if meta.get("fallback"):
        return "fallback"
    if meta.get("source") == "revert":
        return "revert"
    if not meta.get("provisional"):
        return "accepted"
    got = verdicts.get(update.version, [])
    n_targets = len(meta["provisional"]["targets"])
    if "revert" in got:
        return "reverted"
    if got and len(got) >= n_targets:
        return "confirmed" if all(v == "confirm" for v in got) else "superseded"
    return "provisional"


def update_effect_rows(
    metrics: list[StepMetrics], updates: list[UpdateRecord], rounds: list[RoundRecord], dead_eps: float | None = None
) -> list[dict[str, Any]]:
    """Per committed update: the groups its tasks had before it and after it (mean, std, dead share).

    A reader sees whether the repair held. A task's groups come from metrics.jsonl (`tasks`, `group_means`,
    `group_stds` per step); a harder variant an update added counts as the task's "after".
    """
    eps = DetectorConfig().eps if dead_eps is None else dead_eps
    groups: dict[str, list[tuple[int, float, float | None]]] = defaultdict(list)
    for m in metrics:
        stds: list[float | None] = list(m.group_stds or [None] * len(m.tasks))
        for tid, mean, std in zip(m.tasks, m.group_means, stds):
            groups[tid].append((m.step, float(mean), std))

    def side(rows: list[tuple[int, float, float | None]]) -> dict[str, Any]:
        stds = [s for _, _, s in rows if s is not None]
        return {
            "groups": len(rows),
            "mean": sum(m for _, m, _ in rows) / len(rows) if rows else None,
            "std": sum(stds) / len(stds) if stds else None,
            "dead": sum(s < eps for s in stds) / len(stds) if stds else None,
        }

    out = []
    verdicts = graded_verdicts(rounds)
    for u in updates:
        assert u.update is not None  # committed versions only (trainer/report_data.py `collect`)
        ops = u.update.ops
        tasks = sorted({o.task_id for o in ops if o.task_id})
        added = sorted({o.variant_id for o in ops if isinstance(o, AddVariant)})
        before = [g for t in tasks for g in groups[t] if g[0] <= u.step]
        after = [g for t in [*tasks, *added] for g in groups[t] if g[0] > u.step]
        b, a = side(before), side(after)
        out.append(
            {
                "version": u.version,
                "step": u.step,
                "interface": u.update.interface,
                "outcome": update_outcome(u, verdicts),
                "tasks": tasks + added,
                "groups before": b["groups"],
                "mean before": b["mean"],
                "std before": b["std"],
                "dead before": b["dead"],
                "groups after": a["groups"],
                "mean after": a["mean"],
                "std after": a["std"],
                "dead after": a["dead"],
            }
        )
    return out


def eval_domain_rows(ev: dict[str, Any]) -> list[dict[str, Any]]:
    """Base and trained model side by side per domain (same draws: `harnessrl eval` keeps both in eval.json)."""
    base, trained = ev.get("base"), ev.get("trained")
    if not base or not trained:
        return []
    rows = []
    for d in sorted(set(base["domains"]) | set(trained["domains"])):
        b, t = base["domains"].get(d, {}), trained["domains"].get(d, {})
        row = {"domain": d, "tasks": t.get("n_tasks", b.get("n_tasks"))}
        for key, label in (("avg_at_k", "criteria"), ("audit", "audit")):
            bv, tv = b.get(key), t.get(key)
            row[f"{label} base"], row[f"{label} trained"] = bv, tv
            row[f"{label} change"] = (tv - bv) if bv is not None and tv is not None else None
        rows.append(row)
    rows.append(
        {
            "domain": "all",
            "tasks": trained["n_tasks"],
            "criteria base": base["avg_at_k"],
            "criteria trained": trained["avg_at_k"],
            "criteria change": trained["avg_at_k"] - base["avg_at_k"],
            "audit base": base["audit"],
            "audit trained": trained["audit"],
            "audit change": (trained["audit"] - base["audit"])
            if None not in (base["audit"], trained["audit"])
            else None,
        }
    )
    return rows


def write_trace_pages(run_dir: Path, rounds: list[RoundRecord]) -> dict[str, str]:
    """One trace page per in-process round (run_dir/traces/<thread>.html); thread id -> relative link.

    Rounds run on a LangGraph server keep their threads there (open them in Studio).
    """
    from graphs.trace_html import write_trace

    db = run_dir / "evolver.sqlite"
    links: dict[str, str] = {}
    if not db.is_file():
        return links
    for r in rounds:
        tid = r.thread_id
        if not tid:
            continue
        try:
            write_trace(db, tid, run_dir / "traces" / f"{tid}.html")
        except ValueError:
            continue  # not in this database (a server round) or failed before its first checkpoint
        links[tid] = f"traces/{tid}.html"
    return links
