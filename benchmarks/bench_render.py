"""Benchmark report: plots (PNG) and the Markdown report, one function per section; a hand-written analysis
section in an existing report is kept on re-render. Formats only: every number it shows is in `results.json`
or computed by `benchmarks/bench_tables.py` (per section) and `benchmarks/bench_stats.py`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench_collect import GAIN_TARGETS
from bench_spec import ARMS, DAPO_OVERSAMPLE
from bench_stats import DETECT_POINTS, has_full_curve
from bench_tables import (
    PrefixMatch,
    critic_fails,
    evolver_rows,
    gain_rows,
    groups_generated_trained,
    heldout_curves,
    heldout_train_rows,
    horizon_numbers,
    interval_rows,
    measured_gain_targets,
    move_picks,
    paired_fixed_rows,
    seed_matched_targets,
    steps_to_best_rows,
    zero_var_curves,
)

from harness.types import INTERFACES


def _fmt(x: Any, nd: int = 1, sd: Any = None) -> str:
    if x is None:
        return "–"
    s = f"{x:.{nd}f}"
    return s + (f" ± {sd:.{nd}f}" if sd is not None else "")


def _ci(p: dict[str, Any] | None) -> str:
    if p is None or p["mean"] is None:
        return "–"
    return f"{p['mean']:+.1f} [{p['lo']:+.1f}, {p['hi']:+.1f}]"


def _pct_sign(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _share(num: Any, den: Any) -> str:
    return "–" if num is None or not den else f"{100 * num / den:.0f}%"


def _pct(x: Any, nd: int = 1) -> str:
    return _fmt(None if x is None else 100 * x, nd)


# -- plots ---------------------------------------------------------------------------------------------------
def plots(results: dict[str, Any], plot_dir: Path) -> list[str]:
    """Two small PNGs: held-out scores over steps, zero-variance share over training. Returns file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir.mkdir(parents=True, exist_ok=True)
    names = []
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), dpi=80)
    for arm, c in heldout_curves(results["runs"]).items():
        for ax, ys in ((axes[0], c.score), (axes[1], c.audit)):
            ax.plot(
                c.steps,
                ys,
                marker="o",
                ms=3,
                lw=2 if ARMS[arm].key else 1,
                ls="-" if ARMS[arm].key else "--",
                label=arm,
            )
    axes[0].set_title("held-out training-criteria score")
    axes[1].set_title("held-out audit score")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel("Avg@k (0-100)")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(plot_dir / "heldout.png")
    plt.close(fig)
    names.append("heldout.png")

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
    for arm, (steps, smooth) in zero_var_curves(results["runs"]).items():
        ax.plot(steps, smooth, lw=2 if ARMS[arm].key else 1, ls="-" if ARMS[arm].key else "--", label=arm)
    ax.set_title("zero-variance group share (trailing 4-step mean)")
    ax.set_xlabel("step")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(plot_dir / "zero_variance.png")
    plt.close(fig)
    names.append("zero_variance.png")

    paired = paired_fixed_rows(results["runs"])
    if paired:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), dpi=80)
        for ax, key, title in (
            (axes[0], "score", "Δ held-out score vs fixed (final)"),
            (axes[1], "audit", "Δ audit score vs fixed (final)"),
        ):
            for i, p in enumerate(paired):
                vals, mean = (p.score, p.score_mean) if key == "score" else (p.audit_known, p.audit_mean)
                ax.bar(i, mean or 0.0, color="tab:green" if ARMS[p.arm].key else "tab:gray", alpha=0.6)
                ax.scatter([i] * len(vals), vals, color="k", s=10, zorder=3)  # one dot per seed
            ax.axhline(0, color="k", lw=0.8)
            ax.axhline(3, color="tab:red", lw=0.8, ls=":")  # the issue's +3-point target
            ax.set_xticks(range(len(paired)))
            ax.set_xticklabels([p.arm for p in paired], rotation=35, ha="right", fontsize=7)
            ax.set_title(title)
            ax.set_ylabel("points (0-100)")
            ax.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(plot_dir / "paired_vs_fixed.png")
        plt.close(fig)
        names.append("paired_vs_fixed.png")
    return names


# -- the report, section by section --------------------------------------------------------------------------
ANALYSIS_BEGIN, ANALYSIS_END = "<!-- BEGIN ANALYSIS (hand-written, kept on re-render) -->", "<!-- END ANALYSIS -->"


def eval_subset(b: dict[str, Any]) -> str:
    """The held-out eval set in words; eval_per_domain 0 means every held-out task."""
    n = len(b["eval_tasks"])
    if not b["eval_per_domain"]:
        return f"all {n} held-out test tasks"
    return f"fixed subset of {n} test tasks ({b['eval_per_domain']} per domain)"


def render(results: dict[str, Any], report: Path) -> str:
    lines = [
        *_title(results),
        *_setup_section(results),
        *_runs_section(results),
        *_main_table(results),
        *_paired_fixed_section(results),
        *_new_sections(results),
        *_domain_section(results),
        *_evolver_section(results),
        *_critic_fails_section(results),
        *_targets_section(results),
        *_per_run_section(results),
        *_plots_section(results, report),
        "",
        _analysis(report),
        "",
    ]
    return "\n".join(lines)


