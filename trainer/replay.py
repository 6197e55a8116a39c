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
control groups are the same for every set and each set's probe cost is its own. `comparison_rows` puts
the sets side by side per event next to what the run itself recorded; `print_comparison` prints that with
rich and `write_comparison_html` writes it as one self-contained page linking each set's trace.
"""

from __future__ import annotations

import dataclasses
import html
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
from graphs.nodes import ANSWER
from harness.atomic import atomic_write_text
from harness.store import HarnessStore
from harness.types import FailureEvent
from trainer.checkpoint import MEMORY_FILE, STATE_FILE, checkpoints
from trainer.config import RunConfig, load_config
from trainer.io import read_jsonl

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
    record: dict[str, Any]  # the rounds.jsonl line (thread id, recorded per-event reports, ...)

    @property
    def reports(self) -> list[dict[str, Any]]:
        return list(self.record.get("reports") or [])


def load_round(run_dir: str | Path, step: int) -> RecordedRound:
    """Read the round at `step` of the run in `run_dir`; errors say which file lacks what."""
    run_dir = Path(run_dir)
    if not (run_dir / "rounds.jsonl").is_file():
        raise FileNotFoundError(f"{run_dir}: no rounds.jsonl; expected a run folder written by `harnessrl train`")
    rounds = read_jsonl(run_dir / "rounds.jsonl")
    here = [r for r in rounds if int(r.get("step", -1)) == step]
    done = [int(r["step"]) for r in rounds if r.get("n_events")]
    if not here:
        raise ValueError(
            f"{run_dir / 'rounds.jsonl'}: no evolver round at step {step}; rounds with events ran at steps {done}"
        )
    record = here[-1]  # a resumed run truncates rounds after its checkpoint: one line per step remains
    if not record.get("n_events"):
        raise ValueError(
            f"{run_dir / 'rounds.jsonl'}: the round at step {step} had no events "
            f"({record.get('skipped', 'skipped')}); rounds with events ran at steps {done}"
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
        version_before=int(record["version_before"]),
        events=events,
        events_source=source,
        checkpoint=ckpt,
        record=record,
    )


def _round_events(
    run_dir: Path, record: dict[str, Any], rounds: list[dict[str, Any]]
) -> tuple[list[FailureEvent], str]:
    step = int(record["step"])
    path = run_dir / "events.jsonl"
    lines = [r for r in read_jsonl(path) if int(r.get("step", 0)) <= step]
    by_id: dict[str, dict[str, Any]] = {}
    for r in lines:
        by_id[str(r.get("id"))] = r  # the last line per id wins
    ids, source = record.get("event_ids"), "rounds.jsonl event_ids"
    if ids is None and record.get("reports"):
        ids, source = [r["event_id"] for r in record["reports"]], "rounds.jsonl reports (the run predates event_ids)"
    if ids is None:
        before = max((int(r["step"]) for r in rounds if int(r.get("step", 0)) < step), default=0)
        chosen = [r for r in lines if int(r.get("step", 0)) > before]
        source = f"events.jsonl lines of steps {before + 1}..{step} (the run recorded no event list for this round)"
    else:
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise ValueError(f"{path}: events {missing} of the round at step {step} ({source}) are not in the file")
        chosen = [by_id[i] for i in ids]
    return [FailureEvent.from_log_line(r) for r in chosen], source


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
                rec = json.loads(ln)
            except ValueError as e:  # read past a torn or damaged line, saying where, as the report does
                log.warning("%s:%d: not a JSON record (%s); line skipped", src.updates_path, i, e)
                continue
            if rec.get("version", version + 1) <= version:
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
    output: dict[str, Any]
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
    atomic_write_text(out / "comparison.json", json.dumps(comparison_json(result), indent=1, default=str))
    write_comparison_html(result, out / "comparison.html")
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
    from trainer.evolver_round import evolver_context, judge_endpoint
    from trainer.harness_run import make_judge

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
        **overrides,
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


# -- the comparison ------------------------------------------------------------------------------------------
def _f(x: Any) -> str:
    return "–" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))


def _answer(attempt: dict[str, Any]) -> str:
    """What the proposer produced: its rule template, or the LLM's ops (or why it had none)."""
    upd = attempt.get("update") or {}
    ops = ", ".join(f"{op.get('op')}({op.get('criterion_id') or op.get('task_id', '')})" for op in upd.get("ops", []))
    if (
        attempt.get("source") == "llm_fallback"
    ):  # the LLM gave nothing usable: the rule brain decided (agents/proposer.py)
        return f"llm: unusable ({(attempt.get('llm_error') or '')[:60]}) -> rules {attempt.get('template') or '–'}"
    if attempt.get("source") == "llm" or attempt.get("template") == "llm":
        return f"llm: {ops}" if ops else f"llm: {(attempt.get('error') or 'no update')[:80]}"
    return attempt.get("template") or attempt.get("error") or "–"


