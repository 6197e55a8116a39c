"""Atomic file writes: the repository's one write-temp-fsync-rename helper.

Every module that writes a file whole (harness versions, memory snapshots, run-folder JSON, reports, the bundled
suite) goes through `atomic_write_text`, so a crash leaves the old file or the new one, never half of one. It sits
on the ground floor so that writing a file does not mean importing the versioned store.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Flush a folder's entries (a rename into it) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write-temp-fsync-rename in `path`'s directory, then fsync the directory: the repo's one atomic write.

    A crash leaves the old file or the new one, never half of one; a failed write removes its temp file.
    Missing parent folders are created first (run folders grow lazily).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
