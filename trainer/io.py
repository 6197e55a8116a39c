"""Small file helpers for the run folder: atomic JSON writes and append-only JSON lines.

Atomic write = `harness.store.atomic_write_text` (temp file in the same folder, fsync, rename): a run
killed mid-write leaves the old file or the new one, never half of one. JSON-lines logs are appended
one line at a time with a flush+fsync, and readers skip a torn last line (the only damage SIGKILL can
do to an append).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.store import atomic_write_text

# `atomic_write_text` is re-exported: the run folder's writers import their file helpers from here.
__all__ = ["append_jsonl", "atomic_write_json", "atomic_write_text", "read_jsonl", "truncate_jsonl"]


def atomic_write_json(path: Path, data: Any) -> None:
    """`data` as indented, key-sorted JSON, written atomically (the run folder's JSON format)."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, default=str, sort_keys=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """All complete records; a torn *last* line (killed writer) is skipped, a bad line elsewhere raises."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines):
                break
            raise ValueError(f"{path}:{i}: invalid JSON line ({e})") from None
    return out


def truncate_jsonl(path: Path, keep: Any) -> int:
    """Rewrite a JSON-lines file atomically keeping records where keep(record) is true; returns dropped count."""
    records = read_jsonl(path)
    kept = [r for r in records if keep(r)]
    if len(kept) != len(records):
        atomic_write_text(path, "".join(json.dumps(r, default=str, sort_keys=True) + "\n" for r in kept))
    return len(records) - len(kept)
