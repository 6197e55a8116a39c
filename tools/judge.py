"""The rubric judge: programmatic checks plus an LLM brain for text-only criteria.

`Judge.score(criteria, prompt_text, responses)` returns one `ScoreResult` per response:

- a criterion with a `check` is decided by the check (`harness.scoring.programmatic_verdicts`);
- a criterion without one goes to the LLM judge (any LangChain chat model), one call per
  (criterion, response) with a short reason, concurrently under an `asyncio.Semaphore`, cached in an
  LRU keyed by (criterion fingerprint, prompt, response);
- without an LLM, text-only criteria get source "skipped" and are excluded from the score (never
  silently counted unmet: that would make every such task look collapsed);
- a judge failure is never a verdict. One `score` call scores one GRPO group; a criterion the group could
  not be judged on gets source "error" and is left out of the score of *every* response in the call, so
  the group's rewards stay comparable (and a response cannot dodge a pitfall by breaking its judge):
  - a check that cannot decide (a regex timeout, `harness.checks.CheckTimeout`), counted in
    `JudgeStats.check_failures`;
  - an LLM judge that gives no usable verdict after its retries (garbage, timeouts, HTTP 500s, broken
    bodies), counted in `JudgeStats.llm_failures` with a logged warning. Counting it unmet would lower
    the reward as if the answer were wrong; the trainer counts the left-out verdicts per step and flags
    a step where too many were (`trainer/reward.py`).

The verdict is asked for with the chat model's structured output (`with_structured_output` on the JSON
schema `tools.judge_prompts.VERDICT_SCHEMA`): on an OpenAI-compatible server such as vLLM that is guided
decoding, so even a small model answers a schema-valid object. Models without structured output
(NotImplementedError) are asked for plain text. Either way the output is data: the decoded object, or
else the raw text, goes through `parse_verdict` (the first JSON object holding a verdict, found by the
shared bounded extractor `tools.llm_json`; "true"/"yes"/"met" strings and bare yes/no replies accepted).
A malformed reply is retried a bounded number of times. A judge problem never raises into training.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from harness.scoring import ScoreResult, Verdict, aggregate, programmatic_verdicts
from harness.types import Criterion, Task
from tools.judge_prompts import JUDGE_RETRY, JUDGE_SYSTEM, JUDGE_USER, VERDICT_SCHEMA
from tools.llm_json import fenced_blocks, json_objects

if TYPE_CHECKING:  # keep `import tools.judge` light; langchain is only needed when an LLM is given
    from langchain_core.language_models import BaseChatModel

log = logging.getLogger(__name__)

# Bounds on what we read from a judge reply: a runaway model must not make parsing expensive (the
# extractor bounds its own work too). A verdict is short, so only the head of a reply is read.
MAX_REPLY_CHARS = 8_000  # well under tools.llm_json.MAX_TEXT_CHARS, so the extractor never refuses the head
MAX_REASON_CHARS = 300
# Bounds on what we send: long rollouts are truncated (the judge decides on the visible part).
MAX_RESPONSE_CHARS = 8_000
MAX_PROMPT_CHARS = 4_000

_TRUE = frozenset({"true", "yes", "met", "1", "y", "pass", "satisfied"})
_FALSE = frozenset({"false", "no", "unmet", "not met", "0", "n", "fail", "not satisfied"})


@dataclass
class JudgeStats:
    """Counters surfaced in training metrics (`as_metrics`)."""

    llm_calls: int = 0  # requests sent to the chat model (retries included)
    cache_hits: int = 0
    malformed: int = 0  # replies that could not be parsed
    errors: int = 0  # calls that raised (timeouts, HTTP errors, bad bodies)
    llm_failures: int = 0  # (criterion, response) pairs the LLM judge gave no verdict on after its retries
    skipped: int = 0  # text-only criteria not judged because there is no LLM
    unscoreable: int = 0  # responses whose every positive-weight criterion was skipped or failed (score 0)
    check_failures: int = 0  # (group, criterion) pairs whose check could not decide (left out of the group's scores)
    left_out: int = 0  # verdicts left out of a score because the judge (check or LLM) failed on the group

    def as_metrics(self, prefix: str = "judge/") -> dict[str, int]:
        return {f"{prefix}{k}": v for k, v in asdict(self).items()}


# -- parsing -------------------------------------------------------------------------------------
def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().strip(".!").casefold()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    return None


def _from_obj(obj: object) -> tuple[bool, str] | None:
    if not isinstance(obj, dict):
        return None
    for key in ("met", "verdict", "satisfied", "answer"):
        if key in obj:
            met = _as_bool(obj[key])
            if met is None:
                return None
            reason = obj.get("reason", obj.get("explanation", ""))
            return met, str(reason)[:MAX_REASON_CHARS]
    return None


def parse_verdict(text: str) -> tuple[bool, str] | None:
    """`(met, reason)` from a judge reply, or None when the reply is malformed.

    Accepts a bare yes/no reply (also inside a code fence) and the first JSON object holding a verdict,
    bare, fenced or wrapped in prose (`tools.llm_json.json_objects`). Reads at most MAX_REPLY_CHARS;
    linear-time and bounded; never evaluates anything.
    """
    head = text[:MAX_REPLY_CHARS]
    blocks = fenced_blocks(head)
    bare = _as_bool((blocks[0] if blocks else head).strip())
    if bare is not None:
        return bare, ""
    for obj in json_objects(head):
        found = _from_obj(obj)
        if found is not None:
            return found
    return None


def _reply_text(message: object) -> str:
    # AIMessage.text joins text blocks for list-content messages (langchain-core >= 1.0).
    text = getattr(message, "text", None)
    if isinstance(text, str):
        return text
    content = getattr(message, "content", message)
    return content if isinstance(content, str) else str(content)


def _criterion_key(criterion: Criterion) -> str:
    data = json.dumps(criterion.model_dump(mode="json", include={"id", "text", "check"}), sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- the judge -----------------------------------------------------------------------------------
class Judge:
    """Scores responses against rubric criteria. See the module docstring for the rules."""

    def __init__(
        self,
        llm: BaseChatModel | None = None,
        concurrency: int = 16,
        retries: int = 2,
        *,
        cache_size: int = 100_000,
        call_timeout_s: float | None = 120.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.llm = llm
        self.concurrency = concurrency
        self.retries = retries
        self.cache_size = cache_size
        # A second, outer bound: the chat model's own timeout may be unset (fakes, some providers).
        self.call_timeout_s = call_timeout_s
        self.stats = JudgeStats()
        # The verdict call with guided decoding where the model offers structured output; None: plain text.
        self._verdict_llm = None
        if llm is not None:
            try:
                self._verdict_llm = llm.with_structured_output(VERDICT_SCHEMA, include_raw=True)
            except NotImplementedError:
                log.info("judge model %s has no structured output; asking for a plain-text verdict", type(llm).__name__)
        self._cache: OrderedDict[tuple[str, str, str], tuple[bool, str]] = OrderedDict()
        # One semaphore per event loop: asyncio primitives are bound to the loop that first uses them,
        # and `score_sync` runs a fresh loop per call.
        self._sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    # -- public API ----------------------------------------------------------------------------
    async def score(
        self, criteria: Sequence[Criterion], prompt_text: str, responses: Sequence[str]
    ) -> list[ScoreResult]:
        """One `ScoreResult` per response, in order."""
        return await self._score(list(criteria), prompt_text, list(responses))

    def score_sync(
        self, criteria: Sequence[Criterion], prompt_text: str, responses: Sequence[str]
    ) -> list[ScoreResult]:
        """Blocking `score` for callers without an event loop (raises inside a running loop)."""
        return run_sync(self.score(criteria, prompt_text, responses))

    async def audit(self, task: Task, responses: Sequence[str]) -> list[float | None]:
        """Hidden audit score per response; None when the task has no (scoreable) audit criteria."""
        if not task.audit_criteria:
            return [None] * len(responses)
        results = await self._score(
            list(task.audit_criteria), task.user_prompt, list(responses), allow_unscoreable=True
        )
        return [None if r is None else r.score for r in results]

    def audit_sync(self, task: Task, responses: Sequence[str]) -> list[float | None]:
        return run_sync(self.audit(task, responses))

    # -- internals -----------------------------------------------------------------------------
    async def _score(
        self, criteria: list[Criterion], prompt_text: str, responses: list[str], allow_unscoreable: bool = False
    ) -> list:
        if not criteria:
            raise ValueError("criteria must not be empty")
        text_only = [c for c in criteria if c.check is None]
        # Unique (criterion, response) pairs: GRPO groups often repeat a response verbatim.
        llm_verdicts: dict[tuple[str, str], Verdict] = {}
        if text_only and self.llm is not None:
            pairs: dict[tuple[str, str], tuple[Criterion, str]] = {}
            for c in text_only:
                for r in responses:
                    pairs.setdefault((c.id, r), (c, r))
            keys = list(pairs)
            verdicts = await asyncio.gather(*(self._llm_verdict(pairs[k][0], prompt_text, pairs[k][1]) for k in keys))
            llm_verdicts = dict(zip(keys, verdicts))

        checked = self._group_check_verdicts(criteria, responses)
        llm_failed = self._group_llm_failures(llm_verdicts, len(responses))
        out = []
        for r, by_check in zip(responses, checked):
            verdicts: dict[str, Verdict] = {}
            for c in criteria:
                if c.id in by_check:
                    verdicts[c.id] = by_check[c.id]
                elif self.llm is None:
                    self.stats.skipped += 1
                    verdicts[c.id] = Verdict(
                        criterion_id=c.id, met=False, reason="no LLM judge configured", source="skipped"
                    )
                elif c.id in llm_failed and llm_verdicts[(c.id, r)].decided:
                    verdicts[c.id] = Verdict(
                        criterion_id=c.id,
                        met=False,
                        source="error",
                        reason=f"judge failed on another response of the group: {llm_failed[c.id]}"[:MAX_REASON_CHARS],
                    )
                else:
                    verdicts[c.id] = llm_verdicts[(c.id, r)]
            self.stats.left_out += sum(1 for v in verdicts.values() if v.source == "error")
            scored = [c for c in criteria if verdicts[c.id].decided]
            if not any(c.weight > 0 for c in scored):
                self.stats.unscoreable += 1
                if allow_unscoreable:
                    out.append(None)
                    continue
                log.warning(
                    "no positive-weight criterion could be scored (no LLM judge, or the judge failed on the "
                    "group) (%s); score 0",
                    [c.id for c in criteria],
                )
                out.append(ScoreResult(score=0.0, verdicts=verdicts))
                continue
            score = aggregate(scored, {c.id: verdicts[c.id].met for c in scored})
            out.append(ScoreResult(score=score, verdicts=verdicts))
        return out

    def _group_check_verdicts(self, criteria: list[Criterion], responses: list[str]) -> list[dict[str, Verdict]]:
        """Check verdicts per response; a criterion whose check failed on any response is "error" for all."""
        checked = [programmatic_verdicts(criteria, r) for r in responses]
        failed = {cid: v.reason for per in checked for cid, v in per.items() if v.source == "error"}
        if not failed:
            return checked
        self.stats.check_failures += len(failed)
        log.warning("checks could not decide on this group; left out of all %d scores: %s", len(responses), failed)
        for per in checked:
            for cid, reason in failed.items():
                if per[cid].source != "error":
                    per[cid] = Verdict(
                        criterion_id=cid,
                        met=False,
                        source="error",
                        reason=f"check failed on another response of the group: {reason}"[:MAX_REASON_CHARS],
                    )
        return checked

    @staticmethod
    def _group_llm_failures(llm_verdicts: dict[tuple[str, str], Verdict], n_responses: int) -> dict[str, str]:
        """Criterion id -> why, for the text-only criteria the LLM judge failed on for any response of the group."""
        failed: dict[str, str] = {}
        for (cid, _), v in llm_verdicts.items():
            if not v.decided:
                failed.setdefault(cid, v.reason)
        if failed:
            log.warning(
                "the LLM judge gave no verdict on this group; left out of all %d scores (not counted unmet): %s",
                n_responses,
                failed,
            )
        return failed

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._sems.get(loop)
        if sem is None:
            sem = self._sems[loop] = asyncio.Semaphore(self.concurrency)
        return sem

    async def _llm_verdict(self, criterion: Criterion, prompt_text: str, response: str) -> Verdict:
        key = (_criterion_key(criterion), _text_key(prompt_text), _text_key(response))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            self.stats.cache_hits += 1
            return Verdict(criterion_id=criterion.id, met=hit[0], reason=hit[1], source="llm")

        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        messages: list = [
            SystemMessage(JUDGE_SYSTEM),
            HumanMessage(
                JUDGE_USER.format(
                    prompt=prompt_text[:MAX_PROMPT_CHARS],
                    response=response[:MAX_RESPONSE_CHARS],
                    criterion=criterion.text,
                )
            ),
        ]
        problem = ""
        async with self._semaphore():
            for attempt in range(self.retries + 1):
                self.stats.llm_calls += 1
                try:
                    text, parsed = await asyncio.wait_for(self._ask(messages), timeout=self.call_timeout_s)
                except Exception as err:  # noqa: BLE001 - any judge failure is counted, logged and retried
                    self.stats.errors += 1
                    problem = f"{type(err).__name__}: {str(err)[:200]}"
                    log.warning(
                        "judge call failed for criterion %r (attempt %d/%d): %s",
                        criterion.id,
                        attempt + 1,
                        self.retries + 1,
                        problem,
                    )
                    continue
                if parsed is not None:
                    self._remember(key, parsed)
                    return Verdict(criterion_id=criterion.id, met=parsed[0], reason=parsed[1], source="llm")
                self.stats.malformed += 1
                problem = f"malformed reply: {text[:120]!r}"
                messages = [*messages, AIMessage(text[:MAX_REPLY_CHARS]), HumanMessage(JUDGE_RETRY)]
        self.stats.llm_failures += 1
        log.warning(
            "judge gave no usable verdict for criterion %r after %d attempts; leaving it out of the score (%s)",
            criterion.id,
            self.retries + 1,
            problem,
        )
        # Undecided, never unmet: a judge outage must not lower the reward as if the answer were wrong. Not
        # cached: a transient outage must not stick to this (criterion, response) forever.
        return Verdict(
            criterion_id=criterion.id, met=False, reason=f"judge failed: {problem}"[:MAX_REASON_CHARS], source="error"
        )

    async def _ask(self, messages: list) -> tuple[str, tuple[bool, str] | None]:
        """(reply text, parsed verdict or None) for one judge call."""
        if self._verdict_llm is None:
            text = _reply_text(await self.llm.ainvoke(messages))
            return text, parse_verdict(text)
        out = await self._verdict_llm.ainvoke(messages)
        text = _reply_text(out["raw"])
        # The guided-decoding object when it decoded; else the raw text (a model that ignored the schema).
        decoded = _from_obj(out.get("parsed"))
        return text, decoded if decoded is not None else parse_verdict(text)

    def _remember(self, key: tuple[str, str, str], value: tuple[bool, str]) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


def run_sync(coro):
    """Run `coro` to completion from synchronous code; inside a running event loop it must be awaited instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    name = coro.__qualname__  # the async function the sync wrapper runs: Judge.score, ameasure_candidate, ...
    coro.close()
    raise RuntimeError(f"the sync wrapper of {name} was called inside a running event loop; await {name} instead")
