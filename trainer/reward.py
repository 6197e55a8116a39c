"""`RubricReward`: the GRPO reward function, scoring rollouts against the harness's rubric criteria.

TRL 1.16 calls it once per generation batch as
`await reward(prompts=, completions=, completion_ids=, task_id=[...], harness_version=[...], hinted=[...],
hint_text=[...], sample_step=[...], trainer_state=, log_extra=, log_metric=)`; rows of one group are
`num_generations` consecutive rows with the same task (TRL's repeat of our one-row-per-group stream).

Which rubric? Each row is scored with the criteria of the harness version **the row carries** (the
version it was sampled under), not the newest one. Rows are drawn at step time (trainer.sampler), so
a batch holds one version and an update reaches the rewards of the very next step, the same batch in
which its prompts/hints appear; scoring by the row's version keeps that true for any row that was
drawn before a commit, and mixing rubrics within a group would make advantages meaningless.

Per group it builds `harness.detector.GroupStats`, feeds the detector (events go to the run's
pending list, `events.jsonl` and memory), records a group summary with the best and worst responses
in the memory, and tells the sampler whether the group was dead (dynamic-filtering baseline). Per
batch it records the step metrics the callback writes to `metrics.jsonl`.

It is an async callable (the judge is async) and picklable: pickling keeps only the config; the
unpickled copy finds the live run of the same `run_dir` in this process or opens it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import numpy as np

from harness.detector import GroupStats, RolloutRecord
from trainer.config import RunConfig, config_from_dict

log = logging.getLogger(__name__)


def completion_text(completion: Any) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"unexpected completion format: {type(completion).__name__} {completion!r:.80}")


class RubricReward:
    __name__ = "rubric"  # TRL names metrics after it: rewards/rubric/mean

    def __init__(self, run: Any, num_generations: int) -> None:
        self._run = run
        self._cfg: RunConfig = run.cfg
        self.num_generations = num_generations
        self._judge_seen: dict[str, int] = {}

    # -- pickling: config only ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self._cfg.to_dict(), "num_generations": self.num_generations}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._cfg = config_from_dict(state["config"])
        self.num_generations = state["num_generations"]
        self._run = None
        self._judge_seen = {}

    @property
    def run(self) -> Any:
        if self._run is None:
            from trainer.run import HarnessRun

            self._run = HarnessRun.lookup(self._cfg.run_dir) or HarnessRun(self._cfg)
        return self._run

    # -- the reward -----------------------------------------------------------------------------------
    async def __call__(self, prompts: list, completions: list, task_id: list[str], harness_version: list[int],
                       hinted: list[bool] | None = None, hint_text: list[str] | None = None,
                       trainer_state: Any = None, log_extra: Any = None, log_metric: Any = None,
                       **_: Any) -> list[float]:
        run = self.run
        n = len(completions)
        g = self.num_generations
        if n % g:
            raise ValueError(f"reward got {n} completions, not a multiple of num_generations={g}")
        # global_step is the step *before* the update these rollouts feed (spike fact): label with step+1.
        step = (trainer_state.global_step if trainer_state is not None else run.sampler.step if run.sampler else 0) + 1
        texts = [completion_text(c) for c in completions]
        hinted = hinted or [False] * n
        hint_text = hint_text or [""] * n

        groups = []
        for start in range(0, n, g):
            idx = list(range(start, start + g))
            tids = {task_id[i] for i in idx}
            versions = {int(harness_version[i]) for i in idx}
            if len(tids) != 1 or len(versions) != 1:
                raise ValueError(f"rows {start}..{start + g - 1} are not one group (tasks {tids}, versions {versions}); "
                                 "is shuffle_dataset off and the sampler yielding one row per group?")
            groups.append((idx, tids.pop(), versions.pop()))

        scored = await asyncio.gather(*(self._score_group(run, texts, idx, tid, v) for idx, tid, v in groups))
        rewards = [0.0] * n
        verdict_col: list[str] = [""] * n
        stats_list: list[GroupStats] = []
        for (idx, tid, version), (results, audits) in zip(groups, scored):
            state = run.state_for(version)
            criteria = state.criteria(tid)
            records = []
            for j, i in enumerate(idx):
                res = results[j]
                rewards[i] = float(res.score)
                met = {cid: v.met for cid, v in res.verdicts.items() if v.decided}
                verdict_col[i] = json.dumps(met, sort_keys=True)
                records.append(RolloutRecord(text=texts[i], reward=rewards[i], verdicts=met, audit=audits[j],
                                             hinted=bool(hinted[i]), hint_texts=[h for h in hint_text[i].split("\n") if h]))
            stats = GroupStats.from_rollouts(tid, step, records, criteria=criteria, harness_version=version)
            stats_list.append(stats)
            self._observe(run, stats, records, version)

        batch = run.detector.batch(stats_list)
        judge_metrics = run.judge.stats.as_metrics()
        new_warnings = {k: v - self._judge_seen.get(k, 0) for k, v in judge_metrics.items()}
        self._judge_seen = dict(judge_metrics)
        warn_count = sum(new_warnings[k] for k in ("judge/malformed", "judge/errors", "judge/unmet_after_retries",
                                                   "judge/check_failures") if k in new_warnings)
        versions = sorted({v for _, _, v in groups})
        run.record_step(step, {
            "step": step, "reward": float(np.mean(rewards)), "reward_std": float(np.mean([s.std for s in stats_list])),
            "dead_share": batch.dead_share, "n_groups": batch.n_groups, "harness_version": versions[-1],
            "harness_versions": versions, "hinted_share": float(np.mean([bool(h) for h in hinted])),
            "tasks": [tid for _, tid, _ in groups], "group_means": [s.mean for s in stats_list],
            "group_stds": [s.std for s in stats_list],
            "judge_warnings": warn_count, **{k: v for k, v in new_warnings.items() if v},
        })
        if log_extra is not None:
            log_extra("task_id", list(task_id))
            log_extra("harness_version", [int(v) for v in harness_version])
            log_extra("verdicts", verdict_col)
        if log_metric is not None:
            log_metric("harness/version", float(versions[-1]))
            log_metric("harness/dead_share", batch.dead_share)
            log_metric("judge/warnings", float(warn_count))
            for s in stats_list:
                for cid, rate in s.pass_rates.items():
                    log_metric(f"pass_rate/{s.task_id}/{cid}", rate)
        return rewards

    async def _score_group(self, run: Any, texts: list[str], idx: list[int], task_id: str, version: int):
        state = run.state_for(version)
        task = state.task(task_id)
        responses = [texts[i] for i in idx]
        # The judge sees the task's own prompt, without hints: hints guide sampling, they are not the question.
        results = await run.judge.score(task.criteria, task.user_prompt, responses)
        audits = await run.judge.audit(task, responses)
        return results, audits

    def _observe(self, run: Any, stats: GroupStats, records: list[RolloutRecord], version: int) -> None:
        events = run.detector.observe(stats)
        if events:
            run.add_events(events, harness_version=version)
        if run.sampler is not None:
            run.sampler.observe_group(stats.task_id, run.detector.is_dead(stats))
        if run.memory is not None:
            order = sorted(range(len(records)), key=lambda i: records[i].reward)
            run.memory.add_group(stats, best=records[order[-1]], worst=records[order[0]], harness_version=version,
                                 domain=run.state_for(version).task(stats.task_id).domain,
                                 group_index=self._group_index(run, stats), texts=[r.text for r in records])

    @staticmethod
    def _group_index(run: Any, stats: GroupStats) -> int:
        # The same task may be drawn twice in one batch; memory ids are (task, step, index).
        key = (stats.task_id, stats.step)
        with run.lock:
            run.group_counts[key] = run.group_counts.get(key, -1) + 1
            return run.group_counts[key]
