"""`report.html` for a run folder: one self-contained page, plots embedded as base64 PNG.

Sections: a key/value summary, event counts per failure type and decision, proposals and committed
versions per interface, what measuring the proposals cost per interface (probe rollouts, tokens, judge
calls, seconds), reward and reward std per step (with harness-update markers), dead-group share,
harness updates over time by interface and outcome (accepted by the critic, fallback = committed without
the critic's acceptance, not accepted; committed versions from `harness/updates.jsonl`, whose meta flags
fallbacks and reverts, per-event decisions from `rounds.jsonl`), what training made of each accepted update
(confirmed, reverted, still provisional: `trainer.outcomes.update_outcome`), held-out eval per domain
(`eval.json`), pause-time share, judge warnings, and tables of rounds and committed updates.

This file renders (HTML, plots, sentences); every number it shows comes from `trainer/report_data.py`
(the run folder's counts, rows and series) or `trainer/outcomes.py`. Reads only files; no torch.
"""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from pathlib import Path
from typing import Any

from harness.types import INTERFACES
from trainer.io import atomic_write_text
from trainer.judge_drift import drift_sentence
from trainer.outcomes import eval_domain_rows, update_effect_rows, write_trace_pages
from trainer.report_data import (
    COST_COLUMNS,
    RunData,
    Summary,
    collect,
    cost_rows,
    eval_bars,
    eval_rows,
    event_type_rows,
    interface_rows,
    round_rows,
    step_series,
    summary,
    update_points,
    update_rows,
    verdict_rows,
)


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# outcome -> (marker, filled, y offset within the interface's row); colour is the interface
_OUTCOME_STYLE = {
    "accepted": ("o", True, 0.0),
    "fallback": ("s", False, 0.0),
    "revert": ("v", False, 0.14),
    "not accepted": ("x", True, 0.28),
}
_IFACE_COLOR = {"sampling": "tab:blue", "guidance": "tab:orange", "criteria": "tab:purple"}


def _updates_plot(data: RunData, steps: list[Any]) -> str:
    import matplotlib.pyplot as plt

    pts = update_points(data)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    # markers sharing a (step, row) are spread sideways in version order, so three versions committed at
    # one step stay three
    rows = [INTERFACES.index(iface) + _OUTCOME_STYLE[outcome][2] for _s, iface, outcome, _l in pts]
    slots = Counter((s, y) for (s, *_), y in zip(pts, rows))
    seen: Counter[tuple[int, float]] = Counter()
    xy = []
    for (s, *_), y in zip(pts, rows):
        j, n = seen[(s, y)], slots[(s, y)]
        seen[(s, y)] = j + 1
        xy.append((s + (j - (n - 1) / 2) * 0.45, y))
    for iface in INTERFACES:
        for outcome, (marker, filled, _dy) in _OUTCOME_STYLE.items():
            mine = [i for i, p in enumerate(pts) if p[1] == iface and p[2] == outcome]
            if not mine:
                continue
            for i in mine:
                if pts[i][3]:
                    ax.annotate(pts[i][3], xy[i], textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7)
            color = _IFACE_COLOR[iface]
            kw = {"color": color} if filled else {"facecolors": "none", "edgecolors": color, "linewidths": 1.5}
            ax.scatter(
                [xy[i][0] for i in mine],
                [xy[i][1] for i in mine],
                s=60,
                marker=marker,
                label=f"{iface} {outcome} ({len(mine)})",
                **kw,
            )
    ax.set_yticks(range(len(INTERFACES)))
    ax.set_yticklabels(INTERFACES)
    ax.set_xlabel("step")
    ax.set_ylim(-0.5, 2.7)
    if steps:
        ax.set_xlim(0, max(steps) + 1)
    if pts:  # a run without proposals has nothing to name (matplotlib warns on an empty legend)
        ax.legend(
            fontsize=7,
            loc="center left",
            bbox_to_anchor=(1.01, 0.5),
            title="● accepted  □ fallback  × not accepted",
            title_fontsize=7,
        )
    ax.set_title("Harness updates by interface and outcome" + ("" if pts else ": none"))
    return _png(fig)


def _reward_parts_plot(data: RunData) -> str | None:
    """The rubric and each reward part beside it (`train.rewards`), batch means per step; None without parts."""
    import matplotlib.pyplot as plt

    m = [x for x in data["metrics"] if x.reward_parts]
    if not m:
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    steps = [x.step for x in m]
    ax.plot(steps, [x.reward for x in m], marker="o", label="reward (rubric + weighted parts)")
    ax.plot(steps, [x.reward_rubric for x in m], marker=".", label="rubric")
    for name in sorted({k for x in m for k in x.reward_parts}):
        ax.plot(steps, [x.reward_parts.get(name, float("nan")) for x in m], ls="--", marker=".", label=f"{name} (part)")
    ax.set_xlabel("step")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Reward parts (batch means; parts unweighted)")
    return _png(fig)


