"""The pre-flight round: probe the pool on the initial policy and repair its dead tasks before step 1.

A task whose groups are dead from the start (all-low, all-high or flat: zero reward variance, zero advantage) wastes
every group it is drawn for until a round repairs it, and the first regular round comes only after
`harness.evolve_every` steps. With `harness.preflight` the trainer, before the first training step
(`HarnessCallback.on_train_begin` of a run at step 0, `run_preflight`), samples `harness.preflight_groups` groups
per pool task from the initial policy (`train.num_generations` rollouts each, the prompt as step 1 would render it,
training's temperature and length), scores them with the run's judge and feeds each to the run exactly as a
training group (`trainer.reward.observe_group`: the detector, the sampler and memory, labelled step 0). The task's
liveness estimate (harness/liveness.py) counts all its probe rollouts together: the share of its groups of G that
would be dead. With more than one group, a dead probe group on a task whose share is below `DEAD_SHARE` is dropped
as chance (the console and rounds.jsonl name it). These groups are the first cached groups in memory, so the
critic's control and training's grading (trainer/provisional.py) read them like any training group. The detector
treats them as probes: a dead probe group fires its event on the first visit, flat included
(`harness.detector.Detector.observe`). Then the pause runs one ordinary round at step 0 (`EvolverPause.evolve`),
with the same screen, provisional grading, rounds.jsonl record, console lines and Studio thread as any round.

Budget: the probes cost `preflight_groups x min(pool, harness.preflight_max_tasks)` groups of generation (a pool
larger than that is probed on a seeded uniform sample of that many tasks, named in the log and in rounds.jsonl;
with `harness.max_extra_generation` the sample is no larger than the run's probe budget pays for, and the round gets
what the probes left of it, trainer/probe_budget.py);
the round takes every task it found dead, and at least `harness.max_events` events in all (a regular round's bound
is sized for its pause between steps; this round's purpose is the dead tasks); like any round it is cancelled and
rolled back past `harness.max_pause_s`. The probes' seconds are counted in the round's `pause_s`.

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
import time
import traceback
from typing import TYPE_CHECKING, Any

from graphs.round_record import RoundRecord
from harness.detector import GroupStats, RolloutRecord
from harness.guidance import prompt_digest, render_prompt, visible_hints
from tools.judge import run_sync
from tools.reward_parts import combined_reward, parse_parts
from trainer import probe_budget
from trainer.frozen import live_endpoint
from trainer.io import append_jsonl
from trainer.reward import observe_group
from trainer.round_events import EVENT_CLASS

if TYPE_CHECKING:
    from tools.endpoint import PolicyEndpoint
    from trainer.evolver_round import EvolverPause
    from trainer.harness_run import HarnessRun

log = logging.getLogger(__name__)

PREFLIGHT_STEP = 0  # the probes' step label: the initial policy, before the first update
# With several probe groups per task, a dead probe group is repaired only when the task's probe rollouts put its
# dead rate at or above this: most of its groups would be dead (the majority rule of trainer.round_events.live_check).
DEAD_SHARE = 0.5


def probe_tasks(run: HarnessRun, processes: int = 1) -> tuple[list[str], int]:
    """(the pool tasks the pre-flight probes, the pool's size).

    All of them, or a seeded uniform sample of `harness.preflight_max_tasks`, or of as many as the run's probe
    budget pays for (`harness.max_extra_generation`, trainer/probe_budget.py), whichever is fewer.
    """
    pool = sorted(run.state.drawable_task_ids(PREFLIGHT_STEP))
    limit = run.cfg.harness.preflight_max_tasks
    budget = probe_budget.allowed(run.cfg, processes)
    if budget is not None:
        limit = min(limit, budget // (run.cfg.harness.preflight_groups * run.cfg.train.num_generations))
    if len(pool) <= limit:
        return pool, len(pool)
    return sorted(random.Random(run.cfg.train.seed + 3).sample(pool, limit)), len(pool)


def _seed(base: int, group: int) -> int:
    # A seed of the probes' own: never one the critic or training draws with for the same prompt.
    return int(hashlib.sha256(f"preflight:{base}:{group}".encode()).hexdigest()[:8], 16)


def probe(
    run: HarnessRun, endpoint: PolicyEndpoint, tasks: list[str], groups: int = 1
) -> list[tuple[GroupStats, list[RolloutRecord]]]:
    """`groups` scored groups per task from the initial policy, as training would score them at step 1 (main process).

    Each group is its own draw (hints, seed), as each training visit is. The g-th group of every task is sampled in
    one request (distinct prompts, one seed per request): a batch generates many times faster than one group at a
    time on the local policy, and the order of tasks in it changes nothing a rank observes. Returned task by task.
    """
    cfg, state = run.cfg, run.state
    parts = parse_parts(cfg.train.rewards)
    hint_rng = random.Random(cfg.train.seed + 2)  # not the sampler's guidance stream
    by_task: dict[str, list[tuple[GroupStats, list[RolloutRecord]]]] = {tid: [] for tid in tasks}
    for g in range(groups):
        shown = {tid: visible_hints(state.guidance_for(tid), PREFLIGHT_STEP, hint_rng) for tid in tasks}
        prompts = [
            render_prompt(state.task(tid), shown[tid], state.guidance_for(tid).schedule.placement) for tid in tasks
        ]
        sampled = endpoint.sample(
            prompts,
            n=cfg.train.num_generations,
            max_tokens=cfg.train.max_completion_length,
            temperature=cfg.train.temperature,
            seed=_seed(cfg.train.seed, g),
        )
        for tid, texts, prompt in zip(tasks, sampled, prompts):
            task, hints = state.task(tid), shown[tid]
            results = run.judge.score_sync(task.criteria, task.user_prompt, texts)
            audits = run_sync(run.judge.audit(task, texts))
            # Scored as training scores its groups: the rubric plus the run's reward parts (tools.reward_parts).
            combined = combined_reward(
                [res.score for res in results], parts, task=task, prompts=[prompt] * len(texts), texts=texts
            )
            records = [
                RolloutRecord(
                    text=t,
                    reward=combined.rewards[j],
                    verdicts={cid: v.met for cid, v in res.verdicts.items() if v.decided},
                    audit=a,
                    hinted=bool(hints),
                    hint_texts=[h.text for h in hints],
                    rubric=combined.rubric[j] if parts else None,
                    parts={name: v[j] for name, v in combined.parts.items()},
                )
                for j, (t, res, a) in enumerate(zip(texts, results, audits))
            ]
            stats = GroupStats.from_rollouts(
                tid,
                PREFLIGHT_STEP,
                records,
                criteria=state.criteria(tid),
                harness_version=state.version,
                prompt_digest=prompt_digest(prompt),
            )
            by_task[tid].append((stats, records))
        log.info("pre-flight: probe group %d of %d sampled for %d tasks", g + 1, groups, len(tasks))
    for i, tid in enumerate(tasks, 1):
        line = ", ".join(f"mean {s.mean:.2f} std {s.std:.2f}" for s, _ in by_task[tid])
        log.info("pre-flight %d/%d: %s %s", i, len(tasks), tid, line)
    return [group for tid in tasks for group in by_task[tid]]


def observe(run: HarnessRun, groups: list[tuple[GroupStats, list[RolloutRecord]]]) -> dict[str, Any]:
    """Feed the probe groups to the run (every rank, in the same order) and summarise them for rounds.jsonl.

    Each group goes to the detector, sampler and memory like a training group; the liveness estimate counts each
    task's probe rollouts together (`harness.liveness.Liveness.observe_probe`). With several groups per task, a
    dead probe group's event is dropped when the task's rollouts put its dead rate below `DEAD_SHARE`: one dead
    group of several is the chance a mostly-live task has, and a repair cannot remove chance.
    """
    eps = run.detector.config.eps
    by_task: dict[str, list[tuple[GroupStats, list[RolloutRecord]]]] = {}
    for stats, records in groups:
        observe_group(run, stats, records, int(stats.harness_version), probe=True)
        by_task.setdefault(stats.task_id, []).append((stats, records))
    dead, shares = [], {}
    for tid, tgroups in by_task.items():
        rewards = [r.reward for _, records in tgroups for r in records]
        shares[tid] = round(run.liveness.observe_probe(tid, rewards, len(tgroups[0][1]), eps), 4)
        if any(run.detector.is_dead(s) for s, _ in tgroups):
            dead.append(tid)
    chance = {t for t in dead if len(by_task[t]) > 1 and shares[t] < DEAD_SHARE}
    if chance:
        log.info(
            "pre-flight: dead probe groups on %s left unrepaired: their tasks' probes put the dead rate below %.2f",
            ", ".join(sorted(chance)),
            DEAD_SHARE,
        )
        with run.lock:
            run.pending_events = [
                e
                for e in run.pending_events
                if not (e.step == PREFLIGHT_STEP and e.task_id in chance and EVENT_CLASS.get(e.type) == "dead")
            ]
    return {
        "probed": list(by_task),
        "groups_per_task": max((len(g) for g in by_task.values()), default=0),
        "group_means": [round(s.mean, 4) for s, _ in groups],
        "group_stds": [round(s.std, 4) for s, _ in groups],
        "dead_share": shares,
        "dead": [t for t in dead if t not in chance],
        **({"dead_by_chance": sorted(chance)} if chance else {}),
        "rollouts": sum(len(r) for _, r in groups),
    }


def _endpoint(pause: EvolverPause) -> PolicyEndpoint:
    """The initial policy to probe.

    The round's own frozen policy, or the live model when the round runs on a LangGraph server (which gets the
    policy as a folder).
    """
    endpoint, _ = pause.publish_policy(PREFLIGHT_STEP)
    if endpoint is not None:
        return endpoint
    if pause.trainer is None:
        raise RuntimeError("the pre-flight probes need the trainer (HarnessCallback.trainer is None)")
    return live_endpoint(pause.trainer, PREFLIGHT_STEP)


def run_preflight(pause: EvolverPause) -> float:
    """The pre-flight round before step 1 (every rank calls it); returns its seconds.

    The main process probes the pool on the initial policy; every rank observes the same probe groups in the same
    order (their detectors and samplers stay identical), then the round runs as `pause.evolve(0)`. Probes that
    fail are a failed round: logged, recorded in rounds.jsonl, counted towards `harness.max_failed_rounds`, and
    training starts on the unrepaired harness.
    """
    run = pause.run
    t0 = time.monotonic()
    groups: list[Any] = []
    summary: dict[str, Any] = {}
    if pause.is_main():
        tasks, pool = probe_tasks(run, pause.num_processes())
        if len(tasks) < pool:
            log.warning(
                "pre-flight: the pool has %d tasks; probing a seeded sample of %d (harness.preflight_max_tasks, "
                "or what harness.max_extra_generation pays for)",
                pool,
                len(tasks),
            )
        n_groups = run.cfg.harness.preflight_groups
        log.info("pre-flight: probing %d tasks x %d groups on the initial policy before step 1", len(tasks), n_groups)
        summary["pool_size"] = pool
        if not tasks:
            log.warning("pre-flight: harness.max_extra_generation pays for no probe group; nothing is probed")
        try:
            groups = probe(run, _endpoint(pause), tasks, n_groups) if tasks else []
        except Exception as e:  # noqa: BLE001 - like a failed round: training goes on, logged in full
            log.error("pre-flight probes failed; training starts on the unrepaired harness: %s", e)
            summary["error"] = f"{type(e).__name__}: {e}"
            summary["traceback"] = traceback.format_exc(limit=8)
    # Every rank takes the same branch below (a round, or a failed round's count): both hold collectives.
    groups, error = pause.broadcast((groups, summary.get("error")))
    if error is not None:
        summary["error"] = error
    summary.update(observe(run, groups))
    summary["probe_s"] = round(time.monotonic() - t0, 2)
    if "error" not in summary:
        return pause.evolve(PREFLIGHT_STEP, preflight=summary)
    if pause.is_main():
        record = {"step": PREFLIGHT_STEP, "n_accepted": 0, "error": summary["error"]}
        append_jsonl(run.paths.rounds, record | {"preflight": summary, "pause_s": summary["probe_s"], "reports": []})
    pause.count_failure(PREFLIGHT_STEP, RoundRecord(step=PREFLIGHT_STEP, error=summary["error"]), run.state.version)
    return summary["probe_s"]
