"""Small file helpers for the run folder: atomic JSON writes and append-only JSON lines that heal.

Atomic write = `harness.atomic.atomic_write_text` (temp file in the same folder, fsync, rename): a run
killed mid-write leaves the old file or the new one, never half of one.

JSON-lines logs (`metrics`, `events`, `rounds`, ...) are appended one complete line per `os.write` on an
`O_APPEND` descriptor, then fsynced. The only damage a kill (or a full disk) can do is a *torn tail*: a last
line without its newline. Such a tail is never glued to the next record:

- `heal_jsonl` cuts it back to the last complete record (the cut bytes go to `<file>.torn`, so nothing
  is deleted) and returns how many lines it cut; a resume calls it on every log of the run folder and
  counts what it cut in its summary;
- `append_jsonl` checks the last byte before it appends and heals a torn tail first (with a warning), so
  even a writer that did not go through a resume cannot glue two records;
- `read_jsonl` reads past a line that does not parse with a warning naming the file and line (what
  `report`, `eval` and `evolve` need: a damaged log must not hide the rest of a run); `strict=True`
  raises instead, naming file and line.

A short write (`ENOSPC`) is undone by truncating the file back to where the append started, so a full disk
leaves the log as it was and the error goes up.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_text

log = logging.getLogger(__name__)

# `atomic_write_text` is re-exported: the run folder's writers import their file helpers from here.
__all__ = [
    "append_jsonl",
    "atomic_write_json",
    "atomic_write_text",
    "heal_jsonl",
    "read_jsonl",
    "truncate_jsonl",
    "TORN_SUFFIX",
]

TORN_SUFFIX = ".torn"  # `<log>.torn` keeps the bytes `heal_jsonl` cut off a log


def atomic_write_json(path: Path, data: Any) -> None:
    """`data` as indented, key-sorted JSON, written atomically (the run folder's JSON format)."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, default=str, sort_keys=True) + "\n").encode("utf-8")


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append `record` as one line (one write, fsynced). A torn tail left by a killed writer is healed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _line(record)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if _ends_torn(fd):
            os.close(fd)
            fd = -1
            cut = heal_jsonl(path)
            log.warning(
                "%s: the last line was torn (an interrupted write); %d line(s) moved to %s%s before appending",
                path,
                cut,
                path.name,
                TORN_SUFFIX,
            )
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        start = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, start)  # a full disk must not leave half a record behind
            raise
    finally:
        if fd >= 0:
            os.close(fd)


def heal_jsonl(path: Path) -> int:
    """Cut a torn tail (bytes after the last newline) off `path`; returns the lines cut (0 or 1).

    A tail that is a complete JSON object (only its newline was lost) is kept and given its newline. The cut
    bytes are appended to `<path>.torn` (fsynced) before the log is truncated, so nothing is lost."""
    path = Path(path)
    if not path.is_file():
        return 0
    with open(path, "r+b") as f:
        data = f.read()
        if not data or data.endswith(b"\n"):
            return 0
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        try:
            whole = isinstance(json.loads(tail), dict)
        except ValueError:
            whole = False
        if whole:
            f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())
            return 0
        with open(path.with_name(path.name + TORN_SUFFIX), "ab") as aside:
            aside.write(tail + b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())
    return 1


def read_jsonl(path: Path, *, strict: bool = False, bad: list[int] | None = None) -> list[dict[str, Any]]:
    """All records that parse.

    A line that does not (a torn tail, a damaged record) is skipped with a warning naming file and line, and its
    line number goes into `bad` when given; `strict=True` raises `ValueError` naming file and line instead (a
    torn *last* line is still only warned about: a killed writer leaves one).
    """
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn_last = len(lines) if lines[-1] else None  # the file does not end with a newline
    out = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict):
                raise ValueError(f"a JSON {type(rec).__name__}, not an object")
        except ValueError as e:
            what = "torn last line (an interrupted write)" if i == torn_last else f"not a JSON record ({e})"
            if strict and i != torn_last:
                raise ValueError(f"{path}:{i}: {what}") from None
            log.warning("%s:%d: %s; line skipped", path, i, what)
            if bad is not None:
                bad.append(i)
            continue
        out.append(rec)
    return out


def truncate_jsonl(path: Path, keep: Callable[[dict[str, Any]], bool], *, bad: list[int] | None = None) -> int:
    """Rewrite a JSON-lines file atomically keeping the records where keep(record) is true.

    Returns how many records were dropped. Lines that do not parse are dropped too (each with a warning, its
    number in `bad`).
    """
    bad = [] if bad is None else bad
    records = read_jsonl(path, bad=bad)
    kept = [r for r in records if keep(r)]
    if len(kept) != len(records) or bad:
        atomic_write_text(path, "".join(_line(r).decode("utf-8") for r in kept))
    return len(records) - len(kept)
