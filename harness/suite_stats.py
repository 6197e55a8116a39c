"""Suite statistics: the counts `harnessrl data stats` prints and the bundled suite's README states."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.data import KINDS
from harness.types import Task


def suite_stats(tasks: list[Task]) -> dict[str, Any]:
    """Counts a reader (and `harnessrl data stats`) wants.

    Tasks by domain/split, criteria by kind, share of criteria with a programmatic check, audit coverage, mean
    criteria per task, difficulty mix.
    """
    by_domain = Counter(t.domain for t in tasks)
    by_split = Counter(t.split for t in tasks)
    by_ds: dict[str, dict[str, int]] = {}
    for t in tasks:
        by_ds.setdefault(t.domain, {"train": 0, "test": 0})[t.split] += 1
    crit = [c for t in tasks for c in t.criteria]
    audit = [c for t in tasks for c in t.audit_criteria]
    kinds = Counter(c.kind for c in crit)
    with_check = sum(c.check is not None for c in crit)
    with_audit = sum(bool(t.audit_criteria) for t in tasks)
    difficulty = Counter(str(t.meta.get("difficulty", "unknown")) for t in tasks)
    n = len(tasks)
    return {
        "n_tasks": n,
        "by_domain": dict(sorted(by_domain.items())),
        "by_split": {s: by_split.get(s, 0) for s in ("train", "test")},
        "by_domain_split": dict(sorted(by_ds.items())),
        "by_difficulty": dict(sorted(difficulty.items())),
        "criteria": {
            "total": len(crit),
            "by_kind": {k: kinds.get(k, 0) for k in KINDS},
            "with_check": with_check,
            "check_share": round(with_check / len(crit), 4) if crit else 0.0,
            "mean_per_task": round(len(crit) / n, 3) if n else 0.0,
        },
        "audit": {
            "total": len(audit),
            "tasks_with_audit": with_audit,
            "coverage": round(with_audit / n, 4) if n else 0.0,
            "with_check": sum(c.check is not None for c in audit),
        },
    }