def _title(results: dict[str, Any]) -> list[str]:
    return [
        f"# Benchmark: HarnessRL vs fixed harness vs dynamic filtering ({results['preset']} preset)",
        "",
        "Generated by `benchmarks/compare.py` (tables, targets, plots); the analysis section is written by hand.",
        "",
    ]


def _setup_section(results: dict[str, Any]) -> list[str]:
    b = results["budget"]
    pool = (
        "all train tasks"
        if not b.get("train_per_domain")
        else str(b["train_per_domain"]) + " train tasks per domain, `" + b["train_pool"] + "`"
    )
    if results.get("rendered_only"):
        # Rendered from committed summaries with no run of this out folder behind it: the jobs' commands,
        # sittings and load are the analysis section's to state; each job's time and commit are in the Runs table.
        how = [
            f"- Rendered by `{results['command']}` at {results['started']} from the job summaries alone: no job "
            "ran in this invocation. The sittings that ran them (commands, machine load) are listed in the "
            "analysis section; each job's time and commit are in the Runs table.",
        ]
    else:
        how = [
            f"- Command: `{results['command']}`",
            f"- Started {results['started']}, finished {results['finished']}; runtime "
            f"{results['runtime_s'] / 60:.1f} min (wall, {results['jobs']} parallel job(s), shared 2-core machine).",
            f"- Code: commit {results['git']['head']} plus {results['git']['changed_files']} uncommitted changes"
            f"{' (snapshot taken ' + results['git']['taken'] + ')' if results['git'].get('taken') else ''}, "
            f"frozen into `<out>/code` for the whole run (every arm runs the same code).",
        ]
    lines = [
        "## Setup",
        "",
        *how,
        f"- Config `{b['config']}`; per arm: {b['steps']} steps x {b['batch']} completions "
        f"({b['batch'] // b['group']} prompts x G={b['group']}), evolver every {b['evolve_every']} steps, "
        f"held-out eval every {b['eval_every']} steps and at the last step.",
        f"- Training pool: {pool}.",
        f"- Held-out eval: {eval_subset(b)}, "
        f"k={b['eval_k']} samples, {b['max_tokens']} tokens, training temperature, eval seed {b['eval_seed']} "
        f"(same random numbers for every model). Scores are Avg@k on 0-100.",
        f"- Seeds: key arms {b['seeds']}, ablations {b['ablation_seeds']}.",
        *(
            [
                f"- Seeds past the first {b['full_curve_seeds']} of {b['seeds']} are evaluated at step 0 and their "
                "final step only: the held-out curves, steps to fixed's best and the equal-wall-time differences come "
                "from the seeds with full curves; final-checkpoint numbers from every seed."
            ]
            if b.get("full_curve_seeds") and len(b["seeds"]) > b["full_curve_seeds"]
            else []
        ),
        *(
            [
                f"- Second held-out set: {b['train_heldout_tasks']} train-split tasks in no arm's pool (same "
                f"generator as the test tasks), k={b['train_heldout_k']}, on the base and each final checkpoint."
            ]
            if b.get("train_heldout_tasks")
            else []
        ),
        "",
    ]
    code = results.get("code")
    if code:
        lines += [
            f"- Job summaries: `{results.get('results_dir', '')}`; this report renders the {code['n_jobs']} "
            f"summaries of ONE code version: code hash `{code['code_hash'][:12]}`, commit(s) "
            f"{', '.join(c[:10] for c in code['commits'])}, "
            f"{'**dirty tree** (uncommitted changes in the benchmarked code)' if code['dirty'] else 'clean tree'}."
        ]
        lines += stand_in_lines(results.get("stand_ins", []))
        for g in results.get("left_out", []):
            lines += [
                f"- Left out (other code, never mixed in): code `{g['code_hash'][:12]}` (commit(s) "
                f"{', '.join(c[:10] for c in g['commits'])}): {', '.join(g['jobs'])}; `--commit` chooses."
            ]
        lines += [""]
    return lines


def stand_in_lines(stand_ins: list[dict[str, Any]]) -> list[str]:
    """One line per exception to "one code version per table": an arm's seeds taken from older code
    (`bench_collect.stand_ins`), with the seeds at which both codes were shown equal."""
    return [
        f"- **Exception** (`--stand-ins`): {x['arm']} at seeds {x['seeds']} comes from older code "
        f"`{x['code_hash'][:12]}`, whose {x['arm']} runs equal this code's on every held-out task at seeds "
        f"{x['shown_equal_seeds']} (its code path did not change)."
        for x in stand_ins
    ]


def _runs_section(results: dict[str, Any]) -> list[str]:
    # Each job's own time and commit, from its summary: a table rendered from summaries of several sittings
    # has no single runtime.
    ran = {r["name"]: r for r in results["runs"]}
    if results.get("base"):
        ran["base"] = results["base"]
    lines = ["## Runs", "", "| job | status | job time (min) | commit |", "|---|---|---|---|"]
    for k, v in results["status"].items():
        j = ran.get(k, {})
        mins = _fmt(j["job_s"] / 60, 0) if j.get("job_s") else "–"
        if j.get("stand_in"):  # older code's summary (`--stand-ins`): said in its status, named in the setup
            v = f"{v}; stand-in from code `{j['stand_in']['code_hash'][:12]}`"
        lines.append(f"| {k} | {v} | {mins} | {(j.get('code') or {}).get('commit', '')[:7] or '–'} |")
    return lines


