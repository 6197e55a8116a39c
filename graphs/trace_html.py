"""Render one evolver thread from its SQLite checkpoints to a self-contained HTML page (`harnessrl trace`).

No CDN and no JavaScript library: the graph is laid out here (layers by longest path from START,
back edges drawn dashed) and drawn as inline SVG, with the `draw_mermaid()` source included for
anyone who wants to paste it into a Mermaid renderer. Below it, every checkpoint of the run and of
each task lane: the node that ran, the state it read (inputs) and what it wrote (outputs, from the
checkpoint's pending writes), then the per-event decisions: one row per attempt with the critic's
numbers and that attempt's own outcome (rejected → revised, rejected → fallback vN, accepted vN), next
to the event's final decision.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from harness.atomic import atomic_write_text

MAX_JSON_CHARS = 6000
_INTERNAL = ("branch:to:", "__pregel", "__start__")


def _is_internal(channel: str) -> bool:
    return channel.startswith(_INTERNAL)


def load_trace(db_path: str | Path, thread_id: str) -> dict[str, Any]:
    """Checkpoints of `thread_id` grouped by namespace ('' = the run, 'task_lane:<id>' = a lane), oldest first."""
    db_path = Path(db_path)
    if not db_path.is_file():
        raise FileNotFoundError(f"no checkpoint database at {db_path}")
    lanes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    final: dict[str, Any] = {}
    with SqliteSaver.from_conn_string(str(db_path)) as saver:
        tuples = list(saver.list({"configurable": {"thread_id": thread_id}}))
    if not tuples:
        raise ValueError(f"{db_path}: thread {thread_id!r} has no checkpoints")
    for t in tuples:
        ns = t.config["configurable"].get("checkpoint_ns", "")
        values = t.checkpoint["channel_values"]
        nodes = [c.removeprefix("branch:to:") for c in values if c.startswith("branch:to:")]
        if "__start__" in values:
            nodes = ["(input)"]
        outputs: dict[str, Any] = defaultdict(list)
        for _task, channel, value in t.pending_writes or []:
            if not _is_internal(channel):
                outputs[channel].append(value)
        lanes[ns].append(
            {
                "step": t.metadata.get("step"),
                "node": ", ".join(nodes) or "(end)",
                "checkpoint_id": t.config["configurable"]["checkpoint_id"],
                "inputs": {k: v for k, v in values.items() if not _is_internal(k)},
                "outputs": {k: v[0] if len(v) == 1 else v for k, v in outputs.items()},
            }
        )
    for steps in lanes.values():
        steps.sort(key=lambda s: s["step"] if s["step"] is not None else -2)
    if lanes.get(""):
        final = lanes[""][-1]["inputs"]
    return {"thread_id": thread_id, "db": str(db_path), "lanes": dict(lanes), "final": final}


# -- graph drawing ------------------------------------------------------------------------------------
def _layout(
    nodes: list[str], edges: list[tuple[str, str, bool]]
) -> tuple[dict[str, tuple[int, int]], set[tuple[str, str]]]:
    """Layer = longest path from the first node over forward edges (DFS back edges are excluded)."""
    succ: dict[str, list[str]] = defaultdict(list)
    for a, b, _ in edges:
        succ[a].append(b)
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}

    def dfs(n: str) -> None:
        state[n] = 1
        for m in succ[n]:
            if state.get(m) == 1:
                back.add((n, m))
            elif m not in state:
                dfs(m)
        state[n] = 2

    for n in nodes:
        if n not in state:
            dfs(n)
    layer = {n: 0 for n in nodes}
    for _ in nodes:  # relax: a DAG settles in at most len(nodes) rounds
        for a, b, _c in edges:
            if (a, b) not in back and layer[b] < layer[a] + 1:
                layer[b] = layer[a] + 1
    rows: dict[int, list[str]] = defaultdict(list)
    for n in nodes:
        rows[layer[n]].append(n)
    pos = {n: (col, row) for row, ns in rows.items() for col, n in enumerate(ns)}
    return pos, back


def graph_svg(drawable: Any) -> str:
    """Inline SVG of a LangGraph `Graph` (from `compiled.get_graph(xray=True)`)."""
    nodes = list(drawable.nodes)
    edges = [(e.source, e.target, bool(e.conditional)) for e in drawable.edges]
    pos, back = _layout(nodes, edges)
    w, h, gx, gy = 170, 34, 40, 36
    cols = max((c for c, _ in pos.values()), default=0) + 1
    rows = max((r for _, r in pos.values()), default=0) + 1
    width, height = cols * (w + gx) + gx + 120, rows * (h + gy) + gy

    def center(n: str) -> tuple[float, float]:
        c, r = pos[n]
        return gx + c * (w + gx) + w / 2, gy / 2 + r * (h + gy) + h / 2

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        '<defs><marker id="arr" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    for a, b, cond in edges:
        (x1, y1), (x2, y2) = center(a), center(b)
        dash = ' stroke-dasharray="5,4"' if cond else ""
        if (a, b) in back:  # loop back: route around the right side
            xr = width - 60
            parts.append(
                f'<path d="M{x1 + w / 2},{y1} C{xr},{y1} {xr},{y2} {x2 + w / 2},{y2}" fill="none" '
                f'stroke="#b55"{dash} marker-end="url(#arr)"/>'
            )
        else:
            parts.append(
                f'<line x1="{x1}" y1="{y1 + h / 2}" x2="{x2}" y2="{y2 - h / 2}" stroke="#555"{dash} '
                'marker-end="url(#arr)"/>'
            )
    for n in nodes:
        cx, cy = center(n)
        fill = "#eef" if n.startswith("__") else "#fff"
        parts.append(
            f'<rect x="{cx - w / 2}" y="{cy - h / 2}" width="{w}" height="{h}" rx="8" fill="{fill}" stroke="#336"/>'
        )
        parts.append(f'<text x="{cx}" y="{cy + 4}" text-anchor="middle">{html.escape(n)}</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- page -----------------------------------------------------------------------------------------------
def _json(value: Any) -> str:
    text = json.dumps(value, indent=1, default=str, sort_keys=True)
    if len(text) > MAX_JSON_CHARS:
        text = text[:MAX_JSON_CHARS] + f"\n… ({len(text) - MAX_JSON_CHARS} more characters)"
    return html.escape(text)


def _fmt(v: Any) -> str:
    return "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else html.escape(str(v)))


def _verdict(crit: dict[str, Any]) -> str:
    """The critic's verdict on one candidate, before routing."""
    if crit.get("invalid"):
        return "invalid"
    if crit.get("veto"):
        return "vetoed"
    return "passed" if crit.get("measured_ok") else "rejected"


