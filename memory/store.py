"""`TrainingMemory`: the evolver's Chroma-backed memory of groups, failure events, attributions, proposals.

See docs/DESIGN.md §9.

Two ways to reach Chroma, same API:

- `TrainingMemory.persistent(path)`: a `PersistentClient` on a run folder. One writer per folder: we take an
  exclusive `flock` on `<path>/harnessrl.lock` for the life of the store, so a second process (or a second
  store in this process) fails fast with a `MemoryStoreError` instead of corrupting the sqlite/HNSW files.
- `TrainingMemory.http(host, port)`: an `HttpClient` to a `chroma run --path <dir>` server, for when the
  trainer, `langgraph dev` and scripts all need the memory at once. A server can go away and come back: a write
  it cannot take is queued in order and written when it answers again (`memory/outage.py`); a read while it is
  away is a `MemoryServerDown`, as is a queue that would overflow (training stops rather than drop a record).
- `TrainingMemory.ephemeral()`: in-memory, for tests.

Every collection is created and opened with our embedding function passed explicitly (never Chroma's
default, which downloads a model); which one a store was built with is recorded in the collection metadata
and a mismatch on reopen is an error, not a silent mix of vector spaces.

Queries:
- `task_history(task_id, last_n)`: within-task evidence, metadata filter on `task_id`, ordered by (step, seq).
- `similar_cases(text, k, failure_type=, interface=, outcome=)`: cross-task evidence, semantic top-k over
  proposals (accepted and rejected alike) with their outcome and measured deltas.
- `proposals_like(failure_type, exclude_task=)` / `events_like(failure_type, domain=, exclude_task=)`: the same
  cross-task evidence by exact metadata (the rule brains' template evidence; generalising an accepted repair).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chromadb
import httpx
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings
from chromadb.errors import ChromaError

from harness.atomic import atomic_write_text
from memory.embeddings import make_embedding
from memory.outage import MAX_QUEUED_RECORDS, QueuedWrite, WriteQueue
from memory.records import (
    KINDS,
    AttributionRecord,
    EventRecord,
    GroupSummary,
    Kind,
    ProposalRecord,
    Record,
    record_from_metadata,
)

log = logging.getLogger(__name__)

_RUN_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,127}$")
LOCK_FILE = "harnessrl.lock"
SNAPSHOT_FORMAT = "harnessrl-memory-v1"


class MemoryStoreError(RuntimeError):
    """The memory store cannot be opened or used; the message names the path/URL and what to do."""


class MemoryServerDown(MemoryStoreError):
    """The Chroma server does not answer: a read cannot be served, or the queue of writes waiting for it is full."""


@dataclass(frozen=True)
class SimilarCase:
    """One cross-task hit: the stored record plus what the evolver needs at a glance."""

    id: str
    kind: str
    task_id: str
    distance: float
    document: str
    failure_type: str = ""
    interface: str = ""
    outcome: str = ""
    deltas: dict[str, float] = field(default_factory=dict)
    record: Record | None = None


def _settings() -> Settings:
    return Settings(anonymized_telemetry=False, allow_reset=False)


def _where(**eq: Any) -> dict[str, Any] | None:
    """Chroma `where` from equality filters, ignoring None; `$and` only when there are two or more."""
    clauses = [{k: {"$eq": v}} for k, v in eq.items() if v is not None]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class TrainingMemory:
    """Training-time memory over four Chroma collections, one per record kind (`KINDS`).

    Build it with `persistent`, `http` or `ephemeral`.
    """

    def __init__(
        self,
        client: ClientAPI,
        *,
        embedding: Any = "minilm",
        run_id: str | None = None,
        location: str = "",
        lock_fd: int | None = None,
        queue: WriteQueue | None = None,
    ) -> None:
        if run_id is not None and not _RUN_ID.match(run_id):
            raise ValueError(
                f"run_id {run_id!r} must be 1-128 chars of [A-Za-z0-9._-], start with a letter or digit, no '..'"
            )
        self._client = client
        self._lock_fd = lock_fd
        self.location = location
        self.run_id = run_id
        self.embedding = make_embedding(embedding)
        self._seq_lock = threading.Lock()
        self._last_seq = 0
        self._closed = False
        self._cols: dict[str, Collection] = {}
        # Writes waiting for a server that went away (`http` stores only: a local folder has no outages).
        self._queue = queue
        self._queue_lock = threading.RLock()  # the reward's thread and the pause's may both write
        emb_meta = {
            "harnessrl_embedding": self.embedding.name(),
            "harnessrl_embedding_config": json.dumps(self.embedding.get_config(), sort_keys=True),
        }
        try:
            for kind in KINDS:
                name = f"{run_id}__{kind}" if run_id else kind
                col = client.get_or_create_collection(
                    name,
                    embedding_function=self.embedding,
                    metadata=emb_meta,
                    configuration={"hnsw": {"space": "cosine"}},
                )
                stored = col.metadata or {}
                if (
                    stored.get("harnessrl_embedding_config", emb_meta["harnessrl_embedding_config"])
                    != emb_meta["harnessrl_embedding_config"]
                ):
                    raise MemoryStoreError(
                        f"memory at {location}: collection {name!r} was built with embedding "
                        f"{stored.get('harnessrl_embedding')} {stored.get('harnessrl_embedding_config')}, opened with "
                        f"{emb_meta['harnessrl_embedding']} {emb_meta['harnessrl_embedding_config']}; open it with the "
                        "same embedding (vectors from different embedders are not comparable)"
                    )
                self._cols[kind] = col
        except ValueError as e:
            self._abort()
            if "Embedding function conflict" in str(e):
                raise MemoryStoreError(
                    f"memory at {location}: {e}. Open it with the embedding it was created with."
                ) from e
            raise
        except ChromaError as e:
            self._abort()
            raise MemoryStoreError(
                f"memory at {location}: cannot open its collections ({type(e).__name__}: {e}); if the folder is "
                "corrupt, move it aside (or restore a snapshot with TrainingMemory.restore) and start again"
            ) from e
        except BaseException:
            self._abort()
            raise

    # -- constructors ---------------------------------------------------------------------------------------
    @classmethod
    def persistent(
        cls, path: str | os.PathLike[str], embedding: Any = "minilm", run_id: str | None = None
    ) -> TrainingMemory:
        """A store in a run folder (created if missing), held exclusively by this object until `close()`."""
        p = Path(path)
        hint = "pass a writable folder (the run's memory/ directory)"
        if p.exists() and not p.is_dir():
            raise MemoryStoreError(f"memory path {p} exists and is not a folder; {hint}")
        try:
            p.mkdir(parents=True, exist_ok=True)
            fd = os.open(p / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise MemoryStoreError(f"memory path {p}: cannot create the folder or its lock file ({e}); {hint}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise MemoryStoreError(
                f"memory at {p} is locked by another open store (pid {holder}); a Chroma folder has one writer. "
                "Close the other store, or run `chroma run --path <folder>` and use TrainingMemory.http(...) from "
                "every process"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            client = chromadb.PersistentClient(path=str(p), settings=_settings())
        except (ChromaError, OSError) as e:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise MemoryStoreError(
                f"memory at {p} cannot be opened by Chroma ({type(e).__name__}: {e}). If chroma.sqlite3 there is "
                "corrupt, move the folder aside (or restore a snapshot with TrainingMemory.restore) and start again"
            ) from e
        return cls(client, embedding=embedding, run_id=run_id, location=str(p), lock_fd=fd)

    @classmethod
    def http(
        cls,
        host: str = "127.0.0.1",
        port: int = 8000,
        embedding: Any = "minilm",
        run_id: str | None = None,
        max_queued: int = MAX_QUEUED_RECORDS,
    ) -> TrainingMemory:
        """A store on a running `chroma run` server (several processes may share it).

        Writes the server cannot take while it is away are queued, up to `max_queued` records (`memory/outage.py`).
        """
        url = f"http://{host}:{port}"
        try:
            client = chromadb.HttpClient(host=host, port=port, settings=_settings())
            client.heartbeat()
        except Exception as e:  # noqa: BLE001 - any failure to reach the server is re-raised with the URL
            raise MemoryStoreError(
                f"no Chroma server at {url} ({type(e).__name__}: {e}); start one with "
                f"`chroma run --path <folder> --host {host} --port {port}`"
            ) from e
        return cls(client, embedding=embedding, run_id=run_id, location=url, queue=WriteQueue(url, max_queued))

    @classmethod
    def ephemeral(cls, embedding: Any = "hash", run_id: str | None = None) -> TrainingMemory:
        """In-memory store for tests.

        Chroma shares one in-memory system per process, so give each test its own `run_id` (a fresh one is made
        when omitted) to keep their collections apart.
        """
        if run_id is None:
            run_id = f"eph{time.time_ns()}{threading.get_ident() % 10_000}"
        client = chromadb.EphemeralClient(settings=_settings())
        return cls(client, embedding=embedding, run_id=run_id, location="ephemeral")

    # -- lifecycle ------------------------------------------------------------------------------------------
    def _release(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _abort(self) -> None:
        """Undo a half-finished open: close the client, then drop the folder lock."""
        self._closed = True
        try:
            self._client.close()
        finally:
            self._release()

    def close(self) -> None:
        """Flush and release the folder (idempotent). The store cannot be used afterwards.

        Writes still queued for a server that does not answer are lost with the process: said as an error, with
        where the memory stands (the last complete checkpoint holds a whole snapshot).
        """
        if self._closed:
            return
        if self._queue is not None and self._queue.pending:
            try:
                self._flush()
            except (httpx.TransportError, MemoryStoreError) as e:  # closing must still release the client
                log.error(
                    "memory server at %s still unreachable at close (%s): %d queued records were not written. "
                    "The last complete checkpoint's memory snapshot is whole: restart the server and resume from it",
                    self.location,
                    e,
                    self._queue.queued,
                )
        self._closed = True
        self._cols = {}
        try:
            self._client.close()
        finally:
            self._release()

    def __enter__(self) -> TrainingMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _col(self, kind: str) -> Collection:
        if self._closed:
            raise MemoryStoreError(f"memory at {self.location} is closed")
        try:
            return self._cols[kind]
        except KeyError:
            raise ValueError(f"unknown memory collection {kind!r}; expected one of {list(KINDS)}") from None

    def _next_seq(self) -> int:
        # Insertion order breaks ties between records of the same step. Wall-clock nanoseconds keep the order
        # meaningful across processes sharing a server; the max() keeps it strictly increasing in this one.
        with self._seq_lock:
            self._last_seq = max(time.time_ns(), self._last_seq + 1)
            return self._last_seq

    # -- a server that goes away (memory/outage.py) -------------------------------------------------------------
    def _flush(self) -> None:
        """Write out the queued writes, oldest first; raises `httpx.TransportError` while the server is away."""
        if self._queue is None or not self._queue.pending:
            return
        with self._queue_lock:
            self._client.heartbeat()  # cheap: no embedding is computed for a write the server cannot take
            self._queue.flush(self._upsert)

    def _down(self, doing: str, e: BaseException) -> MemoryServerDown:
        waiting = f"; records queued for it: {self._queue.queued}" if self._queue and self._queue.queued else ""
        return MemoryServerDown(
            f"memory server at {self.location} unreachable while {doing} ({type(e).__name__}: {e}){waiting}. "
            f"Restart it on the same port and folder (`chroma run --path <its folder> --port <port>`)"
        )

    def queue_counts(self) -> dict[str, int]:
        """Records waiting for the server now, records written after waiting, outages begun (0s without a server).

        Counted over this store's life; the trainer writes the first two into `metrics.jsonl`.
        """
        q = self._queue
        if q is None:
            return {"queued": 0, "flushed": 0, "outages": 0}
        return {"queued": q.queued, "flushed": q.flushed, "outages": q.outages}

    # -- writes (upserts on stable ids: recording the same thing twice is idempotent) -------------------------
    def _upsert(self, write: QueuedWrite) -> None:
        try:
            self._col(write.kind).upsert(ids=write.ids, documents=write.documents, metadatas=write.metadatas)  # type: ignore[arg-type]
        except ChromaError as e:
            raise MemoryStoreError(
                f"memory at {self.location}: writing {len(write.ids)} {write.kind} failed: {e}"
            ) from e

    def _put(self, records: Sequence[Record]) -> list[str]:
        if not records:
            return []
        kind = records[0].kind
        if any(r.kind != kind for r in records):
            raise ValueError("_put takes records of one kind")
        ids = [r.record_id for r in records]
        metas = [{**r.metadata(), "seq": self._next_seq()} for r in records]
        write = QueuedWrite(kind, ids, [r.document() for r in records], metas)
        queue = self._queue
        if queue is None:
            self._upsert(write)
            return ids
        with self._queue_lock:
            try:
                self._flush()  # what waits goes first: the server sees the writes in the order they were made
                self._upsert(write)
            except httpx.TransportError as e:
                self._hold(queue, write, e)
        return ids

    def _hold(self, queue: WriteQueue, write: QueuedWrite, e: httpx.TransportError) -> None:
        """Queue a write the server could not take; a queue that is full stops training instead."""
        if not queue.fits(len(write.ids)):
            raise MemoryServerDown(
                f"memory server at {self.location} unreachable ({type(e).__name__}: {e}) and "
                f"{queue.queued} records are queued for it, the most this process holds: training stops "
                f"here rather than drop a record. Restart the server on the same port and folder (`chroma run "
                f"--path <its folder> --port <port>`), then continue with `harnessrl train --config <your "
                f"config> --resume` (the last complete checkpoint's memory is restored exactly; the steps since "
                f"are trained again)"
            ) from e
        queue.add(write, e)

    def add_group(
        self, summary: GroupSummary | Any, best: Any = None, worst: Any = None, harness_version: int = 0, **kw: Any
    ) -> str:
        """Record one group: a `GroupSummary`, or (detector `GroupStats`, best, worst, harness_version)."""
        if not isinstance(summary, GroupSummary):
            summary = GroupSummary.from_stats(summary, best, worst, harness_version, **kw)
        return self._put([summary])[0]

    def add_event(self, event: EventRecord | Any, *, domain: str = "", harness_version: int = 0) -> str:
        """Record a failure event: an `EventRecord` or a bare `harness.types.FailureEvent`."""
        if not isinstance(event, EventRecord):
            event = EventRecord(event=event, domain=domain, harness_version=harness_version)
        return self._put([event])[0]

    def add_events(self, events: Sequence[EventRecord]) -> list[str]:
        return self._put(list(events))

    def add_attribution(self, record: AttributionRecord) -> str:
        return self._put([record])[0]

    def add_proposal(self, record: ProposalRecord) -> str:
        return self._put([record])[0]

    def add_proposals(self, records: Sequence[ProposalRecord]) -> list[str]:
        return self._put(list(records))

    # -- reads ----------------------------------------------------------------------------------------------
    def _get(self, kind: str, where: dict[str, Any] | None, ids: list[str] | None = None) -> list[tuple[dict, Record]]:
        try:
            self._flush()  # a reader sees every write made before it, queued ones included
            res = self._col(kind).get(ids=ids, where=where, include=["metadatas"])  # type: ignore[arg-type]
        except httpx.TransportError as e:
            raise self._down(f"reading {kind}", e) from e
        except ChromaError as e:
            raise MemoryStoreError(f"memory at {self.location}: reading {kind} failed: {e}") from e
        metas = res["metadatas"] or []
        return [(dict(m), record_from_metadata(dict(m))) for m in metas]

    def get(self, kind: Kind, record_id: str) -> Record | None:
        rows = self._get(kind, None, ids=[record_id])
        return rows[0][1] if rows else None

    def task_history(
        self, task_id: str, last_n: int = 10, kinds: Iterable[Kind] = ("groups", "events", "proposals")
    ) -> list[Record]:
        """The last `last_n` records about one task across `kinds`, oldest first (by step, then insertion).

        An unknown task id gives an empty list.
        """
        if last_n <= 0:
            return []
        rows: list[tuple[dict, Record]] = []
        for kind in kinds:
            rows.extend(self._get(kind, {"task_id": {"$eq": task_id}}))
        rows.sort(key=lambda r: (int(r[0].get("step", 0)), int(r[0].get("seq", 0))))
        return [rec for _, rec in rows[-last_n:]]

    def proposals_for(self, task_id: str, interface: str | None = None) -> list[ProposalRecord]:
        """Every proposal recorded for a task (optionally on one interface), oldest first."""
        rows = self._get("proposals", _where(task_id=task_id, interface=interface))
        rows.sort(key=lambda r: (int(r[0].get("step", 0)), int(r[0].get("seq", 0))))
        return [rec for _, rec in rows if isinstance(rec, ProposalRecord)]

    def proposals_like(self, failure_type: str, exclude_task: str | None = None) -> list[ProposalRecord]:
        """Cross-task outcomes by metadata, not by embedding.

        Every proposal on `failure_type` made for another task than `exclude_task`, oldest first. The rule brains
        count successes and failures per template and interface over these; `similar_cases` is the semantic top-k
        the LLM brains read.
        """
        where = _where(failure_type=failure_type)
        if exclude_task is not None:
            where = {"$and": [where, {"task_id": {"$ne": exclude_task}}]}
        rows = self._get("proposals", where)
        rows.sort(key=lambda r: (int(r[0].get("step", 0)), int(r[0].get("seq", 0))))
        return [rec for _, rec in rows if isinstance(rec, ProposalRecord)]

    def events_like(
        self, failure_type: str, domain: str | None = None, exclude_task: str | None = None
    ) -> list[EventRecord]:
        """Failure events of one type (optionally of one domain) on tasks other than `exclude_task`, newest first.

        It is where an accepted repair looks for other tasks with the same failure (`agents/generalise.py`).
        """
        clauses = [{"failure_type": {"$eq": failure_type}}]
        if domain is not None:
            clauses.append({"domain": {"$eq": domain}})
        if exclude_task is not None:
            clauses.append({"task_id": {"$ne": exclude_task}})
        rows = self._get("events", clauses[0] if len(clauses) == 1 else {"$and": clauses})
        rows.sort(key=lambda r: (int(r[0].get("step", 0)), int(r[0].get("seq", 0))), reverse=True)
        return [rec for _, rec in rows if isinstance(rec, EventRecord)]

    def _query(self, kind: Kind, query_text: str, k: int, where: dict[str, Any] | None) -> list[SimilarCase]:
        if k <= 0:
            return []
        try:
            self._flush()
            res = self._col(kind).query(
                query_texts=[query_text], n_results=k, where=where, include=["metadatas", "documents", "distances"]
            )
        except httpx.TransportError as e:
            raise self._down(f"querying {kind}", e) from e
        except ChromaError as e:
            raise MemoryStoreError(f"memory at {self.location}: querying {kind} failed: {e}") from e
        out = []
        for rid, meta, doc, dist in zip(
            res["ids"][0], (res["metadatas"] or [[]])[0], (res["documents"] or [[]])[0], (res["distances"] or [[]])[0]
        ):
            rec = record_from_metadata(dict(meta))
            deltas = rec.deltas if isinstance(rec, ProposalRecord) else {}
            out.append(
                SimilarCase(
                    id=rid,
                    kind=kind,
                    task_id=str(meta.get("task_id", "")),
                    distance=float(dist),
                    document=doc or "",
                    failure_type=str(meta.get("failure_type", "")),
                    interface=str(meta.get("interface", "")),
                    outcome=str(meta.get("outcome", "")),
                    deltas=dict(deltas),
                    record=rec,
                )
            )
        return out

    def similar_cases(
        self,
        query_text: str,
        k: int = 5,
        failure_type: str | None = None,
        interface: str | None = None,
        outcome: str | None = None,
        exclude_task: str | None = None,
    ) -> list[SimilarCase]:
        """Cross-task evidence: the `k` proposals nearest to `query_text` that match the filters, nearest first.

        Each comes with its outcome and measured deltas. `exclude_task` drops the asking task's own proposals.
        """
        where = _where(failure_type=failure_type, interface=interface, outcome=outcome)
        if exclude_task is not None:
            clause = {"task_id": {"$ne": exclude_task}}
            where = clause if where is None else {"$and": [*where.get("$and", [where]), clause]}
        return self._query("proposals", query_text, k, where)

    def similar_events(self, query_text: str, k: int = 5, failure_type: str | None = None) -> list[SimilarCase]:
        """Failure events nearest to `query_text` (optionally of one type), nearest first."""
        return self._query("events", query_text, k, _where(failure_type=failure_type))

    def count(self) -> dict[str, int]:
        try:
            self._flush()
            return {kind: self._col(kind).count() for kind in KINDS}
        except httpx.TransportError as e:
            raise self._down("counting records", e) from e

    # -- snapshots (engine-independent JSONL; resume restores the memory with the harness version) ------------
    def snapshot(self, dest: str | os.PathLike[str]) -> Path:
        """Write every record to a JSONL file atomically (`atomic_write_text`).

        Queued writes are written to the server first, so the snapshot holds them; while the server is away it
        cannot be read, and the snapshot is a `MemoryServerDown` (no file is written).

        Embeddings are not stored: `restore` recomputes them, which keeps the file small and portable across
        embedders of the same kind.
        """
        dest = Path(dest)
        lines = [json.dumps({"format": SNAPSHOT_FORMAT, "embedding": self.embedding.name()})]
        for kind in KINDS:
            rows = self._get(kind, None)
            rows.sort(key=lambda r: (int(r[0].get("step", 0)), int(r[0].get("seq", 0))))
            lines.extend(json.dumps({"kind": kind, "record": rec.model_dump(mode="json")}) for _, rec in rows)
        atomic_write_text(dest, "".join(line + "\n" for line in lines))
        return dest

    def restore(self, src: str | os.PathLike[str]) -> dict[str, int]:
        """Upsert every record of a `snapshot` file into this store; returns how many per kind."""
        return self._put_all(_read_snapshot(Path(src)))

    def _put_all(self, by_kind: dict[str, list[Record]]) -> dict[str, int]:
        for recs in by_kind.values():
            for i in range(0, len(recs), 256):
                self._put(recs[i : i + 256])
        return {k: len(v) for k, v in by_kind.items()}

    def restore_exactly(self, src: str | os.PathLike[str]) -> dict[str, int]:
        """Make this store hold exactly the records of a `snapshot` file.

        Delete every record the snapshot lacks, then `restore` (which also puts back the snapshot's version of a
        record re-recorded since). For a store that cannot be swapped for a fresh one, as a run folder can: a Chroma
        server that other processes use. Returns how many records were deleted per kind.
        """
        by_kind = _read_snapshot(Path(src))
        deleted: dict[str, int] = {}
        for kind, recs in by_kind.items():
            keep = {r.record_id for r in recs}
            try:
                extra = [i for i in self._col(kind).get(include=[])["ids"] if i not in keep]
                for i in range(0, len(extra), 256):
                    self._col(kind).delete(ids=extra[i : i + 256])
            except ChromaError as e:
                raise MemoryStoreError(f"memory at {self.location}: deleting {kind} not in {src} failed: {e}") from e
            deleted[kind] = len(extra)
        self._put_all(by_kind)
        return deleted


def _read_snapshot(src: Path) -> dict[str, list[Record]]:
    """The records of a `TrainingMemory.snapshot` file by kind; a bad row is an error naming file and line."""
    from memory.records import RECORD_TYPES

    by_kind: dict[str, list[Record]] = {k: [] for k in KINDS}
    with open(src, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if lineno == 1:
                    if row.get("format") != SNAPSHOT_FORMAT:
                        raise ValueError(f"format {row.get('format')!r}, expected {SNAPSHOT_FORMAT!r}")
                    continue
                by_kind[row["kind"]].append(RECORD_TYPES[row["kind"]].model_validate(row["record"]))  # type: ignore[arg-type]
            except (ValueError, KeyError) as e:
                raise MemoryStoreError(f"{src}:{lineno}: bad memory snapshot row: {e}") from e
    return by_kind
