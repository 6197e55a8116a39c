"""Each visit prompt's rollouts and their scores as a measurement's looks grow them (`tools.candidate`).

Rollouts are drawn into the round's probe cache (a pool only ever grows at its end, and both sides extend with the
same seed), scored once each, and what that cost is counted. It also holds the exact hit test's deferred control
top-up (`Rollouts.defer_control_top_up`).
"""

from __future__ import annotations

import asyncio
import json
import time

from tools.candidate_plan import Plan, Spec, changed_strata
from tools.endpoint import PolicyEndpoint
from tools.group_metrics import Row, Strata, score_rows
from tools.judge import Judge
from tools.measure_settings import MeasureSettings
from tools.probes import Cost, ProbeCache, count_tokens
from tools.sequential import StopRule, dead_level, pooled_plan


class Rollouts:
    """Each visit prompt's rollouts and their scores as the looks grow them, and what that cost.

    Rollouts are sampled into the round's probe cache (a pool only ever grows at its end) and scored once each.
    """

    def __init__(
        self,
        plan: Plan,
        task_ids: list[str],
        endpoint: PolicyEndpoint,
        judge: Judge,
        settings: MeasureSettings,
        cache: ProbeCache,
    ) -> None:
        self.plan, self.task_ids, self.endpoint, self.judge, self.settings, self.cache = (
            plan,
            task_ids,
            endpoint,
            judge,
            settings,
            cache,
        )
        self.cost = Cost()
        self.drawn: dict[str, int] = {}  # prompt key -> probes this measurement generated
        self.scored: dict[tuple[str, str, int], list[Row]] = {}  # (side, task id, stratum index) -> scored rows
        self.deferred: dict[str, int] = {}  # prompt key -> its control pool's floor while the top-up is deferred
        self.judge_calls_before = judge.stats.llm_calls
        self.failures_before = judge.stats.llm_failures + judge.stats.check_failures

    def cache_key(self, prompt_key: str) -> str:
        s = self.settings
        return json.dumps([prompt_key, s.max_tokens, float(s.temperature), s.seed])

    def target(self, prompt_key: str, n: int) -> int:
        return max(n, self.plan.floor.get(prompt_key, 0), len(self.plan.pools_prior.get(prompt_key, [])))

    def pool(self, prompt_key: str, n: int) -> list[str]:
        pri = self.plan.pools_prior.get(prompt_key, [])
        held = self.cache.get(self.settings.step, self.cache_key(prompt_key))
        return pri + held[: self.target(prompt_key, n) - len(pri)]

    def _missing(self, n: int) -> list[dict[tuple[int, int], dict[str, Spec]]]:
        """Per side, the prompts whose pools hold fewer than n rollouts, grouped by (rollouts to draw, held)."""
        step = self.settings.step
        done: set[str] = set()
        out = []
        for side in ("control", "candidate"):
            todo: dict[tuple[int, int], dict[str, Spec]] = {}
            for tid in self.task_ids:
                for st in self.plan.sides[side][tid]:
                    key = st.spec.prompt_key
                    if key in done:
                        continue
                    done.add(key)
                    want = self.target(key, n) - len(self.plan.pools_prior.get(key, []))
                    have = len(self.cache.get(step, self.cache_key(key)))
                    if have < want:
                        todo.setdefault((want - have, have), {})[key] = st.spec
            out.append(todo)
        return out

    def to_draw(self, n: int) -> int:
        """The rollouts `fill(n)` would generate now: an upper bound on any look up to group size n."""
        return sum(need * len(specs) for todo in self._missing(n) for (need, _), specs in todo.items())

    async def fill(self, n: int) -> None:
        """Make every prompt's pool hold at least n rollouts: one sample call per side and (need, have)."""
        s, step = self.settings, self.settings.step
        for todo in self._missing(n):
            for (need, have), specs in todo.items():
                batch = [[{"role": r, "content": c} for r, c in spec.messages] for spec in specs.values()]
                # The seed moves with the texts already held: an extension draws new samples, and both sides
                # extend with the same seed (common random numbers).
                out = await asyncio.to_thread(
                    self.endpoint.sample,
                    batch,
                    n=need,
                    max_tokens=s.max_tokens,
                    temperature=s.temperature,
                    seed=s.seed + have,
                )
                if len(out) != len(batch) or any(len(o) != need for o in out):
                    raise RuntimeError(
                        f"endpoint returned {[len(o) for o in out]} completions for {len(batch)} prompts x n={need}"
                    )
                self.cost.sample_calls += 1
                for key, texts in zip(specs, out):
                    self.cache.extend(step, self.cache_key(key), have, texts)
                    self.drawn[key] = self.drawn.get(key, 0) + len(texts)
                    tokens, self.cost.tokens_by = count_tokens(self.endpoint, list(texts))
                    self.cost.probe_tokens += tokens
                    self.cost.probe_rollouts += len(texts)

    async def _score(self, spec: Spec, texts: list[str]) -> list[Row]:
        return await score_rows(
            spec.task,
            spec.hints,
            texts,
            self.judge,
            self.settings.detector_config,
            parts=self.settings.reward_parts,
            messages=[{"role": r, "content": c} for r, c in spec.messages],
        )

    async def score_all(self, n: int) -> None:
        """Score the rollouts each stratum gained since the last look (a pool only ever grows at its end)."""
        jobs = []
        for side in ("control", "candidate"):
            for tid in self.task_ids:
                for i, s in enumerate(self.plan.sides[side][tid]):
                    texts = self.pool(s.spec.prompt_key, n)
                    rows = self.scored.setdefault((side, tid, i), [])
                    if len(texts) > len(rows):
                        jobs.append((rows, self._score(s.spec, texts[len(rows) :])))
        for (rows, _), new in zip(jobs, await asyncio.gather(*(j for _, j in jobs))):
            rows.extend(new)
            self.cost.scored_rollouts += len(new)

    async def defer_control_top_up(self, rule: StopRule, sizes: list[int], alpha: float) -> int:
        """Defer the exact test's fresh control probes while a top-up could only raise the test's bounds.

        Control rollouts without a hit narrow p0's posterior downwards and lower the bounds; each control hit raises
        them. So when the plan from the free pools (cached training rollouts and probes already drawn this round)
        equals the plan from pools topped up without a single hit, every top-up gives bounds at least as high: a
        candidate that does not pass on the free pools would not pass on the topped-up ones either, and no top-up is
        drawn for it. One that passes gets its top-up then (`top_up_deferred`) and is decided again on the full pool,
        hit test and point rule, as if the top-up had been drawn first: the point rule's "std up" needs fresh control
        rollouts, since a pool that is only the group which flagged the task has std 0. Applies when every focus
        control prompt already holds at least the largest look and no counted candidate stratum shares a control
        prompt; returns the fresh control probes deferred (0: the top-up is drawn up front).
        """
        assert rule.hits is not None
        now: list[tuple[int, int, int]] = []
        best: list[tuple[int, int, int]] = []
        floors: dict[str, int] = {}
        for t in [rule.task_id, *rule.pooled]:
            strata = self.plan.sides["control"][t]
            pools = [self.pool(st.spec.prompt_key, 0) for st in strata]
            keys = {st.spec.prompt_key for st in strata}
            changed = changed_strata(self.plan.sides, t)
            counted = [self.plan.sides["candidate"][t][i].spec.prompt_key for i in changed]
            if any(len(p) < sizes[-1] for p in pools) or keys.intersection(counted):
                return 0
            rows = await asyncio.gather(*(self._score(st.spec, p) for st, p in zip(strata, pools)))
            for i, r in enumerate(rows):
                self.scored[("control", t, i)] = list(r)
                self.cost.scored_rollouts += len(r)
            rewards = [row.reward for r in rows for row in r]
            level = dead_level(rewards)
            x0 = sum(rule.hits.is_hit(x, level, self.settings.detector_config.eps) for x in rewards)
            full = sum(max(len(p), self.plan.floor.get(st.spec.prompt_key, 0)) for st, p in zip(strata, pools))
            now.append((x0, len(rewards), len(changed)))
            best.append((x0, full, len(changed)))
            floors.update({st.spec.prompt_key: len(p) for st, p in zip(strata, pools)})
        gain = rule.hits.min_rate_gain
        a, b = pooled_plan(now, sizes, alpha, alpha, gain), pooled_plan(best, sizes, alpha, alpha, gain)
        deferred = sum(b_[1] - n_[1] for n_, b_ in zip(now, best))
        if deferred == 0 or (a.pass_at, a.fail_at) != (b.pass_at, b.fail_at):
            return 0
        self.deferred = {key: self.plan.floor[key] for key in floors}
        self.plan.floor.update(floors)
        return deferred

    async def top_up_deferred(self, n: int) -> int:
        """Draw and score the deferred control top-up (the look's group size is n); returns the rollouts drawn."""
        before = self.cost.probe_rollouts
        self.plan.floor.update(self.deferred)
        self.deferred = {}
        await self.fill(n)
        await self.score_all(n)
        return self.cost.probe_rollouts - before

    def side_rows(self, side: str, tid: str, n: int | None = None) -> Strata:
        """A side's scored strata; with n, each cut to the pool it had at group size n (an earlier look)."""
        return [
            (
                s.weight,
                bool(s.spec.hints),
                self.scored[(side, tid, i)][: None if n is None else len(self.pool(s.spec.prompt_key, n))],
            )
            for i, s in enumerate(self.plan.sides[side][tid])
        ]

    def close(self, k: int, t0: float) -> Cost:
        """The measurement's cost once its last look (group size k) is taken."""
        used = {
            s.spec.prompt_key: len(self.pool(s.spec.prompt_key, k))
            for side in self.plan.sides.values()
            for ss in side.values()
            for s in ss
        }
        self.cost.reused_rollouts = sum(max(0, n - self.drawn.get(key, 0)) for key, n in used.items())
        self.cost.judge_calls = self.judge.stats.llm_calls - self.judge_calls_before
        self.cost.seconds = round(time.monotonic() - t0, 3)
        return self.cost

    def judge_failures(self) -> int:
        return self.judge.stats.llm_failures + self.judge.stats.check_failures - self.failures_before