def attempt_outcome(report: dict[str, Any], index: int) -> str:
    """What happened to attempt `index` of an event, as opposed to the event's final decision.

    Only the last attempt can be the one committed; every earlier one was rejected and revised
    (`agents.decisions.after_critique` revises after any failing candidate until R charged attempts, then falls
    back; a candidate that changed no score is revised for free).
    """
    attempts = report.get("attempts") or []
    verdict = _verdict(attempts[index].get("critique") or {})
    if index < len(attempts) - 1:
        free = (attempts[index].get("critique") or {}).get("no_effect") is True
        return f"{verdict} → revised" + (" (free: no score changed)" if free else "")
    decision, version = report.get("decision", ""), report.get("committed_version")
    if decision == "accepted":
        return f"accepted v{version}"
    if decision == "fallback":
        return f"{verdict} → fallback v{version}"
    if decision == "rejected_stale":
        return f"{verdict} → stale at commit"
    if decision == "rejected_by_human":
        return f"{verdict} → rejected by human"
    fb = report.get("fallback") or {}
    if decision == "rejected" and fb and not fb.get("applied"):
        return f"{verdict} → fallback not applied"
    return f"{verdict} → no change" if decision == "rejected" else f"{verdict} → {decision}"


def final_decision(report: dict[str, Any]) -> str:
    """The event's final decision (one per event), e.g. 'fallback v3' or 'rejected'."""
    version = report.get("committed_version")
    return report.get("decision", "") + (f" v{version}" if version else "")


