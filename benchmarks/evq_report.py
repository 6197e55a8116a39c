"""The evolver-quality benchmark's report: summary numbers per defect and arm, the issue-19 targets, and
EVOLVER.md rendered from one or two result files (before → after), keeping hand-written notes below
`NOTES_MARKER`.

A result file of an earlier version of the benchmark (one round per case, no grading) renders too: the numbers
it lacks show as "–". Part of `benchmarks/evolver_quality.py` (modules in `benchmarks/` import each other by
plain name).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evq_cases import DEFECTS, EXPECTED, Case

from harness.atomic import atomic_write_text

REPAIR_TARGET = 0.8  # planted defects repaired by an accepted update the follow-up groups confirm (issue 19)
FALSE_ACCEPT_TARGET = 0.05  # accepts on healthy controls and known-bad candidates (issue 19)


# -- summary --------------------------------------------------------------------------------------------
def _per(rows: list[dict], key: str) -> float | None:
    n = sum(r["decisions"] for r in rows)
    return round(sum(r[key] for r in rows) / n, 2) if n else None


def summarise(
    cases: Sequence[Case], detection_rows: list[dict], rows: list[dict], bad_rows: list[dict], arms: Sequence[str]
) -> dict[str, Any]:
    """Per defect and arm, counted per case (a two-round case is one case; probes and seconds are per decision,
    a round being one decision), the known-bad candidates, and the two targets per arm."""
    per: dict[str, Any] = {}
    for d in DEFECTS:
        det = [r for r in detection_rows if r["defect"] == d]
        if not det:
            continue
        entry: dict[str, Any] = {
            "cases": len(det),
            "detected": sum(r["detected"] for r in det),
            "other_events": sum(len(r["other_events"]) for r in det),
            "arms": {},
        }
        for a in arms:
            rs = [r for r in rows if r["defect"] == d and r["arm"] == a]
            pairs = [(r["rounds"][0], x) for r in rs for x in r["rounds"] if x["round"] == 2]
            second = [x for _, x in pairs]
            entry["arms"][a] = {
                "n": len(rs),
                "correct_interface": None
                if d == "control"
                else sum(r["interface"] == r["expected_interface"] for r in rs),
                "accepted": sum(r["accepted"] for r in rs),
                "confirmed": sum(r["confirmed"] for r in rs),
                "reverted": sum(r["reverted"] > 0 for r in rs),
                "undecided": sum(r["undecided"] > 0 for r in rs),
                "accepted_ungraded": sum(r["accepted_ungraded"] > 0 for r in rs),
                "fallback": sum(r["fallback"] for r in rs),
                "out_of_training": sum(not r["in_training_after"] for r in rs),
                "other_tasks_touched": sum(len(r["other_tasks_touched"]) for r in rs),
                "decisions": sum(r["decisions"] for r in rs),
                "probe_rollouts_per_decision": _per(rs, "probe_rollouts"),
                "seconds_per_decision": _per(rs, "seconds"),
                "followup_rollouts": sum(r["followup_rollouts"] for r in rs),
                "two_round_cases": sum(r["rounds_planned"] > 1 for r in rs),
                "second_rounds": len(second),
                "second_round_detected": sum(x["detected"] is True for x in second),
                "second_round_accepted": sum(x["accepted"] for x in second),
                "second_round_confirmed": sum(x["verdict"] == "confirm" for x in second),
                "second_round_templates_new": sum(
                    bool(set(x["templates"]) - set(first["templates"])) for first, x in pairs
                ),
            }
        per[d] = entry
    bad: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in bad_rows}):
        bad[kind] = {
            a: {
                "n": len(rs),
                "accepted": sum(r["accepted"] for r in rs),
                "invalid": sum(r["invalid"] for r in rs),
                "probe_rollouts_per_decision": round(sum(r["probe_rollouts"] for r in rs) / len(rs), 2) if rs else None,
                "seconds_per_decision": round(sum(r["seconds"] for r in rs) / len(rs), 2) if rs else None,
            }
            for a in arms
            for rs in [[r for r in bad_rows if r["kind"] == kind and r["arm"] == a]]
        }
    targets: dict[str, Any] = {}
    for a in arms:
        planted = [r for r in rows if r["arm"] == a and r["defect"] != "control"]
        controls = [r for r in rows if r["arm"] == a and r["defect"] == "control"]
        bads = [r for r in bad_rows if r["arm"] == a]
        repaired = sum(r["repaired"] for r in planted)
        false = sum(r["accepted"] for r in controls) + sum(r["accepted"] for r in bads)
        n_false = len(controls) + len(bads)
        targets[a] = {
            "repaired": repaired,
            "planted": len(planted),
            "repaired_rate": round(repaired / len(planted), 3) if planted else None,
            "false_accepts": false,
            "false_accept_decisions": n_false,
            "false_accept_rate": round(false / n_false, 3) if n_false else None,
            "false_accepts_confirmed": sum(r["confirmed"] for r in controls),
            "repair_target_met": bool(planted) and repaired / len(planted) >= REPAIR_TARGET,
            "false_accept_target_met": bool(n_false) and false / n_false <= FALSE_ACCEPT_TARGET,
        }
    return {"per_defect": per, "bad_candidates": bad, "targets": targets}


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
    return s["per_defect"][d]["arms"][arm].get(key)


def _arm_cell(b: dict[str, Any], a: dict[str, Any] | None, d: str, arm: str, key: str, frac: bool = True) -> str:
    """`before → after` of one summary number (`k/n` when `frac`; "–" where a file lacks it)."""

    def show(s: dict[str, Any]) -> str:
        v = _arm_value(s, d, arm, key)
        if frac:
            return _frac(v, _arm_value(s, d, arm, "n") or 0)
        return "–" if v is None else str(v)

    return _cell(show(b), None if a is None else show(a))


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _target_lines(doc: dict[str, Any]) -> list[str]:
    t = doc["summary"].get("targets")
    if not t:
        return []
    lines = [
        "| arm | repaired (accepted, then confirmed) | target ≥ 80% | false accepts (controls + known-bad) "
        "| target ≤ 5% "
        "| false accepts the follow-up groups confirmed |",
        "|---|---|---|---|---|---|",
    ]
    for arm, e in t.items():
        lines.append(
            f"| {arm} | {e['repaired']}/{e['planted']} ({_pct(e['repaired_rate'])}) "
            f"| {'met' if e['repair_target_met'] else 'missed'} "
            f"| {e['false_accepts']}/{e['false_accept_decisions']} ({_pct(e['false_accept_rate'])}) "
            f"| {'met' if e['false_accept_target_met'] else 'missed'} | {e['false_accepts_confirmed']} |"
        )
    return lines


def _detected(x: dict[str, Any] | None, d: str) -> str:
    return "–" if x is None or d == "control" else _frac(x["detected"], x["cases"])


def _bad_value(x: dict[str, Any] | None, key: str, frac: bool = True) -> str:
    if x is None:
        return "–"
    return _frac(x[key], x["n"]) if frac else str(x[key])


def render_markdown(before: dict[str, Any], after: dict[str, Any] | None) -> str:
    """EVOLVER.md from the before (and, once run, after) result files."""
    b, a = before["summary"], (after or {}).get("summary")
    main = after or before
    lines = [
        "# Evolver quality benchmark",
        "",
        "How well the evolver finds, routes and repairs known reward defects planted in copies of bundled",
        "`rubric-mix-lite` tasks, whether its accepted repairs hold on the training groups that follow, what it costs,",
        "and how often it changes things it should leave alone. The frozen policy is",
        f"`{main['settings']['model']}`; everything else (detector, judge, graph, rule brains, critic, the trainer's",
        "confirm/revert rule, store, Chroma memory) is the real code. Method, cases and the gaming overlay: "
        "the docstring",
        f"of `benchmarks/evolver_quality.py`. Each cell reads **{before['label']} → "
        f"{after['label'] if after else '…'}**; the result files are "
        "`benchmarks/results/evolver_quality_<label>.json`.",
        "",
        "## Runs",
        "",
        f"| | {before['label']} | {after['label'] if after else 'after'} |",
        "|---|---|---|",
    ]
    for label, key in (
        ("command", "command"),
        ("runtime", "runtime_s"),
        ("load before (/proc/loadavg)", "loadavg_before"),
        ("load after", "loadavg_after"),
        ("machine", "machine"),
        ("settings", "settings"),
    ):
        lines.append(f"| {label} | {_show_run(before, key)} | {_show_run(after, key)} |")
    if _target_lines(main):
        lines += ["", f"## Targets (issue 19; {main['label']})", "", *_target_lines(main)]
    lines += [
        "",
        "## Detection (the real detector on W groups of k rollouts per task)",
        "",
        "| defect | planted event | detected | other events on the task |",
        "|---|---|---|---|",
    ]
    for d in DEFECTS:
        e, ea = b["per_defect"].get(d), a["per_defect"].get(d) if a else None
        if e is None and ea is None:
            continue
        planted = EXPECTED[d][0] or "none (false event fed)"
        others = _cell(str(e["other_events"]) if e else "–", (str(ea["other_events"]) if ea else "–") if a else None)
        lines.append(f"| {d} | {planted} | {_cell(_detected(e, d), _detected(ea, d) if a else None)} | {others} |")
    lines += [
        "",
        "For `control` the other-events column counts false positives of the detector on healthy tasks.",
        "",
        "## Evolver rounds per case",
        "",
        "Counted per case (a two-round case counts once). `interface ok`: the attribution chose the expected "
        "interface;",
        "`accepted`: a measured repair was committed (for `control`: a false accept); `confirmed` / `reverted`: the",
        "trainer's rule graded it on the W follow-up groups of the task (sampled on the frozen policy under the",
        "committed harness); `fallback`: the safe sampling change was committed; `out of training`: after the case",
        "neither the task nor an active variant of it is drawn; `others`: changes to other tasks made in the same",
        "round (batched repairs); probes are rollouts the critic asked for, per decision (one round = one decision).",
        "",
        "| defect | arm | interface ok | accepted | confirmed | reverted | fallback | out of training | others "
        "| probes / decision | s / decision |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    arms = list(
        dict.fromkeys(before["settings"]["arms"].split(",") + (after["settings"]["arms"].split(",") if after else []))
    )
    for d in DEFECTS:
        for arm in arms:
            if _arm_value(b, d, arm, "n") is None and _arm_value(a, d, arm, "n") is None:
                continue
            cells = [
                _arm_cell(b, a, d, arm, k)
                for k in ("correct_interface", "accepted", "confirmed", "reverted", "fallback", "out_of_training")
            ]
            cells += [
                _arm_cell(b, a, d, arm, k, False)
                for k in ("other_tasks_touched", "probe_rollouts_per_decision", "seconds_per_decision")
            ]
            lines.append(f"| {d} | {arm} | " + " | ".join(cells) + " |")
    if a is not None and any(_arm_value(a, d, arm, "two_round_cases") for d in DEFECTS for arm in arms):
        lines += [
            "",
            f"## Two-round cases ({after['label']})",
            "",
            "The last case of each type: when its first round leaves no confirmed repair and the task in training,",
            "W more groups under the harness as it then is (after a revert, a fallback or nothing) go through a fresh",
            "detector window, and a second round answers the event seen again, with the memory of the first.",
            "",
            "| defect | arm | cases | second rounds | event seen again by the detector | accepted | confirmed "
            "| a template round 1 did not try |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for d in DEFECTS:
            for arm in arms:
                if not _arm_value(a, d, arm, "two_round_cases"):
                    continue
                v = {
                    k: _arm_value(a, d, arm, k)
                    for k in (
                        "two_round_cases",
                        "second_rounds",
                        "second_round_detected",
                        "second_round_accepted",
                        "second_round_confirmed",
                        "second_round_templates_new",
                    )
                }
                sr = v["second_rounds"]
                lines.append(
                    f"| {d} | {arm} | {v['two_round_cases']} | {sr} "
                    f"| {'–' if d == 'control' else _frac(v['second_round_detected'], sr)} "
                    f"| {_frac(v['second_round_accepted'], sr)} | {_frac(v['second_round_confirmed'], sr)} "
                    f"| {_frac(v['second_round_templates_new'], sr)} |"
                )
    lines += [
        "",
        "## Known-bad candidates fed to the critic",
        "",
        "Every accept here is a false accept. `invalid` = refused before measuring (e.g. the hint-leak guard).",
        "",
        "| candidate | arm | accepted | invalid | probes / decision | s / decision |",
        "|---|---|---|---|---|---|",
    ]
    kinds = list(dict.fromkeys([*b["bad_candidates"], *(a["bad_candidates"] if a else {})]))
    for kind in kinds:
        for arm in arms:
            e = b["bad_candidates"].get(kind, {}).get(arm)
            ea = a["bad_candidates"].get(kind, {}).get(arm) if a else None
            if e is None and ea is None:
                continue
            show = _bad_value
            accepted = _cell(show(e, "accepted"), show(ea, "accepted") if a else None)
            invalid = _cell(show(e, "invalid"), show(ea, "invalid") if a else None)
            probes = _cell(
                show(e, "probe_rollouts_per_decision", False),
                show(ea, "probe_rollouts_per_decision", False) if a else None,
            )
            seconds = _cell(
                show(e, "seconds_per_decision", False), show(ea, "seconds_per_decision", False) if a else None
            )
            lines.append(f"| {kind} | {arm} | {accepted} | {invalid} | {probes} | {seconds} |")
    lines += [
        "",
        f"## Per round ({main['label']})",
        "",
        "| arm | case | round | event | interface | templates tried | decision | graded | probes | s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in main["cases"]:
        for x in r.get("rounds", [r]):
            verdict = x.get("verdict") or ("accepted, not gradeable" if x.get("accepted") else "–")
            lines.append(
                f"| {r['arm']} | {r['case']} | {x.get('round', 1)} | {x['event_type']} | {x['interface']} "
                f"| {', '.join(x['templates']) or '–'} | {x['decision']} | {verdict} | {x['probe_rollouts']} "
                f"| {x['seconds']:.1f} |"
            )
        if r.get("second_round_skipped"):
            lines.append(
                f"| {r['arm']} | {r['case']} | 2 | – | – | – | not run: {r['second_round_skipped']} | – | 0 | 0.0 |"
            )
    other = before if after is not None else None
    lines += [
        "",
        "Per case of "
        + (
            f"`{other['label']}`: `benchmarks/results/evolver_quality_{other['label']}.json`."
            if other
            else "the other run: " + PENDING + "."
        ),
        "",
    ]
    return "\n".join(lines)


def write_report(path: Path, text: str) -> None:
    """Write the generated report, keeping any hand-written text below NOTES_MARKER in an existing one."""
    kept = ""
    if path.is_file():
        old = path.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            kept = old[old.index(NOTES_MARKER) :]
    atomic_write_text(path, text + ("\n" + kept if kept else f"\n{NOTES_MARKER}\n"))