def _main_table(results: dict[str, Any]) -> list[str]:
    arm_sum = results["arms"]
    # The external yardstick's column, where any arm has it (summaries from before it have not).
    ife = any(s.get("final_ifeval") is not None for s in arm_sum.values())
    lines = [
        "",
        "## Main table (mean ± sd over seeds)",
        "",
        "| arm | n | held-out score (best ckpt) | audit (best ckpt) | best step | final score | final audit | "
        "zero-var share | len corr (final / base) | train-audit gap growth | wall s | pause % | judge warn |"
        + (" IFEval final (prompt / instr strict) |" if ife else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if ife else ""),
    ]
    for arm, s in arm_sum.items():
        lines.append(
            f"| {ARMS[arm].label} | {s['n']} | {_fmt(s['best_score'], 1, s['best_score_sd'])} | "
            f"{_fmt(s['best_audit'], 1, s['best_audit_sd'])} | {_fmt(s['best_step'], 0)} | "
            f"{_fmt(s['final_score'], 1, s['final_score_sd'])} | {_fmt(s['final_audit'], 1, s['final_audit_sd'])} | "
            f"{_fmt(s['zero_var_share'], 2, s['zero_var_share_sd'])} | "
            f"{_fmt(s['length_corr_final'], 2)} / {_fmt(s['length_corr_base'], 2)} | {_fmt(s['gap_growth'], 1)} | "
            f"{_fmt(s['wall_s'], 0)} | {_fmt(None if s['pause_share'] is None else 100 * s['pause_share'], 1)} | "
            f"{_fmt(s['judge_warnings'], 0)} |"
            + (
                f" {_fmt(s.get('final_ifeval'), 1, s.get('final_ifeval_sd'))} / {_fmt(s.get('final_ifeval_inst'), 1)} |"
                if ife
                else ""
            )
        )
    seed_sets = {arm: sorted(s.get("seeds") or []) for arm, s in arm_sum.items()}
    if len({tuple(v) for v in seed_sets.values()}) > 1:  # a sitting in progress, or fewer ablation seeds
        lines += [
            "",
            "The arms ran different seeds ("
            + ", ".join(f"{arm} {v}" for arm, v in seed_sets.items())
            + "), so the means above are over different seeds; the paired tables and the targets below "
            "compare two arms over the seeds both ran.",
        ]
    base = results.get("base")
    if base:
        lines += [
            "",
            f"Base model (step 0, same eval): score {_fmt(100 * base['eval']['avg_at_k'])}, audit "
            f"{_fmt(None if base['eval']['audit'] is None else 100 * base['eval']['audit'])}, "
            f"length corr {_fmt(base['eval']['length_corr'], 2)}"
            + (
                f"; IFEval prompt / instruction strict {_fmt(100 * base['eval']['ifeval']['prompt_strict'])} / "
                f"{_fmt(100 * base['eval']['ifeval']['instruction_strict'])} "
                f"({base['eval']['ifeval']['n_prompts']} prompts, greedy, "
                f"{base['eval']['ifeval']['max_tokens']} tokens)"
                if base["eval"].get("ifeval")
                else ""
            )
            + ".",
        ]
    lines += [
        "",
        "Columns: *best ckpt* = the evaluated checkpoint (step 0 = base included) with the highest held-out "
        "training-criteria score (selected on the same eval subset, so optimistic); *len corr* = within-task "
        "correlation of response word count with the training-criteria score on the held-out eval; "
        "*train-audit gap growth* = (score - audit) at the final checkpoint minus the same at the base model "
        "(positive: the training criteria rose more than the hidden audit = spurious reward); *wall s* = "
        "training wall time (evolver pauses included, eval excluded); *pause %* = share of it spent paused "
        "in the evolver."
        + (
            " *IFEval final* = the external yardstick at the last checkpoint: greedy answers to the 52 "
            "held-out prompts of `data/ifeval-heldout/`, scored by IFEval's own instruction checkers "
            "(`if-verifiable`), prompt-level / instruction-level strict accuracy (0-100); nothing in "
            "training saw these prompts or this scorer."
            if ife
            else ""
        ),
        "",
    ]
    return lines


def _paired_fixed_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "## Paired with the fixed harness (same seed, same eval draws): final-checkpoint differences",
        "",
        "| arm | seeds | Δ score per seed | mean Δ score | Δ audit per seed | mean Δ audit |",
        "|---|---|---|---|---|---|",
    ]
    for p in paired_fixed_rows(results["runs"]):
        lines.append(
            f"| {p.arm} | {p.seeds} | {', '.join(_fmt(x) for x in p.score)} | "
            f"{_fmt(p.score_mean, 1, p.score_sd)} | {', '.join(_fmt(x) for x in p.audit)} | "
            f"{_fmt(p.audit_mean, 1, p.audit_sd)} |"
        )
    return lines


def _new_sections(results: dict[str, Any]) -> list[str]:
    """Issue 13's additions: paired intervals at equal steps and equal wall time, steps to fixed's best, costs
    (zero-variance, pause, overhead, DAPO's extra generation), power, and the GPU preset's status."""
    return [
        *_intervals_section(results),
        *_heldout_train_section(results),
        *_steps_to_best_section(results),
        *_costs_section(results),
        *gain_section(results),
        *moves_section(results),
        *horizon_section(results.get("horizon"), results["runs"]),
        *_power_section(results.get("power")),
        *_gpu_section(results),
    ]


