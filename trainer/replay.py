"""Replay one evolver round of a training run with other brains (`harnessrl evolve RUN_DIR --step N`).

The round that ran at step N is rebuilt from what the run wrote; the run folder is only read:

- the round: its `rounds.jsonl` line: `version_before` (the harness version the round started from) and its
  input events: `event_ids` (recorded by the callback), else the ids of the round's per-event reports (runs
  written before `event_ids` existed), else, for a failed round of such a run, every `events.jsonl` line
  after the previous round's step up to N (the events that were pending; approximate, said so);
- the events: the `events.jsonl` lines with those ids (the last one per id at or before step N);
- the policy: `checkpoints/checkpoint-N`, saved right after the round: the round does not train, so these
  are the weights the round froze (a LoRA adapter is loaded onto its base and merged, a full model as is;
  `tools.local_endpoint.LocalEndpoint.from_path`), or `policy` (e.g. a server that serves that checkpoint);
- the harness: versions 0..version_before and their `updates.jsonl` lines, copied into each brain set's store,
  so the replay starts from the checkpoint's version even when the run holds later ones;
- the memory: `checkpoint-N/memory.jsonl` minus the attributions and proposals of the round's own events (the
  checkpoint is written after the round), restored into a fresh Chroma folder with the run's embedding.

Each brain set (attributor, proposer, critic models: `rules` or provider:model) then runs the round once, in
process, in its own folder `OUT/<n>-<name>/` (harness/, memory/, evolver.sqlite, trace.html, output.json),
with the run's own knobs from its config.yaml (sample_k, max_completion_length, temperature, seed, judge,
detector, interfaces, ...), each through a fresh memo over the one loaded policy, so the critic's seeded
control groups are the same for every set and each set's probe cost is its own. The comparison of the sets
with what the run itself recorded (`comparison.json`, `comparison.html`) is `trainer/replay_page.py`'s.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agents.context import RULES
from graphs.round_record import EventReport, RoundRecord
from harness.atomic import atomic_write_text
from harness.store import HarnessStore, UpdateRecord
from harness.types import FailureEvent
from trainer.checkpoint import MEMORY_FILE, STATE_FILE, checkpoints
from trainer.config import RunConfig
from trainer.config_loader import load_config
from trainer.run_logs import read_events, read_rounds

log = logging.getLogger(__name__)


# -- brain sets ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BrainSet:
    """The three agent brains of one replay: `rules` or provider:model each."""

    attributor: str = RULES
    proposer: str = RULES
    critic: str = RULES

    def label(self) -> str:
        return f"attributor={self.attributor} proposer={self.proposer} critic={self.critic}"

    def folder_name(self, index: int) -> str:
        """`<index>-<the non-rules roles>`, e.g. `2-proposer-openai_qwen_qwen3-8b` (`1-rules` for all rules)."""
        parts = [f"{role}-{model}" for role, model in dataclasses.asdict(self).items() if model != RULES]
        slug = re.sub(r"[^a-z0-9.-]+", "_", "-".join(parts).lower()).strip("_")[:60] or RULES
        return f"{index}-{slug}"


def split_models(values: list[str] | None) -> list[str]:
    """Repeated flags and comma lists, in order, duplicates dropped; nothing given means `rules`."""
    out: list[str] = []
    for v in values or [RULES]:
        for m in v.split(","):
            m = m.strip()
            if m and m not in out:
                out.append(m)
    return out or [RULES]


def brain_sets(attributors: list[str], proposers: list[str], critics: list[str]) -> list[BrainSet]:
    """Every combination (cartesian product) of the models given per role, attributor varying slowest."""
    return [BrainSet(a, p, c) for a, p, c in itertools.product(attributors, proposers, critics)]


# -- the recorded round ----------------------------------------------------------------------------------
@dataclass
class RecordedRound:
    """What the run wrote about its round at `step` (see the module docstring for where each part comes from)."""

    run_dir: Path
    step: int
    cfg: RunConfig
    version_before: int
    events: list[FailureEvent]
    events_source: str  # where the event list came from, for the user
    checkpoint: Path
    record: RoundRecord  # the rounds.jsonl line (thread id, recorded per-event reports, ...)


def load_round(run_dir: str | Path, step: int) -> RecordedRound:
    """Read the round at `step` of the run in `run_dir`; errors say which file lacks what."""
    run_dir = Path(run_dir)
    if not (run_dir / "rounds.jsonl").is_file():
        raise FileNotFoundError(f"{run_dir}: no rounds.jsonl; expected a run folder written by `harnessrl train`")
    rounds = read_rounds(run_dir / "rounds.jsonl")
    here = [r for r in rounds if r.step == step]
    done = [r.step for r in rounds if r.n_events]
    if not here:
        raise ValueError(
            f"{run_dir / 'rounds.jsonl'}: no evolver round at step {step}; rounds with events ran at steps {done}"
        )
    record = here[-1]  # a resumed run truncates rounds after its checkpoint: one line per step remains
    if not record.n_events or record.version_before is None:
        raise ValueError(
            f"{run_dir / 'rounds.jsonl'}: the round at step {step} had no events "
            f"({record.skipped or 'skipped'}); rounds with events ran at steps {done}"
        )
    cfg = load_config(run_dir / "config.yaml")
    ckpt = run_dir / "checkpoints" / f"checkpoint-{step}"
    if not (ckpt / STATE_FILE).is_file():
        have = [n for n, p in checkpoints(run_dir) if (p / STATE_FILE).is_file()]
        raise FileNotFoundError(
            f"{ckpt}: no complete checkpoint for step {step} (complete ones: steps {have}); "
            f"the round's policy is that checkpoint (train.save_total_limit may have deleted it), "
            f"or pass --policy"
        )
    events, source = _round_events(run_dir, record, rounds)
    return RecordedRound(
        run_dir=run_dir,
        step=step,
        cfg=cfg,
        version_before=record.version_before,
        events=events,
        events_source=source,
        checkpoint=ckpt,
        record=record,
    )


def _round_events(run_dir: Path, record: RoundRecord, rounds: list[RoundRecord]) -> tuple[list[FailureEvent], str]:
    step = record.step
    path = run_dir / "events.jsonl"
    events = [e for e in read_events(path) if e.step <= step]
    by_id = {e.id: e for e in events}  # the last line per id wins
    ids, source = record.event_ids, "rounds.jsonl event_ids"
    if ids is None and record.reports:
        ids = [str(r.event_id) for r in record.reports]
        source = "rounds.jsonl reports (the run predates event_ids)"
    if ids is None:
        before = max((r.step for r in rounds if r.step < step), default=0)
        source = f"events.jsonl lines of steps {before + 1}..{step} (the run recorded no event list for this round)"
        return [e for e in events if e.step > before], source
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ValueError(f"{path}: events {missing} of the round at step {step} ({source}) are not in the file")
    return [by_id[i] for i in ids], source


# -- the scratch folder of one brain set --------------------------------------------------------------------
def copy_harness(src_root: Path, dest_root: Path, version: int) -> HarnessStore:
    """Versions 0..`version` and their `updates.jsonl` lines, byte for byte, into a new store at `dest_root`."""
    src = HarnessStore(src_root)
    have = src.versions()
    if version not in have:
        raise FileNotFoundError(
            f"{src.root}: harness version {version} (the round's start) is missing; store has {have}"
        )
    dest = HarnessStore(dest_root)
    dest.versions_dir.mkdir(parents=True, exist_ok=False)
    for v in have:
        if v <= version:
            shutil.copyfile(src.path(v), dest.path(v))
    if src.updates_path.is_file():
        kept = []
        for i, ln in enumerate(src.updates_path.read_bytes().split(b"\n"), 1):
            if not ln.strip():
                continue
            try:
                rec = UpdateRecord.model_validate_json(ln)
            except ValueError as e:  # read past a torn or damaged line, saying where, as the report does
                log.warning("%s:%d: not an update record (%s); line skipped", src.updates_path, i, e)
                continue
            if rec.version <= version:
                kept.append(ln)
        dest.updates_path.write_bytes(b"".join(ln + b"\n" for ln in kept))
    return dest


def memory_before_round(snapshot: Path, event_ids: set[str], dest: Path) -> Path:
    """`snapshot` without the attributions and proposals written for `event_ids` (the round's own records)."""
    lines = snapshot.read_text(encoding="utf-8").splitlines()
    kept = lines[:1]  # the format header
    for line in lines[1:]:
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("kind") in ("attributions", "proposals") and row["record"].get("event_id") in event_ids:
            continue
        kept.append(line)
    atomic_write_text(dest, "".join(line + "\n" for line in kept))
    return dest


# -- running the brain sets -----------------------------------------------------------------------------------
@dataclass
class BrainRun:
    """One brain set's replay of the round."""

    brains: BrainSet
    folder: Path
    thread_id: str
    output: dict[str, Any]  # the graph's output, as output.json keeps it
    reports: list[EventReport]  # its per-event reports, read once
    harness_version: int  # the harness version after the round
    seconds: float
    event_seconds: dict[str, float]
    policy_stats: dict[str, int]
    trace: Path


@dataclass
class Replay:
    round: RecordedRound
    out: Path
    policy: str
    runs: list[BrainRun] = field(default_factory=list)


def check_out_dir(out: Path, run_dir: Path) -> None:
    """The scratch folder is new (or empty) and outside the run: the run folder is never written."""
    o, r = out.resolve(), run_dir.resolve()
    if o == r or r in o.parents:
        raise ValueError(
            f"--out {out} is inside the run folder {run_dir}; a replay never writes into the run: "
            f"choose a folder outside it"
        )
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"--out {out} already holds files; choose a new folder or delete it")


