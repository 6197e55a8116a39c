"""`WriteQueue`: memory writes held, in order, while the Chroma server is unreachable, and written when it answers.

A `TrainingMemory.http` store keeps one. A write that fails because the server is gone (a transport error: refused,
reset, cut mid-request) is appended here instead of failing the training step that made it; every later write,
read and snapshot first tries to write the queue out, oldest first, so a reader never sees the memory without what
was queued before it. Writes are upserts on stable ids, so one that reached the server before the connection broke
is harmless to repeat.

The queue is bounded (`MAX_QUEUED_RECORDS`): it lives in the training process, and a record that does not fit must
stop training rather than be dropped (the store raises; see docs/DESIGN.md §9). Each outage is said in one log
line when it starts and one when it ends (records queued and flushed, seconds down); `queued` and `flushed` are the
counts the trainer writes into `metrics.jsonl`.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# Records (not calls) held at most. A group record carries its rollouts' texts (a few KiB each): 5,000 of them stay
# well under a GiB, and at a few dozen groups per step they cover a few hundred steps of outage.
MAX_QUEUED_RECORDS = 5_000


@dataclass(frozen=True)
class QueuedWrite:
    """One upsert as `TrainingMemory._put` built it (its `seq` numbers already assigned, so order survives)."""

    kind: str
    ids: list[str]
    documents: list[str]
    metadatas: list[dict[str, Any]]


@dataclass
class WriteQueue:
    """The writes waiting for the server at `location`, oldest first, and the counts of this process's outages."""

    location: str
    limit: int = MAX_QUEUED_RECORDS
    pending: deque[QueuedWrite] = field(default_factory=deque)
    queued: int = 0  # records waiting now
    flushed: int = 0  # records written after waiting, over the store's life
    outages: int = 0  # outages begun over the store's life
    _down_since: float | None = None
    _queued_this_outage: int = 0

    @property
    def down(self) -> bool:
        """True from the first failed write until the queue is written out."""
        return self._down_since is not None

    def fits(self, n: int) -> bool:
        return self.queued + n <= self.limit

    def add(self, write: QueuedWrite, error: BaseException) -> None:
        """Hold `write` (the caller checked `fits`); the first one of an outage says so in the log."""
        if self._down_since is None:
            self._down_since = time.monotonic()
            self._queued_this_outage = 0
            self.outages += 1
            log.warning(
                "memory server at %s unreachable (%s: %s): memory writes are queued in order until it answers "
                "(at most %d records; training goes on)",
                self.location,
                type(error).__name__,
                error,
                self.limit,
            )
        self.pending.append(write)
        self.queued += len(write.ids)
        self._queued_this_outage += len(write.ids)

    def flush(self, put: Callable[[QueuedWrite], None]) -> None:
        """Write the queue out, oldest first, with `put`; the first one `put` cannot write stops it (re-raised).

        A write that was put leaves the queue at once, so a flush cut short resumes where it stopped.
        """
        while self.pending:
            write = self.pending[0]
            put(write)
            self.pending.popleft()
            self.queued -= len(write.ids)
            self.flushed += len(write.ids)
        if self._down_since is not None:
            log.warning(
                "memory server at %s answers again after %.0f s: records queued meanwhile written: %d",
                self.location,
                time.monotonic() - self._down_since,
                self._queued_this_outage,
            )
            self._down_since = None