def _intervals_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Paired differences with bootstrap 95% intervals (points, 0-100)",
        "",
        "Same seed, same eval draws; per seed the difference over the held-out tasks, the interval resamples "
        "seeds and tasks. *Equal steps*: final checkpoints. *Equal wall time*: per seed, each arm's last "
        "evaluated checkpoint reached within the shorter of the two training wall times (HarnessRL pays its "
        "pauses, DAPO its over-sampling); the steps used are listed.",
        "",
        "| arm − reference | seeds | Δ audit, equal steps | Δ score, equal steps | Δ audit greedy | "
        "Δ audit, equal wall time | Δ score, equal wall time | steps at equal time (arm/ref) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in interval_rows(results):
        lines.append(
            f"| {r.arm} − {r.ref} | {r.audit['seeds']} | {_ci(r.audit)} | {_ci(r.score)} | {_ci(r.greedy_audit)} | "
            f"{_ci(r.time_audit)} | {_ci(r.time_score)} | "
            f"{', '.join(f'{x}/{y}' for x, y in r.time_audit['steps']) if r.time_audit else '–'} |"
        )
    return lines


def _heldout_train_section(results: dict[str, Any]) -> list[str]:
    rows = heldout_train_rows(results)
    if not rows:
        return []
    ci = lambda c: "–" if c is None else f"{c[0]:+.1f} [{c[1]:+.1f}, {c[2]:+.1f}]"  # noqa: E731
    lines = [
        "",
        "## Second held-out set: train-split tasks in no arm's pool",
        "",
        f"The suite's train-split tasks that no arm trained on ({rows[0].n_tasks} tasks, k = "
        f"{results['budget'].get('train_heldout_k', '?')}), scored on the base model and every final checkpoint: "
        "more held-out signal per generated token beside the 65 test tasks. They come from the same generator "
        "as the test tasks (suitegen), so they measure the same distribution, not a new one; they are never pooled "
        "with the test tasks. Paired by seed and task, bootstrap 95% intervals (points, 0-100).",
        "",
        "| arm − reference | seeds | Δ audit | Δ score | arm final score / audit | reference final score / audit |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.arm} − {r.ref} | {r.seeds} | {ci(r.audit)} | {ci(r.score)} | "
            f"{_fmt(r.arm_final[0])} / {_fmt(r.arm_final[1])} | {_fmt(r.ref_final[0])} / {_fmt(r.ref_final[1])} |"
        )
    return lines


def _steps_to_best_section(results: dict[str, Any]) -> list[str]:
    cheap = sorted({r["seed"] for r in results["runs"] if not has_full_curve(r)})
    lines = [
        "",
        "## Steps to the fixed arm's best held-out score",
        "",
        *(
            [
                f"From the seeds with full curves only: seeds {cheap} were evaluated at step 0 and their final step "
                "(as were their curves in the plots, which leave them out).",
                "",
            ]
            if cheap
            else []
        ),
        "| arm | per seed: fixed's best (step) → first checkpoint of the arm at or above it | mean ratio |",
        "|---|---|---|",
    ]
    for arm, rows, mean_ratio in steps_to_best_rows(results["runs"]):
        cells = "; ".join(
            f"s{r['seed']}: {_fmt(r['fixed_best'])} ({r['fixed_best_step']}) → "
            f"{'never' if r['reached_at'] is None else r['reached_at']}"
            for r in rows
        )
        lines.append(f"| {arm} | {cells} | {_fmt(mean_ratio, 2)} |")
    return lines


