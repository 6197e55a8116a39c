"""The comparison page of a replay (`harnessrl evolve RUN_DIR --step N`, trainer/replay.py).

One row per event of the round: what the run itself recorded (its rounds.jsonl line) next to each brain set's report.

`comparison_rows` builds the rows, `comparison_json` the file `comparison.json`, `print_comparison` prints them with
rich and `write_comparison_html` writes them as one self-contained page linking each set's trace; `write_comparison`
writes both files into the replay's folder.
"""

from __future__ import annotations

import dataclasses
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphs.nodes import ANSWER
from graphs.round_record import Attempt, AttemptLine, EventLine, EventReport
from harness.atomic import atomic_write_text

if TYPE_CHECKING:
    from trainer.replay import Replay


def _f(x: Any) -> str:
    return "–" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))


def _answer(attempt: Attempt | AttemptLine) -> str:
    """What the proposer produced: its rule template, or the LLM's ops (or why it had none)."""
    if isinstance(attempt, AttemptLine):  # rounds.jsonl keeps only the template
        return attempt.template or "–"
    ops = ", ".join(
        f"{op['op']}({op.get('criterion_id') or op['task_id']})" for op in (attempt.update or {"ops": []})["ops"]
    )
    if attempt.source == "llm_fallback":  # the LLM gave nothing usable: the rule brain decided (agents/proposer.py)
        return f"llm: unusable ({(attempt.llm_error or '')[:60]}) -> rules {attempt.template or '–'}"
    if attempt.source == "llm" or attempt.template == "llm":
        return f"llm: {ops}" if ops else f"llm: {(attempt.error or 'no update')[:80]}"
    return attempt.template or attempt.error or "–"


def _numbers_of(attempt: Attempt | AttemptLine) -> dict[str, Any]:
    return (attempt.numbers if isinstance(attempt, AttemptLine) else attempt.critique.numbers) or {}


def _numbers(attempt: Attempt | AttemptLine | None) -> str:
    n = {} if attempt is None else _numbers_of(attempt)
    if not n:
        return "unmeasured"
    if "budget_need" in n:  # agents.critic.over_budget_critique
        return f"over the probe budget: needs {_f(n['budget_need'])}, {_f(n.get('budget_left'))} left"
    return (
        f"mean {_f(n.get('control_mean'))}→{_f(n.get('candidate_mean'))}  "
        f"std {_f(n.get('control_std'))}→{_f(n.get('candidate_std'))}"
    )


def _cost(attempt: Attempt | AttemptLine, key: str) -> int:
    """One cost of the attempt's measurement.

    The critic copies it into its numbers (so rounds.jsonl has it), else the measurement's own.
    """
    measured = {} if isinstance(attempt, AttemptLine) else (attempt.measurement or {}).get("cost") or {}
    return int(_numbers_of(attempt).get(f"cost_{key}") or measured.get(key) or 0)


def _cell(report: EventReport | EventLine | None, seconds: float | None, recorded: bool = False) -> dict[str, str]:
    if report is None:
        return {"decision": "–", "answer": "", "numbers": "", "cost": "", "seconds": ""}
    attempts: list[Attempt] | list[AttemptLine] = report.attempts
    decision = str(report.decision)
    if report.committed_version:
        decision += f" v{report.committed_version}"
    gen = report.generalised
    if gen is not None and gen.decision == "accepted":  # also committed for similar tasks (graphs/nodes.py generalise)
        decision += f" + generalised to {len(gen.targets or [])} tasks v{gen.version}"
    answers = " → ".join(_answer(a) for a in attempts) or (report.note or "–")
    rollouts = sum(_cost(a, "probe_rollouts") for a in attempts)
    tokens = sum(_cost(a, "probe_tokens") for a in attempts)
    tools = sum(1 for c in report.tool_calls if c["name"] != ANSWER) if isinstance(report, EventReport) else 0
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
    recorded = {r.event_id: r for r in result.round.record.reports}
    rows = []
    for ev in result.round.events:
        runs = []
        for run in result.runs:
            rep = next((r for r in run.reports if r.event_id == ev.id), None)
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
        "recorded_thread_id": rr.record.thread_id,
        "brain_sets": [
            {
                "brains": dataclasses.asdict(r.brains),
                "folder": r.folder.name,
                "thread_id": r.thread_id,
                "harness_version_after": r.harness_version,
                "seconds": round(r.seconds, 2),
                "n_accepted": len(r.output["accepted"]),
                "policy": r.policy_stats,
                "trace": str(r.trace.relative_to(result.out)),
            }
            for r in result.runs
        ],
        "rows": comparison_rows(result),
    }


def write_comparison(result: Replay) -> None:
    """`comparison.json` and `comparison.html` in the replay's folder."""
    atomic_write_text(result.out / "comparison.json", json.dumps(comparison_json(result), indent=1, default=str))
    write_comparison_html(result, result.out / "comparison.html")


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
        table.add_column(f"{i}: {r.brains.label()}\nv{rr.version_before}→v{r.harness_version}, {r.seconds:.0f} s")
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
        f"<span class=m>v{rr.version_before}→v{r.harness_version}, "
        f"{r.seconds:.0f} s, policy calls {r.policy_stats['policy_requests']}</span><br>"
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
