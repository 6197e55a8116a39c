"""How well the pre-flight finds the tasks the initial policy leaves dead, as a function of its probe groups.

For every task of a benchmark preset's training pool it samples `--groups` probe groups (G rollouts each) from the
initial policy exactly as the pre-flight does (`trainer.preflight.probe`: the prompt step 1 renders, training's
temperature and length, the run's judge), so each task has k = groups x G scored rollouts. From them:

- `dead_rate`: the share of the C(k, G) groups of G drawable from the k rollouts with zero reward variance
  (`harness.liveness.dead_subset_share`), the reference estimate of the task's dead rate at step 1;
- `flag_p[n]`: the probability that a pre-flight of n groups (`harness.preflight_groups=n`) hands the task to the
  round, over random choices of n disjoint groups from the k rollouts: for n = 1, a dead group; for n > 1, a dead
  group and a share of at least `trainer.preflight.DEAD_SHARE` over the n groups' rollouts
  (`trainer.preflight.observe`);
- the generation cost of each n as a share of the preset's trained groups (steps x batch / G).

    .venv/bin/python benchmarks/preflight_power.py --preset smollm2-40 --seeds 0 1 --groups 4 \
        --out benchmarks/results/preflight/power.json

Tasks with `dead_rate >= 0.5` are the ones the round should get; a good probe flags them with high probability
and the others with low. The output keeps the raw rewards, so other rules can be scored without sampling again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:  # the bench_* siblings import each other by their bare names
    sys.path.insert(1, str(HERE))

from bench_run import pick_eval_tasks  # noqa: E402
from bench_spec import PRESETS  # noqa: E402

from harness.liveness import dead_subset_share  # noqa: E402
from trainer.config_loader import load_config  # noqa: E402
from trainer.preflight import DEAD_SHARE, probe  # noqa: E402

DRAWS = 4000  # random choices of disjoint groups per (task, n)


def flag_probability(rewards: list[float], group: int, n: int, eps: float, rng: random.Random) -> float:
    """P(a pre-flight of `n` groups of `group` flags the task), over random disjoint groups from `rewards`."""
    if n == 1:
        return dead_subset_share(rewards, group, eps)
    hits = 0
    for _ in range(DRAWS):
        pick = rng.sample(rewards, n * group)
        groups = [pick[i * group : (i + 1) * group] for i in range(n)]
        any_dead = any(float(np.std(g)) < eps for g in groups)
        hits += any_dead and dead_subset_share(pick, group, eps) >= DEAD_SHARE
    return hits / DRAWS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--preset", default="smollm2-40", choices=sorted(PRESETS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0], help="train.seed values (the probes' seeds)")
    ap.add_argument("--groups", type=int, default=4, help="probe groups per task (k = groups x G rollouts)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    if args.groups < 2:
        ap.error("--groups must be >= 2: the reference needs more rollouts than one pre-flight group")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from memory.store import TrainingMemory
    from tools.local_endpoint import LocalEndpoint
    from trainer.grpo import load_policy
    from trainer.harness_run import HarnessRun

    preset = PRESETS[args.preset]
    cfg_path = ROOT / preset.config
    base = load_config(cfg_path)
    suite = str(ROOT / base.data.suite) if not Path(base.data.suite).is_absolute() else base.data.suite
    pool = pick_eval_tasks(suite, preset.train_per_domain, split="train")
    overrides = [
        *preset.extra,
        f"train.batch_size={preset.batch}",
        f"train.num_generations={preset.group}",
        f"train.max_completion_length={preset.max_tokens}",
        f"data.tasks=[{','.join(pool)}]",
    ]
    t0 = time.time()
    load0 = os.getloadavg()
    out: dict = {
        "what": "pre-flight detection power: probe groups per task vs each task's dead rate on the initial policy",
        "command": "benchmarks/preflight_power.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, load average at start {load0[0]:.1f}",
        "preset": args.preset,
        "pool": pool,
        "group_size": preset.group,
        "trained_groups": preset.steps * preset.batch // preset.group,
        "seeds": {},
    }
    model = tok = None
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = load_config(cfg_path, [*overrides, f"train.seed={seed}", f"run_dir={tmp}/run"])
            if model is None:
                model, tok, _ = load_policy(cfg)
                model.eval()
            run = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
            try:
                endpoint = LocalEndpoint(model, tok, name="local:initial")
                ts = time.time()
                groups = probe(run, endpoint, pool, args.groups)
                probe_s = time.time() - ts
                eps = run.detector.config.eps
            finally:
                run.close()
        rng = random.Random(seed)
        tasks = {}
        for tid in pool:
            rewards = [r.reward for s, recs in groups if s.task_id == tid for r in recs]
            tasks[tid] = {
                "rewards": [round(x, 4) for x in rewards],
                "dead_rate": round(dead_subset_share(rewards, preset.group, eps), 4),
                "flag_p": {
                    str(n): round(flag_probability(rewards, preset.group, n, eps, rng), 4)
                    for n in range(1, args.groups // 2 + 1)
                },
            }
        out["seeds"][str(seed)] = {"probe_s": round(probe_s, 1), "tasks": tasks}
        print(f"seed {seed}: {probe_s:.0f} s", flush=True)
        for tid, t in tasks.items():
            print(f"  {tid}: dead rate {t['dead_rate']:.2f}  flag p {t['flag_p']}", flush=True)
    n_pool = len(pool)
    out["cost_share"] = {str(n): round(n * n_pool / out["trained_groups"], 4) for n in range(1, args.groups // 2 + 1)}
    out["runtime_s"] = round(time.time() - t0, 1)
    out["load_average_end"] = round(os.getloadavg()[0], 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