def _costs_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Costs: zero-variance groups, pauses, harness overhead, DAPO's extra generation",
        "",
        "| arm | zero-var share (generated) | zero-var share (trained) | pause % of wall | harness overhead % "
        "of step time | overhead s | step wall s (no pause) | groups generated / trained | extra generation |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, s in results["arms"].items():
        gen, tr = groups_generated_trained(results["runs"], arm)
        lines.append(
            f"| {arm} | {_fmt(s.get('zero_var_share'), 2)} | {_fmt(s.get('zero_var_trained'), 2)} | "
            f"{_pct(s.get('pause_share'))} | {_pct(s.get('overhead_share'), 2)} | "
            f"{_fmt(s.get('overhead_s'), 1)} | {_fmt(s.get('step_wall_s'), 1)} | {gen} / {tr} | "
            f"{_pct_sign(s.get('extra_generation'))} |"
        )
    lines += [
        "",
        "*Zero-var (trained)*: share of the groups a step trained on (DAPO drops the others; other arms "
        "train on every generated group). *Harness overhead*: the harness's own work per step (sampler "
        "draw, reward bookkeeping, hidden audit, detector, memory writes; `harness_overhead_s` in "
        "metrics.jsonl) over the step time (generation + reward + loss + backward). The `plain` arm (plain "
        "TRL GRPO, same reward, no harness code) gives the step time without any of it. *Extra generation*: "
        "rollouts generated beyond those trained on (DAPO's over-sampling).",
        "",
        "**How the DAPO arm differs from verl's dynamic sampling** (`trainer/dynamic_sampling.py`): verl "
        "generates batch after batch until batch/G groups with reward variance are collected. TRL 1.16 "
        "generates, scores and builds advantages in one private method, so here each step generates ONE "
        f"over-sampled batch ({DAPO_OVERSAMPLE} x the rollouts), the reward wrapper keeps the first batch/G "
        "groups with variance in draw order and returns None for the rest (advantage 0), and the loss is "
        "normalised over the kept rows' tokens (public `compute_loss`). When fewer groups vary, the step "
        "trains on fewer (counted as DAPO short groups: groups generated / trained above); dropped rows still "
        "pass through the forward/backward with zero weight, which DAPO's wall time pays. "
        "*HarnessRL + DAPO* (`harnessrl-dapo`) is the evolver with the same dynamic sampling: its detector, "
        "memory and the grading of accepted updates see every generated group (the dropped zero-variance groups "
        "are the evidence of dead groups), only the loss sees the kept ones; like DAPO it needs `train.beta=0`, "
        "a token-mean loss and one process (refused at start otherwise).",
        "",
        "**The two controls HarnessRL has to beat.** *fixed-norm* is the fixed harness with DAPO's loss normaliser "
        "and nothing else: the rows of zero-variance groups (advantage 0) leave the token-mean normaliser, with no "
        "over-sampling (the fixed arm divides by every row's tokens, dead rows included; DAPO by its kept rows). "
        "*skip* is a zero-LLM predictive sampler (no evolver): a task whose last z groups were dead is drawn with "
        "probability max(p^z, floor), p adapting each step towards a dead-share target "
        f"({skip_setting(results, 'skip_target')}; floor {skip_setting(results, 'skip_floor')}; harness/skip.py). "
        "DAPO's first batch/G draws of each step are the fixed arm's at the same seed (common random numbers); its "
        "over-sampled surplus comes from a second stream.",
        "",
    ]
    return lines


def skip_setting(results: dict[str, Any], knob: str) -> str:
    """`harness.<knob>` as the skip arm's runs set it (the config's default unless an override changed it)."""
    import dataclasses

    from trainer.config import HarnessConfig

    default = next(f.default for f in dataclasses.fields(HarnessConfig) if f.name == knob)
    seen = {
        o.split("=", 1)[1]
        for r in results["runs"]
        if r["arm"] == "skip"
        for o in r.get("job", {}).get("overrides", [])
        if o.startswith(f"harness.{knob}=")
    }
    return f"`harness.{knob}` = " + (", ".join(sorted(seen)) if seen else str(default))


def _gpu_section(results: dict[str, Any]) -> list[str]:
    ran = results.get("gpu_summaries") or {}
    if isinstance(ran, int):  # results.json from before gpu-4b: the count of the gpu preset's summaries
        ran = {"gpu": ran}
    lines = []
    if not ran.get("gpu"):
        lines += [
            "",
            "## GPU preset",
            "",
            "The `gpu` preset (same protocol, >= 100 steps per arm, every job a "
            "concurrent bf16 process on one GPU, sized for < 8 min on one H200) **has not been run**: no GPU "
            "was available. Its config is validated in tests/test_bench_smoke.py; run it with "
            "`benchmarks/compare.py --preset gpu --arms all --seeds 0,1,2,3,4,5 --report benchmarks/RESULTS-gpu.md`.",
        ]
    if not ran.get("gpu-4b"):
        lines += [
            "",
            "The `gpu-4b` preset (configs/gpu-4b.yaml: Qwen3-4B with LoRA, TRL's vLLM server for rollouts, an LLM "
            "judge and brains on a second vLLM server; one job at a time) **has not been run**: no GPU was lent to "
            "this sitting. Its arms are validated as trainer configs in tests/test_bench_controls.py; with the two "
            "servers of the config's header up, run `benchmarks/compare.py --preset gpu-4b --arms key --seeds 0,1` "
            "(its report: RESULTS-gpu.md in --out).",
        ]
    return lines


def _domain_section(results: dict[str, Any]) -> list[str]:
    arm_sum = results["arms"]
    lines = ["", "## Per domain (final checkpoint, score / audit)", ""]
    domains = sorted({d for s in arm_sum.values() for d in s["final_domains"]})
    lines += ["| arm | " + " | ".join(domains) + " |", "|---|" + "---|" * len(domains)]
    for arm, s in arm_sum.items():
        cells = [
            f"{_fmt(s['final_domains'].get(d, {}).get('score'))} / {_fmt(s['final_domains'].get(d, {}).get('audit'))}"
            for d in domains
        ]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines


def _evolver_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Evolver (summed over seeds): proposals / accepted / rejected per interface",
        "",
        "| arm | rounds | sampling | guidance | criteria | fallbacks | committed updates | groups on updated "
        "tasks after the update | hinted rollouts | round errors | spurious events | events |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in evolver_rows(results):
        pi = e.per_interface
        cells = [f"{pi[i]['proposals']} / {pi[i]['accepted']} / {pi[i]['rejected']}" for i in INTERFACES]
        lines.append(
            f"| {e.arm} | {e.rounds} | " + " | ".join(cells) + f" | {e.fallbacks} | "
            f"{e.updates} | {e.updated_task_revisits} | "
            f"{_fmt(e.hinted_share, 2)} | "
            f"{e.round_errors} | "
            f"{e.spurious_events} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(e.event_types.items())) or '–'} |"
        )
    return lines