def _numbers(attempt: dict[str, Any] | None) -> str:
    n = ((attempt or {}).get("critique") or {}).get("numbers") or (attempt or {}).get("numbers") or {}
    if not n:
        return "unmeasured"
    return (
        f"mean {_f(n.get('control_mean'))}→{_f(n.get('candidate_mean'))}  "
        f"std {_f(n.get('control_std'))}→{_f(n.get('candidate_std'))}"
    )


def _cell(report: dict[str, Any] | None, seconds: float | None, recorded: bool = False) -> dict[str, str]:
    if report is None:
        return {"decision": "–", "answer": "", "numbers": "", "cost": "", "seconds": ""}
    attempts = [a for a in report.get("attempts") or [] if isinstance(a, dict)]
    decision = str(report.get("decision"))
    if report.get("committed_version"):
        decision += f" v{report['committed_version']}"
    gen = report.get("generalised") or {}
    if (
        gen.get("decision") == "accepted"
    ):  # the repair was also committed for similar tasks (graphs/nodes.py generalise)
        decision += (
            f" + generalised to {len(gen.get('per_task') or gen.get('events') or [])} tasks v{gen.get('version')}"
        )
    answers = " → ".join(_answer(a) for a in attempts) or (report.get("note") or "–")
    rollouts = tokens = 0
    for a in attempts:
        # The critic copies the measurement's cost into its numbers (so rounds.jsonl has it); else the measurement's.
        n = ((a.get("critique") or {}).get("numbers")) or a.get("numbers") or {}
        cost = ((a.get("measurement") or {}).get("cost")) or {}
        rollouts += int(n.get("cost_probe_rollouts") or cost.get("probe_rollouts") or 0)
        tokens += int(n.get("cost_probe_tokens") or cost.get("probe_tokens") or 0)
    tools = sum(1 for c in report.get("tool_calls") or [] if c.get("name") != ANSWER)
    cost = f"{rollouts} rollouts, {tokens} tokens" + (f", {tools} tool calls" if tools else "")
    return {
        "decision": decision,
        "answer": answers,
        "numbers": _numbers(attempts[-1] if attempts else None),
        "cost": cost,
        "seconds": "not recorded" if recorded else (f"{seconds:.1f} s" if seconds is not None else "–"),
    }


def comparison_rows(result: Replay) -> list[dict[str, Any]]:
    """One row per event of the round: the run's recorded outcome, then each brain set's."""
    recorded = {r.get("event_id"): r for r in result.round.reports}
    rows = []
    for ev in result.round.events:
        runs = []
        for run in result.runs:
            rep = next((r for r in run.output.get("reports", []) if r.get("event_id") == ev.id), None)
            runs.append(_cell(rep, run.event_seconds.get(ev.id)))
        rows.append(
            {
                "event_id": ev.id,
                "task_id": ev.task_id,
                "type": ev.type,
                "recorded": _cell(recorded.get(ev.id), None, recorded=True),
                "runs": runs,
            }
        )
    return rows


