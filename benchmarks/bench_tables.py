"""The numbers behind each table and plot of the benchmark report (RESULTS.md), computed from `results.json`'s
runs and arm summaries: what `benchmarks/bench_render.py` formats.

Per section: the plots' per-arm curves, the paired differences with fixed and their intervals, steps to fixed's
best, the costs' group counts, the evolver's sums over seeds, the targets (over the seeds two arms both ran),
where each gain comes from (accepted updates and training's verdicts, the issue's targets per arm), which updates
moved the curve, and the longer-horizon curve. Report-only, like the renderer: not part of a job's code hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

from bench_collect import GAIN_TARGETS, arm_summary, gain_targets, paired_vs_fixed, targets
from bench_spec import ARMS
from bench_stats import has_full_curve, mean_of, paired, sd_of, steps_to_best, task_diffs

from harness.types import INTERFACES


def by_arm(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The runs per arm, arms in the order their first run comes."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        out.setdefault(r["arm"], []).append(r)
    return out


def on_seeds(runs: list[dict[str, Any]], seeds: set[int]) -> list[dict[str, Any]]:
    return [r for r in runs if r["seed"] in seeds]


# -- plots ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HeldoutCurve:
    """One arm's held-out curve, mean over its seeds per evaluated step (None where no seed has it)."""

    steps: list[int]
    score: list[float | None]
    audit: list[float | None]


def heldout_curves(runs: list[dict[str, Any]]) -> dict[str, HeldoutCurve]:
    """Per arm, from its seeds with full curves (a cheaper seed's two points would bend the mean curve)."""
    out: dict[str, HeldoutCurve] = {}
    for arm, mine in by_arm([r for r in runs if has_full_curve(r)]).items():
        steps = sorted({s for r in mine for s, _, _ in r["summary"]["curve"]})
        score, audit = (
            [mean_of([next((c[idx] for c in r["summary"]["curve"] if c[0] == s), None) for r in mine]) for s in steps]
            for idx in (1, 2)
        )
        out[arm] = HeldoutCurve(steps, score, audit)
    return out


ZERO_VAR_WINDOW = 4  # trailing mean over 4 steps: one step holds only batch/G groups


def zero_var_curves(runs: list[dict[str, Any]]) -> dict[str, tuple[list[int], list[float | None]]]:
    """Per arm: (steps, zero-variance group share, mean over seeds, trailing mean over `ZERO_VAR_WINDOW` steps)."""
    out: dict[str, tuple[list[int], list[float | None]]] = {}
    for arm, mine in by_arm(runs).items():
        steps = sorted({s for r in mine for s, _ in r["summary"]["dead_curve"]})
        ys = [
            mean_of([next((d for st, d in r["summary"]["dead_curve"] if st == s), None) for r in mine]) for s in steps
        ]
        w = ZERO_VAR_WINDOW
        out[arm] = (steps, [mean_of(ys[max(0, i - w + 1) : i + 1]) for i in range(len(ys))])
    return out


# -- paired with the fixed harness ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedFixed:
    """An arm's final-checkpoint differences with fixed at the same seed (points), per seed and over seeds."""

    arm: str
    seeds: list[int]
    score: list[float]
    score_mean: float | None
    score_sd: float | None
    audit: list[float | None]  # None where either audit is missing
    audit_mean: float | None
    audit_sd: float | None
    audit_known: list[float]  # the seeds' known audit differences (the plot's dots)


def paired_fixed_rows(runs: list[dict[str, Any]]) -> list[PairedFixed]:
    out = []
    for arm, d in paired_vs_fixed(runs).items():
        out.append(
            PairedFixed(
                arm=arm,
                seeds=d["seeds"],
                score=d["score"],
                score_mean=mean_of(d["score"]),
                score_sd=sd_of(d["score"]),
                audit=d["audit"],
                audit_mean=mean_of(d["audit"]),
                audit_sd=sd_of(d["audit"]),
                audit_known=[v for v in d["audit"] if v is not None],
            )
        )
    return out