def _critic_fails_section(results: dict[str, Any]) -> list[str]:
    lines = ["", "Critic checks that failed (per interface, summed over seeds):", ""]
    for arm, fails in critic_fails(results).items():
        if fails:
            lines.append(f"- {arm}: " + ", ".join(f"{k} x{v}" for k, v in sorted(fails.items())))
    return lines


def _targets_section(results: dict[str, Any]) -> list[str]:
    lines = ["", "## Targets (aims, measured as is)", "", "| target | measured | met? | note |", "|---|---|---|---|"]
    for t in seed_matched_targets(results["runs"]):
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {_fmt(t['value'], 2)} | {met} | {t.get('note', '')} |")
    return lines


def _per_run_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Per run",
        "",
        "| run | best step | best score | best audit | final score | final audit | "
        "zero-var | wall s | pause s | eval s | harness version |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        s = r["summary"]
        lines.append(
            f"| {r['name']} | {_fmt(s['best_step'], 0)} | {_fmt(s['best_score'])} | {_fmt(s['best_audit'])} | "
            f"{_fmt(s['final_score'])} | {_fmt(s['final_audit'])} | {_fmt(s['zero_var_share'], 2)} | "
            f"{_fmt(s['wall_s'], 0)} | {_fmt(s['pause_s'], 0)} | {_fmt(s['eval_s'], 0)} | "
            f"v{s['harness_version']} |"
        )
    return lines


def _plots_section(results: dict[str, Any], report: Path) -> list[str]:
    rel = os.path.relpath(results["plot_dir"], report.parent)
    return ["", "## Plots", "", *(f"![{p}]({rel}/{p})" for p in results["plots"])]


def _analysis(report: Path) -> str:
    """The hand-written analysis of the report already at `report` (a placeholder where it has none)."""
    analysis = f"{ANALYSIS_BEGIN}\n## Analysis\n\n(not written yet)\n{ANALYSIS_END}"
    if report.is_file():
        old = report.read_text()
        if ANALYSIS_BEGIN in old and ANALYSIS_END in old:
            analysis = old[old.index(ANALYSIS_BEGIN) : old.index(ANALYSIS_END) + len(ANALYSIS_END)]
    return analysis


def gain_section(results: dict[str, Any]) -> list[str]:
    """Issue 22 item 5: per arm, the evolver's accepted / confirmed / reverted updates per interface (summed over
    seeds) beside the costs, then the issue's targets measured per arm. Summaries from before training's verdicts
    were collected show "–" for them."""
    arm_sum = results["arms"]
    if not arm_sum:
        return []
    lines = [
        "",
        "## Where each gain comes from",
        "",
        "Per arm, summed over seeds: the evolver's *proposals* (critic attempts) and the *accepted* ones; the "
        "*accepted updates* they committed, one per task (an accepted repair generalised to sibling tasks commits "
        "one per task), and what training made of each at the next pauses (`trainer/provisional.py`): "
        "*confirmed*, *reverted*, *superseded* (a later update touched the task first), or *never graded* (its "
        "task had not trained on enough groups before the run ended); per interface accepted updates / confirmed "
        "/ reverted. Fallbacks and reverts are not accepted updates. Zero-variance shares, extra generation, "
        "pause and overhead are the arm's means (as in the costs table).",
        "",
        "| arm | proposals | accepted (% of proposals) | accepted updates: confirmed / reverted / superseded / never "
        "graded (% confirmed) | "
        + " | ".join(f"{i}: upd / conf / rev" for i in INTERFACES)
        + " | zero-var generated | zero-var trained | extra generation | pause % | overhead % |",
        "|---|---|---|---|" + "---|" * len(INTERFACES) + "---|---|---|---|---|",
    ]
    for g in gain_rows(results):
        s = arm_sum[g.arm]
        cells = [f"{x.updates} / " + (f"{x.confirm} / {x.revert}" if x.graded else "– / –") for x in g.per_interface]
        lines.append(
            f"| {g.arm} | {_fmt(g.proposals, 0)} | {_fmt(g.accepted, 0)} ({_share(g.accepted, g.proposals)}) | "
            f"{_fmt(g.updates, 0)}: {_fmt(g.confirmed, 0)} / {_fmt(g.reverted, 0)} / {_fmt(g.superseded, 0)} / "
            f"{_fmt(g.never_graded, 0)} ({_share(g.confirmed, g.updates)}) | "
            + " | ".join(cells)
            + f" | {_fmt(s.get('zero_var_share'), 2)} | {_fmt(s.get('zero_var_trained'), 2)} | "
            f"{_pct_sign(s.get('extra_generation'))} | {_pct(s.get('pause_share'))} | "
            f"{_pct(s.get('overhead_share'), 2)} |"
        )
    measured = measured_gain_targets(results)
    if not measured:
        return lines
    arms = list(measured)
    lines += [
        "",
        "Issue 22's targets, measured per arm (✓ met, ✗ missed, – not measurable: no proposals, no verdicts "
        "in the summaries, or no fixed arm). The zero-variance target holds only with both of its rows; its ratio "
        "to fixed is over the seeds both arms ran.",
        "",
        "| target | " + " | ".join(arms) + " |",
        "|---|" + "---|" * len(arms),
    ]
    for key, words, _ in GAIN_TARGETS:
        cells = []
        for arm in arms:
            m = measured[arm][key]
            v = m["value"]
            nd = {"overhead_share": 2, "pause_share": 1, "extra_generation": 1}.get(key, 0)
            text = _fmt(v, 2) if key == "zero_var_ratio" else _pct(v, nd) + "%"
            cells.append("–" if v is None else f"{text} {'✓' if m['met'] else '✗'}")
        lines.append(f"| {words} | " + " | ".join(cells) + " |")
    return lines


