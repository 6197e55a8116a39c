"""LangChain tools the evolver's LLM agents call for evidence and measurements.

`make_tools(services)` returns `StructuredTool`s whose infrastructure (harness store, memory,
frozen policy, judge) is closed over: the model only ever sees the arguments a reasoning agent
should choose (task ids, queries, counts, responses), never a store or endpoint. No tool measures a
candidate update: the graph's critique node runs that measurement, so no LLM can produce (or fake) the
numbers a candidate is accepted on.

Every tool returns a string (compact JSON, or a line starting with "error:"). Mistakes an agent can
make — an unknown task id, too many responses, memory switched off — come back as readable error
strings it can act on, not as exceptions that would end its run. Infrastructure failures (the policy
endpoint down, a corrupt store) do raise: the agent cannot fix those and the run must say so.

Hidden information stays hidden: no tool shows the audit criteria, audit scores or anything derived
from them (`harness.visibility`: `score_responses` gives training scores only,
`similar_cases` drops audit numbers, memory documents carry none), and `current_harness` does not show
the reference answer. The evolver must not tune the harness to the yardstick that judges it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.tools import BaseTool, StructuredTool

from harness.guidance import render_prompt
from harness.types import HarnessState
from harness.visibility import redact
from tools.endpoint import PolicyEndpoint
from tools.judge import Judge

if TYPE_CHECKING:
    from harness.store import HarnessStore
    from memory.store import TrainingMemory


class ToolServices(Protocol):
    """What the tools close over; `graphs.services.RunServices` (the live infrastructure of a run) provides it."""

    store: HarnessStore
    endpoint: PolicyEndpoint
    judge: Judge
    memory: TrainingMemory | None
    max_tokens: int
    temperature: float
    seed: int


MAX_SAMPLES = 16
MAX_RESPONSES = 32
MAX_TEXT_CHARS = 600  # per response echoed back to the agent
MAX_HISTORY = 50
MAX_SIMILAR = 20
MAX_DOC_CHARS = 400


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def _unknown(state: HarnessState, task_id: str) -> str:
    known = state.active_task_ids()
    shown = ", ".join(known[:20]) + (f", ... ({len(known)} active)" if len(known) > 20 else "")
    return f"error: unknown task id {task_id!r}. Active task ids: {shown or '(none)'}"


def make_tools(services: ToolServices) -> list[BaseTool]:
    """The evolver's tools bound to `services`: memory, harness, then frozen policy and judge."""
    return [*_memory_tools(services), *_harness_tools(services), *_policy_tools(services)]


def _tool(func, name: str, coroutine=None) -> StructuredTool:
    # parse_docstring: the docstring's Args section becomes the argument descriptions the model reads.
    return StructuredTool.from_function(func=func, coroutine=coroutine, name=name, parse_docstring=True)


def _memory_tools(services: ToolServices) -> list[BaseTool]:
    """`task_history` (one task's records) and `similar_cases` (other tasks' proposals)."""

    def task_history(task_id: str, last_n: int = 10) -> str:
        """Recent history of one task from training memory, oldest first: group statistics per step
        (mean, std, best/worst responses with verdicts), failure events, and past proposals with their
        outcomes. Use it to see whether a failure is persistent and what was already tried on this task.

        Args:
            task_id: the task to look up (as in a failure event).
            last_n: how many records to return (1-50).
        """
        st = services.store.latest()
        if not st.has_task(task_id):
            return _unknown(st, task_id)
        if services.memory is None:
            return "error: training memory is disabled in this run; rely on the failure event and current_harness"
        records = services.memory.task_history(task_id, max(1, min(int(last_n), MAX_HISTORY)))
        return _dump([{"kind": r.kind, "step": r.step, "summary": r.document()[:MAX_DOC_CHARS]} for r in records])

    def similar_cases(query: str, failure_type: str | None = None, interface: str | None = None, k: int = 5) -> str:
        """Cross-task evidence: past proposals on other tasks most similar to `query`, each with its
        interface, outcome (accepted/rejected/fallback) and measured deltas (candidate minus control).
        Use it to learn which kinds of fixes worked for this kind of failure.

        Args:
            query: a short description of the failure or fix, e.g. "collapse_low on a medical task, all rollouts score 0".
            failure_type: optional filter, one of collapse_low, collapse_high, flat, spurious_length,
                spurious_audit, stuffing, blind_criterion, guidance_leak.
            interface: optional filter: sampling, guidance or criteria.
            k: number of cases (1-20).
        """  # noqa: E501 (model-visible tool docstring: the Args line may not be rewrapped)
        if services.memory is None:
            return "error: training memory is disabled in this run; no cross-task evidence is available"
        cases = services.memory.similar_cases(
            query, max(1, min(int(k), MAX_SIMILAR)), failure_type=failure_type, interface=interface
        )
        return _dump(
            [
                {
                    "task_id": c.task_id,
                    "failure_type": c.failure_type,
                    "interface": c.interface,
                    "outcome": c.outcome,
                    "deltas": redact(c.deltas),
                    "distance": round(c.distance, 4),
                    "summary": c.document[:MAX_DOC_CHARS],
                }
                for c in cases
            ]
        )

    return [_tool(task_history, "task_history"), _tool(similar_cases, "similar_cases")]


