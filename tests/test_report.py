"""`trainer/report.py` on a synthetic run folder: outcome counts (accepted by the critic vs fallback vs not
accepted) in the summary, the per-type and per-interface tables, the updates plot's legend, and the page
itself (key/value summary without raw JSON, self-contained, no scripts)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.store import UpdateRecord
from trainer import report
from trainer.io import read_jsonl
from trainer.step_metrics import StepMetrics


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _update(version: int, step: int, interface: str, *, fallback: bool = False) -> dict:
    meta = {"event_id": f"e{version}", "fallback": True} if fallback else {"event_id": f"e{version}", "revision": 0}
    task = f"t{version}"
    op = {
        "sampling": {"op": "reweight", "task_id": task, "weight": 2.0},
        "criteria": {"op": "remove_criterion", "task_id": task, "criterion_id": "c1"},
    }[interface]
    return {
        "version": version,
        "parent_version": version - 1,
        "step": step,
        "meta": meta,
        "update": {"interface": interface, "rationale": f"r{version}", "ops": [op]},
        "timestamp": "2026-01-01T00:00:00",
    }


def _rep(event_id: str, ftype: str, interface: str | None, decision: str, version: int | None = None) -> dict:
    return {
        "event_id": event_id,
        "task_id": "t",
        "failure_type": ftype,
        "interface": interface,
        "decision": decision,
        "committed_version": version,
        "attempts": [],
    }


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    """Two rounds; committed: v1 criteria accepted, v2 sampling fallback (event attributed to criteria),
    v3 sampling accepted, v4 sampling fallback (attributed to sampling); not committed: one guidance
    rejection, one stale, one skipped batch-level event (no interface)."""
    root = tmp_path / "run"
    _jsonl(
        root / "metrics.jsonl",
        [
            {
                "step": s,
                "reward": 0.1 * s,
                "reward_std": 0.1,
                "dead_share": 0.5,
                "time": 10.0 * s,
                "pause_s": 2.0 if s in (4, 8) else 0.0,
                "judge_warnings": 0,
            }
            for s in range(1, 9)
        ],
    )
    types = ["flat", "flat", "collapse_high", "collapse_high", "collapse_low", "collapse_low", "flat", "stuffing"]
    _jsonl(root / "events.jsonl", [{"id": f"ev{i}", "type": t, "task_id": "t", "step": i} for i, t in enumerate(types)])
    _jsonl(
        root / "rounds.jsonl",
        [
            {
                "step": 4,
                "thread_id": "a",
                "event_types": ["flat", "collapse_low"],
                "outcomes": {"accepted": 1, "fallback": 1, "rejected": 1},
                "reports": [
                    _rep("ev0", "flat", "criteria", "accepted", 1),
                    _rep("ev1", "flat", "criteria", "fallback", 2),
                    _rep("ev4", "collapse_low", "guidance", "rejected"),
                ],
            },
            {
                "step": 8,
                "thread_id": "b",
                "event_types": ["collapse_high", "collapse_low", "flat"],
                "outcomes": {"accepted": 1, "fallback": 1, "rejected_stale": 1, "skipped": 1},
                "reports": [
                    _rep("ev2", "collapse_high", "sampling", "accepted", 3),
                    _rep("ev3", "collapse_high", "sampling", "fallback", 4),
                    _rep("ev5", "collapse_low", "guidance", "rejected_stale"),
                    _rep("ev6", "flat", None, "skipped"),
                ],
            },
        ],
    )
    _jsonl(
        root / "harness" / "updates.jsonl",
        [
            {"version": 0, "parent_version": None, "step": 0, "update": None, "timestamp": "2026-01-01T00:00:00"},
            _update(1, 4, "criteria"),
            _update(2, 4, "sampling", fallback=True),
            _update(3, 8, "sampling"),
            _update(4, 8, "sampling", fallback=True),
        ],
    )
    return root


class _Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts (nested lists flattened into the cell's text)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "li" and self._cell is not None and self._cell:
            self._cell.append("; ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _table_after(page: str, heading: str) -> list[list[str]]:
    parser = _Tables()
    parser.feed(page[page.index(f"<h2>{heading}</h2>") :])
    return parser.tables[0]


def test_summary_separates_critic_accepted_from_fallback(run_dir):
    s = report.summary(report.collect(run_dir))
    assert s["accepted_by_interface"] == {"criteria": 1, "sampling": 1} and s["accepted_total"] == 2
    assert s["fallback_by_interface"] == {"sampling": 2} and s["fallback_total"] == 2
    assert s["committed_by_interface"] == {"criteria": 1, "sampling": 3} and s["committed_total"] == 4
    assert s["event_types"] == {"flat": 3, "collapse_high": 2, "collapse_low": 2, "stuffing": 1}
    assert s["proposals_by_interface"]["criteria"] == {"accepted": 1, "fallback": 1}
    assert s["proposals_by_interface"]["none"] == {"skipped": 1}


def test_update_points_and_plot_legend_count_each_outcome(run_dir, monkeypatch):
    data = report.collect(run_dir)
    pts = report.update_points(data)
    counts: dict[tuple[str, str], int] = {}
    for _step, iface, outcome, _label in pts:
        counts[(iface, outcome)] = counts.get((iface, outcome), 0) + 1
    # the fallback attributed to criteria changed sampling: it sits on the sampling row, as a fallback
    assert counts == {
        ("criteria", "accepted"): 1,
        ("sampling", "accepted"): 1,
        ("sampling", "fallback"): 2,
        ("guidance", "not accepted"): 2,
    }
    monkeypatch.setattr(report, "_png", lambda fig: fig)  # keep the figure to read its legend
    fig = report._updates_plot(data, [x.step for x in data["metrics"]])
    legend = sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert legend == [
        "criteria accepted (1)",
        "guidance not accepted (2)",
        "sampling accepted (1)",
        "sampling fallback (2)",
    ]
    markers = {c.get_label(): c for c in fig.axes[0].collections}
    assert markers["sampling fallback (2)"].get_facecolors().size == 0  # hollow: committed without acceptance
    assert markers["sampling accepted (1)"].get_facecolors().size > 0


def test_page_tables_match_the_run(run_dir):
    page = report.build_report(run_dir).read_text()
    assert page.count("data:image/png;base64,") == 4
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)  # base64 may spell anything
    assert "<script" not in text and "cdn" not in text.lower() and "http" not in text

    summary = {row[0]: row[1] for row in _table_after(page, "Summary")}
    assert len({len(row) for row in _table_after(page, "Summary")}) == 1  # two columns, key and value
    assert summary["accepted_total"] == "2" and summary["fallback_total"] == "2"
    assert summary["fallback_by_interface"] == "sampling: 2"
    assert summary["proposals_by_interface"].split("; ")[0] == "criteria: accepted: 1, fallback: 1"
    assert not re.search(r"[{}\[\]\"]", "".join(summary.values())), "raw JSON in the summary"

    types = {row[0]: row[1:] for row in _table_after(page, "Events by type")}
    assert types["type"] == ["detected", "in rounds", "accepted", "fallback", "rejected"]
    assert types["flat"] == ["3", "3", "1", "1", "1"]  # the skipped batch-level flat counts as rejected
    assert types["collapse_low"] == ["2", "2", "0", "0", "2"]
    assert types["stuffing"] == ["1", "0", "0", "0", "0"]
    assert types["total"] == ["8", "7", "2", "2", "3"]

    ifaces = {row[0]: row[1:] for row in _table_after(page, "Proposals and updates by interface")}
    assert ifaces["interface"] == [
        "proposals",
        "accepted",
        "fallback",
        "rejected",
        "committed (accepted)",
        "committed (fallback)",
    ]
    assert ifaces["criteria"] == ["2", "1", "1", "0", "1", "0"]
    assert ifaces["sampling"] == ["2", "1", "1", "0", "1", "2"]
    assert ifaces["guidance"] == ["2", "0", "0", "2", "0", "0"]
    assert ifaces["none"] == ["1", "0", "0", "1", "0", "0"]
    assert ifaces["total"] == ["7", "2", "2", "3", "2", "2"]

    updates = _table_after(page, "Harness updates")
    assert [(r[0], r[2], r[3]) for r in updates[1:]] == [
        ("1", "criteria", "accepted"),
        ("2", "sampling", "fallback"),
        ("3", "sampling", "accepted"),
        ("4", "sampling", "fallback"),
    ]
    rounds = _table_after(page, "Evolver rounds")
    assert rounds[1][rounds[0].index("outcomes")] == "accepted: 1, fallback: 1, rejected: 1"


def test_not_a_run_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a HarnessRL run folder"):
        report.build_report(tmp_path)


def _costed(event_id: str, interface: str, attempts: list[dict]) -> dict:
    return {**_rep(event_id, "flat", interface, "rejected"), "attempts": attempts}


def test_cost_table_sums_each_proposals_measurement_per_interface(run_dir):
    """Every attempt's `cost_*` numbers (critic) are summed under the attributed interface; revisions count."""

    def nums(probes, tokens, calls, secs, reused=0):
        return {
            "numbers": {
                "cost_probe_rollouts": probes,
                "cost_probe_tokens": tokens,
                "cost_judge_calls": calls,
                "cost_seconds": secs,
                "cost_reused_rollouts": reused,
                "std_gain": 0.1,
            }
        }

    rounds = read_jsonl(run_dir / "rounds.jsonl")
    rounds.append(
        {
            "step": 9,
            "thread_id": "c",
            "outcomes": {"rejected": 2},
            "reports": [
                _costed("ev8", "guidance", [nums(8, 96, 0, 1.5), nums(16, 200, 2, 2.25)]),
                _costed("ev9", "criteria", [nums(0, 0, 1, 0.5, reused=8), {"numbers": None}]),  # unmeasured revision
            ],
        }
    )
    _jsonl(run_dir / "rounds.jsonl", rounds)
    rows = {r["interface"]: r for r in report.cost_rows(report.collect(run_dir))}
    assert rows["guidance"] == {
        "interface": "guidance",
        "proposals": 2,
        "probe rollouts": 24,
        "reused rollouts": 0,
        "tokens": 296,
        "judge calls": 2,
        "seconds": 3.75,
    }
    assert rows["criteria"]["proposals"] == 2 and rows["criteria"]["reused rollouts"] == 8
    assert rows["criteria"]["probe rollouts"] == 0 and rows["sampling"]["proposals"] == 0
    assert rows["total"]["probe rollouts"] == 24 and rows["total"]["seconds"] == 4.25

    page = report.build_report(run_dir).read_text()
    table = {row[0]: row[1:] for row in _table_after(page, "Critic cost by interface")}
    assert table["interface"] == ["proposals", "probe rollouts", "reused rollouts", "tokens", "judge calls", "seconds"]
    assert table["guidance"] == ["2", "24", "0", "296", "2", "3.750"]