# The paired-interval table's rows: (arm, reference), shown where both arms ran.
PAIRS = [
    ("harnessrl", "fixed"),
    ("harnessrl", "dapo"),
    ("harnessrl", "fixed-norm"),
    ("harnessrl", "skip"),
    ("fixed-norm", "fixed"),
    ("skip", "fixed"),
    ("dapo", "fixed"),
    ("harnessrl-dapo", "dapo"),
    ("harnessrl-dapo", "harnessrl"),
    ("harnessrl-dapo", "fixed"),
    ("dynfilter", "fixed"),
    ("plain", "fixed"),
    ("no-sampling", "harnessrl"),
    ("no-guidance", "harnessrl"),
    ("no-criteria", "harnessrl"),
    ("no-memory", "harnessrl"),
    ("no-critic", "harnessrl"),
    ("no-confirm", "harnessrl"),
    ("no-preflight", "harnessrl"),
]


@dataclass(frozen=True)
class IntervalRow:
    """arm − ref with bootstrap intervals (`bench_stats.paired`): audit and score at equal steps, greedy audit,
    audit and score at equal wall time (None where it cannot be measured)."""

    arm: str
    ref: str
    audit: dict[str, Any]
    score: dict[str, Any] | None
    greedy_audit: dict[str, Any] | None
    time_audit: dict[str, Any] | None  # None: no seed of both arms has a full curve
    time_score: dict[str, Any] | None


def interval_rows(results: dict[str, Any]) -> list[IntervalRow]:
    runs, base, arm_sum = results["runs"], results.get("base"), results["arms"]
    out = []
    for arm, ref in PAIRS:
        if arm not in arm_sum or ref not in arm_sum:
            continue
        a = paired(runs, base, arm, ref, metric="audit")
        if a is None:
            continue
        out.append(
            IntervalRow(
                arm=arm,
                ref=ref,
                audit=a,
                score=paired(runs, base, arm, ref, metric="avg"),
                greedy_audit=paired(runs, base, arm, ref, metric="audit", greedy=True),
                time_audit=paired(runs, base, arm, ref, metric="audit", equal_time=True),
                time_score=paired(runs, base, arm, ref, metric="avg", equal_time=True),
            )
        )
    return out


@dataclass(frozen=True)
class HeldoutTrainRow:
    """arm − ref on the second held-out set (train-split tasks outside every pool) at the final checkpoints, paired
    by seed and task, with a bootstrap interval over seeds and tasks; and each arm's own final means."""

    arm: str
    ref: str
    seeds: list[int]
    n_tasks: int
    audit: tuple[float, float, float] | None
    score: tuple[float, float, float] | None
    arm_final: tuple[float | None, float | None]  # (score, audit), mean over the seeds, 0-100
    ref_final: tuple[float | None, float | None]


def heldout_train_rows(results: dict[str, Any]) -> list[HeldoutTrainRow]:
    """The `PAIRS` whose runs both evaluated the second held-out set (none in summaries from before issue 32)."""
    from bench_power import bootstrap_ci

    runs, arm_sum = results["runs"], results["arms"]

    def final_ev(r: dict[str, Any]) -> dict[str, Any] | None:
        return r["evals"].get(str(r["summary"]["final_step"]), {}).get("train_heldout")

    out = []
    for arm, ref in PAIRS:
        if arm not in arm_sum or ref not in arm_sum:
            continue
        mine = {r["seed"]: r for r in runs if r["arm"] == arm and final_ev(r)}
        refs = {r["seed"]: r for r in runs if r["arm"] == ref and final_ev(r)}
        seeds = sorted(set(mine) & set(refs))
        if not seeds:
            continue
        diffs = {
            m: [task_diffs(final_ev(mine[s]), final_ev(refs[s]), m, False) for s in seeds] for m in ("audit", "avg")
        }
        out.append(
            HeldoutTrainRow(
                arm,
                ref,
                seeds,
                len(final_ev(mine[seeds[0]])["tasks"]),  # type: ignore[index]
                bootstrap_ci(diffs["audit"]),
                bootstrap_ci(diffs["avg"]),
                (arm_sum[arm].get("final_train_heldout"), arm_sum[arm].get("final_train_heldout_audit")),
                (arm_sum[ref].get("final_train_heldout"), arm_sum[ref].get("final_train_heldout_audit")),
            )
        )
    return out


