"""One harness version written out as a task suite, with where each of its items came from.

A run's harness lives in its store (`harness/store.py`): the suite's tasks plus every committed edit. This module
turns one version into a folder that `data.suite` and `harnessrl data validate` read like any suite:

- ``train.jsonl``: the version's train tasks in the project's task format, each with its criteria as the version
  has them (edited, split, added, reweighted), and the harder variants as tasks of their own (``parent_id`` and
  ``meta.lineage`` kept). Tasks the version keeps out of training (retired, or weight 0) are left out unless asked
  for; they are named in the sidecar, never dropped unsaid;
- ``test.jsonl``: the held-out tasks exactly as the run's suite had them (no op may edit one, so the next run and
  an evaluation keep the same yardstick); audit criteria stay in every row, unchanged, as in any suite;
- ``harness.json``: what the task format cannot hold: each task's sampling (weight, status, quarantine end) and
  guidance (hints and their reveal schedule). A suite load ignores it;
- ``provenance.json``: per task, which version (and the update behind it) created or last changed the task, each
  criterion, each hint, the schedule and the sampling entry. Version 0 is the run's suite.

Provenance is found by comparing consecutive version files (the source of truth), so a version whose log line was
lost still has an owner. The folder is built beside its place and renamed into it.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.atomic import atomic_write_text, fsync_dir
from harness.store import HarnessStore, UpdateRecord
from harness.types import Guidance, HarnessState, Task, TaskSampling

EXPORT_FILES = ("train.jsonl", "test.jsonl", "harness.json", "provenance.json")
SIDECAR_NOTE = (
    "Harness state the task format cannot hold: each exported task's sampling (weight, status, quarantine end in "
    "the source run's steps) and guidance (hints and their reveal schedule). A suite load (data.suite, harnessrl data "
    "validate) reads only train.jsonl and test.jsonl and ignores this file: a run on this folder starts with every "
    "task at weight 1 and no hints."
)


class ExportError(ValueError):
    """The export is refused; the message says why and what to do instead."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Provenance(_Model):
    """The harness version that created or last changed an item, and the update behind that version."""

    version: int  # 0: the run's suite
    step: int  # the training step the version was committed at
    # "suite" (version 0), the commit's source ("rules", "llm", "llm_fallback", "generalise", "revert"), "fallback",
    # "recovered" (a version whose log line was rebuilt without its update), "unlogged" (no log line at all) or
    # "unspecified" (a commit whose meta names no source).
    source: str
    event_id: str | None = None
    proposal_id: str | None = None
    failure_type: str | None = None
    template: str | None = None
    interface: str | None = None
    revert_of: int | None = None
    rationale: str | None = None
    # What training made of that update (confirmed, reverted, provisional, ...), when the caller knows it.
    outcome: str | None = None


class TaskProvenance(_Model):
    task: Provenance  # version 0 for a suite task; the version that added it for a variant
    criteria: dict[str, Provenance]
    hints: dict[str, Provenance] = {}
    # The version that gave the task its guidance (its first hint or schedule) or last changed the schedule; None: the
    # task has no guidance.
    schedule: Provenance | None = None
    sampling: Provenance | None = None  # None: a held-out task (never sampled)


class ProvenanceFile(_Model):
    run: str
    harness_version: int
    committed_at_step: int
    tasks: dict[str, TaskProvenance]


class HarnessSidecar(_Model):
    note: str = SIDECAR_NOTE
    run: str
    harness_version: int
    committed_at_step: int
    picked: str  # how the version was chosen: "latest", "--step N" (in force at step N) or "--version V"
    suite: str | None = None  # the source run's data.suite, when the caller knows it
    sampling: dict[str, TaskSampling]
    guidance: dict[str, Guidance]
    # Train tasks of the version that are not in train.jsonl (retired or weight 0), with their sampling entry.
    left_out: dict[str, TaskSampling] = {}


@dataclass(frozen=True)
class SuiteExport:
    state: HarnessState
    train: list[Task]
    test: list[Task]
    harness: HarnessSidecar
    provenance: ProvenanceFile

    @property
    def variants(self) -> list[str]:
        return [t.id for t in self.train if t.id in self.state.variants]


def commit_steps(store: HarnessStore) -> dict[int, int]:
    """Version -> the training step it was committed at, for every version in the store.

    From the update log; a version without a log line (a crash between file and line) is read from its file.
    """
    have = store.versions()
    logged = {r.version: r.step for r in store.history()}
    return {v: logged[v] if v in logged else store.load(v).step for v in have}