def test_update_effect_rows_split_each_tasks_groups_at_the_update(run_dir):
    from trainer.outcomes import update_effect_rows

    data = report.collect(run_dir)
    # t1 (v1 at step 4): groups at steps 2 and 4 before, 6 after; one dead before, none after.
    metrics = [
        StepMetrics(step=2, tasks=["t1", "x"], group_means=[0.0, 0.5], group_stds=[0.0, 0.2]),
        StepMetrics(step=4, tasks=["t1"], group_means=[0.5], group_stds=[0.3]),
        StepMetrics(step=6, tasks=["t1"], group_means=[0.7], group_stds=[0.25]),
    ]
    rows = {r["version"]: r for r in update_effect_rows(metrics, data["updates"], data["rounds"])}
    r1 = rows[1]
    assert (r1["groups before"], r1["groups after"]) == (2, 1)
    assert r1["mean before"] == pytest.approx(0.25) and r1["dead before"] == pytest.approx(0.5)
    assert r1["mean after"] == pytest.approx(0.7) and r1["dead after"] == 0.0 and r1["outcome"] == "accepted"
    assert rows[2]["groups before"] == 0 and rows[2]["mean after"] is None and rows[2]["outcome"] == "fallback"
    # A harder variant an update added is the task's "after": its groups count there.
    prompt = [{"role": "user", "content": "The harder question."}]
    variant = {"op": "add_variant", "task_id": "t1", "variant_id": "t1.v9-hard", "prompt": prompt}
    update = {"interface": "sampling", "ops": [variant]}
    updates = [UpdateRecord(version=9, parent_version=8, step=4, update=update, timestamp="2026-01-01T00:00:00")]
    metrics.append(StepMetrics(step=7, tasks=["t1.v9-hard"], group_means=[0.4], group_stds=[0.2]))
    (v9,) = update_effect_rows(metrics, updates, data["rounds"])
    assert v9["tasks"] == ["t1", "t1.v9-hard"] and v9["groups after"] == 2 and v9["mean after"] == pytest.approx(0.55)


