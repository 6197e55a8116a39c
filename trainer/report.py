"""`report.html` for a run folder: one self-contained page, plots embedded as base64 PNG.

Sections: a key/value summary, event counts per failure type and decision, proposals and committed
versions per interface, what measuring the proposals cost per interface (probe rollouts, tokens, judge
calls, seconds), reward and reward std per step (with harness-update markers), dead-group share,
harness updates over time by interface and outcome (accepted by the critic, fallback = committed without
the critic's acceptance, not accepted; committed versions from `harness/updates.jsonl`, whose meta flags
fallbacks and reverts, per-event decisions from `rounds.jsonl`), what training made of each accepted update
(confirmed, reverted, still provisional: `trainer.outcomes.update_outcome`), held-out eval per domain
(`eval.json`), pause-time share, judge warnings, and tables of rounds and committed updates. Reads only files; no torch.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

import yaml

from harness.types import INTERFACES
from trainer.io import atomic_write_text, read_jsonl
from trainer.outcomes import eval_domain_rows, graded_verdicts, update_effect_rows, update_outcome, write_trace_pages


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def collect(run_dir: Path) -> dict[str, Any]:
    run_dir = Path(run_dir)
    if not (run_dir / "harness").is_dir():
        raise FileNotFoundError(f"{run_dir} is not a HarnessRL run folder (no harness/ inside)")
    updates = read_jsonl(run_dir / "harness" / "updates.jsonl")
    return {
        "metrics": read_jsonl(run_dir / "metrics.jsonl"),
        "rounds": read_jsonl(run_dir / "rounds.jsonl"),
        "events": read_jsonl(run_dir / "events.jsonl"),
        "updates": [u for u in updates if u.get("update")],
        "eval": json.loads((run_dir / "eval.json").read_text()) if (run_dir / "eval.json").is_file() else {},
        "dead_eps": _detector_eps(run_dir / "config.yaml"),
    }


def _detector_eps(config: Path) -> float | None:
    """The run's `harness.detector.eps` from its saved config (None: not set there, the detector's default)."""
    if not config.is_file():
        return None
    raw = yaml.safe_load(config.read_text()) or {}
    eps = ((raw.get("harness") or {}).get("detector") or {}).get("eps")
    return None if eps is None else float(eps)


# Per-event decisions written by the evolver's `record` node; everything that is neither accepted by the
# critic nor a committed fallback (rejected, rejected_stale, rejected_by_human, skipped) left the harness as it was.
COMMITTING = ("accepted", "fallback")


def _reports(data: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(round step, per-event report) for every report in rounds.jsonl."""
    return [(int(r["step"]), rep) for r in data["rounds"] for rep in r.get("reports") or [] if isinstance(rep, dict)]


def is_fallback(update: dict[str, Any]) -> bool:
    """A committed version the critic did not accept: the safe sampling change after R rejected candidates."""
    return bool((update.get("meta") or {}).get("fallback"))


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """Counts a reader wants first (and the README's demo numbers).

    `*_by_interface` of committed versions use the committed update's interface (a fallback is always a
    sampling change); `proposals_by_interface` counts per-event decisions by the attributed interface.
    """
    outcomes: dict[str, int] = {}
    for r in data["rounds"]:
        for k, v in (r.get("outcomes") or {}).items():
            outcomes[k] = outcomes.get(k, 0) + v
    proposals_by_interface: dict[str, dict[str, int]] = {}
    for _step, rep in _reports(data):
        iface = str(rep.get("interface") or "none")
        out = str(rep.get("decision", "unknown"))
        proposals_by_interface.setdefault(iface, {}).setdefault(out, 0)
        proposals_by_interface[iface][out] += 1
    accepted: dict[str, int] = {}
    fallback: dict[str, int] = {}
    committed: dict[str, int] = {}
    reverts: dict[str, int] = {}
    for u in data["updates"]:
        iface = u["update"]["interface"]
        committed[iface] = committed.get(iface, 0) + 1
        # fallbacks are committed but not critic-accepted; reverts undo an accepted update training refuted
        into = fallback if is_fallback(u) else reverts if update_outcome(u, {}) == "revert" else accepted
        into[iface] = into.get(iface, 0) + 1
    verdicts = graded_verdicts(data)
    fates = _count(update_outcome(u, verdicts) for u in data["updates"])
    m = data["metrics"]
    total_pause = sum(float(x.get("pause_s", 0.0)) for x in m)
    span = (m[-1]["time"] - m[0]["time"]) if len(m) > 1 and "time" in m[0] else 0.0
    return {
        "steps": len(m),
        "events": len(data["events"]),
        "event_types": _count(e.get("type") for e in data["events"]),
        "rounds": len(data["rounds"]),
        "rounds_failed": sum(1 for r in data["rounds"] if r.get("error")),
        "outcomes": outcomes,
        "proposals_by_interface": proposals_by_interface,
        "accepted_by_interface": accepted,
        "accepted_total": sum(accepted.values()),
        "fallback_by_interface": fallback,
        "fallback_total": sum(fallback.values()),
        "committed_by_interface": committed,
        "committed_total": len(data["updates"]),
        "revert_total": sum(reverts.values()),
        "confirmed_total": fates.get("confirmed", 0),
        "reverted_total": fates.get("reverted", 0),
        "provisional_total": fates.get("provisional", 0),
        "superseded_total": fates.get("superseded", 0),
        "pause_s": total_pause,
        "pause_share": (total_pause / span) if span > 0 else None,
        "judge_warnings": sum(int(x.get("judge_warnings", 0)) for x in m),
        **{k: sum(int(x.get(k, 0)) for x in m) for k in ("unscoreable", "criteria_skipped", "judge_left_out")},
        "steps_flagged": sum(
            1 for x in m if x.get("judge_flagged") or x.get("unscoreable_flagged") or x.get("skipped_flagged")
        ),
        "brains": brain_counts(data),
    }