def _decisions(final: dict[str, Any]) -> str:
    """One row per attempt with its own outcome; the event columns and final decision span its rows."""
    rows = []
    for r in final.get("reports", []):
        attempts = r.get("attempts") or []
        fb = r.get("fallback") or {}
        gen = r.get("generalised") or {}
        n_rows = max(1, len(attempts)) + (1 if fb else 0) + (1 if gen.get("targets") else 0)
        span = f' rowspan="{n_rows}"' if n_rows > 1 else ""
        event_cells = "".join(
            f"<td{span}>{x}</td>"
            for x in (
                html.escape(r["event_id"]),
                html.escape(r["task_id"]),
                html.escape(r["failure_type"]),
                _fmt(r.get("interface")),
            )
        )
        final_cell = f"<td{span} class=final><b>{html.escape(final_decision(r))}</b></td>"
        if not attempts:  # skipped (batch-level event, unknown task) or no candidate at all
            note = html.escape(r.get("note") or "no candidate")
            rows.append(f"<tr>{event_cells}<td colspan=7>{note}</td><td>–</td>{final_cell}</tr>")
        for i, a in enumerate(attempts):
            crit = a.get("critique") or {}
            n = crit.get("numbers") or {}
            tools = [
                f"{c['agent']}:{c['name']}" + (" (error)" if c.get("error") else "")
                for c in r.get("tool_calls") or []
                if c.get("revision") == a.get("revision")
            ]
            outcome = attempt_outcome(r, i)
            css = "ok" if outcome.startswith("accepted") else "no"
            cells = (
                "".join(
                    f"<td>{x}</td>"
                    for x in (
                        _fmt(a.get("revision")),
                        _fmt(a.get("template")),
                        html.escape(", ".join(tools)) or "–",
                        f"{_fmt(n.get('control_std'))} → {_fmt(n.get('candidate_std'))}",
                        f"{_fmt(n.get('control_mean'))} → {_fmt(n.get('candidate_mean'))}",
                        "pass" if crit.get("measured_ok") else "fail",
                        html.escape("; ".join(crit.get("reasons", []))[:400]),
                    )
                )
                + f"<td class={css}>{html.escape(outcome)}</td>"
            )
            rows.append("<tr>" + (event_cells if i == 0 else "") + cells + (final_cell if i == 0 else "") + "</tr>")
        if fb:  # the safe sampling change after R rejections is not a critic attempt: its own row
            upd = fb.get("update") or {}
            ops = ", ".join(f"{o.get('op')}({o.get('task_id', '')})" for o in upd.get("ops") or [])
            errors = "; ".join(map(str, fb.get("errors") or []))
            status = f"committed v{fb['version']}" if fb.get("applied") else f"not applied: {errors}"
            # the event cells and final decision were emitted (with rowspan) by the first row above
            rows.append(
                f"<tr><td>–</td><td>fallback</td><td>–</td><td colspan=3>{html.escape(ops) or '–'}</td>"
                f"<td>{html.escape(str(upd.get('rationale', ''))[:400])}</td>"
                f"<td class=fb>{html.escape(status)}</td></tr>"
            )
        if gen.get("targets"):  # the accepted repair re-targeted as one batch, decided by agents.decisions.batch_accept
            why = (gen.get("verdict") or {}).get("reasons") or [gen.get("note") or ""]
            status = f"{gen.get('decision')}" + (f" v{gen['version']}" if gen.get("version") is not None else "")
            rows.append(
                f"<tr><td>–</td><td>batched</td><td>–</td><td colspan=3>{html.escape(', '.join(gen['targets']))}</td>"
                f"<td>{html.escape('; '.join(map(str, why))[:400])}</td>"
                f"<td class={'ok' if gen.get('decision') == 'accepted' else 'no'}>{html.escape(status)}</td></tr>"
            )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "event",
            "task",
            "type",
            "interface",
            "rev",
            "template",
            "LLM tool calls",
            "std",
            "mean",
            "rule",
            "critic's reasons",
            "attempt outcome",
            "final decision",
        )
    )
    return f"<table class=decisions><tr>{head}</tr>{''.join(rows)}</table>"


def render_html(trace: dict[str, Any], drawable: Any, mermaid: str) -> str:
    sections = []
    for ns in sorted(trace["lanes"], key=lambda s: (s != "", s)):
        steps = trace["lanes"][ns]
        items = []
        for s in steps:
            items.append(
                f"<details><summary>step {s['step']}: <b>{html.escape(s['node'])}</b> — writes "
                f"{html.escape(', '.join(s['outputs']) or '–')}</summary>"
                f"<div class=cols><div><h4>inputs (state read)</h4><pre>{_json(s['inputs'])}</pre></div>"
                f"<div><h4>outputs (writes)</h4><pre>{_json(s['outputs'])}</pre></div></div></details>"
            )
        title = "run" if ns == "" else f"lane {ns}"
        sections.append(f"<h3>{html.escape(title)}</h3>{''.join(items)}")
    final = trace["final"]
    thread = html.escape(trace["thread_id"])
    version = _fmt(final.get("harness_version"))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>evolver trace {thread}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}pre{{background:#f6f6f6;padding:.5em;overflow:auto;max-height:30em;font-size:11px}}
table{{border-collapse:collapse;font-size:12px}}td,th{{border:1px solid #ccc;padding:3px 6px;vertical-align:top}}
.cols{{display:flex;gap:1em}}.cols>div{{flex:1;min-width:0}}details{{margin:.2em 0}}
td.ok{{background:#e7f6e7}}td.no{{background:#fbecec}}td.fb{{background:#fff6dd}}
td.final{{background:#f3f3fb}}</style></head><body>
<h1>Evolver trace: thread {thread}</h1>
<p>checkpoints from <code>{html.escape(trace["db"])}</code>; harness version after the run: <b>{version}</b>,
accepted updates: <b>{len(final.get("accepted", []))}</b>.</p>
<h2>Graph</h2>{graph_svg(drawable)}
<details><summary>Mermaid source</summary><pre>{html.escape(mermaid)}</pre></details>
<h2>Decisions</h2>{_decisions(final)}
<h2>Steps</h2>{"".join(sections)}
</body></html>"""


def write_trace(db_path: str | Path, thread_id: str, out: str | Path) -> Path:
    from graphs.evolver import graph  # the wiring, for the picture

    trace = load_trace(db_path, thread_id)
    drawable = graph.get_graph(xray=True)
    page = render_html(trace, drawable, drawable.draw_mermaid())
    out = Path(out)
    atomic_write_text(out, page)
    return out