def test_update_effects_count_dead_groups_at_the_runs_own_detector_eps(run_dir):
    from trainer.outcomes import update_effect_rows

    assert report.collect(run_dir)["dead_eps"] is None  # no config.yaml: the detector's default
    (run_dir / "config.yaml").write_text("harness:\n  detector:\n    eps: 0.35\n")
    data = report.collect(run_dir)
    assert data["dead_eps"] == 0.35
    metrics = [
        StepMetrics(step=2, tasks=["t1"], group_means=[0.5], group_stds=[0.3]),
        StepMetrics(step=6, tasks=["t1"], group_means=[0.7], group_stds=[0.4]),
    ]
    rows = update_effect_rows(metrics, data["updates"], data["rounds"], dead_eps=data["dead_eps"])
    r1 = {r["version"]: r for r in rows}[1]
    assert (r1["dead before"], r1["dead after"]) == (1.0, 0.0)  # std 0.3 is dead at eps 0.35, live at the default


def test_eval_domains_side_by_side_and_summary_sentences(run_dir):
    from trainer.outcomes import eval_domain_rows

    data = report.collect(run_dir)
    data["eval"] = {
        "base": {
            "n_tasks": 2,
            "avg_at_k": 0.4,
            "audit": 0.5,
            "domains": {
                "med": {"n_tasks": 1, "avg_at_k": 0.3, "audit": 0.5},
                "sci": {"n_tasks": 1, "avg_at_k": 0.5, "audit": None},
            },
        },
        "trained": {
            "n_tasks": 2,
            "avg_at_k": 0.5,
            "audit": 0.6,
            "domains": {
                "med": {"n_tasks": 1, "avg_at_k": 0.45, "audit": 0.6},
                "sci": {"n_tasks": 1, "avg_at_k": 0.55, "audit": None},
            },
        },
    }
    rows = {r["domain"]: r for r in eval_domain_rows(data["eval"])}
    assert rows["med"]["criteria change"] == pytest.approx(0.15) and rows["sci"]["audit change"] is None
    assert rows["all"]["audit change"] == pytest.approx(0.1)
    text = " ".join(report.summary_sentences(report.summary(data)))
    assert "8 training steps" in text and "The critic accepted 2 updates" in text and "2 fallbacks" in text
    assert "1 evolver round " not in text and "2 evolver rounds" in text
    assert "_total" not in text and "_by_interface" not in text