def brain_counts(data: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per role, the decisions each brain made over the run's rounds (`brains` of each report in rounds.jsonl).

    The brains are "rules", "llm", "llm_fallback" (the LLM could not answer validly; the rule brain decided).
    """
    counts: dict[str, dict[str, int]] = {}
    for _step, rep in _reports(data):
        b = rep.get("brains") or {}
        for role, seq in (
            ("attributor", [b.get("attributor")]),
            ("proposer", b.get("proposer") or []),
            ("critic", b.get("critic") or []),
        ):
            for source in seq:
                if source is not None:
                    counts.setdefault(role, {}).setdefault(str(source), 0)
                    counts[role][str(source)] += 1
    return counts


_IFACE_COLS = ("proposals", "accepted", "fallback", "rejected", "committed (accepted)", "committed (fallback)")


def interface_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per interface: events attributed to it and their decisions, and the versions committed on it.

    A fallback is counted twice on purpose: under the attributed interface as the event's decision, and
    under `sampling` as a committed version, because that is the interface the fallback changed.
    """
    rows: dict[str, dict[str, Any]] = {}

    def row(iface: str) -> dict[str, Any]:
        return rows.setdefault(iface, {"interface": iface, **dict.fromkeys(_IFACE_COLS, 0)})

    for iface in INTERFACES:
        row(iface)
    for _step, rep in _reports(data):
        r = row(str(rep.get("interface") or "none"))  # none: skipped before attribution
        r["proposals"] += 1
        decision = rep.get("decision")
        r[decision if decision in COMMITTING else "rejected"] += 1
    for u in data["updates"]:
        row(u["update"]["interface"])["committed (fallback)" if is_fallback(u) else "committed (accepted)"] += 1
    out = list(rows.values())
    out.append({"interface": "total", **{k: sum(r[k] for r in out) for k in _IFACE_COLS}})
    return out


# What each proposal's measurement cost, from the `cost_*` numbers the critic records on every attempt
# (agents/critic.py `cost_numbers`); column -> number key.
_COST_COLS = {
    "probe rollouts": "cost_probe_rollouts",
    "reused rollouts": "cost_reused_rollouts",
    "tokens": "cost_probe_tokens",
    "judge calls": "cost_judge_calls",
    "seconds": "cost_seconds",
}


def cost_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per interface: proposals and what measuring them cost, summed over rounds.jsonl; a total row last.

    Proposals are the candidates the critic saw, every revision counted. Unmeasured attempts (invalid, critic
    off) cost 0.
    """
    rows: dict[str, dict[str, Any]] = {
        i: {"interface": i, "proposals": 0, **dict.fromkeys(_COST_COLS, 0.0)} for i in INTERFACES
    }
    for _step, rep in _reports(data):
        iface = str(rep.get("interface") or "none")
        for a in rep.get("attempts") or []:
            r = rows.setdefault(iface, {"interface": iface, "proposals": 0, **dict.fromkeys(_COST_COLS, 0.0)})
            r["proposals"] += 1
            numbers = (a.get("numbers") or {}) if isinstance(a, dict) else {}
            for col, key in _COST_COLS.items():
                r[col] += float(numbers.get(key) or 0.0)
    out = list(rows.values())
    out.append(
        {
            "interface": "total",
            "proposals": sum(r["proposals"] for r in out),
            **{c: sum(r[c] for r in out) for c in _COST_COLS},
        }
    )
    for r in out:  # counts are whole numbers; only seconds keep their fraction
        for c in ("probe rollouts", "reused rollouts", "tokens", "judge calls"):
            r[c] = int(r[c])
    return out


_TYPE_COLS = ("detected", "in rounds", "accepted", "fallback", "rejected")


def event_type_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per failure type: events detected (events.jsonl) and the decisions the evolver rounds reached on them."""
    rows: dict[str, dict[str, Any]] = {}

    def row(t: str) -> dict[str, Any]:
        return rows.setdefault(t, {"type": t, **dict.fromkeys(_TYPE_COLS, 0)})

    for e in data["events"]:
        row(str(e.get("type")))["detected"] += 1
    for _step, rep in _reports(data):
        r = row(str(rep.get("failure_type")))
        r["in rounds"] += 1
        decision = rep.get("decision")
        r[decision if decision in COMMITTING else "rejected"] += 1
    out = [rows[t] for t in sorted(rows)]
    if out:
        out.append({"type": "total", **{k: sum(r[k] for r in out) for k in out[0] if k != "type"}})
    return out


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[str(i)] = out.get(str(i), 0) + 1
    return out


# outcome -> (marker, filled, y offset within the interface's row); colour is the interface
_OUTCOME_STYLE = {
    "accepted": ("o", True, 0.0),
    "fallback": ("s", False, 0.0),
    "revert": ("v", False, 0.14),
    "not accepted": ("x", True, 0.28),
}
_IFACE_COLOR = {"sampling": "tab:blue", "guidance": "tab:orange", "criteria": "tab:purple"}


def update_points(data: dict[str, Any]) -> list[tuple[int, str, str, str]]:
    """(step, interface, outcome, label) per marker of the updates plot.

    accepted / fallback: one per committed version, on the interface it changed (a fallback is a
    sampling change committed without the critic's acceptance); not accepted: one per event whose
    decision committed nothing, on the interface the attributor chose.
    """
    pts = [
        (
            int(u["step"]),
            u["update"]["interface"],
            "fallback" if is_fallback(u) else "revert" if update_outcome(u, {}) == "revert" else "accepted",
            f"v{u['version']}",
        )
        for u in data["updates"]
    ]
    pts += [
        (step, rep["interface"], "not accepted", "")
        for step, rep in _reports(data)
        if rep.get("decision") not in COMMITTING and rep.get("interface") in INTERFACES
    ]
    return pts


def _updates_plot(data: dict[str, Any], steps: list[int]) -> str:
    import matplotlib.pyplot as plt

    pts = update_points(data)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    # markers sharing a (step, row) are spread sideways in version order, so three versions committed at
    # one step stay three
    rows = [INTERFACES.index(iface) + _OUTCOME_STYLE[outcome][2] for _s, iface, outcome, _l in pts]
    slots: dict[tuple[int, float], int] = {}
    for (s, *_), y in zip(pts, rows):
        slots[(s, y)] = slots.get((s, y), 0) + 1
    seen: dict[tuple[int, float], int] = {}
    xy = []
    for (s, *_), y in zip(pts, rows):
        j, n = seen.get((s, y), 0), slots[(s, y)]
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
    ax.legend(
        fontsize=7,
        loc="center left",
        bbox_to_anchor=(1.01, 0.5),
        title="● accepted  □ fallback  × not accepted",
        title_fontsize=7,
    )
    ax.set_title("Harness updates by interface and outcome")
    return _png(fig)


def plots(data: dict[str, Any]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    m = data["metrics"]
    steps = [x["step"] for x in m]
    update_steps = sorted({int(u["step"]) for u in data["updates"]})

    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot(steps, [x.get("reward", float("nan")) for x in m], marker="o", label="reward (batch mean)")
    ax.plot(steps, [x.get("reward_std", float("nan")) for x in m], marker=".", label="reward std (within group)")
    for s in update_steps:
        ax.axvline(s, color="tab:green", ls="--", alpha=0.6)
    ax.set_xlabel("step")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    ax.set_title("Reward (dashed: harness updates)")
    out["reward"] = _png(fig)

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.bar(steps, [x.get("dead_share", 0.0) for x in m], color="tab:red", alpha=0.7)
    ax.set_ylim(0, 1)
    ax.set_xlabel("step")
    ax.set_title("Dead-group share (zero reward variance)")
    out["dead"] = _png(fig)

    out["updates"] = _updates_plot(data, steps)

    if data["eval"]:
        fig, ax = plt.subplots(figsize=(7, 3))
        labels = list(data["eval"])
        domains = sorted({d for e in data["eval"].values() for d in e.get("domains", {})})
        width = 0.8 / max(1, len(labels))
        for j, lab in enumerate(labels):
            ev = data["eval"][lab]["domains"]
            ax.bar(
                [i + j * width for i in range(len(domains))],
                [ev.get(d, {}).get("avg_at_k", 0) for d in domains],
                width,
                label=f"{lab} (criteria)",
            )
            aud = [ev.get(d, {}).get("audit") for d in domains]
            ax.scatter(
                [i + j * width for i in range(len(domains))],
                [a if a is not None else float("nan") for a in aud],
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

    fig, ax = plt.subplots(figsize=(7, 2.6))
    times = [x.get("time") for x in m]
    if len(m) > 1 and all(t is not None for t in times):
        durations = [max(1e-9, times[i] - times[i - 1]) for i in range(1, len(times))]
        pause = [float(m[i].get("pause_s", 0.0)) for i in range(1, len(m))]
        ax.bar(steps[1:], [p / d for p, d in zip(pause, durations)], color="tab:gray", label="pause share of step")
    ax.plot(steps, [x.get("judge_warnings", 0) for x in m], color="tab:red", marker=".", label="judge warnings")
    ax.set_xlabel("step")
    ax.legend(fontsize=7)
    ax.set_title("Pause-time share and judge warnings")
    out["pause"] = _png(fig)
    return out


def _table(rows: list[dict[str, Any]], cols: list[str], links: dict[str, dict[str, str]] | None = None) -> str:
    """`links[col][cell text]` = href: that cell becomes a link (trace pages)."""
    links = links or {}

    def cell(r: dict[str, Any], c: str) -> str:
        text = html.escape(_fmt(r.get(c)))
        href = links.get(c, {}).get(_fmt(r.get(c)))
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


def _kv_table(values: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{_value_html(v)}</td></tr>" for k, v in values.items())
    return f"<table class=kv>{rows}</table>"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


_BRAIN_WORDS = {"rules": "by rules", "llm": "by the LLM", "llm_fallback": "by rules after the LLM failed"}


def summary_sentences(s: dict[str, Any]) -> list[str]:
    """The summary as a person reads it."""

    def by_iface(d: dict[str, int]) -> str:
        return ", ".join(f"{n} {i}" for i, n in d.items()) or "none"

    pause = f"{s['pause_s']:.0f} s" + (
        f" ({100 * s['pause_share']:.0f}% of training time)" if s.get("pause_share") is not None else ""
    )
    lines = [
        f"{_n(s['steps'], 'training step')}; the detector reported {_n(s['events'], 'failure event')} "
        f"({_fmt(s['event_types']) or 'none'}).",
        f"{_n(s['rounds'], 'evolver round')} ({s['rounds_failed']} failed) paused training for {pause}.",
        f"The critic accepted {_n(s['accepted_total'], 'update')} ({by_iface(s['accepted_by_interface'])}); "
        f"{_n(s['fallback_total'], 'fallback')} changed sampling after every candidate was rejected; "
        f"{_n(s['committed_total'], 'harness version')} committed in all.",
    ]
    if s.get("confirmed_total") or s.get("reverted_total") or s.get("provisional_total"):
        lines.append(
            f"Training confirmed {_n(s['confirmed_total'], 'accepted update')} and reverted "
            f"{s['reverted_total']} (its failure persisted or a guard showed harm on the next training groups; "
            f"{_n(s['revert_total'], 'revert version')}); {s['provisional_total']} still provisional"
            + (f", {s['superseded_total']} superseded by a later update" if s.get("superseded_total") else "")
            + "."
        )
    brains = s.get("brains") or {}
    if any(src != "rules" for per in brains.values() for src in per):
        lines.append(
            "Decisions by brain: "
            + "; ".join(
                f"{role} " + ", ".join(f"{n} {_BRAIN_WORDS.get(src, src)}" for src, n in sorted(per.items()))
                for role, per in brains.items()
            )
            + "."
        )
    if s.get("unscoreable") or s.get("criteria_skipped") or s.get("judge_left_out"):
        lines.append(
            f"Scoring: {_n(s['unscoreable'], 'response')} could not be scored (reward 0), "
            f"{_n(s['criteria_skipped'], 'verdict')} skipped for want of a judge and "
            f"{_n(s['judge_left_out'], 'verdict')} left out because the judge failed; "
            f"{_n(s['steps_flagged'], 'step')} flagged (metrics.jsonl)."
        )
    if s["judge_warnings"]:
        lines.append(
            f"The judge reported {s['judge_warnings']} warnings (malformed answers, errors or checks that "
            "could not decide): see metrics.jsonl."
        )
    return lines


def verdict_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per verdict training gave a provisional update (rounds.jsonl `provisional`, trainer/provisional.py)."""
    return [
        {
            "round": r.get("step"),
            "version": v.get("version"),
            "task": v.get("task_id"),
            "failure": v.get("failure_type"),
            "verdict": v.get("verdict"),
            "why": "; ".join(v.get("reasons") or []),
            "revert": f"v{v['revert_version']}" if v.get("revert_version") else "",
        }
        for r in data["rounds"]
        for v in (r.get("provisional") or {}).get("verdicts") or []
    ]


def build_report(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    data = collect(run_dir)
    s = summary(data)
    imgs = plots(data)
    upd_rows = [
        {
            "version": u["version"],
            "step": u["step"],
            "interface": u["update"]["interface"],
            "outcome": update_outcome(u, graded_verdicts(data)),
            "ops": ", ".join(f"{o['op']}({o.get('task_id', '')})" for o in u["update"]["ops"]),
            "rationale": u["update"].get("rationale", ""),
        }
        for u in data["updates"]
    ]
    round_rows = [
        {
            **{
                k: r.get(k)
                for k in (
                    "step",
                    "n_events",
                    "event_types",
                    "outcomes",
                    "n_accepted",
                    "version_before",
                    "version_after",
                    "pause_s",
                    "error",
                    "thread_id",
                )
            },
            "confirmed / reverted": "{} / {}".format(
                (r.get("provisional") or {}).get("n_confirmed", 0), (r.get("provisional") or {}).get("n_reverted", 0)
            ),
        }
        for r in data["rounds"]
    ]
    iface_rows = interface_rows(data)
    type_rows = event_type_rows(data)
    effect_rows = update_effect_rows(data, dead_eps=data.get("dead_eps"))
    trace_links = write_trace_pages(run_dir, data)
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
        _table(cost_rows(data), ["interface", "proposals", *_COST_COLS]),
        "<p class=note>What measuring the proposals cost: probe rollouts generated on the frozen policy and "
        "their tokens, rollouts re-scored at no generation cost (training groups, shared control probes), "
        "judge LLM calls and wall-clock seconds of the measurements.</p>",
        f'<h2>Reward</h2><img src="{imgs["reward"]}">',
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
        _table(verdict_rows(data), ["round", "version", "task", "failure", "verdict", "why", "revert"])
        if verdict_rows(data)
        else "<p>No accepted update has had its training groups yet.</p>",
        "<p class=note>Every accepted update is provisional: its task's first training groups under it "
        "confirm it, or revert it with a new version when its failure persists (agents/decisions.py).</p>",
    ]
    if "eval" in imgs:
        sections.append(f'<h2>Held-out evaluation</h2><img src="{imgs["eval"]}">')
        sections.append(
            _table(
                [
                    {"model": k, "avg_at_k": v["avg_at_k"], "audit": v["audit"], "k": v["k"], "n_tasks": v["n_tasks"]}
                    for k, v in data["eval"].items()
                ],
                ["model", "avg_at_k", "audit", "k", "n_tasks"],
            )
        )
        dom_rows = eval_domain_rows(data)
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
        "<h2>Evolver rounds</h2>",
        _table(round_rows, list(round_rows[0]) if round_rows else ["step"], links={"thread_id": trace_links}),
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
