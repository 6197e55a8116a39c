"""How often the critic accepts a repair of a dead group, as a function of the repair's true effect and of
the measurement budget (`sample_k_max`): the power curve behind the benchmark's "the critic accepted
nothing", and its false-accept rate on a repair that changes nothing.

It runs the critic's own decision code on simulated groups: `agents.critic.stop_rule` (the collapse_low
rule: std gain >= min_std_gain with the group guards), `tools.sequential.looks` / `p_pass` / `decide`
(bootstrap p_pass at each look, Bonferroni over the looks), and the point-estimate rule at the last look,
as `agents.critic.judge_measurement` combines them. Only the rollouts are simulated: each one meets the
task's rewarded criterion with probability p (reward `--hit-reward`, else 0), control p0, candidate p1,
audit constant, no leaks. Simplification: the candidate is one hinted stratum (the real hint schedule
mixes hinted and unhinted visits, which dilutes the effect further).

    .venv/bin/python benchmarks/critic_power.py --reps 200 --out benchmarks/results/critic/power.json

The default effects bracket what the benchmark measured on SmolLM2: a hint that lifted a dead task's hit
rate from about 1 in 16 to about 1 in 3 (replay in benchmarks/results/critic/replay_collapse_low.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.context import EvolverContext  # noqa: E402
from agents.critic import stop_rule  # noqa: E402
from harness.detector import DetectorConfig  # noqa: E402
from harness.types import FailureEvent, HarnessUpdate  # noqa: E402
from tools.group_metrics import Row, group_metrics  # noqa: E402
from tools.sequential import BOOTSTRAP, decide, looks, p_pass  # noqa: E402

TASK = "t"
EFFECTS = ((0.06, 0.06), (0.06, 0.2), (0.06, 0.33), (0.06, 0.5))  # (p0, p1): the first is a null repair
CAPS = (8, 16, 32, 64)


def _rows(hits: np.ndarray, lengths: np.ndarray, hit_reward: float) -> list[Row]:
    return [Row(text="", reward=hit_reward if h else 0.0, length=int(n), audit=0.75, verdicts={"c1": bool(h)},
                leak=False, repeat=1) for h, n in zip(hits, lengths)]


def one_decision(p0: float, p1: float, sample_k: int, cap: int, ctx: EvolverContext, cfg: DetectorConfig,
                 rng: np.random.Generator, resamples: int, hit_reward: float) -> tuple[bool, int]:
    """(accepted, rollouts per side spent) of one simulated sequential measurement."""
    event = FailureEvent(id=f"collapse_low:{TASK}:1", type="collapse_low", task_id=TASK, step=1, window=[0, 1],
                         window_hits=2, confirmed=True, stats={"harness_version": 0})
    update = HarnessUpdate.model_validate({"interface": "guidance", "event_id": event.id, "rationale": "power",
                                           "ops": [{"op": "add_hint", "task_id": TASK,
                                                    "hint": {"id": "h1", "text": "mention the key term"}}]})
    rule = stop_rule(event, update, ctx)
    ks = looks(sample_k, cap)
    per_look = ctx.critic_alpha / len(ks)
    hc, hd = rng.random(ks[-1]) < p0, rng.random(ks[-1]) < p1
    lc, ld = rng.integers(20, 48, ks[-1]), rng.integers(20, 48, ks[-1])
    for k in ks:
        c = [(1.0, False, _rows(hc[:k], lc[:k], hit_reward))]
        d = [(1.0, True, _rows(hd[:k], ld[:k], hit_reward))]
        decision = decide(p_pass(rule, c, d, False, (0, 1), cfg, rng, resamples), per_look)
        if decision != "undecided":
            break
    point = rule.holds(group_metrics(TASK, 0, c, cfg), group_metrics(TASK, 1, d, cfg), False)
    return decision == "pass" and point, k


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200, help="simulated measurements per (effect, cap) cell")
    ap.add_argument("--caps", default=",".join(map(str, CAPS)), help="sample_k_max values, comma-separated")
    ap.add_argument("--sample-k", type=int, default=4, help="rollouts per side at the first look")
    ap.add_argument("--resamples", type=int, default=BOOTSTRAP, help="bootstrap resamples per look (the critic's)")
    ap.add_argument("--hit-reward", type=float, default=0.625, help="reward of a rollout that meets the criterion")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the JSON summary here")
    args = ap.parse_args(argv)
    caps = [int(c) for c in args.caps.split(",")]
    ctx, cfg = EvolverContext(), DetectorConfig()
    rng = np.random.default_rng(args.seed)
    t0, load0 = time.time(), os.getloadavg()[0]
    cells = []
    for p0, p1 in EFFECTS:
        for cap in caps:
            runs = [one_decision(p0, p1, args.sample_k, cap, ctx, cfg, rng, args.resamples, args.hit_reward)
                    for _ in range(args.reps)]
            acc = sum(a for a, _ in runs) / len(runs)
            cells.append({"p0": p0, "p1": p1, "sample_k_max": cap, "accept_rate": round(acc, 3),
                          "mean_rollouts_per_side": round(sum(k for _, k in runs) / len(runs), 1)})
            print(f"[critic-power] hit rate {p0} -> {p1}, cap {cap}: accepted {acc:.2f} "
                  f"(mean {cells[-1]['mean_rollouts_per_side']} rollouts/side)", flush=True)
    out = {"command": "benchmarks/critic_power.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "rule": f"collapse_low: std gain >= {ctx.min_std_gain}, sequential alpha {ctx.critic_alpha}",
           "reps": args.reps, "resamples": args.resamples, "sample_k": args.sample_k, "hit_reward": args.hit_reward,
           "seconds": round(time.time() - t0, 1), "load_start": round(load0, 2), "load_end": round(os.getloadavg()[0], 2),
           "machine": f"{platform.machine()}, {os.cpu_count()} cpus", "cells": cells}
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
