"""The evolver-quality benchmark's report: summary numbers per defect and arm, and EVOLVER.md rendered
from one or two result files (before → after), keeping hand-written notes below `NOTES_MARKER`.

Part of `benchmarks/evolver_quality.py` (modules in `benchmarks/` import each other by plain name).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evq_cases import DEFECTS, EXPECTED, Case


# -- summary --------------------------------------------------------------------------------------------
def summarise(cases: Sequence[Case], detection_rows: list[dict], rows: list[dict], bad_rows: list[dict],
              arms: Sequence[str]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for d in DEFECTS:
        det = [r for r in detection_rows if r["defect"] == d]
        if not det:
            continue
        entry: dict[str, Any] = {"cases": len(det), "detected": sum(r["detected"] for r in det),
                                 "other_events": sum(len(r["other_events"]) for r in det), "arms": {}}
        for a in arms:
            rs = [r for r in rows if r["defect"] == d and r["arm"] == a]
            n = len(rs)
            entry["arms"][a] = {
                "n": n,
                "correct_interface": None if d == "control" else sum(r["interface"] == r["expected_interface"] for r in rs),
                "accepted": sum(r["accepted"] for r in rs),
                "fallback": sum(r["fallback"] for r in rs),
                "harness_changed": sum(r["harness_changed"] for r in rs),
                "out_of_training": sum(not r["in_training_after"] for r in rs),
                "other_tasks_touched": sum(len(r["other_tasks_touched"]) for r in rs),
                "probe_rollouts_per_decision": round(sum(r["probe_rollouts"] for r in rs) / n, 2) if n else None,
                "seconds_per_decision": round(sum(r["seconds"] for r in rs) / n, 2) if n else None,
            }
        per[d] = entry
    bad: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in bad_rows}):
        bad[kind] = {a: {"n": len(rs), "accepted": sum(r["accepted"] for r in rs),
                         "invalid": sum(r["invalid"] for r in rs),
                         "probe_rollouts_per_decision": round(sum(r["probe_rollouts"] for r in rs) / len(rs), 2) if rs else None,
                         "seconds_per_decision": round(sum(r["seconds"] for r in rs) / len(rs), 2) if rs else None}
                     for a in arms for rs in [[r for r in bad_rows if r["kind"] == kind and r["arm"] == a]]}
    return {"per_defect": per, "bad_candidates": bad}


# -- report -------------------------------------------------------------------------------------------------
PENDING = "to run after the mechanics changes land"
# Everything below this line in an existing report is hand-written and survives a re-render.
NOTES_MARKER = "<!-- hand-written notes below: kept when the report is re-rendered -->"


def _frac(a: int | None, n: int) -> str:
    return "–" if a is None or n == 0 else f"{a}/{n}"


def _cell(before: str, after: str | None) -> str:
    return f"{before} → {after if after is not None else '…'}"


def _show_run(r: dict[str, Any] | None, key: str) -> str:
    if r is None:
        return PENDING
    v = r[key]
    if key == "runtime_s":
        return f"{v:.0f} s ({v / 60:.1f} min)"
    if key == "command":
        return f"`{v}`"
    if key == "settings":
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def _arm_value(s: dict[str, Any] | None, d: str, arm: str, key: str) -> Any:
    if s is None or d not in s["per_defect"] or arm not in s["per_defect"][d]["arms"]:
        return None
    return s["per_defect"][d]["arms"][arm][key]


def _arm_cell(b: dict[str, Any], a: dict[str, Any] | None, d: str, arm: str, key: str, frac: bool = True) -> str:
    """`before → after` of one summary number (`k/n` when `frac`)."""
    def show(s: dict[str, Any]) -> str:
        v = _arm_value(s, d, arm, key)
        if frac:
            return _frac(v, _arm_value(s, d, arm, "n") or 0)
        return "–" if v is None else str(v)
    return _cell(show(b), None if a is None else show(a))


def render_markdown(before: dict[str, Any], after: dict[str, Any] | None) -> str:
    """EVOLVER.md from the before (and, once run, after) result files."""
    b, a = before["summary"], (after or {}).get("summary")
    lines = [
        "# Evolver quality benchmark",
        "",
        "How well one evolver round finds, routes and repairs known reward defects planted in copies of bundled",
        "`rubric-mix-lite` tasks, what it costs, and how often it changes things it should leave alone. The frozen",
        f"policy is `{before['settings']['model']}`; everything else (detector, judge, graph, rule brains, critic, store,",
        "Chroma memory) is the real code. Method, cases and the gaming overlay: the docstring of",
        "`benchmarks/evolver_quality.py`. This is the yardstick of issue 10 points 2-4 (cross-task repairs, the",
        "fallback, the critic): each cell reads **before → after** those changes.",
        "",
        "## Runs",
        "",
        "| | before | after |",
        "|---|---|---|",
    ]
    for label, key in (("command", "command"), ("runtime", "runtime_s"), ("load before (/proc/loadavg)", "loadavg_before"),
                       ("load after", "loadavg_after"), ("machine", "machine"), ("settings", "settings")):
        lines.append(f"| {label} | {_show_run(before, key)} | {_show_run(after, key)} |")
    lines += [
        "",
        "## Detection (the real detector on W groups of k rollouts per task)",
        "",
        "| defect | planted event | detected | other events on the task |",
        "|---|---|---|---|",
    ]
    for d, e in b["per_defect"].items():
        ea = a["per_defect"].get(d) if a else None
        planted = EXPECTED[d][0] or "none (false event fed)"
        det_b = _frac(e["detected"], e["cases"]) if d != "control" else "–"
        det_a = None if ea is None else _frac(ea["detected"], ea["cases"]) if d != "control" else "–"
        lines.append(f"| {d} | {planted} | {_cell(det_b, det_a)} "
                     f"| {_cell(str(e['other_events']), str(ea['other_events']) if ea else None)} |")
    lines += [
        "",
        "For `control` the other-events column counts false positives of the detector on healthy tasks.",
        "",
        "## One evolver round per case",
        "",
        "`interface ok`: the attribution chose the expected interface; `accepted`: a measured repair was committed",
        "(for `control`: a false accept); `fallback`: the safe sampling change was committed; `out of training`:",
        "after the round neither the task nor an active variant of it is drawn (weight 0 or retired); `others`:",
        "changes to other tasks made in the same round (batched repairs); probes are rollouts the critic asked for.",
        "",
        "| defect | arm | interface ok | accepted | fallback | out of training | others | probes / decision | s / decision |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    arms = before["settings"]["arms"].split(",")
    for d in b["per_defect"]:
        for arm in arms:
            cells = [_arm_cell(b, a, d, arm, "correct_interface"), _arm_cell(b, a, d, arm, "accepted"),
                     _arm_cell(b, a, d, arm, "fallback"), _arm_cell(b, a, d, arm, "out_of_training"),
                     _arm_cell(b, a, d, arm, "other_tasks_touched", False),
                     _arm_cell(b, a, d, arm, "probe_rollouts_per_decision", False),
                     _arm_cell(b, a, d, arm, "seconds_per_decision", False)]
            lines.append(f"| {d} | {arm} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Known-bad candidates fed to the critic",
        "",
        "Every accept here is a false accept. `invalid` = refused before measuring (e.g. the hint-leak guard).",
        "",
        "| candidate | arm | accepted | invalid | probes / decision | s / decision |",
        "|---|---|---|---|---|---|",
    ]
    for kind, per_arm in b["bad_candidates"].items():
        for arm, e in per_arm.items():
            ea = a["bad_candidates"].get(kind, {}).get(arm) if a else None
            lines.append(f"| {kind} | {arm} | {_cell(_frac(e['accepted'], e['n']), _frac(ea['accepted'], ea['n']) if ea else None)} "
                         f"| {_cell(_frac(e['invalid'], e['n']), _frac(ea['invalid'], ea['n']) if ea else None)} "
                         f"| {_cell(str(e['probe_rollouts_per_decision']), str(ea['probe_rollouts_per_decision']) if ea else None)} "
                         f"| {_cell(str(e['seconds_per_decision']), str(ea['seconds_per_decision']) if ea else None)} |")
    lines += ["", "## Per case (before)", "", "| arm | case | event | interface | templates tried | decision | probes | s |",
              "|---|---|---|---|---|---|---|---|"]
    for r in before["cases"]:
        lines.append(f"| {r['arm']} | {r['case']} | {r['event_type']} | {r['interface']} | {', '.join(r['templates']) or '–'} "
                     f"| {r['decision']} | {r['probe_rollouts']} | {r['seconds']:.1f} |")
    lines += ["", "After: " + (PENDING + "." if after is None else "see `benchmarks/results/evolver_quality_"
                                + after["label"] + ".json` for the same per-case rows."), ""]
    return "\n".join(lines)


def write_report(path: Path, text: str) -> None:
    """Write the generated report, keeping any hand-written text below NOTES_MARKER in an existing one."""
    kept = ""
    if path.is_file():
        old = path.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            kept = old[old.index(NOTES_MARKER):]
    path.write_text(text + ("\n" + kept if kept else f"\n{NOTES_MARKER}\n"), encoding="utf-8")