def version_at_step(store: HarnessStore, step: int) -> int:
    """The version training drew step `step` under: the newest one committed before that step.

    A pause after step s commits before step s + 1 draws, so a version committed at step s is in force from s + 1
    (the checkpoint of step s holds it too). Version 0 and the pre-flight's versions (step 0) are in force at step 1.
    """
    steps = commit_steps(store)
    if not steps:
        raise ExportError(f"{store.root}: no harness version")
    before = [v for v, s in steps.items() if s < step]
    if not before:
        first = min(steps)
        raise ExportError(
            f"step {step} is before the first harness version: v{first} (committed at step {steps[first]}) is in "
            f"force from step {steps[first] + 1}; pass --step {steps[first] + 1} or more, or --version {first}"
        )
    return max(before)


def _record_provenance(state: HarnessState, rec: UpdateRecord | None, outcomes: dict[int, str]) -> Provenance:
    if rec is None:
        return Provenance(version=state.version, step=state.step, source="unlogged")
    if rec.update is None:
        return Provenance(version=rec.version, step=rec.step, source="recovered")
    meta = rec.meta
    return Provenance(
        version=rec.version,
        step=rec.step,
        source="fallback" if meta.get("fallback") else str(meta.get("source") or "unspecified"),
        event_id=rec.update.event_id or meta.get("event_id"),
        proposal_id=meta.get("proposal_id") or meta.get("generalised_from"),
        failure_type=meta.get("failure_type"),
        template=meta.get("template") or None,
        interface=rec.update.interface,
        revert_of=meta.get("revert_of"),
        rationale=rec.update.rationale or None,
        outcome=outcomes.get(rec.version),
    )


def _changed(
    before: Mapping[str, object], after: Mapping[str, object], by: Provenance, owners: dict[str, Provenance]
) -> None:
    """Items (by id) new or different in `after` now belong to `by`; items gone from it lose their owner."""
    for key in [k for k in owners if k not in after]:
        del owners[key]
    for key, item in after.items():
        if key not in before or before[key] != item:
            owners[key] = by


def _provenance(
    chain: list[HarnessState], records: dict[int, UpdateRecord], outcomes: dict[int, str]
) -> dict[str, TaskProvenance]:
    """Task id -> TaskProvenance for every task of the last state in `chain` (versions 0..V in order)."""
    seed = chain[0]
    suite = Provenance(version=seed.version, step=seed.step, source="suite")
    tasks: dict[str, Provenance] = {}
    criteria: dict[str, dict[str, Provenance]] = {}
    hints: dict[str, dict[str, Provenance]] = {}
    schedules: dict[str, Provenance] = {}
    sampling: dict[str, Provenance] = {}
    empty = HarnessState()
    for prev, cur in zip([empty, *chain[:-1]], chain):
        by = suite if cur is seed else _record_provenance(cur, records.get(cur.version), outcomes)
        for tid in [*cur.tasks, *cur.variants]:
            new_task = not prev.has_task(tid)
            if new_task:
                tasks[tid] = by
            _changed(
                {} if new_task else {c.id: c for c in prev.task(tid).criteria},
                {c.id: c for c in cur.task(tid).criteria},
                by,
                criteria.setdefault(tid, {}),
            )
            g_prev, g_cur = prev.guidance_for(tid), cur.guidance_for(tid)
            _changed({h.id: h for h in g_prev.hints}, {h.id: h for h in g_cur.hints}, by, hints.setdefault(tid, {}))
            if tid not in cur.guidance:
                schedules.pop(tid, None)
            elif tid not in prev.guidance or g_prev.schedule != g_cur.schedule:
                schedules[tid] = by
            if tid not in cur.sampling:
                sampling.pop(tid, None)
            elif prev.sampling.get(tid) != cur.sampling[tid]:
                sampling[tid] = by
    last = chain[-1]
    return {
        tid: TaskProvenance(
            task=tasks[tid],
            criteria=criteria[tid],
            hints=hints[tid],
            schedule=schedules.get(tid),
            sampling=sampling.get(tid),
        )
        for tid in [*last.tasks, *last.variants]
    }


