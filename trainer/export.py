"""A run folder's harness exported as a suite (`harnessrl export RUN`), over `harness/export.py`.

What the run folder adds to a store's export: the folder's checks (what is missing), the choice of version (the
latest, the one in force at a step, or one named), what training made of each update (rounds.jsonl, read as the
report reads it: `trainer.outcomes.update_outcome`), and the lines the command prints: what each file holds, which
tasks were left out, and which provisional and reverted updates the exported version includes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.export import (
    ExportError,
    SuiteExport,
    build_export,
    check_out_dir,
    commit_steps,
    version_at_step,
    write_export,
)
from harness.store import HarnessStore, UpdateRecord
from trainer.config_loader import load_config
from trainer.harness_run import RunPaths
from trainer.outcomes import graded_verdicts, update_outcome
from trainer.run_logs import read_rounds


@dataclass(frozen=True)
class RunExport:
    export: SuiteExport
    files: list[Path]
    lines: list[str]


def run_folder_problems(run_dir: Path) -> list[str]:
    """What `run_dir` lacks to be a run folder `harnessrl train` wrote (empty: nothing)."""
    if not run_dir.is_dir():
        return [f"{run_dir}: no such folder"]
    paths = RunPaths(run_dir)
    missing = []
    if not paths.config.is_file():
        missing.append(f"{paths.config} (the run's resolved config)")
    if not HarnessStore(paths.harness).versions():
        missing.append(f"{paths.harness / 'versions'}/v000000.json (the harness store's versions)")
    return missing


def pick_version(store: HarnessStore, step: int | None, version: int | None) -> tuple[int, str]:
    """(version, how it was picked): the one named, the one in force at `step`, or the latest committed one."""
    if step is not None and version is not None:
        raise ExportError("pass --step or --version, not both")
    if version is not None:
        return version, f"--version {version}"
    if step is not None:
        return version_at_step(store, step), f"--step {step}"
    return store.versions()[-1], "latest"


def _in_force(steps: dict[int, int], version: int) -> str:
    """When training drew under `version`, in words."""
    at = steps[version]
    later = [s for v, s in steps.items() if v > version]
    if not later:
        return f"in force from step {at + 1} on"
    until = min(later)
    if until == at:
        return f"replaced in the same pause (step {at}): training never drew under it"
    return f"in force at steps {at + 1}..{until}"


def _update_lines(records: list[UpdateRecord], version: int, outcomes: dict[int, str]) -> list[str]:
    """The updates up to `version` grouped by what training made of them, reverted ones with where they were undone."""
    reverts = {int(r.meta["revert_of"]): r for r in records if r.meta.get("revert_of") is not None}
    groups: dict[str, list[str]] = {}
    for r in records:
        if r.version > version or r.update is None:
            continue
        outcome = outcomes[r.version]
        if outcome == "reverted":
            w = reverts.get(r.version)
            if w is None:
                outcome = "reverted by training, its revert refused: still in this export"
            elif w.version <= version:
                outcome = f"reverted by training, undone here (by v{w.version})"
            else:
                outcome = f"reverted by training later (v{w.version}, step {w.step}): still in this export"
        elif outcome == "provisional":
            outcome = "provisional (training had not graded it when the run stopped)"
        elif outcome == "accepted":
            outcome = "accepted (nothing in training grades it)"
        groups.setdefault(outcome, []).append(f"v{r.version}")
    if not groups:
        return ["  updates included: none (the run's suite as it was)"]
    return ["  updates included (what training made of each, from rounds.jsonl):"] + [
        f"    {what}: {', '.join(vs)}" for what, vs in groups.items()
    ]


def export_run(
    run_dir: str | Path,
    out: str | Path,
    *,
    step: int | None = None,
    version: int | None = None,
    force: bool = False,
    include_retired: bool = False,
) -> RunExport:
    """Write the harness of the run in `run_dir` (latest, at `step` or `version`) as a suite folder `out`.

    Raises `ExportError` (not a run folder, a step before the first version, `out` not empty without `force`),
    `harness.store.StoreCorrupt` for a version file or log line that does not read, and `ValueError` for a
    rounds.jsonl record that does not.
    """
    run_dir, out = Path(run_dir), Path(out)
    missing = run_folder_problems(run_dir)
    if missing:
        raise ExportError(f"{run_dir} is not a run folder written by `harnessrl train`: missing {'; '.join(missing)}")
    check_out_dir(out, force=force)
    paths = RunPaths(run_dir)
    cfg = load_config(paths.config)
    store = HarnessStore(paths.harness)
    chosen, picked = pick_version(store, step, version)
    records = store.history()
    verdicts = graded_verdicts(read_rounds(paths.rounds))
    outcomes = {r.version: update_outcome(r, verdicts) for r in records if r.update is not None}
    export = build_export(
        store,
        chosen,
        run=str(run_dir),
        picked=picked,
        outcomes=outcomes,
        include_retired=include_retired,
        suite=cfg.data.suite,
    )
    files = write_export(export, out, force=force)
    state = export.state
    edited = [t.id for t in export.train if t.id in state.criteria_overrides]
    hinted = [tid for tid, g in export.harness.guidance.items() if g.hints]
    lines = [
        f"harness v{state.version} of {run_dir} ({picked}: committed at step {state.step}, "
        f"{_in_force(commit_steps(store), state.version)}) -> {out}",
        f"  train.jsonl: {len(export.train)} tasks, {len(export.variants)} of them variants the evolver added; "
        f"criteria as v{state.version} has them (edited in {len(edited)} of the tasks)",
        f"  test.jsonl: {len(export.test)} held-out tasks, as the run's suite had them (the harness never edits one)",
        f"  harness.json: what the task format cannot hold: sampling weights and status of "
        f"{len(export.harness.sampling)} tasks, hints and reveal schedules of {len(hinted)}; "
        "a suite load (data.suite) ignores this file",
        "  provenance.json: the version and update that created or last changed each task, criterion, hint, "
        "schedule and sampling entry",
    ]
    if export.harness.left_out:
        names = ", ".join(f"{tid} ({s.status}, weight {s.weight:g})" for tid, s in export.harness.left_out.items())
        lines.append(
            f"  left out of train.jsonl (not in training in v{state.version}; --include-retired keeps them): {names}"
        )
    lines += _update_lines(records, state.version, outcomes)
    return RunExport(export=export, files=files, lines=lines)
