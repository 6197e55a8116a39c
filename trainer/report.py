"""`report.html` for a run folder: one self-contained page, plots embedded as base64 PNG.

Sections: reward and reward std per step (with harness-update markers), dead-group share, harness
updates over time by interface and outcome (committed updates from `harness/updates.jsonl`, per-event
outcomes from `rounds.jsonl`), held-out eval per domain (`eval.json`), pause-time share, judge
warnings, and tables of rounds and committed updates. Reads only files; no torch.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from trainer.io import atomic_write_text, read_jsonl


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
    }


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """Counts a reader wants first (and the README's demo numbers)."""
    outcomes: dict[str, int] = {}
    proposals_by_interface: dict[str, dict[str, int]] = {}
    for r in data["rounds"]:
        for k, v in (r.get("outcomes") or {}).items():
            outcomes[k] = outcomes.get(k, 0) + v
        for rep in r.get("reports") or []:
            if isinstance(rep, dict):
                iface = str(rep.get("interface") or "none")
                out = str(rep.get("decision", "unknown"))
                proposals_by_interface.setdefault(iface, {}).setdefault(out, 0)
                proposals_by_interface[iface][out] += 1
    accepted: dict[str, int] = {}
    committed: dict[str, int] = {}
    for u in data["updates"]:
        iface = u["update"]["interface"]
        committed[iface] = committed.get(iface, 0) + 1
        if not (u.get("meta") or {}).get("fallback"):  # fallbacks are committed but not critic-accepted
            accepted[iface] = accepted.get(iface, 0) + 1
    m = data["metrics"]
    total_pause = sum(float(x.get("pause_s", 0.0)) for x in m)
    span = (m[-1]["time"] - m[0]["time"]) if len(m) > 1 and "time" in m[0] else 0.0
    return {
        "steps": len(m), "events": len(data["events"]),
        "event_types": _count(e.get("type") for e in data["events"]),
        "rounds": len(data["rounds"]), "rounds_failed": sum(1 for r in data["rounds"] if r.get("error")),
        "outcomes": outcomes, "proposals_by_interface": proposals_by_interface,
        "accepted_by_interface": accepted, "accepted_total": sum(accepted.values()),
        "committed_by_interface": committed, "committed_total": len(data["updates"]),
        "pause_s": total_pause, "pause_share": (total_pause / span) if span > 0 else None,
        "judge_warnings": sum(int(x.get("judge_warnings", 0)) for x in m),
    }


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[str(i)] = out.get(str(i), 0) + 1
    return out


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
    ax.set_xlabel("step"); ax.set_ylim(-0.05, 1.05); ax.legend(fontsize=8); ax.set_title("Reward (dashed: harness updates)")
    out["reward"] = _png(fig)

    fig, ax = plt.subplots(figsize=(7, 2.6))
    ax.bar(steps, [x.get("dead_share", 0.0) for x in m], color="tab:red", alpha=0.7)
    ax.set_ylim(0, 1); ax.set_xlabel("step"); ax.set_title("Dead-group share (zero reward variance)")
    out["dead"] = _png(fig)

    fig, ax = plt.subplots(figsize=(7, 2.8))
    ifaces = ["sampling", "guidance", "criteria"]
    colors = {"sampling": "tab:blue", "guidance": "tab:orange", "criteria": "tab:purple"}
    for i, iface in enumerate(ifaces):
        xs = [int(u["step"]) for u in data["updates"] if u["update"]["interface"] == iface]
        ax.scatter(xs, [i] * len(xs), s=80, color=colors[iface], label=f"{iface} accepted ({len(xs)})")
    rej: list[tuple[int, str]] = []
    for r in data["rounds"]:
        for rep in r.get("reports") or []:
            if isinstance(rep, dict) and rep.get("decision") != "accepted" and rep.get("interface") in ifaces:
                rej.append((int(r["step"]), rep["interface"]))
    if rej:
        ax.scatter([s for s, _ in rej], [ifaces.index(i) + 0.2 for _, i in rej], marker="x", color="gray",
                   label=f"not accepted ({len(rej)})")
    ax.set_yticks(range(3)); ax.set_yticklabels(ifaces); ax.set_xlabel("step"); ax.set_ylim(-0.5, 2.7)
    if steps:
        ax.set_xlim(0, max(steps) + 1)
    ax.legend(fontsize=7, loc="upper left"); ax.set_title("Harness updates by interface and outcome")
    out["updates"] = _png(fig)

    if data["eval"]:
        fig, ax = plt.subplots(figsize=(7, 3))
        labels = list(data["eval"])
        domains = sorted({d for e in data["eval"].values() for d in e.get("domains", {})})
        width = 0.8 / max(1, len(labels))
        for j, lab in enumerate(labels):
            ev = data["eval"][lab]["domains"]
            ax.bar([i + j * width for i in range(len(domains))], [ev.get(d, {}).get("avg_at_k", 0) for d in domains],
                   width, label=f"{lab} (criteria)")
            aud = [ev.get(d, {}).get("audit") for d in domains]
            ax.scatter([i + j * width for i in range(len(domains))], [a if a is not None else float("nan") for a in aud],
                       marker="D", color="black", zorder=3, label=f"{lab} (audit)" if j == 0 else None)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(domains))]); ax.set_xticklabels(domains, fontsize=8)
        ax.set_ylim(0, 1); ax.legend(fontsize=7); ax.set_title("Held-out Avg@k per domain")
        out["eval"] = _png(fig)

    fig, ax = plt.subplots(figsize=(7, 2.6))
    times = [x.get("time") for x in m]
    if len(m) > 1 and all(t is not None for t in times):
        durations = [max(1e-9, times[i] - times[i - 1]) for i in range(1, len(times))]
        pause = [float(m[i].get("pause_s", 0.0)) for i in range(1, len(m))]
        ax.bar(steps[1:], [p / d for p, d in zip(pause, durations)], color="tab:gray", label="pause share of step")
    ax.plot(steps, [x.get("judge_warnings", 0) for x in m], color="tab:red", marker=".", label="judge warnings")
    ax.set_xlabel("step"); ax.legend(fontsize=7); ax.set_title("Pause-time share and judge warnings")
    out["pause"] = _png(fig)
    return out


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)[:300]
    return "" if v is None else str(v)


