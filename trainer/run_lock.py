"""One writer per run folder: an exclusive lock held for the life of a trainer.

`harnessrl train` (fresh, `--resume`, `--overwrite`) takes the lock on `run_dir/.harnessrl.lock` before it
touches anything in the folder and keeps it until the trainer is done. The lock is an `flock` on that file,
which the kernel drops when the holder dies (even by SIGKILL), so a dead trainer never blocks the folder.
The holder writes its pid (and start time and command) into the file and clears it on a clean release: a
pid found there when the lock is taken is a holder that died without releasing, which is said (a stale
lock taken over). A second process is refused with `RunFolderLocked`, naming the holder's pid and what to do.

Within one process the lock is re-entrant (`train` takes it, `build_trainer` takes it again for the
`HarnessRun`): a count per folder, released when the last holder releases. Only the main process of a
multi-process launch takes it (the other ranks never write to the folder).

The lock file lives inside the folder (a dot-file, which `trainer.grpo.clear_run_folder` keeps while it
deletes a previous run for `--overwrite`). A lock on a network filesystem holds only where that filesystem
supports `flock` across machines.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = ".harnessrl.lock"

_HELD: dict[str, RunLock] = {}
_GUARD = threading.Lock()


class RunFolderLocked(RuntimeError):
    """Another live process holds the run folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(fd: int) -> dict:
    raw = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    if not raw:
        return {}
    try:
        info = json.loads(raw)
    except ValueError:
        return {"pid": raw[:32]}
    return info if isinstance(info, dict) else {}


class RunLock:
    """The lock on one run folder, held by this process (see the module docstring)."""

    def __init__(self, root: Path, fd: int) -> None:
        self.root = root
        self.path = root / LOCK_NAME
        self._fd: int | None = fd
        self._count = 1

    @classmethod
    def acquire(cls, run_dir: str | os.PathLike[str]) -> RunLock:
        """Take (or, in this process, take again) the lock on `run_dir`, creating the folder if needed.

        Raises `RunFolderLocked` when another live process holds it."""
        root = Path(run_dir).resolve()
        key = str(root)
        with _GUARD:
            held = _HELD.get(key)
            if held is not None and held._fd is not None:
                held._count += 1
                return held
            if root.exists() and not root.is_dir():
                raise FileExistsError(f"run_dir {root} exists and is not a folder")
            root.mkdir(parents=True, exist_ok=True)
            fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                info = _holder(fd)
                os.close(fd)
                pid = info.get("pid", "unknown")
                since = f", since {info['started']}" if info.get("started") else ""
                cmd = f" ({info['command']})" if info.get("command") else ""
                raise RunFolderLocked(
                    f"run folder {root} is in use by another trainer: pid {pid}{since}{cmd} holds {root / LOCK_NAME}. "
                    f"One process writes a run folder at a time: wait for it to finish, stop it (kill {pid}) and "
                    f"then `--resume`, or choose another run_dir (e.g. --set run_dir={root}-2)"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            stale = _holder(fd)
            if stale.get("pid") not in (None, os.getpid()):
                pid = stale["pid"]
                state = (
                    "no longer running" if isinstance(pid, int) and not _alive(pid) else "it no longer holds the lock"
                )
                log.warning(
                    "run folder %s: took over a stale lock left by pid %s (%s; it stopped without releasing "
                    "it, e.g. killed)",
                    root,
                    pid,
                    state,
                )
            info = {
                "pid": os.getpid(),
                "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
            os.fsync(fd)
            lock = cls(root, fd)
            _HELD[key] = lock
            return lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop one hold; the last one clears the pid and unlocks (idempotent once released)."""
        with _GUARD:
            if self._fd is None:
                return
            self._count -= 1
            if self._count > 0:
                return
            fd, self._fd = self._fd, None
            _HELD.pop(str(self.root), None)
            try:
                os.ftruncate(fd, 0)  # a clean release: the next holder finds no pid, so no stale lock
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
