"""Versioned on-disk harness: one JSON file per version plus an append-only update log.

Layout under `root`:

    versions/v000000.json   HarnessState JSON (version 0 = the seed harness)
    versions/v000001.json   ...
    updates.jsonl           one line per *committed* update: version, parent_version, step, update, meta, timestamp

Durability rules:

- A version file is written to a temp file in the same directory, flushed and fsynced, then
  `os.replace`d into place and the directory fsynced: a crash leaves either the old set of versions
  or the new one, never a half-written version. Temp files never match `v{n}.json` and are swept by
  the next commit.
- The version file is written *before* its log line, so version files are the source of truth. If
  a crash lands between the two, the next `commit` appends a recovery record (`update: null`,
  `meta.recovered: true`) for the orphaned version before its own, so the log stays complete.
- Each log line goes out in one `write` of a complete line, then flush + fsync. A torn last line
  (power loss mid-write) is reported with a warning by `history()` and moved aside to
  `updates.jsonl.torn` by the next `commit`; a bad line anywhere else is corruption and raises.
- One writer per store: `commit` (and `abandon_versions_after`, which moves later versions aside for a
  resume or a failed round) holds an exclusive `flock` on `root/.lock`.

Rejected proposals are not logged here: `updates.jsonl` holds committed updates only; the evolver
records rejected candidates and the critic's numbers in the training memory (docs/DESIGN.md §9).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.atomic import atomic_write_text
from harness.ops import apply
from harness.types import Criterion, HarnessState, HarnessUpdate

_VERSION_FILE = re.compile(r"^v(\d{6,})\.json$")


class StoreCorrupt(ValueError):
    """A file in the store cannot be read back.

    The message names the path (and line), what is wrong and the way out, in one line (no pydantic dump).
    """


def _what(err: ValidationError) -> str:
    """A validation error in a sentence: the first problem with its field, and how many more."""
    errors = err.errors(include_url=False)
    first = errors[0] if errors else {"loc": (), "msg": str(err)}
    loc = ".".join(str(p) for p in first.get("loc", ())) or "the file"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {first.get('msg', '')}{more}"


def _version_recovery(version: int) -> str:
    if version == 0:
        return (
            "version 0 is the seed harness: `harnessrl train --resume` rebuilds it from the run's suite; or move "
            "the file aside and resume from a checkpoint"
        )
    return (
        f"`harnessrl train --resume` rebuilds it exactly from version {version - 1} and its updates.jsonl line when "
        f"that line holds the update; otherwise resume from a checkpoint taken before version {version} "
        f"(`--resume STEP`), which moves this version aside"
    )


class UpdateRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    parent_version: int | None
    step: int
    update: HarnessUpdate | None  # None only for a recovery record (see module docstring)
    meta: dict[str, Any] = {}
    timestamp: str


class HarnessStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.versions_dir = self.root / "versions"
        self.updates_path = self.root / "updates.jsonl"

    def path(self, version: int) -> Path:
        return self.versions_dir / f"v{version:06d}.json"

    # -- reading --------------------------------------------------------------------------------------
    def versions(self) -> list[int]:
        if not self.versions_dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.versions_dir.iterdir() if (m := _VERSION_FILE.match(p.name)))

    def load(self, version: int) -> HarnessState:
        path = self.path(version)
        if not path.is_file():
            have = self.versions()
            raise FileNotFoundError(
                f"harness version {version} not found: {path} (store has {have[:3]}…{have[-3:]})"
                if len(have) > 6
                else f"harness version {version} not found: {path} (store has {have})"
            )
        try:
            state = HarnessState.model_validate_json(path.read_bytes())
        except ValidationError as err:
            raise StoreCorrupt(
                f"{path}: not a valid harness state ({_what(err)}); {_version_recovery(version)}"
            ) from None
        if state.version != version:
            raise StoreCorrupt(
                f"{path}: file holds version {state.version}, expected {version}; {_version_recovery(version)}"
            )
        return state

    def latest(self) -> HarnessState:
        have = self.versions()
        if not have:
            raise FileNotFoundError(f"harness store {self.root} has no versions; call init(state) first")
        return self.load(have[-1])

    def history(self) -> list[UpdateRecord]:
        """Committed update records in log order. Warns (does not raise) on a torn final line."""
        records, torn = self._read_log()
        if torn is not None:
            warnings.warn(
                f"{self.updates_path}:{torn}: torn last line (interrupted write) ignored; "
                "the next commit moves it aside",
                RuntimeWarning,
                stacklevel=2,
            )
        return records

    def _read_log(self) -> tuple[list[UpdateRecord], int | None]:
        """(records, line number of a torn last line or None)."""
        if not self.updates_path.is_file():
            return [], None
        data = self.updates_path.read_bytes()
        lines = data.split(b"\n")
        complete, tail = lines[:-1], lines[-1]  # `tail` is b"" when the file ends with a newline
        records: list[UpdateRecord] = []
        for i, raw in enumerate(complete, 1):
            try:
                records.append(UpdateRecord.model_validate_json(raw))
            except ValidationError as err:
                raise StoreCorrupt(
                    f"{self.updates_path}:{i}: invalid update record ({_what(err)}); the version files "
                    f"are the source of truth: move the bad line aside (a commit logs a recovery "
                    f"record for a version without one), or resume from a checkpoint"
                ) from None
        return records, (len(complete) + 1 if tail else None)

    # -- writing --------------------------------------------------------------------------------------
    @contextmanager
    def _lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def init(self, state: HarnessState) -> HarnessState:
        """Write the seed version. Refuses a store that already has versions."""
        with self._lock():
            if self.versions():
                raise FileExistsError(f"harness store {self.root} already initialised (versions {self.versions()})")
            self.versions_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path(state.version), state.model_dump_json())
        return state

    def commit(self, update: HarnessUpdate, step: int = 0, meta: dict[str, Any] | None = None) -> HarnessState:
        """Apply `update` to the latest version and persist the result as the next version.

        Raises `harness.ops.UpdateRejected` for an invalid update; nothing is written then.
        """
        with self._lock():
            current = self.latest()
            new = apply(current, update, step=step)  # raises before anything on disk changes
            self._sweep_temp_files()
            records = self._repair_log()
            path = self.path(new.version)
            if path.exists():
                raise StoreCorrupt(f"{path}: already exists although version {current.version} is the latest")
            self._append_missing_records(records, current)
            atomic_write_text(path, new.model_dump_json())
            self._append(
                UpdateRecord(
                    version=new.version,
                    parent_version=current.version,
                    step=step,
                    update=update,
                    meta=meta or {},
                    timestamp=_now(),
                )
            )
        return new

    def abandon_versions_after(self, version: int, aside: str | os.PathLike[str]) -> list[int]:
        """Move the versions after `version` into `aside`; returns the versions moved (for a resume or a failed round).

        Their files go to `aside/versions/` and their log lines are appended to `aside/updates.jsonl`, so the
        next commit continues from `version`. A log line that does not parse is dropped with a warning (the version
        files are the source of truth). Under the commit lock: no commit can interleave with the move.
        """
        aside = Path(aside)
        with self._lock():
            later = [v for v in self.versions() if v > version]
            if not later:
                return []
            (aside / "versions").mkdir(parents=True, exist_ok=True)
            for v in later:
                os.replace(self.path(v), aside / "versions" / self.path(v).name)
            if self.updates_path.is_file():
                kept, moved, dropped = self._split_log(version)
                with open(aside / "updates.jsonl", "a", encoding="utf-8") as f:
                    f.writelines(moved)
                if moved or dropped:
                    atomic_write_text(self.updates_path, "".join(kept))
        return later

    def _split_log(self, version: int) -> tuple[list[str], list[str], int]:
        """(lines of versions <= `version`, lines of later ones, lines dropped because they do not parse)."""
        kept: list[str] = []
        moved: list[str] = []
        dropped = 0
        for i, raw in enumerate(self.updates_path.read_text(encoding="utf-8").split("\n"), 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                v = int(rec.get("version", -1))
            except (ValueError, TypeError, AttributeError) as e:
                warnings.warn(
                    f"{self.updates_path}:{i}: not an update record ({e}); line dropped", RuntimeWarning, stacklevel=3
                )
                dropped += 1
                continue
            (moved if v > version else kept).append(raw + "\n")
        return kept, moved, dropped

    def _sweep_temp_files(self) -> None:
        for p in self.versions_dir.glob(".*.tmp"):
            p.unlink()  # a writer died before its rename; under the lock nobody else owns it

    def _repair_log(self) -> list[UpdateRecord]:
        records, torn = self._read_log()
        if torn is not None:
            data = self.updates_path.read_bytes()
            cut = data.rfind(b"\n") + 1
            aside = self.updates_path.with_name(self.updates_path.name + ".torn")
            with open(aside, "ab") as f:
                f.write(data[cut:] + b"\n")
                f.flush()
                os.fsync(f.fileno())
            with open(self.updates_path, "r+b") as f:
                f.truncate(cut)
                f.flush()
                os.fsync(f.fileno())
            warnings.warn(f"{self.updates_path}:{torn}: torn last line moved to {aside}", RuntimeWarning, stacklevel=3)
        return records

    def _append_missing_records(self, records: list[UpdateRecord], current: HarnessState) -> None:
        """Log versions whose file exists but whose log line was lost in a crash."""
        logged = {r.version for r in records}
        have = self.versions()
        for v in have:
            if v in logged or v == have[0]:  # the seed version is written by init, never logged
                continue
            state = self.load(v)
            warnings.warn(
                f"{self.path(v)}: version has no record in {self.updates_path}; logging a recovery record",
                RuntimeWarning,
                stacklevel=3,
            )
            self._append(
                UpdateRecord(
                    version=v,
                    parent_version=state.parent_version,
                    step=state.step,
                    update=None,
                    meta={"recovered": True},
                    timestamp=_now(),
                )
            )

    def _append(self, record: UpdateRecord) -> None:
        line = (record.model_dump_json() + "\n").encode("utf-8")
        fd = os.open(self.updates_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)  # one write of the whole line: no interleaving, no partial record
            if written != len(line):
                raise OSError(f"{self.updates_path}: short write ({written} of {len(line)} bytes)")
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- comparing ------------------------------------------------------------------------------------
    def diff(self, a: int | HarnessState, b: int | HarnessState) -> list[str]:
        sa = a if isinstance(a, HarnessState) else self.load(a)
        sb = b if isinstance(b, HarnessState) else self.load(b)
        return diff_states(sa, sb)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _crit(c: Criterion) -> str:
    check = f", check {c.check.type}" if c.check is not None else ""
    return f"{c.id} [{c.kind} {c.weight:g}{check}] {c.text!r}"


def diff_states(a: HarnessState, b: HarnessState) -> list[str]:
    """Human-readable changes from `a` to `b`, one line each, grouped by interface and task."""
    out: list[str] = []
    for t in sorted(set(a.variants) | set(b.variants)):
        if t not in a.variants:
            v = b.variants[t]
            out.append(f"variants: + {t} (parent {v.parent_id}, {len(v.criteria)} criteria)")
        elif t not in b.variants:
            out.append(f"variants: - {t}")
    for t in sorted(set(a.sampling) | set(b.sampling)):
        sa, sb = a.sampling.get(t), b.sampling.get(t)
        if sa == sb:
            continue
        if sa is None:
            out.append(f"sampling {t}: + weight {sb.weight:g}, {sb.status}")  # type: ignore[union-attr]
        elif sb is None:
            out.append(f"sampling {t}: - (was weight {sa.weight:g}, {sa.status})")
        else:
            if sa.weight != sb.weight:
                out.append(f"sampling {t}: weight {sa.weight:g} -> {sb.weight:g}")
            if sa.status != sb.status:
                out.append(f"sampling {t}: status {sa.status} -> {sb.status}")
            if sa.quarantined_until != sb.quarantined_until:
                out.append(f"sampling {t}: quarantined until step {sa.quarantined_until} -> {sb.quarantined_until}")
    for t in sorted(set(a.guidance) | set(b.guidance)):
        ga, gb = a.guidance_for(t), b.guidance_for(t)
        ha, hb = {h.id: h for h in ga.hints}, {h.id: h for h in gb.hints}
        for hid in ha.keys() - hb.keys():
            out.append(f"guidance {t}: - hint {hid} {ha[hid].text!r}")
        for hid in [h for h in hb if h not in ha]:
            out.append(f"guidance {t}: + hint {hid} {hb[hid].text!r}")
        for hid in [h for h in hb if h in ha and ha[h] != hb[h]]:
            out.append(f"guidance {t}: ~ hint {hid} {ha[hid].text!r} -> {hb[hid].text!r}")
        if ga.schedule != gb.schedule:
            out.append(f"guidance {t}: schedule {ga.schedule.model_dump()} -> {gb.schedule.model_dump()}")
    for t in sorted(set(a.criteria_overrides) | set(b.criteria_overrides)):
        ca = {c.id: c for c in a.criteria(t)} if a.has_task(t) else {}
        cb = {c.id: c for c in b.criteria(t)} if b.has_task(t) else {}
        for cid in [c for c in ca if c not in cb]:
            out.append(f"criteria {t}: - {_crit(ca[cid])}")
        for cid in [c for c in cb if c not in ca]:
            out.append(f"criteria {t}: + {_crit(cb[cid])}")
        for cid in [c for c in cb if c in ca and ca[c] != cb[c]]:
            out.append(f"criteria {t}: ~ {_crit(ca[cid])} -> {_crit(cb[cid])}")
    return out
