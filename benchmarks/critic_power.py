"""How often the critic accepts a repair of a dead group, as a function of the repair's true effect, of the
measurement budget (`sample_k_max`) and of how many cached training rollouts the task has in memory: the power
of the critic's test, and its false-accept rate on a repair that changes nothing.

It runs the critic's whole decision path on simulated rollouts: `agents.critic.stop_rule` (the collapse_low rule
with its exact hit test), `tools.candidate.measure_candidate` (the control pool from the cached history, fresh
control probes to twice the cap when the history is short, the looks, the exact test's bounds, the point rule) and
`agents.critic.judge_measurement` (guards and the final verdict), with the programmatic `tools.judge.Judge`.
Only the frozen policy is simulated: each rollout meets the task's rewarded criterion with probability p (reward
`--hit-reward` 0.625, else 0; audit constant, no leaks), p0 on the unhinted control prompt and in the cached
history, p1 on the hinted candidate prompt (one hinted stratum: `hinted_share` 1).

    .venv/bin/python benchmarks/critic_power.py --reps 400 --out benchmarks/results/critic/power.json

The default effects bracket what the benchmark measured on SmolLM2: a hint that lifted a dead task's hit rate
from about 1 in 16 to about 1 in 3 (replay in benchmarks/results/critic/replay_collapse_low.json). The "before"
numbers (the bootstrap rule on fresh groups, the code before issue 19) are kept from the committed table in the
output's `before` field; they were measured by this script's previous version (`--reps 200`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.context import EvolverContext  # noqa: E402
from agents.critic import judge_measurement, stop_rule  # noqa: E402
from harness.detector import DetectorConfig  # noqa: E402
from harness.guidance import prompt_digest, render_prompt  # noqa: E402
from harness.types import Criterion, FailureEvent, HarnessState, HarnessUpdate, Message, Task  # noqa: E402
from tools.candidate import measure_candidate  # noqa: E402
from tools.judge import Judge  # noqa: E402
from tools.measure_settings import MeasureSettings  # noqa: E402

TASK = "t"
EFFECTS = ((0.06, 0.06), (0.06, 0.2), (0.06, 0.33), (0.06, 0.5))  # (p0, p1): the first is a null repair
CAPS = (8, 16, 32, 64)
HISTORIES = (0, 8, 16, 32, 64)  # cached unhinted training rollouts of the task (0: a fresh control only)
MAIN_HISTORY = 32  # the main table's history: 8 training groups of 4
HIT, MISS = "ok KEY answer", "ok answer"


def _task(hit_reward: float) -> Task:
    w = 5.0
    return Task(
        id=TASK,
        domain="sim",
        prompt=[Message(role="user", content="Question?")],
        criteria=[
            Criterion(
                id="c1", text="says KEY", weight=w, kind="essential", check={"type": "contains_any", "phrases": ["KEY"]}
            ),
            Criterion(
                id="c2",
                text="never met",
                weight=w * (1 - hit_reward) / hit_reward,
                kind="important",
                check={"type": "contains_any", "phrases": ["NEVER-MET"]},
            ),
        ],
        audit_criteria=[
            Criterion(
                id="a1", text="ok", weight=1.0, kind="essential", check={"type": "contains_any", "phrases": ["ok"]}
            )
        ],
    )


class SimPolicy:
    """Frozen-policy stand-in: a hinted prompt's rollout hits with p1, an unhinted one with p0."""

    name = "sim"

    def __init__(self, p0: float, p1: float, rng: np.random.Generator):
        self.p0, self.p1, self.rng = p0, p1, rng

    def sample(self, messages_batch, n=1, max_tokens=48, temperature=1.0, seed=None):
        out = []
        for conv in messages_batch:
            p = self.p1 if "Hint:" in conv[-1]["content"] else self.p0
            out.append([HIT if h else MISS for h in self.rng.random(n) < p])
        return out