def moves_section(results: dict[str, Any]) -> list[str]:
    """Issue 22 item 5: for the best and the worst seed of each evolving arm (by its final audit minus fixed's at
    the same seed), every harness update beside its domain's held-out audit: from the last checkpoint before the
    update to the run's last one, against fixed's change over the same steps at the same seed. Updates of one domain
    share its curve, so this places updates; it does not attribute the curve to one of them."""
    picks = move_picks(results)
    if not picks:
        return []
    lines: list[str] = []
    for p in picks:
        curve = ", ".join(f"{s}: {_fmt(d, 2)}" for s, d in p.curve)
        lines += [
            "",
            f"**{p.arm}, {p.label} seed ({p.seed}{', the only one' if p.only_one else ''}):** final "
            f"audit {_fmt(p.gap, 2)} points against fixed; {p.arm} − fixed audit per checkpoint: {curve}.",
            "",
        ]
        if not p.updates:
            lines.append("No harness update in this run.")
            continue
        lines += [
            "| v | step | interface | tasks (domain) | origin | failure | training's verdict | "
            f"domain audit, checkpoint before → last: {p.arm} | fixed | difference |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for m in p.updates:
            u = m.update
            cells = [
                (f"{d.domain}: –", "–", "–")
                if d.difference is None
                else (
                    f"{d.domain} {m.before}→{m.last}: {_fmt(d.arm_change, 2)}",
                    _fmt(d.fixed_change, 2),
                    _fmt(d.difference, 2),
                )
                for d in m.domains
            ]
            verdict = ", ".join(f"{v['verdict']} (step {v['step']})" for v in u["verdicts"].values()) or "–"
            lines.append(
                f"| {u['version']} | {u['step']} | {u['interface']} | {', '.join(u['tasks'])} "
                f"({', '.join(u['domains'])}) | {u['origin'] or '–'} | {u['failure_type'] or '–'} | {verdict} | "
                + " | ".join("; ".join(c[i] for c in cells) for i in range(3))
                + " |"
            )
    return [
        "",
        "## Which updates moved the curve",
        "",
        "For the best and the worst seed of each evolving arm (its final audit minus fixed's at the same seed): "
        "every harness update, where it came from and training's verdict on it, beside the held-out audit of "
        "its task's domain from the last checkpoint before the update to the run's last, and fixed's change "
        "over the same checkpoints at the same seed. Updates of one domain share that curve: the table places "
        "updates, it does not attribute a gain to one of them. Verdict '–': never graded (fallbacks and reverts "
        "are not; an accepted update is graded once its task has trained again).",
        *lines,
    ]


def _same_prefix(m: PrefixMatch) -> str:
    """Whether a longer run's checkpoints repeat the same-named run of this table, in words."""
    if not m.in_table:
        return f"{m.name}: not in this table"
    if not m.common:
        return f"{m.name}: no checkpoint evaluated in both"
    if not m.differing:
        return f"{m.name}: the same audit and score as this table's at every common checkpoint (to step {m.common[-1]})"
    return f"{m.name}: differs from this table's at step(s) {', '.join(m.differing)}"


def horizon_section(h: dict[str, Any] | None, table_runs: list[dict[str, Any]] | None = None) -> list[str]:
    """Issue 22 item 3: the longer-horizon pair (the same preset at more steps, its own summaries folder) as a
    per-checkpoint curve of each arm's held-out audit beside fixed's, the paired difference with its interval at
    every checkpoint, and steps to fixed's best, so a reader sees whether a gap grows, holds or closes."""
    if h is None:
        return []
    head = ["", f"## Longer horizon: `{h['dir']}`", ""]
    if not h["runs"]:
        other = "; ".join(f"code `{g['code_hash'][:12]}`: {', '.join(g['jobs'])}" for g in h["other_code"])
        return head + [
            f"No job summary of this table's code (`{(h['code_hash'] or '?')[:12]}`) there yet: the longer pair has "
            f"not run on it{' (other code, never mixed in: ' + other + ')' if other else ''}."
        ]
    n = horizon_numbers(h, table_runs)
    head[1] = f"## Longer horizon: {max(n.steps)} steps, {', '.join(['fixed', *n.arms])} (seeds {n.fixed_seeds})"
    link = f"; its own report (every table and plot): [{h['report']}]({h['report']})" if h.get("report") else ""
    lines = head + [
        f"Job summaries `{h['dir']}`, the same code as this table (`{h['code_hash'][:12]}`){link}. Same preset and "
        "eval as above; only the step budget differs. Audit on 0-100, mean over seeds; the difference is paired by "
        "seed and task, its 95% interval resamples seeds and tasks. Against this table's runs of the same name: "
        + "; ".join(_same_prefix(m) for m in n.prefixes)
        + ".",
        "",
    ]
    if not n.arms:
        lines += ["Only fixed has run there on this code: no pair to difference yet.", ""]
    lines += [
        "| "
        + " | ".join(["step", "fixed audit", *(f"{a} audit | {a} − fixed [95%] | per seed" for a in n.arms)])
        + " |",
        "|---|---|" + "---|---|---|" * len(n.arms),
    ]
    for row in n.rows:
        cells = [f"{row.step}", _fmt(row.fixed_audit)]
        for mean_audit, d in row.arms:
            per_seed = ", ".join(f"s{sd}: {_fmt(x)}" for sd, x in zip(d["seeds"], d["per_seed"])) if d else "–"
            cells += [_fmt(mean_audit), _ci(d), per_seed]
        lines.append("| " + " | ".join(cells) + " |")
    for a in n.arms:
        reach = [
            f"s{r['seed']}: fixed {_fmt(r['fixed_best'])} at step {r['fixed_best_step']} → "
            + ("never" if r["reached_at"] is None else f"step {r['reached_at']}")
            + ("" if r["ratio"] is None else f" (ratio {r['ratio']:.2f})")
            for r in n.reach[a]
        ]
        if reach:
            lines += ["", f"Steps to fixed's best held-out score, {a}: " + "; ".join(reach) + "."]
    return lines


def _power_section(pw: dict[str, Any] | None) -> list[str]:
    if not pw:
        return []
    prev, p = pw["prev"], pw.get("pilot") or {}
    lines = [
        "",
        "## Power: how many seeds detect a 2-audit-point difference",
        "",
        f"Paired design: one difference HarnessRL − fixed per seed; two-sided α = 0.05, power 80%, "
        f"δ = {DETECT_POINTS:.0f} audit points. Seeds needed n = ((z₀.₉₇₅ + z₀.₈) · sd_d / δ)² (normal "
        f"approximation), and the smallest n whose paired t test has 80% power (`benchmarks/bench_power.py`).",
        "",
        f"- sd of the paired difference measured so far: {_fmt(pw['sd_prev'], 2)} audit points (first sitting: "
        f"{prev['steps']} steps, {prev['eval_tasks']} eval tasks × k={prev['eval_k']}; per seed "
        f"{', '.join(f'{x:+.1f}' for x in prev['audit_diffs'])}). With it: n = {pw['needed_prev_sd']['normal']} "
        f"(normal) / {pw['needed_prev_sd']['t']} (t).",
    ]
    if p.get("eval_sd_audit") is not None:
        lines += [
            f"- Eval noise (pilot: the same model evaluated with two eval seeds, {p['n_tasks']} tasks × "
            f"k={p['k']}, models {', '.join(p['models'])}): sd of one eval's mean audit "
            f"{_fmt(p['eval_sd_audit'], 2)} points (score {_fmt(p.get('eval_sd_avg'), 2)}). Scaled as "
            f"1/√(tasks·k): {_fmt(pw.get('eval_sd_prev'), 2)} at the first sitting's eval, "
            f"{_fmt(pw.get('eval_sd_new'), 2)} at this protocol's eval. Greedy eval has no sampling noise.",
            f"- Eval noise of a *paired* difference under common random numbers (pilot: trained − base "
            f"measured with both eval seeds): {_fmt(p.get('eval_sd_paired_audit'), 2)} audit points at the "
            f"pilot's eval; scaled: {_fmt(pw.get('eval_sd_paired_prev'), 2)} at the first sitting's eval, "
            f"{_fmt(pw.get('eval_sd_paired_new'), 2)} at this protocol's (used below when measured; else the "
            f"conservative 2·eval² of two independent evals).",
            f"- Training noise (sd_d² − eval noise of the difference): {_fmt(pw.get('sd_train'), 2)}; "
            f"projected sd_d at this "
            f"protocol's eval: {_fmt(pw.get('sd_projected'), 2)} → **n = {pw['needed']['normal']} (normal) / "
            f"{pw['needed']['t']} (paired t) seeds per key arm**. Assumes the training noise of 8 steps; longer "
            f"runs may drift further apart (then the measured sd below takes over).",
        ]
    else:
        lines += ["- No pilot summaries with a second eval seed were found: the projection uses the measured sd as is."]
    lines += [
        "- Power at δ = 2 with the projected sd: "
        + ", ".join(f"{n} seeds {100 * v:.0f}%" for n, v in pw["power_by_n"].items() if v == v)
    ]
    if pw.get("power_now") is not None:
        lines += [
            f"- **Achieved** with the {pw['n_seeds']} paired seeds in this report (measured sd "
            f"{_fmt(pw['sd_measured'], 2)}): power {100 * pw['power_now']:.0f}% (paired t)."
        ]
    else:
        lines += [
            f"- Achieved: this report has {pw['n_seeds']} paired seed(s) of HarnessRL and fixed; power needs ≥ 2."
        ]
    if p.get("step_s") is not None:
        overhead = None if p.get("overhead_share") is None else 100 * p["overhead_share"]
        lines += [
            f"- Pilot timing (this machine, shared): one step of {16} rollouts {_fmt(p['step_s'], 0)} s "
            f"(wall {_fmt(p['step_wall_s'], 0)} s, pause excluded); one checkpoint eval "
            f"{_fmt(p.get('eval_sampled_s'), 0)} s sampled (k={p['k']}) + {_fmt(p.get('eval_greedy_s'), 0)} s "
            f"greedy; overhead share {_fmt(overhead, 2)}%."
        ]
    return lines