def test_report_writes_a_trace_page_per_round_and_links_it(tmp_path, tiny_model_dir):
    """A real in-process evolver round (the snapshot fixture on the tiny model) gets a trace page, linked from the
    report's rounds table; a thread the database does not hold (a server round) stays plain text."""
    from trainer.cli import main

    run = tmp_path / "run"
    snapshot = Path(__file__).parent / "fixtures" / "evolver_snapshot"
    assert (
        main(
            [
                "evolve",
                str(snapshot),
                "--run-dir",
                str(run),
                "--policy",
                f"local:{tiny_model_dir}",
                "--sample-k",
                "2",
                "--max-revisions",
                "0",
                "--thread",
                "t1",
            ]
        )
        == 0
    )
    _jsonl(run / "metrics.jsonl", [{"step": 1, "reward": 0.0, "dead_share": 1.0, "time": 1.0, "pause_s": 0.0}])
    _jsonl(run / "events.jsonl", [])
    _jsonl(
        run / "rounds.jsonl",
        [{"step": 1, "thread_id": "t1", "reports": []}, {"step": 2, "thread_id": "on-server", "reports": []}],
    )
    page = report.build_report(run).read_text()
    assert (run / "traces" / "t1.html").is_file() and not (run / "traces" / "on-server.html").exists()
    assert '<a href="traces/t1.html">t1</a>' in page and "on-server</td>" in page


def test_report_command_prints_sentences_or_json(run_dir, capsys):
    from trainer.cli import main

    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("8 training steps") and "report: " in out and "accepted_total" not in out
    assert main(["report", str(run_dir), "--json"]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["accepted_total"] == 2  # stdout is the JSON alone
    assert "report: " in printed.err


def test_reward_parts_and_judge_drift_are_plotted_only_when_the_run_has_them(run_dir, monkeypatch):
    drawn: dict[str, list[tuple[str, list]]] = {}
    real = report._png

    def png(fig):  # the lines each figure holds, by title
        ax = fig.axes[0]
        drawn[ax.get_title()] = [(line.get_label(), list(line.get_ydata())) for line in ax.get_lines()]
        return real(fig)

    monkeypatch.setattr(report, "_png", png)
    page = report.build_report(run_dir).read_text()
    assert "<h2>Reward parts</h2>" not in page and "<h2>Judge drift</h2>" not in page
    assert not any("parts" in t or "drift" in t for t in drawn)

    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for m in lines:
        m.update(reward_rubric=0.05 * m["step"], reward_parts={"brevity": 0.5, "format": 0.25 * (m["step"] % 2)})
        if m["step"] in (4, 8):
            first = m["step"] == 4
            m["judge_drift"] = {
                "items": 8,
                "n": 8,
                "agreement": 1.0 if first else 0.75,
                "met_rate": 0.5,
                "first": first,
            }
    _jsonl(run_dir / "metrics.jsonl", lines)
    drawn.clear()
    page = report.build_report(run_dir).read_text()
    assert "<h2>Reward parts</h2>" in page and "<h2>Judge drift</h2>" in page
    parts = dict(drawn["Reward parts (batch means; parts unweighted)"])
    assert parts["rubric"] == [0.05 * s for s in range(1, 9)]
    assert parts["format (part)"] == [0.25 * (s % 2) for s in range(1, 9)] and parts["brevity (part)"] == [0.5] * 8
    drift = dict(drawn["Judge drift on the fixed probe set"])
    assert drift["agreement with the first judging"] == [1.0, 0.75] and drift["met rate"] == [0.5, 0.5]
    assert "agreement with the checks" not in drift  # no item had a check: no line, rather than an empty one