def build_report(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    data = collect(run_dir)
    s = summary(data)
    imgs = plots(data)
    upd_rows = [{"version": u["version"], "step": u["step"], "interface": u["update"]["interface"],
                 "ops": ", ".join(f"{o['op']}({o.get('task_id', '')})" for o in u["update"]["ops"]),
                 "rationale": u["update"].get("rationale", "")} for u in data["updates"]]
    round_rows = [{k: r.get(k) for k in ("step", "n_events", "event_types", "n_accepted", "version_before",
                                          "version_after", "pause_s", "error", "thread_id")} for r in data["rounds"]]
    sections = [f"<h1>HarnessRL run: {html.escape(run_dir.name)}</h1>",
                "<h2>Summary</h2>", _table([s], list(s)),
                f'<h2>Reward</h2><img src="{imgs["reward"]}">', f'<h2>Dead groups</h2><img src="{imgs["dead"]}">',
                f'<h2>Harness updates</h2><img src="{imgs["updates"]}">',
                _table(upd_rows, ["version", "step", "interface", "ops", "rationale"]) if upd_rows else "<p>No committed updates.</p>"]
    if "eval" in imgs:
        sections.append(f'<h2>Held-out evaluation</h2><img src="{imgs["eval"]}">')
        sections.append(_table([{"model": k, "avg_at_k": v["avg_at_k"], "audit": v["audit"], "k": v["k"],
                                 "n_tasks": v["n_tasks"]} for k, v in data["eval"].items()],
                               ["model", "avg_at_k", "audit", "k", "n_tasks"]))
    else:
        sections.append("<h2>Held-out evaluation</h2><p>No eval.json yet: run <code>harnessrl eval --run "
                        f"{html.escape(str(run_dir))}</code>.</p>")
    sections += [f'<h2>Pause time and judge warnings</h2><img src="{imgs["pause"]}">',
                 "<h2>Evolver rounds</h2>", _table(round_rows, list(round_rows[0]) if round_rows else ["step"])]
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>HarnessRL report</title><style>"
            "body{font-family:sans-serif;max-width:1000px;margin:auto}table{border-collapse:collapse;font-size:12px}"
            "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}img{max-width:100%}</style></head><body>"
            + "\n".join(sections) + "</body></html>")
    out = run_dir / "report.html"
    atomic_write_text(out, page)
    return out
