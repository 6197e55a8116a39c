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

Reward parts beside the rubric (`train.rewards`, `tools.reward_parts`): each row's reward is
`combined_reward`'s rubric score plus the weighted parts, computed here, inside the one reward function TRL gets, so
GRPO's advantages are computed on exactly what the detector, memory (hence training's grading of accepted updates)
and the critic's probes (`tools.group_metrics.score_rows`, the same function) see. The group stats keep the rubric
score and each part per rollout; the step record has their means (`reward_rubric`, `reward_parts`).

Per group it builds `harness.detector.GroupStats`, feeds the detector (events go to the run's
pending list, `events.jsonl` and memory), records a group summary with the best and worst responses
in the memory, and tells the sampler whether the group was dead (dynamic-filtering baseline). Per
batch it records the step metrics the callback writes to `metrics.jsonl`.

Several processes: each rank scores its own slice of the batch, then the ranks' parts are gathered
(`all_ranks`, accelerate's `gather_object`) and every rank feeds every group, in the global batch's order,
to its detector and sampler: their state, and so the next draw, stays the same on all ranks (checked each
step with `HarnessSampler.fingerprint`); only the main process writes memory, events and metrics. The step's
metrics cover the whole batch and, with several processes, name each rank's tasks and harness versions
(`ranks`).

Judge failures: a verdict the judge could not give (an LLM judge failing after its retries, a check
timing out) is left out of the rollout's score, never counted unmet (`tools/judge.py`). The step counts
those verdicts (`judge_left_out`, `judge_left_out_share` of all the step's verdicts) and, above
`harness.max_judge_failure_share`, sets `judge_flagged` (the console prints a warning line for it):
such a step's rewards rest on fewer criteria than its rubric has. The same step record counts the responses
no positive criterion could be decided for (`unscoreable`: reward 0, flagged `unscoreable_flagged` above that
share of the step's responses) and the verdicts skipped for want of an LLM judge (`criteria_skipped`, flagged
`skipped_flagged` above that share of the step's verdicts); the console prints a line for each flag and the
report sums them.

It is an async callable (the judge is async) and picklable: pickling keeps only the config; the
unpickled copy finds the live run of the same `run_dir` in this process or opens it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.detector import GroupStats, RolloutRecord
from harness.guidance import prompt_digest
from tools.reward_parts import RewardPart, combined_reward, parse_parts
from trainer.config import RunConfig
from trainer.config_loader import config_from_dict
from trainer.harness_run import HarnessRun

log = logging.getLogger(__name__)


def completion_text(completion: Any) -> str:
    """TRL passes conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"unexpected completion format: {type(completion).__name__} {completion!r:.80}")


def _messages(prompt: Any) -> list[dict[str, str]]:
    """A TRL prompt as the messages a reward part reads (our dataset's prompts are conversational already)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]


@dataclass
class StepPart:
    """One process's part of a training step: its groups (stats + rollouts) and the counts the step's metrics sum.

    With several processes each scores its own slice of the batch; the parts are gathered so that every
    process observes every group (identical detector and dynamic-filtering state, hence identical draws) and
    the main process records the whole step (memory, events, metrics.jsonl)."""

    groups: list[tuple[GroupStats, list[RolloutRecord]]]
    rewards: list[float]
    hinted: list[bool]
    judge_counts: dict[str, int]  # judge stats accrued on this process during the step
    verdicts: int
    left_out: int  # verdicts the judge could not give (left out of the score)
    sampler: str | None = None  # HarnessSampler.fingerprint() after this step's draw


def all_ranks(part: StepPart) -> list[StepPart]:
    """Every process's part in rank order, through accelerate's public `gather_object`.

    That is an all-gather of pickled objects, a collective: every rank's reward calls it once per step, as TRL calls
    the reward on every rank.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [part]
    from accelerate.utils import gather_object

    return list(gather_object([part]))


class RubricReward:
    __name__ = "rubric"  # TRL names metrics after it: rewards/rubric/mean

    def __init__(self, run: HarnessRun, num_generations: int) -> None:
        self._run: HarnessRun | None = run
        self._cfg: RunConfig = run.cfg
        self._parts: tuple[RewardPart, ...] = parse_parts(run.cfg.train.rewards)
        self.num_generations = num_generations
        self._judge_seen: dict[str, int] = {}
        self._audit_s = 0.0  # audit time of the current call (overhead timer)

    # -- pickling: config only ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"config": self._cfg.to_dict(), "num_generations": self.num_generations}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._cfg = config_from_dict(state["config"])
        self._parts = parse_parts(self._cfg.train.rewards)
        self.num_generations = state["num_generations"]
        self._run = None
        self._judge_seen = {}
        self._audit_s = 0.0

    @property
    def run(self) -> HarnessRun:
        if self._run is None:
            self._run = HarnessRun.lookup(self._cfg.run_dir) or HarnessRun(self._cfg)
        return self._run

    # -- the reward -----------------------------------------------------------------------------------
    async def __call__(
        self,
        prompts: list,
        completions: list,
        task_id: list[str],
        harness_version: list[int],
        hinted: list[bool] | None = None,
        hint_text: list[str] | None = None,
        trainer_state: Any = None,
        log_extra: Any = None,
        log_metric: Any = None,
        **_: Any,
    ) -> list[float]:
        t_call = time.perf_counter()  # the harness's own work = this call minus the criteria scoring
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
        groups = self._groups(task_id, harness_version, n)

        t_score = time.perf_counter()
        scored = await asyncio.gather(*(self._score_group(run, texts, idx, tid, v) for idx, tid, v in groups))
        t_scored = time.perf_counter()
        rewards, verdict_col, mine = self._rollout_records(
            run, step, groups, scored, texts, hinted, hint_text, [_messages(p) for p in prompts], self._parts
        )
        parts = self._gather(run, step, mine, rewards, hinted, [res for results, _ in scored for res in results])
        stats_list: list[GroupStats] = []
        for part in parts:
            for stats, records in part.groups:
                stats_list.append(stats)
                observe_group(run, stats, records, int(stats.harness_version))

        record = self._step_record(step, parts, stats_list, run.detector.batch(stats_list))
        # Overhead timer: everything but the criteria scoring a plain reward also does (the hidden audit is the
        # harness's, so it counts); the sampler adds its own `sampler_s`.
        record["reward_overhead_s"] = (t_score - t_call) + (time.perf_counter() - t_scored) + self._audit_s
        self._audit_s = 0.0
        run.record_step(step, record)
        _log_step(record, stats_list, task_id, harness_version, verdict_col, log_extra, log_metric)
        return rewards

    def _groups(self, task_id: list[str], harness_version: list[int], n: int) -> list[tuple[list[int], str, int]]:
        """The batch's groups as (row indices, task id, harness version): `num_generations` consecutive rows each."""
        g = self.num_generations
        groups = []
        for start in range(0, n, g):
            idx = list(range(start, start + g))
            tids = {task_id[i] for i in idx}
            versions = {int(harness_version[i]) for i in idx}
            if len(tids) != 1 or len(versions) != 1:
                raise ValueError(
                    f"rows {start}..{start + g - 1} are not one group (tasks {tids}, versions {versions}); "
                    "is shuffle_dataset off and the sampler yielding one row per group?"
                )
            groups.append((idx, tids.pop(), versions.pop()))
        return groups

    @staticmethod
    def _rollout_records(
        run: HarnessRun,
        step: int,
        groups: list[tuple[list[int], str, int]],
        scored: list,
        texts: list[str],
        hinted: list[bool],
        hint_text: list[str],
        prompts: list[list[dict[str, str]]],
        parts: tuple[RewardPart, ...],
    ) -> tuple[list[float], list[str], list[tuple[GroupStats, list[RolloutRecord]]]]:
        """Per row its reward (rubric + parts) and verdicts (JSON, for TRL's completion log); per group its stats."""
        n = len(texts)
        rewards = [0.0] * n
        verdict_col: list[str] = [""] * n
        mine: list[tuple[GroupStats, list[RolloutRecord]]] = []
        for (idx, tid, version), (results, audits) in zip(groups, scored):
            state = run.state_for(version)
            criteria = state.criteria(tid)
            combined = combined_reward(
                [res.score for res in results],
                parts,
                task=state.task(tid),
                prompts=[prompts[i] for i in idx],
                texts=[texts[i] for i in idx],
            )
            records = []
            for j, i in enumerate(idx):
                res = results[j]
                rewards[i] = combined.rewards[j]
                met = {cid: v.met for cid, v in res.verdicts.items() if v.decided}
                verdict_col[i] = json.dumps(met, sort_keys=True)
                records.append(
                    RolloutRecord(
                        text=texts[i],
                        reward=rewards[i],
                        verdicts=met,
                        audit=audits[j],
                        hinted=bool(hinted[i]),
                        hint_texts=[h for h in hint_text[i].split("\n") if h],
                        rubric=combined.rubric[j] if parts else None,
                        parts={name: v[j] for name, v in combined.parts.items()},
                    )
                )
            mine.append(
                (
                    GroupStats.from_rollouts(
                        tid,
                        step,
                        records,
                        criteria=criteria,
                        harness_version=version,
                        prompt_digest=prompt_digest(prompts[idx[0]]),
                    ),
                    records,
                )
            )
        return rewards, verdict_col, mine

    def _gather(
        self,
        run: HarnessRun,
        step: int,
        mine: list[tuple[GroupStats, list[RolloutRecord]]],
        rewards: list[float],
        hinted: list[bool],
        all_results: list,
    ) -> list[StepPart]:
        """Every process's part of the step in rank order; this one's carries the judge counts since the last step.

        Processes that drew from different sampler states are an error.
        """
        judge_metrics = run.judge.stats.as_metrics()
        new_warnings = {k: v - self._judge_seen.get(k, 0) for k, v in judge_metrics.items()}
        self._judge_seen = dict(judge_metrics)
        # Every rank's part of the step, in rank order (the global batch's order, trainer.sampler.fill).
        parts = all_ranks(
            StepPart(
                groups=mine,
                rewards=rewards,
                hinted=[bool(h) for h in hinted],
                judge_counts=new_warnings,
                verdicts=sum(len(res.verdicts) for res in all_results),
                left_out=sum(1 for res in all_results for v in res.verdicts.values() if v.source == "error"),
                sampler=run.sampler.fingerprint() if run.sampler is not None else None,
            )
        )
        if len({p.sampler for p in parts}) > 1:
            # Every rank raises (all hold the same parts): a silent mismatch would train on overlapping slices.
            raise RuntimeError(
                f"step {step}: the processes drew from different sampler states "
                f"({[p.sampler for p in parts]}); their batches are not slices of one draw"
            )
        return parts

    def _step_record(
        self, step: int, parts: list[StepPart], stats_list: list[GroupStats], batch: Any
    ) -> dict[str, Any]:
        """The step's line of `metrics.jsonl`: rewards, dead share, versions, tasks, the judge's counts and flags."""
        warnings: dict[str, int] = {}
        for part in parts:
            for k, v in part.judge_counts.items():
                warnings[k] = warnings.get(k, 0) + v
        warn_count = sum(
            warnings[k]
            for k in ("judge/malformed", "judge/errors", "judge/llm_failures", "judge/check_failures")
            if k in warnings
        )
        left_out, share, flagged = self._judge_failure_share(
            sum(p.left_out for p in parts), sum(p.verdicts for p in parts)
        )
        scoring = self._scoring_counts(
            warnings, n_responses=sum(len(p.rewards) for p in parts), n_verdicts=sum(p.verdicts for p in parts)
        )
        versions = sorted({int(s.harness_version) for s in stats_list})
        record = {
            "step": step,
            "reward": float(np.mean([r for p in parts for r in p.rewards])),
            "reward_std": float(np.mean([s.std for s in stats_list])),
            "dead_share": batch.dead_share,
            "n_groups": batch.n_groups,
            "harness_version": versions[-1],
            "harness_versions": versions,
            "hinted_share": float(np.mean([h for p in parts for h in p.hinted])),
            "tasks": [s.task_id for s in stats_list],
            "group_means": [s.mean for s in stats_list],
            "group_stds": [s.std for s in stats_list],
            "judge_warnings": warn_count,
            "judge_left_out": left_out,
            "judge_left_out_share": share,
            "judge_flagged": flagged,
            **scoring,
            **{k: v for k, v in warnings.items() if v},
        }
        if self._parts:
            # The reward's parts as TRL sums them: the rubric's mean and each part's mean value (unweighted).
            record["reward_rubric"] = float(np.mean([x for s in stats_list for x in s.rubric]))
            record["reward_parts"] = {
                p.name: float(np.mean([x for s in stats_list for x in s.parts[p.name]])) for p in self._parts
            }
        if len(parts) > 1:
            # What each process trained on: its groups' tasks and the harness versions it drew them under.
            record["ranks"] = [
                {
                    "tasks": [s.task_id for s, _ in p.groups],
                    "harness_versions": sorted({int(s.harness_version) for s, _ in p.groups}),
                }
                for p in parts
            ]
        return record

    def _judge_failure_share(self, left_out: int, total: int) -> tuple[int, float, bool]:
        """(verdicts left out because the judge failed, their share of all `total` verdicts, over the limit?)."""
        share = left_out / total if total else 0.0
        return left_out, share, share > self._cfg.harness.max_judge_failure_share

    def _scoring_counts(self, warnings: dict[str, int], *, n_responses: int, n_verdicts: int) -> dict[str, Any]:
        """The step's responses that could not be scored (reward 0) and verdicts skipped for want of a judge.

        Each is flagged above `harness.max_judge_failure_share` of the step's responses / verdicts.
        """
        limit = self._cfg.harness.max_judge_failure_share
        unscoreable = int(warnings.get("judge/unscoreable", 0))
        skipped = int(warnings.get("judge/skipped", 0))
        return {
            "unscoreable": unscoreable,
            "unscoreable_flagged": bool(n_responses) and unscoreable / n_responses > limit,
            "criteria_skipped": skipped,
            "skipped_flagged": bool(n_verdicts) and skipped / n_verdicts > limit,
        }

    async def _score_group(self, run: HarnessRun, texts: list[str], idx: list[int], task_id: str, version: int):
        state = run.state_for(version)
        task = state.task(task_id)
        responses = [texts[i] for i in idx]
        # The judge sees the task's own prompt, without hints: hints guide sampling, they are not the question.
        results = await run.judge.score(task.criteria, task.user_prompt, responses)
        t0 = time.perf_counter()
        audits = await run.judge.audit(task, responses)
        self._audit_s += time.perf_counter() - t0
        return results, audits

    @staticmethod
    def _group_index(run: HarnessRun, stats: GroupStats) -> int:
        # The same task may be drawn twice in one batch; memory ids are (task, step, index).
        key = (stats.task_id, stats.step)
        with run.lock:
            run.group_counts[key] = run.group_counts.get(key, -1) + 1
            return run.group_counts[key]


def observe_group(
    run: HarnessRun, stats: GroupStats, records: list[RolloutRecord], version: int, *, probe: bool = False
) -> None:
    """One scored group into the run: detector (events queued), sampler, and memory with its best and worst rollouts.

    Training's reward calls it for every group; the pre-flight round (trainer/preflight.py) for each probe group
    (`probe`: see `harness.detector.Detector.observe`).
    """
    positive = {c.id for c in run.state_for(version).criteria(stats.task_id) if c.weight > 0}
    if not any(cid in positive for r in records for cid in r.verdicts):
        # The judge decided no positive criterion for any rollout (an outage): the group's 0 rewards say
        # nothing about the policy, so the detector, the filter and memory must not read it as a collapse.
        log.warning(
            "step %d: group of %s left unobserved: the judge decided none of its positive criteria",
            stats.step,
            stats.task_id,
        )
        return
    events = run.detector.observe(stats, probe=probe)
    if events:
        run.add_events(events, harness_version=version)
    if not probe:  # the pre-flight counts its probes per task, over all of a task's rollouts (trainer.preflight)
        run.liveness.observe(stats.task_id, run.detector.is_dead(stats))
    if run.sampler is not None:
        run.sampler.observe_group(stats.task_id, run.detector.is_dead(stats))
    if run.memory is not None:
        order = sorted(range(len(records)), key=lambda i: records[i].reward)
        run.memory.add_group(
            stats,
            best=records[order[-1]],
            worst=records[order[0]],
            harness_version=version,
            domain=run.state_for(version).task(stats.task_id).domain,
            group_index=RubricReward._group_index(run, stats),
            texts=[r.text for r in records],
        )


def _log_step(
    record: dict[str, Any],
    stats_list: list[GroupStats],
    task_id: list[str],
    harness_version: list[int],
    verdict_col: list[str],
    log_extra: Any,
    log_metric: Any,
) -> None:
    """TRL's per-row completion columns and the step's logged metrics (both callbacks are TRL's, optional)."""
    if log_extra is not None:
        log_extra("task_id", list(task_id))
        log_extra("harness_version", [int(v) for v in harness_version])
        log_extra("verdicts", verdict_col)
    if log_metric is not None:
        log_metric("harness/version", float(record["harness_version"]))
        log_metric("harness/dead_share", record["dead_share"])
        log_metric("judge/warnings", float(record["judge_warnings"]))
        if "reward_rubric" in record:
            log_metric("reward_parts/rubric", record["reward_rubric"])
            for name, mean in record["reward_parts"].items():
                log_metric(f"reward_parts/{name}", mean)
        for s in stats_list:
            for cid, rate in s.pass_rates.items():
                log_metric(f"pass_rate/{s.task_id}/{cid}", rate)