def build_export(
    store: HarnessStore,
    version: int,
    *,
    run: str,
    picked: str,
    outcomes: dict[int, str] | None = None,
    include_retired: bool = False,
    suite: str | None = None,
) -> SuiteExport:
    """Version `version` of `store` as a suite: train and held-out tasks, the sidecar and the provenance.

    Reads every version from 0 to `version` (each a `StoreCorrupt` if it does not load) and the update log.
    `outcomes` maps a version to what training made of its update (the trainer reads that from the run's rounds);
    `include_retired` keeps retired and weight-0 train tasks in train.jsonl too; `suite` is recorded in the sidecar.
    """
    have = store.versions()
    if not have:
        raise ExportError(f"{store.root}: no harness version")
    if version not in have:
        raise ExportError(f"harness version {version} is not in {store.versions_dir} (it has v{have[0]}..v{have[-1]})")
    missing = [v for v in range(version + 1) if v not in have]
    if missing:
        raise ExportError(
            f"{store.versions_dir}: versions {missing} are missing, so the provenance of v{version} cannot be traced; "
            "restore them (or export an earlier version)"
        )
    chain = [store.load(v) for v in range(version + 1)]
    records = {r.version: r for r in store.history() if r.version <= version}
    state = chain[-1]
    prov = _provenance(chain, records, outcomes or {})
    train: list[Task] = []
    left_out: dict[str, TaskSampling] = {}
    for tid in [*state.tasks, *state.variants]:
        task = state.task(tid)
        if task.split == "test":
            continue
        s = state.sampling.get(tid)
        if s is not None and not include_retired and (s.status != "active" or s.weight <= 0):
            left_out[tid] = s
            continue
        train.append(task)
    test = [t for t in state.tasks.values() if t.split == "test"]
    kept = [t.id for t in train]
    sidecar = HarnessSidecar(
        run=run,
        harness_version=state.version,
        committed_at_step=state.step,
        picked=picked,
        suite=suite,
        sampling={tid: state.sampling[tid] for tid in kept if tid in state.sampling},
        guidance={tid: state.guidance[tid] for tid in kept if tid in state.guidance},
        left_out=left_out,
    )
    provenance = ProvenanceFile(
        run=run,
        harness_version=state.version,
        committed_at_step=state.step,
        tasks={tid: prov[tid] for tid in [*kept, *(t.id for t in test)]},
    )
    return SuiteExport(state=state, train=train, test=test, harness=sidecar, provenance=provenance)


def check_out_dir(out: Path, *, force: bool) -> None:
    """Refuse an `out` that is a file, or a non-empty folder without `force`, or with files an export never writes."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder; choose a new --out")
    entries = sorted(p.name for p in out.iterdir())
    if entries and not force:
        raise ExportError(f"{out} exists and is not empty; choose a new --out, or --force to replace an earlier export")
    foreign = [e for e in entries if e not in EXPORT_FILES]
    if foreign:
        raise ExportError(
            f"{out} holds files an export does not write ({', '.join(foreign)}); --force replaces only an earlier "
            f"export ({', '.join(EXPORT_FILES)}): choose a new --out"
        )


def _new_folder(out: Path, what: str) -> Path:
    """A fresh hidden folder beside `out`, made with the umask's mode (a temp folder would be private to its owner)."""
    path = out.parent / f".{out.name}.{what}-{os.getpid()}-{secrets.token_hex(4)}"
    path.mkdir()
    return path


def write_export(export: SuiteExport, out: str | os.PathLike[str], *, force: bool = False) -> list[Path]:
    """Write the four files into `out` (refused as `check_out_dir` says); returns their paths.

    The folder is built next to `out` and renamed into place (an earlier export it replaces is moved aside first,
    then deleted), so a crash leaves the old folder or the new one, never a mix.
    """
    out = Path(out)
    check_out_dir(out, force=force)
    out.parent.mkdir(parents=True, exist_ok=True)
    build = _new_folder(out, "export")
    try:
        texts = {
            "train.jsonl": "".join(t.model_dump_json(exclude_none=True) + "\n" for t in export.train),
            "test.jsonl": "".join(t.model_dump_json(exclude_none=True) + "\n" for t in export.test),
            "harness.json": export.harness.model_dump_json(indent=2, exclude_none=True) + "\n",
            "provenance.json": export.provenance.model_dump_json(indent=2, exclude_none=True) + "\n",
        }
        for name in EXPORT_FILES:
            atomic_write_text(build / name, texts[name])
    except BaseException:
        shutil.rmtree(build)
        raise
    aside = None
    if out.exists():
        aside = _new_folder(out, "replaced")
        os.replace(out, aside / out.name)
    try:
        os.replace(build, out)
    except BaseException:
        if aside is not None:
            os.replace(aside / out.name, out)  # the earlier export back in its place
        raise
    fsync_dir(out.parent)
    if aside is not None:
        shutil.rmtree(aside)
    return [out / name for name in EXPORT_FILES]
