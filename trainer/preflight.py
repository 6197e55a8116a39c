"""The pre-flight round: probe the pool on the initial policy and repair its dead tasks before step 1.

A task whose groups are dead from the start (all-low, all-high or flat: zero reward variance, zero advantage) wastes
every group it is drawn for until a round repairs it, and the first regular round comes only after
`harness.evolve_every` steps. With `harness.preflight` the trainer, before the first training step
(`HarnessCallback.on_train_begin` of a run at step 0), samples one group per pool task from the initial policy
(`train.num_generations` rollouts, the prompt as step 1 would render it, training's temperature and length), scores
it with the run's judge and feeds it to the run exactly as a training group (`trainer.reward.observe_group`: the
detector, the sampler and memory, labelled step 0). These groups are the first cached groups in memory, so the
critic's control and training's grading (trainer/provisional.py) read them like any training group. The detector
treats them as probes: a dead probe group fires its event on the first visit, flat included
(`harness.detector.Detector.observe`). Then the pause runs one ordinary round at step 0 (`EvolverPause.evolve`),
with the same screen, provisional grading, rounds.jsonl record, console lines and Studio thread as any round.

Budget: the probes cost `min(pool, harness.preflight_max_tasks)` groups of generation (a pool larger than that is
probed on a seeded uniform sample of that many tasks, named in the log and in rounds.jsonl); the round is bounded
like any round by `harness.max_events` and `harness.max_pause_s`. The probes' seconds are counted in the round's
`pause_s`.

Resume: the pre-flight runs only when training starts at step 0. A run resumed from a checkpoint (step >= 1) has
it already in its harness and memory; a run killed before its first checkpoint cannot be resumed and starts over
(`--overwrite`), so the pre-flight never runs twice into one run folder. The probes use their own random streams:
the training sampler's task and hint draws are the same as in a run without a pre-flight until the round commits
(with `harness.dynamic_filtering` a dead probe also lowers its task's weight, as a dead training group would).
"""

from __future__ import annotations

import hashlib
import logging
import random
from typing import TYPE_CHECKING, Any

from harness.detector import GroupStats, RolloutRecord
from harness.guidance import render_prompt, visible_hints
from measure.judge import run_sync
from trainer.reward import observe_group

if TYPE_CHECKING:
    from measure.endpoint import PolicyEndpoint
    from trainer.harness_run import HarnessRun

log = logging.getLogger(__name__)

PREFLIGHT_STEP = 0  # the probes' step label: the initial policy, before the first update


def probe_tasks(run: HarnessRun) -> tuple[list[str], int]:
    """(the pool tasks the pre-flight probes, the pool's size).

    All of them, or a seeded uniform sample of `harness.preflight_max_tasks`.
    """
    pool = sorted(run.state.drawable_task_ids(PREFLIGHT_STEP))
    limit = run.cfg.harness.preflight_max_tasks
    if len(pool) <= limit:
        return pool, len(pool)
    return sorted(random.Random(run.cfg.train.seed + 3).sample(pool, limit)), len(pool)


def _seed(base: int, task_id: str) -> int:
    # A per-task seed of its own: never one the critic or training draws with for the same prompt.
    return int(hashlib.sha256(f"preflight:{base}:{task_id}".encode()).hexdigest()[:8], 16)


def probe(run: HarnessRun, endpoint: PolicyEndpoint, tasks: list[str]) -> list[tuple[GroupStats, list[RolloutRecord]]]:
    """One scored group per task from the initial policy, as training would score it at step 1 (main process)."""
    cfg, state = run.cfg, run.state
    hint_rng = random.Random(cfg.train.seed + 2)  # not the sampler's guidance stream
    out = []
    for i, tid in enumerate(tasks, 1):
        task, guidance = state.task(tid), state.guidance_for(tid)
        hints = visible_hints(guidance, PREFLIGHT_STEP, hint_rng)
        messages = render_prompt(task, hints, guidance.schedule.placement)
        texts = endpoint.sample(
            [messages],
            n=cfg.train.num_generations,
            max_tokens=cfg.train.max_completion_length,
            temperature=cfg.train.temperature,
            seed=_seed(cfg.train.seed, tid),
        )[0]
        results = run.judge.score_sync(task.criteria, task.user_prompt, texts)
        audits = run_sync(run.judge.audit(task, texts))
        records = [
            RolloutRecord(
                text=t,
                reward=float(res.score),
                verdicts={cid: v.met for cid, v in res.verdicts.items() if v.decided},
                audit=a,
                hinted=bool(hints),
                hint_texts=[h.text for h in hints],
            )
            for t, res, a in zip(texts, results, audits)
        ]
        stats = GroupStats.from_rollouts(
            tid, PREFLIGHT_STEP, records, criteria=state.criteria(tid), harness_version=state.version
        )
        out.append((stats, records))
        log.info("pre-flight %d/%d: %s mean %.2f std %.2f", i, len(tasks), tid, stats.mean, stats.std)
    return out


def observe(run: HarnessRun, groups: list[tuple[GroupStats, list[RolloutRecord]]]) -> dict[str, Any]:
    """Feed the probe groups to the run (every rank, in the same order) and summarise them for rounds.jsonl."""
    dead = []
    for stats, records in groups:
        observe_group(run, stats, records, int(stats.harness_version), probe=True)
        if run.detector.is_dead(stats):
            dead.append(stats.task_id)
    return {
        "probed": [s.task_id for s, _ in groups],
        "group_means": [round(s.mean, 4) for s, _ in groups],
        "group_stds": [round(s.std, 4) for s, _ in groups],
        "dead": dead,
        "rollouts": sum(len(r) for _, r in groups),
    }