def _drift_plot(data: RunData) -> str | None:
    """The judge's drift line (trainer/judge_drift.py) at each pause; None when the run had no drift probe."""
    import matplotlib.pyplot as plt

    m = [x for x in data["metrics"] if x.judge_drift is not None and x.judge_drift.error is None]
    if not m:
        return None
    fig, ax = plt.subplots(figsize=(7, 2.6))
    steps = [x.step for x in m]
    nan = float("nan")
    lines = {
        "agreement with the first judging": [x.judge_drift.agreement for x in m],
        "met rate": [x.judge_drift.met_rate for x in m],
        "agreement with the checks": [x.judge_drift.check_agreement for x in m],
    }
    for label, ys in lines.items():
        if any(y is not None for y in ys):
            ax.plot(steps, [nan if y is None else y for y in ys], marker="o", label=label)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("step")
    ax.legend(fontsize=7)
    ax.set_title("Judge drift on the fixed probe set")
    return _png(fig)


def plots(data: RunData) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    series = step_series(data)
    steps = series.steps

    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot(steps, series.reward, marker="o", label="reward (batch mean)")
    ax.plot(steps, series.reward_std, marker=".", label="reward std (within group)")
    for s in series.update_steps:
        ax.axvline(s, color="tab:green", ls="--", alpha=0.6)
    ax.set_xlabel("step")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    ax.set_title("Reward (dashed: harness updates)")
    out["reward"] = _png(fig)

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.bar(steps, series.dead_share, color="tab:red", alpha=0.7)
    ax.set_ylim(0, 1)
    ax.set_xlabel("step")
    ax.set_title("Dead-group share (zero reward variance)")
    out["dead"] = _png(fig)

    out["updates"] = _updates_plot(data, steps)

    if data["eval"]:
        fig, ax = plt.subplots(figsize=(7, 3))
        bars = eval_bars(data)
        domains = bars.domains
        width = 0.8 / max(1, len(bars.criteria))
        for j, lab in enumerate(bars.criteria):
            ax.bar(
                [i + j * width for i in range(len(domains))],
                bars.criteria[lab],
                width,
                label=f"{lab} (criteria)",
            )
            ax.scatter(
                [i + j * width for i in range(len(domains))],
                [a if a is not None else float("nan") for a in bars.audit[lab]],
                marker="D",
                color="black",
                zorder=3,
                label=f"{lab} (audit)" if j == 0 else None,
            )
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(domains))])
        ax.set_xticklabels(domains, fontsize=8)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
        ax.set_title("Held-out Avg@k per domain")
        out["eval"] = _png(fig)

    parts = _reward_parts_plot(data)
    if parts:
        out["reward_parts"] = parts
    drift = _drift_plot(data)
    if drift:
        out["judge_drift"] = drift

    fig, ax = plt.subplots(figsize=(7, 2.6))
    if series.pause_share:
        ax.bar(series.pause_steps, series.pause_share, color="tab:gray", label="pause share of step")
    ax.plot(steps, series.judge_warnings, color="tab:red", marker=".", label="judge warnings")
    ax.set_xlabel("step")
    ax.legend(fontsize=7)
    ax.set_title("Pause-time share and judge warnings")
    out["pause"] = _png(fig)
    return out


def _table(rows: list[Any], cols: list[str], links: dict[str, dict[str, str]] | None = None) -> str:
    """`links[col][cell text]` = href: that cell becomes a link (trace pages)."""
    links = links or {}

    def cell(r: Any, c: str) -> str:
        text = html.escape(_fmt(r[c]))
        href = links.get(c, {}).get(_fmt(r[c]))
        return f'<a href="{html.escape(href)}">{text}</a>' if href else text

    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{cell(r, c)}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    """One cell's text: floats to 3 places, lists comma-joined, dicts as 'k: v' pairs (never raw JSON)."""
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items())[:300]
    if isinstance(v, list):
        return ", ".join(_fmt(x) for x in v)[:300]
    return "" if v is None else str(v)


def _value_html(v: Any) -> str:
    """A summary value: scalars as text, a dict as a short list of 'k: v' lines (nested dicts inline)."""
    if isinstance(v, dict):
        if not v:
            return "–"
        items = "".join(f"<li>{html.escape(str(k))}: {html.escape(_fmt(x))}</li>" for k, x in v.items())
        return f"<ul>{items}</ul>"
    return html.escape(_fmt(v)) or "–"


