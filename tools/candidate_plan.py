"""What each side of a candidate measurement samples, fixed before any rollout (`tools.candidate`).

A side is, per affected task, the visit prompts the next training steps will show (`Stratum`: a prompt and the
probability that a visit sees it); `make_plan` builds both sides per interface, the sampling weights, and the pools
fixed up front (cached rollouts re-scored for a criteria update; the exact hit test's control pool, at least
`CONTROL_FACTOR` times the candidate's cap). The module docstring of `tools.candidate` says how and why.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.guidance import prompt_digest, render_prompt, visible_hints
from harness.types import HarnessState, HarnessUpdate, Hint, Task
from tools.sequential import StopRule

# The exact hit test's control pool holds at least this many times the candidate's cap: p0's uncertainty then costs
# about half the power that the candidate's own noise does (with a pool the size of the cap it costs as much).
CONTROL_FACTOR = 2


# -- what a side samples -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """A visit prompt to sample and score: a task as one harness version sees it, with the hints shown."""

    task: Task
    hints: tuple[Hint, ...]
    messages: tuple[tuple[str, str], ...]

    @property
    def prompt_key(self) -> str:
        return json.dumps(self.messages)

    @property
    def digest(self) -> str:
        """The key of this prompt's cached training groups (`GroupStats.prompt_digest`)."""
        return prompt_digest([{"role": r, "content": c} for r, c in self.messages])


@dataclass(frozen=True)
class Stratum:
    weight: float  # probability that a visit sees this prompt
    spec: Spec


class _HintedVisit(random.Random):
    """The rng of a visit that is hinted whenever hinted_share > 0.

    `visible_hints` then returns what a hinted visit sees, with the schedule logic kept in one place
    (`harness.guidance`).
    """

    def random(self) -> float:
        return 0.0


def visit_strata(state: HarnessState, task_id: str, step: int) -> list[Stratum]:
    """The visit prompts of `task_id` at `step` with their probabilities (`tools.candidate`: what a group is)."""
    task = state.task(task_id)
    g = state.guidance_for(task_id)
    shown = visible_hints(g, step, _HintedVisit())
    share = g.schedule.hinted_share if shown else 0.0
    out = []
    if share > 0:
        out.append(Stratum(share, visit_spec(task, shown, g.schedule.placement)))
    if share < 1:
        out.append(Stratum(1.0 - share, visit_spec(task, [], g.schedule.placement)))
    return out


def visit_spec(task: Task, hints: list[Hint], placement: Literal["user", "system"]) -> Spec:
    msgs = render_prompt(task, hints, placement)
    return Spec(task, tuple(hints), tuple((m["role"], m["content"]) for m in msgs))


def _sampling_weight(state: HarnessState, task_id: str) -> float:
    s = state.sampling.get(task_id)
    return 0.0 if s is None or s.status != "active" else float(s.weight)


Sides = dict[str, dict[str, list[Stratum]]]  # side ("control"/"candidate") -> task id -> its strata


@dataclass
class Plan:
    """What each side samples, before any rollout: strata, sampling weights, the pools fixed up front."""

    sides: Sides
    weights: dict[str, dict[str, float]]  # task id -> side -> sampling weight
    pools_prior: dict[str, list[str]]  # prompt key -> training rollouts re-scored with it (criteria, exact control)
    floor: dict[str, int]  # prompt key -> rollouts its pool holds from the first look (the exact test's control)
    paired: dict[str, bool]  # task id -> both sides score the same rollouts


def check_rule(rule: StopRule | None, task_ids: list[str]) -> None:
    if rule is not None and rule.task_id not in task_ids:
        raise ValueError(f"rule.task_id {rule.task_id!r} is not among the update's tasks {task_ids}")
    if rule is not None and any(t not in task_ids for t in rule.pooled):
        raise ValueError(f"rule.pooled {list(rule.pooled)} are not all among the update's tasks {task_ids}")


def make_plan(
    state: HarnessState,
    candidate_state: HarnessState,
    update: HarnessUpdate,
    rule: StopRule | None,
    prior: Mapping[str, Sequence[str]],
    history: Mapping[str, Sequence[str]],
    step: int,
    cap: int,
    exact: bool,
) -> Plan:
    """Both sides' strata per affected task (`tools.candidate`: how the sides are built, per interface)."""
    criteria = update.interface == "criteria"
    sampling = update.interface == "sampling"
    visit = step  # the next training step draws its prompts at global_step = the pause's step
    plan = Plan(sides={"control": {}, "candidate": {}}, weights={}, pools_prior={}, floor={}, paired={})
    sides = plan.sides
    for tid in update.task_ids:
        new_variant = not state.has_task(tid)
        # A new variant has no control group of its own: its parent's group is the baseline.
        base_id = candidate_state.task(tid).parent_id if new_variant else tid
        control = visit_strata(state, base_id, visit)
        if criteria:
            # One pool: the rubric is what changes, not the prompt (tools.candidate docstring).
            top = max(control, key=lambda s: s.weight)
            sides["control"][tid] = [Stratum(1.0, top.spec)]
            sides["candidate"][tid] = [
                Stratum(
                    1.0,
                    visit_spec(
                        candidate_state.task(tid), list(top.spec.hints), state.guidance_for(tid).schedule.placement
                    ),
                )
            ]
            plan.pools_prior.setdefault(top.spec.prompt_key, []).extend(prior.get(tid, []))
        else:
            sides["control"][tid] = control
            sides["candidate"][tid] = visit_strata(candidate_state, tid, visit)
            if exact and rule is not None and (tid == rule.task_id or tid in rule.pooled):
                # The exact test's control pool is fixed before the first look: each control prompt's cached training
                # rollouts (hinted or not), topped up with fresh probes to CONTROL_FACTOR x the cap (tools.sequential).
                for s in control:
                    pool = plan.pools_prior.setdefault(s.spec.prompt_key, [])
                    if not pool:
                        pool.extend(history.get(s.spec.digest, []))
                    plan.floor[s.spec.prompt_key] = CONTROL_FACTOR * cap
        if sampling:
            plan.weights[tid] = {
                "control": 0.0 if new_variant else _sampling_weight(state, tid),
                "candidate": _sampling_weight(candidate_state, tid),
            }
        else:
            plan.weights[tid] = {"control": 1.0, "candidate": 1.0}
    plan.paired = {
        t: [(s.weight, s.spec.prompt_key) for s in sides["control"][t]]
        == [(s.weight, s.spec.prompt_key) for s in sides["candidate"][t]]
        for t in update.task_ids
    }
    return plan


def changed_strata(sides: Sides, t: str) -> list[int]:
    """Task t's candidate strata whose prompt its control does not share (all of them when it shares every one)."""
    shared = {s.spec.prompt_key for s in sides["control"][t]}
    cand = sides["candidate"][t]
    return [i for i, s in enumerate(cand) if s.spec.prompt_key not in shared] or list(range(len(cand)))