def steps_to_best_rows(runs: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]], float | None]]:
    """(arm, `bench_stats.steps_to_best` per seed, mean ratio: None unless every seed has one) for the key arms
    and dynfilter that ran."""
    out = []
    for arm in ("harnessrl", "dapo", "harnessrl-dapo", "fixed-norm", "skip", "dynfilter"):
        rows = steps_to_best(runs, arm)
        if not rows:
            continue
        ratios = [r["ratio"] for r in rows]
        out.append((arm, rows, mean_of(ratios) if all(x is not None for x in ratios) else None))
    return out


def groups_generated_trained(runs: list[dict[str, Any]], arm: str) -> tuple[int, int]:
    """The arm's groups generated and trained on, summed over its seeds (DAPO trains on fewer than it generates)."""
    rs = [r for r in runs if r["arm"] == arm]
    return (
        sum(r["summary"].get("groups_generated") or 0 for r in rs),
        sum(r["summary"].get("groups_trained") or 0 for r in rs),
    )


# -- the evolver, critic fails, targets ----------------------------------------------------------------------
@dataclass(frozen=True)
class EvolverRow:
    """An arm's evolver summed over its seeds (the hinted share is the seeds' mean)."""

    arm: str
    rounds: int
    per_interface: dict[str, dict[str, int]]  # interface -> proposals / accepted / rejected (arm summary)
    fallbacks: int
    updates: int
    updated_task_revisits: int
    hinted_share: float | None
    round_errors: int
    spurious_events: int
    event_types: dict[str, int]


def evolver_rows(results: dict[str, Any]) -> list[EvolverRow]:
    out = []
    for arm, s in results["arms"].items():
        runs = [r for r in results["runs"] if r["arm"] == arm]
        ev: dict[str, int] = {}
        for r in runs:
            for k, v in r["summary"]["event_types"].items():
                ev[k] = ev.get(k, 0) + v
        out.append(
            EvolverRow(
                arm=arm,
                rounds=sum(r["summary"]["rounds"] for r in runs),
                per_interface=s["per_interface"],
                fallbacks=sum(r["summary"]["fallbacks"] for r in runs),
                updates=sum(r.get("updates", 0) for r in runs),
                updated_task_revisits=sum(r.get("updated_task_revisits", 0) for r in runs),
                hinted_share=mean_of([r.get("hinted_share") for r in runs]),
                round_errors=sum(r["summary"]["round_errors"] for r in runs),
                spurious_events=sum(r["summary"]["spurious_events"] for r in runs),
                event_types=ev,
            )
        )
    return out