def _harness_tools(services: ToolServices) -> list[BaseTool]:
    """`current_harness`: the task as training sees it, reference answer withheld."""

    def current_harness(task_id: str) -> str:
        """The task as training currently sees it: prompt, rubric criteria (id, text, weight, kind,
        programmatic check), guidance hints and reveal schedule, sampling weight and status, parent and
        variants. Read it before proposing an update: ops must reference existing ids.

        Args:
            task_id: the task (or variant) id.
        """
        st = services.store.latest()
        if not st.has_task(task_id):
            return _unknown(st, task_id)
        task = st.task(task_id)
        g = st.guidance_for(task_id)
        sampling = st.sampling.get(task_id)
        return _dump(
            {
                "harness_version": st.version,
                "task_id": task.id,
                "domain": task.domain,
                "parent_id": task.parent_id,
                "prompt": [m.model_dump() for m in task.prompt],
                "criteria": [c.model_dump(mode="json", exclude_none=True, exclude={"origin"}) for c in task.criteria],
                "hints": [h.model_dump(mode="json") for h in g.hints],
                "schedule": g.schedule.model_dump(mode="json"),
                "sampling": None if sampling is None else sampling.model_dump(mode="json"),
                "variants": sorted(v.id for v in st.variants.values() if v.parent_id == task_id),
                "has_reference_answer": task.reference_answer is not None,
            }
        )

    return [_tool(current_harness, "current_harness")]


def _measurement_prompt(st: HarnessState, task_id: str) -> list[dict]:
    g = st.guidance_for(task_id)
    return render_prompt(st.task(task_id), list(g.hints), g.schedule.placement)


def _score_view(responses: list[str], results: list) -> str:
    return _dump(
        [
            {
                "response": r[:120],
                "score": round(res.score, 4),
                "verdicts": {
                    cid: {"met": v.met, "source": v.source, "reason": v.reason[:160]} for cid, v in res.verdicts.items()
                },
            }
            for r, res in zip(responses, results)
        ]
    )


def _check_responses(st: HarnessState, task_id: str, responses: list[str]) -> str | None:
    if not st.has_task(task_id):
        return _unknown(st, task_id)
    if not responses:
        return "error: give at least one response to score"
    if len(responses) > MAX_RESPONSES:
        return f"error: at most {MAX_RESPONSES} responses per call, got {len(responses)}"
    return None


def _policy_tools(services: ToolServices) -> list[BaseTool]:
    """`sample_policy` (the frozen policy's responses) and `score_responses` (the judge, training criteria only)."""

    def sample_policy(task_id: str, n: int = 4) -> str:
        """Sample responses to a task from the frozen policy (the checkpoint training paused at), with the
        task's current hints shown. Use it to see what the policy actually writes.

        Args:
            task_id: the task id.
            n: number of responses (1-16).
        """
        st = services.store.latest()
        if not st.has_task(task_id):
            return _unknown(st, task_id)
        n = max(1, min(int(n), MAX_SAMPLES))
        [texts] = services.endpoint.sample(
            [_measurement_prompt(st, task_id)],
            n=n,
            max_tokens=services.max_tokens,
            temperature=services.temperature,
            seed=services.seed,
        )
        return _dump([t[:MAX_TEXT_CHARS] for t in texts])

    def score_responses(task_id: str, responses: list[str]) -> str:
        """Score responses against the task's current rubric: total score in [0, 1] and one verdict per
        criterion (met, source: check/llm/skipped, reason). Use it to test whether a criterion rewards
        what it should.

        Args:
            task_id: the task id.
            responses: up to 32 response texts.
        """
        st = services.store.latest()
        if (err := _check_responses(st, task_id, responses)) is not None:
            return err
        task = st.task(task_id)
        return _score_view(responses, services.judge.score_sync(task.criteria, task.user_prompt, responses))

    async def ascore_responses(task_id: str, responses: list[str]) -> str:
        st = services.store.latest()
        if (err := _check_responses(st, task_id, responses)) is not None:
            return err
        task = st.task(task_id)
        return _score_view(responses, await services.judge.score(task.criteria, task.user_prompt, responses))

    return [_tool(sample_policy, "sample_policy"), _tool(score_responses, "score_responses", ascore_responses)]