def _kv_table(values: Summary) -> str:
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{_value_html(v)}</td></tr>" for k, v in values.items())
    return f"<table class=kv>{rows}</table>"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


_BRAIN_WORDS = {"rules": "by rules", "llm": "by the LLM", "llm_fallback": "by rules after the LLM failed"}


def _steps(steps: list[int]) -> str:
    """Steps as runs: [3, 4, 5, 9] -> "steps 3-5, 9"."""
    runs: list[list[int]] = []
    for n in steps:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return "steps " + ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def summary_sentences(s: Summary) -> list[str]:
    """The summary as a person reads it."""

    def by_iface(d: dict[str, int]) -> str:
        return ", ".join(f"{n} {i}" for i, n in d.items()) or "none"

    pause = f"{s['pause_s']:.0f} s" + (
        f" ({100 * s['pause_share']:.0f}% of training time)" if s["pause_share"] is not None else ""
    )
    lines = [
        f"{_n(s['steps'], 'training step')}; the detector reported {_n(s['events'], 'failure event')} "
        f"({_fmt(s['event_types']) or 'none'}).",
        f"{_n(s['rounds'], 'evolver round')} ({s['rounds_failed']} failed) paused training for {pause}.",
        f"The critic accepted {_n(s['accepted_total'], 'update')} ({by_iface(s['accepted_by_interface'])}); "
        f"{_n(s['fallback_total'], 'fallback')} changed sampling after every candidate was rejected; "
        f"{_n(s['committed_total'], 'harness version')} committed in all.",
    ]
    for step, error in s["round_errors"].items():
        lines.append(f"The round at step {step} failed and was rolled back: {error}")
    if s["confirmed_total"] or s["reverted_total"] or s["provisional_total"]:
        lines.append(
            f"Training confirmed {_n(s['confirmed_total'], 'accepted update')} and reverted "
            f"{s['reverted_total']} (its failure persisted or a guard showed harm on the next training groups; "
            f"{_n(s['revert_total'], 'revert version')}); {s['provisional_total']} still provisional"
            + (f", {s['superseded_total']} superseded by a later update" if s["superseded_total"] else "")
            + "."
        )
    brains = s["brains"]
    if any(src != "rules" for per in brains.values() for src in per):
        lines.append(
            "Decisions by brain: "
            + "; ".join(
                f"{role} " + ", ".join(f"{n} {_BRAIN_WORDS.get(src, src)}" for src, n in sorted(per.items()))
                for role, per in brains.items()
            )
            + "."
        )
    if s["unscoreable"] or s["criteria_skipped"] or s["judge_left_out"]:
        lines.append(
            f"Scoring: {_n(s['unscoreable'], 'response')} could not be scored (reward 0), "
            f"{_n(s['criteria_skipped'], 'verdict')} skipped for want of a judge and "
            f"{_n(s['judge_left_out'], 'verdict')} left out because the judge failed; "
            f"{_n(s['steps_flagged'], 'step')} flagged (metrics.jsonl)."
        )
    if s["memory_outage_steps"] or s["memory_flushed"]:
        down = s["memory_outage_steps"]
        lines.append(
            f"The memory server was unreachable at the end of {_n(len(down), 'step')}"
            + (f" ({_steps(down)})" if down else "")
            + f"; {_n(s['memory_flushed'], 'queued record')} written once it answered again"
            + (
                f", {s['memory_queued_at_end']} still queued at the last step (not written)"
                if s["memory_queued_at_end"]
                else ""
            )
            + " (metrics.jsonl: memory_queued, memory_flushed)."
        )
    drift = drift_sentence(s["judge_drift"])
    if drift:
        lines.append(drift)
    if s["judge_warnings"]:
        lines.append(
            f"The judge reported {s['judge_warnings']} warnings (malformed answers, errors or checks that "
            "could not decide): see metrics.jsonl."
        )
    return lines