def comparison_json(result: Replay) -> dict[str, Any]:
    rr = result.round
    return {
        "run_dir": str(rr.run_dir),
        "step": rr.step,
        "harness_version": rr.version_before,
        "policy": result.policy,
        "events_source": rr.events_source,
        "recorded_thread_id": rr.record.get("thread_id"),
        "brain_sets": [
            {
                "brains": dataclasses.asdict(r.brains),
                "folder": r.folder.name,
                "thread_id": r.thread_id,
                "harness_version_after": r.output.get("harness_version"),
                "seconds": round(r.seconds, 2),
                "n_accepted": len(r.output.get("accepted") or []),
                "policy": r.policy_stats,
                "trace": str(r.trace.relative_to(result.out)),
            }
            for r in result.runs
        ],
        "rows": comparison_rows(result),
    }


_FIELDS = ("decision", "answer", "numbers", "cost", "seconds")


def print_comparison(result: Replay, console: Any = None) -> None:
    """The side-by-side table in the terminal (rich)."""
    from rich.console import Console
    from rich.table import Table

    rr = result.round
    console = console or Console(width=220)
    table = Table(
        title=f"round at step {rr.step} of {rr.run_dir.name}, from harness v{rr.version_before} "
        f"({len(rr.events)} events; policy {result.policy})",
        show_lines=True,
    )
    table.add_column("event")
    table.add_column("recorded in the run")
    for i, r in enumerate(result.runs, 1):
        table.add_column(
            f"{i}: {r.brains.label()}\nv{rr.version_before}→v{r.output.get('harness_version')}, {r.seconds:.0f} s"
        )
    for row in comparison_rows(result):

        def text(c: dict[str, str]) -> str:
            return "\n".join(f"[bold]{c['decision']}[/bold]" if k == "decision" else c[k] for k in _FIELDS if c[k])

        table.add_row(
            f"{row['event_id']}\n{row['task_id']} · {row['type']}",
            text(row["recorded"]),
            *(text(c) for c in row["runs"]),
        )
    console.print(table)
    console.print(f"events from {rr.events_source}")
    for i, r in enumerate(result.runs, 1):
        console.print(f"{i}: {r.folder}  trace: {r.trace}")
    console.print(f"comparison: {result.out / 'comparison.html'}")


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.4em .6em;vertical-align:top;font-size:.9em}th{background:#f3f3f3;text-align:left}
.d{font-weight:bold}.m{color:#555;font-family:monospace;font-size:.85em}"""


def write_comparison_html(result: Replay, path: Path) -> Path:
    """The table as one self-contained page (inline CSS, no script); each brain set links its trace page."""
    rr = result.round
    e = html.escape
    head = "".join(
        f"<th>{i}: {e(r.brains.label())}<br>"
        f"<span class=m>v{rr.version_before}→v{e(str(r.output.get('harness_version')))}, "
        f"{r.seconds:.0f} s, policy calls {r.policy_stats.get('policy_requests', 0)}</span><br>"
        f'<a href="{e(r.trace.relative_to(result.out).as_posix())}">trace</a> · '
        f'<a href="{e((r.folder / "output.json").relative_to(result.out).as_posix())}">output.json</a></th>'
        for i, r in enumerate(result.runs, 1)
    )

    def cell(c: dict[str, str]) -> str:
        return (
            "<td>"
            + "".join(f"<div class={'d' if k == 'decision' else 'm'}>{e(c[k])}</div>" for k in _FIELDS if c[k])
            + "</td>"
        )

    body = "".join(
        f"<tr><td><b>{e(row['event_id'])}</b><br>{e(row['task_id'])} · {e(row['type'])}</td>"
        f"{cell(row['recorded'])}{''.join(cell(c) for c in row['runs'])}</tr>"
        for row in comparison_rows(result)
    )
    page = (
        f"<!doctype html><html><head><meta charset=utf-8><title>replay step {rr.step}</title><style>{_CSS}</style>"
        f"</head><body><h1>Replay of the round at step {rr.step}</h1>"
        f"<p>Run <code>{e(str(rr.run_dir))}</code>, harness v{rr.version_before}, "
        f"policy <code>{e(result.policy)}</code>, "
        f"{len(rr.events)} events from {e(rr.events_source)}.</p>"
        f"<table><tr><th>event</th><th>recorded in the run</th>{head}</tr>{body}</table></body></html>"
    )
    atomic_write_text(path, page)
    return path