def critic_fails(results: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per arm, the critic checks that failed, summed over its seeds ({} where none did)."""
    out: dict[str, dict[str, int]] = {}
    for arm in results["arms"]:
        fails: dict[str, int] = {}
        for r in results["runs"]:
            if r["arm"] == arm:
                for k, v in r.get("critic_fails", {}).items():
                    fails[k] = fails.get(k, 0) + v
        out[arm] = fails
    return out


def seed_matched_targets(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`bench_collect.targets`, with every row that compares two arms measured over the seeds both ran.

    Why: `targets` differences the arms' means, so while a sitting is in progress (one arm at seeds 0-1, the
    other at 0) a row would compare different seeds; the paired tables never do. A row compares arms a and b
    when it is measurable with both and with neither alone; with no seed in common it is not measurable. The
    fix belongs in `bench_collect.targets`, which a sitting's code hash freezes."""
    arms = by_arm(runs)

    def measure(sub: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
        return targets(sub, {a: arm_summary(rs) for a, rs in sub.items() if rs})

    rows = measure(arms)
    for a, b in combinations(sorted(arms), 2):
        sa, sb = {r["seed"] for r in arms[a]}, {r["seed"] for r in arms[b]}
        if sa == sb:
            continue
        both, alone_a, alone_b = measure({a: arms[a], b: arms[b]}), measure({a: arms[a]}), measure({b: arms[b]})
        common = sa & sb
        matched = measure({a: on_seeds(arms[a], common), b: on_seeds(arms[b], common)}) if common else None
        for i, row in enumerate(both):
            if row["value"] is None or alone_a[i]["value"] is not None or alone_b[i]["value"] is not None:
                continue
            new = dict(matched[i]) if matched else {**row, "value": None, "met": None}
            seeds = f"over the seeds both ran: {sorted(common)} ({a} ran {sorted(sa)}, {b} {sorted(sb)})"
            new["note"] = "; ".join(n for n in (new.get("note"), seeds) if n)
            rows[i] = new
    return rows


# -- where each gain comes from ------------------------------------------------------------------------------
# Update-log origins that did not pass the critic.
NOT_CRITIC = ("fallback", "revert")


def accepted_updates(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Summed over the runs: the updates that passed the critic (update-log entries that are neither a fallback
    nor a revert), one per task an update touched, with training's verdict on each (confirm, revert, superseded,
    or none yet: `ungraded`), also per interface. None where a summary predates the update log.

    Why not the summaries' own counts: an accepted repair that the evolver generalises to sibling tasks is one
    accepted critic decision but commits one update per task, each graded on its own, so confirmed verdicts over
    accepted decisions (`bench_collect.gain_targets`, which a sitting's code hash freezes) can pass 100%."""
    if not runs or any("update_log" not in r for r in runs):
        return None
    out: dict[str, Any] = {"updates": 0, "confirm": 0, "revert": 0, "superseded": 0, "ungraded": 0}
    out["per_interface"] = {i: {"updates": 0, "confirm": 0, "revert": 0} for i in INTERFACES}
    for r in runs:
        for u in r["update_log"]:
            if u["origin"] in NOT_CRITIC:
                continue
            per = out["per_interface"][u["interface"]]
            for t in u["tasks"]:
                verdict = (u["verdicts"].get(t) or {}).get("verdict")
                key = verdict if verdict in ("confirm", "revert", "superseded") else "ungraded"
                out["updates"] += 1
                out[key] += 1
                per["updates"] += 1
                if key in per:
                    per[key] += 1
    return out


@dataclass(frozen=True)
class InterfaceGain:
    """One interface's accepted updates and training's verdicts on them (summed over seeds)."""

    updates: Any  # accepted updates; for summaries before the update log, the accepted decisions
    confirm: Any
    revert: Any
    graded: bool  # False: summaries from before training's verdicts were collected (no confirm / revert)


@dataclass(frozen=True)
class GainRow:
    """An arm's proposals, accepted decisions, and accepted updates with training's verdicts, summed over seeds."""

    arm: str
    proposals: Any
    accepted: Any
    updates: Any
    confirmed: Any
    reverted: Any
    superseded: Any
    never_graded: Any  # None where the summaries predate the update log
    per_interface: list[InterfaceGain]  # in `INTERFACES` order


def gain_rows(results: dict[str, Any]) -> list[GainRow]:
    out = []
    for arm, s in results["arms"].items():
        prop, acc = s.get("proposals_total"), s.get("accepted_total")
        au, g = accepted_updates([r for r in results["runs"] if r["arm"] == arm]), s.get("graded")
        if au is not None:
            n, conf, rev, sup, never = au["updates"], au["confirm"], au["revert"], au["superseded"], au["ungraded"]
            per = [InterfaceGain(v["updates"], v["confirm"], v["revert"], True) for v in au["per_interface"].values()]
        else:  # summaries from before the update log: the accepted decisions stand in for the updates
            n, conf, rev, never = acc, s.get("confirmed_total"), s.get("reverted_total"), None
            sup = None if g is None else sum(v["superseded"] for v in g.values())
            per = [
                InterfaceGain(
                    s["per_interface"][i]["accepted"],
                    None if g is None else g[i]["confirm"],
                    None if g is None else g[i]["revert"],
                    g is not None,
                )
                for i in INTERFACES
            ]
        out.append(GainRow(arm, prop, acc, n, conf, rev, sup, never, per))
    return out


def measured_gain_targets(results: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """`bench_collect.gain_targets` per arm, with the confirmed share over accepted updates where the update log
    has them (see `accepted_updates`) and the zero-variance ratio to fixed over the seeds both ran (see
    `seed_matched_targets`)."""
    arm_sum = results["arms"]
    measured = gain_targets(arm_sum)
    if not measured:
        return measured
    confirm_test = next(test for key, _, test in GAIN_TARGETS if key == "confirm_share")
    for arm, m in measured.items():
        au = accepted_updates([r for r in results["runs"] if r["arm"] == arm])
        if au is not None and au["updates"]:
            share = au["confirm"] / au["updates"]
            m["confirm_share"] = {"value": share, "met": bool(confirm_test(share))}
    arms = by_arm(results["runs"])
    fixed_seeds = {r["seed"] for r in arms.get("fixed", [])}
    for arm, m in measured.items():
        seeds = {r["seed"] for r in arms.get(arm, [])}
        if fixed_seeds and seeds != fixed_seeds:
            common = seeds & fixed_seeds
            pair = {a: arm_summary(on_seeds(arms[a], common)) for a in (arm, "fixed")} if common else None
            m["zero_var_ratio"] = gain_targets(pair)[arm]["zero_var_ratio"] if pair else {"value": None, "met": None}
    return measured


# -- which updates moved the curve ---------------------------------------------------------------------------
def domain_audit(run: dict[str, Any], base: dict[str, Any] | None, step: int, domain: str) -> float | None:
    """The held-out audit (0-100) of one domain at a checkpoint of the run (step 0: the base model)."""
    e = (base or {}).get("eval") if step == 0 else run["evals"].get(str(step))
    d = (e or {}).get("domains", {}).get(domain)
    return None if d is None or d.get("audit") is None else 100.0 * d["audit"]


@dataclass(frozen=True)
class DomainMove:
    """A domain's audit change from the checkpoint before an update to the run's last: the arm's, fixed's over
    the same checkpoints at the same seed, and their difference (None where any of the four audits is missing)."""

    domain: str
    arm_change: float | None
    fixed_change: float | None
    difference: float | None


@dataclass(frozen=True)
class UpdateMove:
    update: dict[str, Any]  # the update-log entry
    before: int  # the last evaluated checkpoint at or before the update's step (0: the base model)
    last: int
    domains: list[DomainMove]


@dataclass(frozen=True)
class MovePick:
    """The best or the worst seed of an evolving arm, by its final audit minus fixed's at the same seed."""

    arm: str
    label: str  # best, worst
    seed: int
    only_one: bool  # the arm has one seed beside fixed
    gap: float
    curve: list[tuple[int, float]]  # (step, arm − fixed audit) where both were evaluated
    updates: list[UpdateMove]


def move_picks(results: dict[str, Any]) -> list[MovePick]:
    runs, base = results["runs"], results.get("base")
    fixed = {r["seed"]: r for r in runs if r["arm"] == "fixed"}
    out: list[MovePick] = []
    for arm in [a for a in ARMS if ARMS[a].overrides[0] == "harness.evolver=true"]:
        mine = [r for r in runs if r["arm"] == arm and r["seed"] in fixed and "update_log" in r]
        if not mine:
            continue
        gap = lambda r: r["summary"]["final_audit"] - fixed[r["seed"]]["summary"]["final_audit"]  # noqa: E731
        ranked = sorted(mine, key=lambda r: (gap(r), r["seed"]))
        picks = [("best", ranked[-1])] + ([("worst", ranked[0])] if len(ranked) > 1 else [])
        for label, run in picks:
            f = fixed[run["seed"]]
            steps = [c[0] for c in run["summary"]["curve"]]
            curve = [
                (s, a - b)
                for (s, _, a), (_, _, b) in zip(run["summary"]["curve"], f["summary"]["curve"])
                if a is not None and b is not None
            ]
            updates = []
            if run["update_log"]:
                last = steps[-1]
                for u in run["update_log"]:
                    before = max((s for s in steps if s <= u["step"]), default=0)
                    moves = []
                    for d in u["domains"]:
                        vals = [domain_audit(r, base, st, d) for r in (run, f) for st in (before, last)]
                        if None in vals:
                            moves.append(DomainMove(d, None, None, None))
                            continue
                        h, x = vals[1] - vals[0], vals[3] - vals[2]
                        moves.append(DomainMove(d, h, x, h - x))
                    updates.append(UpdateMove(u, before, last, moves))
            out.append(MovePick(arm, label, run["seed"], len(ranked) == 1, gap(run), curve, updates))
    return out


# -- the longer horizon --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PrefixMatch:
    """Whether a longer run's checkpoints repeat the same-named run of this table where both were evaluated
    (a constant learning rate and the same seed make the first steps the same run; a schedule over the step
    budget does not)."""

    name: str
    in_table: bool
    common: list[str]  # the checkpoints evaluated in both, in step order
    differing: list[str]  # those of them whose audit or score differ


def prefix_match(run: dict[str, Any], mine: dict[str, Any] | None) -> PrefixMatch:
    if mine is None:
        return PrefixMatch(run["name"], False, [], [])
    common = sorted(set(run["evals"]) & set(mine["evals"]), key=int)
    differing = [
        s
        for s in common
        if (run["evals"][s]["audit"], run["evals"][s]["avg_at_k"])
        != (mine["evals"][s]["audit"], mine["evals"][s]["avg_at_k"])
    ]
    return PrefixMatch(run["name"], True, common, differing)


@dataclass(frozen=True)
class HorizonStep:
    """One checkpoint of the longer pair: fixed's mean audit, and per arm its mean audit and the paired
    difference with fixed (`bench_stats.paired` at that step; None without a common seed)."""

    step: int
    fixed_audit: float | None
    arms: list[tuple[float | None, dict[str, Any] | None]]


@dataclass(frozen=True)
class Horizon:
    steps: list[int]
    arms: list[str]  # the arms beside fixed that ran, in `ARMS` order
    fixed_seeds: list[int]
    prefixes: list[PrefixMatch]  # per longer run, against this table's run of the same name
    rows: list[HorizonStep]
    reach: dict[str, list[dict[str, Any]]]  # per arm, `bench_stats.steps_to_best` per seed


def horizon_numbers(h: dict[str, Any], table_runs: list[dict[str, Any]] | None) -> Horizon:
    """The longer-horizon pair's numbers (`h` from compare.py's `load_horizon`, with runs of this table's code)."""
    runs, base = h["runs"], h["base"]
    by_name = {r["name"]: r for r in table_runs or []}
    steps = sorted({s for r in runs for s, _, _ in r["summary"]["curve"]})
    arms = [a for a in ARMS if a != "fixed" and any(r["arm"] == a for r in runs)]

    def mean_audit(arm: str, step: int) -> float | None:
        return mean_of([a for r in runs if r["arm"] == arm for s, _, a in r["summary"]["curve"] if s == step])

    rows = [
        HorizonStep(
            step,
            mean_audit("fixed", step),
            [(mean_audit(a, step), paired(runs, base, a, "fixed", metric="audit", at_step=step)) for a in arms],
        )
        for step in steps
    ]
    return Horizon(
        steps=steps,
        arms=arms,
        fixed_seeds=sorted(r["seed"] for r in runs if r["arm"] == "fixed"),
        prefixes=[prefix_match(r, by_name.get(r["name"])) for r in runs],
        rows=rows,
        reach={a: steps_to_best(runs, a) for a in arms},
    )