def one_decision(
    state: HarnessState,
    p0: float,
    p1: float,
    cap: int,
    history: int,
    ctx: EvolverContext,
    cfg: DetectorConfig,
    rng: np.random.Generator,
    sample_k: int,
) -> tuple[bool, int, int]:
    """(accepted, candidate rollouts spent, fresh control rollouts drawn) of one simulated measurement."""
    event = FailureEvent(
        id=f"collapse_low:{TASK}:1",
        type="collapse_low",
        task_id=TASK,
        step=1,
        window=[0, 1],
        window_hits=2,
        confirmed=True,
        stats={"harness_version": 0},
    )
    update = HarnessUpdate.model_validate(
        {
            "interface": "guidance",
            "event_id": event.id,
            "rationale": "power",
            "ops": [{"op": "add_hint", "task_id": TASK, "hint": {"id": "h1", "text": "mention the key term"}}],
        }
    )
    # The control pool is keyed by the prompt it was sampled with: the task's unhinted prompt here.
    key = prompt_digest(render_prompt(state.task(TASK), []))
    cached = {key: [HIT if h else MISS for h in rng.random(history) < p0]} if history else None
    settings = MeasureSettings(
        sample_k=sample_k,
        sample_k_max=cap,
        alpha=ctx.critic_alpha,
        step=1,
        seed=int(rng.integers(1 << 30)),
        detector_config=cfg,
    )
    m = measure_candidate(
        state,
        update,
        SimPolicy(p0, p1, rng),
        Judge(None),
        settings,
        rule=stop_rule(event, update, ctx),
        control_history=cached,
    )
    crit = judge_measurement(event, update, m, ctx)
    assert m.sequential is not None and m.sequential.test == "exact"
    fresh = m.sequential.control_n - history if m.sequential.control_n is not None else 0
    return crit.measured_ok, m.k, fresh


def _cell(state, p0, p1, cap, history, reps, ctx, cfg, rng, sample_k) -> dict:
    runs = [one_decision(state, p0, p1, cap, history, ctx, cfg, rng, sample_k) for _ in range(reps)]
    acc = sum(a for a, _, _ in runs) / reps
    cell = {
        "p0": p0,
        "p1": p1,
        "sample_k_max": cap,
        "history": history,
        "accept_rate": round(acc, 3),
        "mean_rollouts_per_side": round(sum(k for _, k, _ in runs) / reps, 1),
        "fresh_control_rollouts": round(sum(f for _, _, f in runs) / reps, 1),
    }
    print(
        f"[critic-power] hit rate {p0} -> {p1}, cap {cap}, history {history}: accepted {acc:.3f} "
        f"(candidate {cell['mean_rollouts_per_side']} rollouts, fresh control {cell['fresh_control_rollouts']})",
        flush=True,
    )
    return cell


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=400, help="simulated measurements per cell")
    ap.add_argument("--caps", default=",".join(map(str, CAPS)), help="sample_k_max values, comma-separated")
    ap.add_argument(
        "--histories",
        default=",".join(map(str, HISTORIES)),
        help="cached training rollouts of the task, comma-separated (swept at cap 16; '': no sweep)",
    )
    ap.add_argument("--history", type=int, default=MAIN_HISTORY, help="cached rollouts in the main table")
    ap.add_argument("--sample-k", type=int, default=4, help="rollouts per side at the first look")
    ap.add_argument("--hit-reward", type=float, default=0.625, help="reward of a rollout that meets the criterion")
    ap.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="the critic's error rate (evolver.critic_alpha; default the context's): a screen that training's "
        "confirm/revert grade backs runs at a larger one",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the JSON summary here (its `before` field is kept)")
    args = ap.parse_args(argv)
    caps = [int(c) for c in args.caps.split(",")]
    histories = [int(h) for h in args.histories.split(",") if h.strip()]  # "": no history sweep
    ctx, cfg = EvolverContext(), DetectorConfig()
    if args.alpha is not None:
        ctx = replace(ctx, critic_alpha=args.alpha)
    state = HarnessState.from_tasks([_task(args.hit_reward)])
    rng = np.random.default_rng(args.seed)
    uptime0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    t0, load0 = time.time(), os.getloadavg()[0]
    cells = [
        _cell(state, p0, p1, cap, args.history, args.reps, ctx, cfg, rng, args.sample_k)
        for p0, p1 in EFFECTS
        for cap in caps
    ]
    sweep = [
        _cell(state, p0, p1, 16, h, args.reps, ctx, cfg, rng, args.sample_k)
        for p0, p1 in (EFFECTS[0], EFFECTS[2])
        for h in histories
    ]
    before = None
    if args.out and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        before = old.get("before") or {
            k: old[k]
            for k in ("command", "rule", "reps", "resamples", "seconds", "load_start", "load_end", "machine", "cells")
            if k in old
        }
    out = {
        "command": "benchmarks/critic_power.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "rule": (
            f"collapse_low: exact group-sequential hit test (alpha {ctx.critic_alpha} spent linearly over the "
            f"looks, futility for a rate gain of {ctx.min_rate_gain}) + point rule std gain >= {ctx.min_std_gain}"
        ),
        "reps": args.reps,
        "sample_k": args.sample_k,
        "hit_reward": args.hit_reward,
        "history": args.history,
        "seconds": round(time.time() - t0, 1),
        "load_start": round(load0, 2),
        "load_end": round(os.getloadavg()[0], 2),
        "uptime_start": uptime0,
        "uptime_end": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "cells": cells,
        "history_sweep_cap16": sweep,
        "before": before,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