def replay_round(
    rr: RecordedRound,
    brains: list[BrainSet],
    out: Path,
    *,
    policy: str | None = None,
    base_url: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> Replay:
    """Run the recorded round once per brain set in `out` (see the module docstring)."""
    from trainer.frozen import MemoEndpoint

    check_out_dir(out, rr.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec = policy or f"local:{rr.checkpoint.resolve()}"
    endpoint = _load_policy(spec)
    result = Replay(round=rr, out=out, policy=spec)
    for i, b in enumerate(brains, 1):
        result.runs.append(
            _run_one(
                rr,
                b,
                out / b.folder_name(i),
                MemoEndpoint(endpoint),
                spec,
                base_url=base_url,
                overrides=overrides or {},
            )
        )
    return result


def _load_policy(spec: str) -> Any:
    from graphs.services import parse_policy

    return parse_policy(spec)


def _run_one(
    rr: RecordedRound,
    brains: BrainSet,
    folder: Path,
    endpoint: Any,
    spec: str,
    *,
    base_url: str | None,
    overrides: dict[str, Any],
) -> BrainRun:
    from agents.chat_models import role_endpoint
    from graphs.runner import run_in_process
    from graphs.services import live_services, register_services, unregister_services
    from graphs.trace_html import write_trace
    from harness.detector import DetectorConfig
    from memory.store import TrainingMemory
    from trainer.evolver_round import evolver_context
    from trainer.harness_run import judge_endpoint, make_judge

    h = rr.cfg.harness
    folder.mkdir(parents=True)
    store = copy_harness(rr.run_dir / "harness", folder / "harness", rr.version_before)
    memory = None
    snapshot = rr.checkpoint / MEMORY_FILE
    if rr.cfg.evolver.memory and snapshot.is_file():
        memory = TrainingMemory.persistent(folder / "memory", embedding=rr.cfg.evolver.memory_embedding)
        memory.restore(memory_before_round(snapshot, {e.id for e in rr.events}, folder / "memory-before-round.jsonl"))
    key = f"replay:{folder.resolve()}"
    ctx = dataclasses.replace(
        evolver_context(rr.cfg, services_key=key, policy_spec=spec),
        run_dir=str(folder.resolve()),
        memory_location=str((folder / "memory").resolve()) if memory else "none",
        attributor_model=brains.attributor,
        proposer_model=brains.proposer,
        critic_model=brains.critic,
        base_url=base_url or rr.cfg.evolver.base_url,
        # The recorded round's probe budget (harness.max_extra_generation), unless --probe-budget replaces it.
        **({"probe_budget": rr.record.probe_budget} | overrides),
    )
    # The run's judge scores the critic's rollouts unless --judge-model replaces it (then at the context's judge URL).
    judge = (
        make_judge(rr.cfg.evolver.judge_model, *judge_endpoint(rr.cfg))
        if "judge_model" not in overrides
        else make_judge(ctx.judge_model, *role_endpoint(ctx, "judge"))
    )
    register_services(
        key,
        live_services(
            ctx,
            store=store,
            endpoint=endpoint,
            memory=memory,
            judge=judge,
            detector_config=DetectorConfig(**h.detector),
        ),
    )
    thread_id = f"replay-{rr.run_dir.name}-step{rr.step}-{folder.name}"
    inp = {
        "events": [e.model_dump(mode="json") for e in rr.events],
        "harness_version": rr.version_before,
        "step": rr.step,
    }
    db = folder / "evolver.sqlite"
    t0 = time.monotonic()
    try:
        out = run_in_process(inp, ctx, db, thread_id)
    finally:
        unregister_services(key)
        if memory is not None:
            memory.close()
    seconds = time.monotonic() - t0
    atomic_write_text(
        folder / "output.json",
        json.dumps({"thread_id": thread_id, "brains": dataclasses.asdict(brains), **out}, indent=1, default=str),
    )
    trace = write_trace(db, thread_id, folder / "trace.html")
    return BrainRun(
        brains=brains,
        folder=folder,
        thread_id=thread_id,
        output=out,
        reports=[EventReport.model_validate(r) for r in out["reports"]],
        harness_version=out["harness_version"],
        seconds=seconds,
        event_seconds=event_seconds(db, thread_id),
        policy_stats=endpoint.stats(),
        trace=trace,
    )


def event_seconds(db: Path, thread_id: str) -> dict[str, float]:
    """Wall seconds per event id, from the lanes' checkpoint timestamps.

    An event runs from the lane's checkpoint at its cursor (the lane's first one for the first event) to the
    first one at the next cursor (`record`).
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(db)) as saver:
        tuples = list(saver.list({"configurable": {"thread_id": thread_id}}))
    lanes: dict[str, list[tuple[datetime, dict[str, Any]]]] = defaultdict(list)
    for t in tuples:
        ns = t.config["configurable"].get("checkpoint_ns", "")
        if ns:
            lanes[ns].append((datetime.fromisoformat(t.checkpoint["ts"]), t.checkpoint["channel_values"]))
    out: dict[str, float] = {}
    for cps in lanes.values():
        cps.sort(key=lambda c: c[0])
        events = next((v["events"] for _, v in cps if v.get("events")), [])
        first: dict[int, datetime] = {}
        for ts, v in cps:
            if isinstance(v.get("cursor"), int):
                first.setdefault(v["cursor"], ts)
        for i, ev in enumerate(events):
            start = cps[0][0] if i == 0 else first.get(i)
            end = first.get(i + 1)
            if start is not None and end is not None:
                out[ev["id"]] = round((end - start).total_seconds(), 2)
    return out