def build_report(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    data = collect(run_dir)
    s = summary(data)
    imgs = plots(data)
    upd_rows = update_rows(data)
    verdicts = verdict_rows(data)
    iface_rows = interface_rows(data)
    type_rows = event_type_rows(data)
    effect_rows = update_effect_rows(data["metrics"], data["updates"], data["rounds"], dead_eps=data["dead_eps"])
    rounds = round_rows(data)
    trace_links = write_trace_pages(run_dir, data["rounds"])
    sections = [
        f"<h1>HarnessRL run: {html.escape(run_dir.name)}</h1>",
        "<h2>Summary</h2>",
        "".join(f"<p>{html.escape(line)}</p>" for line in summary_sentences(s)),
        f"<details><summary>All counts</summary>{_kv_table(s)}</details>",
        "<h2>Events by type</h2>",
        _table(type_rows, list(type_rows[0])) if type_rows else "<p>No events detected.</p>",
        "<p class=note>detected: events.jsonl; in rounds: events an evolver round decided on. accepted: the "
        "critic measured an improvement and the update was committed; fallback: every candidate was rejected "
        "and the safe sampling change was committed; rejected: nothing committed (rejected, stale, skipped, "
        "or refused by a human).</p>",
        "<h2>Proposals and updates by interface</h2>",
        _table(iface_rows, list(iface_rows[0])),
        "<p class=note>proposals/accepted/fallback/rejected count events by the interface the attributor "
        "chose; committed columns count harness versions by the interface they changed (a fallback is "
        "always a sampling change).</p>",
        "<h2>Critic cost by interface</h2>",
        _table(cost_rows(data), ["interface", "proposals", *COST_COLUMNS]),
        "<p class=note>What measuring the proposals cost: probe rollouts generated on the frozen policy and "
        "their tokens, rollouts re-scored at no generation cost (training groups, shared control probes), "
        "judge LLM calls and wall-clock seconds of the measurements.</p>",
        f'<h2>Reward</h2><img src="{imgs["reward"]}">',
        *([f'<h2>Reward parts</h2><img src="{imgs["reward_parts"]}">'] if "reward_parts" in imgs else []),
        f'<h2>Dead groups</h2><img src="{imgs["dead"]}">',
        f'<h2>Harness updates</h2><img src="{imgs["updates"]}">',
        _table(upd_rows, ["version", "step", "interface", "outcome", "ops", "rationale"])
        if upd_rows
        else "<p>No committed updates.</p>",
        "<h2>Did each update hold?</h2>",
        _table(effect_rows, list(effect_rows[0])) if effect_rows else "<p>No committed updates.</p>",
        "<p class=note>The training groups of each update's tasks (and of a variant it added) before and "
        "after it: mean reward, mean within-group std, and the share of dead groups (std below the "
        "detector's eps). No groups after an update: its tasks were not drawn again in this run.</p>",
        "<h2>Training's verdicts on accepted updates</h2>",
        _table(verdicts, ["round", "version", "task", "failure", "verdict", "why", "revert"])
        if verdicts
        else "<p>No accepted update has had its training groups yet.</p>",
        "<p class=note>Every accepted update is provisional: its task's first training groups under it "
        "confirm it, or revert it with a new version when its failure persists (agents/decisions.py).</p>",
    ]
    if "eval" in imgs:
        sections.append(f'<h2>Held-out evaluation</h2><img src="{imgs["eval"]}">')
        sections.append(_table(eval_rows(data), ["model", "avg_at_k", "audit", "k", "n_tasks"]))
        dom_rows = eval_domain_rows(data["eval"])
        if dom_rows:
            sections += [
                "<h3>Base vs trained per domain (same tasks and seeds)</h3>",
                _table(dom_rows, list(dom_rows[0])),
                "<p class=note>criteria: the training rubric's score (Avg@k); audit: the hidden audit "
                "criteria, which no agent sees.</p>",
            ]
    else:
        sections.append(
            "<h2>Held-out evaluation</h2><p>No eval.json yet: run <code>harnessrl eval --run "
            f"{html.escape(str(run_dir))}</code>.</p>"
        )
    sections += [
        f'<h2>Pause time and judge warnings</h2><img src="{imgs["pause"]}">',
        *(
            [
                f'<h2>Judge drift</h2><img src="{imgs["judge_drift"]}">',
                "<p class=note>The fixed probe set (judge_probe.json) re-judged at each pause: agreement with its "
                "first judging, the share judged met, and agreement with the programmatic checks where an item has "
                "one (trainer/judge_drift.py).</p>",
            ]
            if "judge_drift" in imgs
            else []
        ),
        "<h2>Evolver rounds</h2>",
        _table(rounds, list(rounds[0]) if rounds else ["step"], links={"thread_id": trace_links}),
        "<p class=note>Each thread id links to its trace page (traces/), written with this report; a round "
        "run on a LangGraph server is in Studio instead.</p>",
    ]
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>HarnessRL report</title><style>"
        "body{font-family:sans-serif;max-width:1000px;margin:auto}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}img{max-width:100%}"
        "table.kv th{text-align:left;background:#f4f4f4;white-space:nowrap}table.kv ul{margin:0;padding-left:1.2em}"
        ".note{font-size:12px;color:#555}</style></head><body>" + "\n".join(sections) + "</body></html>"
    )
    out = run_dir / "report.html"
    atomic_write_text(out, page)
    return out
