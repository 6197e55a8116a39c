"""How far an LLM judge can be trusted on a suite (`harnessrl judge check`); the rule judge for comparison.

Four measurements, each with its n:

- **agreement with the checks**: criteria that HAVE a programmatic check are put to the LLM judge as if they had
  none (`as_text_only`: the judge's prompt holds the criterion's text only), and its verdict is compared with the
  check's. Responses come from a JSONL file of `{task_id, response}` rows, or else from `candidate_responses`:
  the task's reference answer where it has one, else a sentence of its checks' keywords, and fixed perturbations
  of it (a chatty preamble, bullets, cut to four words, an off-topic text, the prompt echoed), so both verdicts
  occur; three per task (`task_candidates`), so a budget of items spans many tasks. Agreement (Wilson 95%
  interval), Cohen's kappa (seeded bootstrap 95% interval) and the confusion counts, per domain and overall
  (`agreement`).
- **agreement with labels**: a JSONL file of `{task_id, criterion_id, response, verdict}` rows (`parse_labels`; a
  bad row is refused naming file, line and field); the checks' own agreement with the labels beside it, for the
  labelled criteria that have a check.
- **position**: the judge (`tools/judge.py`) asks about one criterion and one response per call, so no other
  response or criterion shares a prompt and order cannot reach a verdict through the prompt. What is left is the
  order of a group's calls at the server (a batch's make-up can change a verdict where kernels are not batch
  invariant): each group is judged again with its responses reversed (a response judged first is judged last),
  and again in the same order, so the reversed pass's flip rate stands beside the plain repeat's.
- **verbosity**: the same response with `PADDING` appended (neutral filler that asks, answers and claims nothing)
  is judged again; the rates at which verdicts flip unmet → met and met → unmet are counted over the items whose
  check verdict the padding leaves unchanged (a word limit or an "ends with" criterion the padding really breaks is
  left out, and counted).

Every judge call goes through `tools.judge.Judge` with its cache off, so each pass asks the model again. A verdict
the judge could not give (after its retries) is counted as `failed`, never as met or unmet. `check_judge` judges
nothing before one call of one token (`ensure_reachable`) answers; when that call raises (a server that is down, a
wrong URL or model) it raises `JudgeUnreachable`.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.checks import AllOf, AnyOf, Check, CheckTimeout, ContainsAll, ContainsAny, words
from harness.data import DataError, RowError
from harness.scoring import Verdict
from harness.types import Criterion, Task
from tools.judge import Judge, run_sync

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
BOOTSTRAP = 1000  # resamples of kappa's interval
SEED = 0
DEFAULT_MAX_ITEMS = 120
CANDIDATES_PER_TASK = 3  # responses per task: 2 or more, so a group has an order to reverse

# Appended for the verbosity test: filler a response can carry without meeting or breaking any criterion about
# its content (it names no topic, gives no advice, makes no claim, asks nothing).
PADDING = (
    "The points above are given as written. They are repeated here, with nothing new added, so that the reply is "
    "longer. A longer reply does not change what the reply says. This paragraph adds no further information."
)
OFF_TOPIC = (
    "The printing press spread across Europe in the fifteenth century, and movable type made books cheaper to make."
)
PREAMBLE = "Sure! Here is my answer. "


class JudgeUnreachable(RuntimeError):
    """The judge's first call raised (connection refused, unknown model, timeout): nothing can be measured."""


@dataclass(frozen=True)
class Item:
    """One question to the judge: does `response` meet `criterion` of task `task_id`.

    `truth` is the check's or the label's answer (None: the check could not decide, the item is left out).
    """

    task_id: str
    domain: str
    prompt: str
    criterion: Criterion
    response: str
    source: str  # where the response came from: a candidate's name, "responses file", "labels file"
    truth: bool | None


@dataclass
class Agreement:
    """The judge against a reference verdict (a check's or a label) on n decided items of one domain."""

    domain: str
    n: int = 0
    agree: int = 0
    both_met: int = 0  # reference met, judge met
    judge_only: int = 0  # reference unmet, judge met
    reference_only: int = 0  # reference met, judge unmet
    neither: int = 0
    failed: int = 0  # items the judge gave no verdict on (left out of n)
    agreement: float | None = None
    low: float | None = None  # Wilson 95% interval of the agreement
    high: float | None = None
    kappa: float | None = None  # None: undefined (one verdict on both sides, or n = 0)
    kappa_low: float | None = None  # seeded bootstrap 95% interval of kappa
    kappa_high: float | None = None


@dataclass
class Flips:
    """How often a second judging of the same items changed the verdict."""

    n: int = 0
    flips: int = 0
    rate: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass
class Verbosity:
    """Verdict changes when `PADDING` is appended, over items whose check verdict it leaves unchanged."""

    n_unmet: int = 0  # items the judge found unmet without padding
    unmet_to_met: int = 0
    unmet_to_met_rate: float | None = None
    n_met: int = 0
    met_to_unmet: int = 0
    met_to_unmet_rate: float | None = None
    excluded: int = 0  # items whose check verdict the padding changed (a word limit, an "ends with")


@dataclass
class CheckReport:
    """What `check_judge` measured; `as_json` is the command's `--json`."""

    responses_from: str
    items: int
    by_domain: list[Agreement]  # agreement with the checks; the last row is "all"
    labels: list[Agreement] | None = None  # agreement with the labels (None: no labels file)
    checks_vs_labels: Agreement | None = None  # the checks' own agreement with the labels, where they have one
    position: Flips = field(default_factory=Flips)  # responses reversed within each group
    repeat: Flips = field(default_factory=Flips)  # the same order again: the flips order alone cannot explain
    verbosity: Verbosity = field(default_factory=Verbosity)
    judge_stats: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# -- statistics ---------------------------------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval of a proportion k/n; (None, None) when n = 0."""
    if n == 0:
        return None, None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of (reference, judge) verdict pairs; None when undefined (no pairs, or chance agreement 1)."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(a == b for a, b in pairs) / n
    p_ref = sum(a for a, _ in pairs) / n
    p_judge = sum(b for _, b in pairs) / n
    chance = p_ref * p_judge + (1 - p_ref) * (1 - p_judge)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1 - chance)


def kappa_interval(
    pairs: Sequence[tuple[bool, bool]], resamples: int = BOOTSTRAP, seed: int = SEED
) -> tuple[float | None, float | None]:
    """Seeded percentile-bootstrap 95% interval of kappa; resamples where kappa is undefined are dropped."""
    if len(pairs) < 2:
        return None, None
    rng = random.Random(seed)
    values = sorted(
        k for k in (cohen_kappa(rng.choices(pairs, k=len(pairs))) for _ in range(resamples)) if k is not None
    )
    if not values:
        return None, None
    return values[int(0.025 * (len(values) - 1))], values[int(math.ceil(0.975 * (len(values) - 1)))]


def agreement(domain: str, pairs: Sequence[tuple[bool, bool]], failed: int = 0) -> Agreement:
    """Agreement, kappa and confusion counts of (reference, judge) pairs."""
    out = Agreement(domain=domain, n=len(pairs), failed=failed)
    for ref, judged in pairs:
        out.agree += ref == judged
        if ref and judged:
            out.both_met += 1
        elif judged:
            out.judge_only += 1
        elif ref:
            out.reference_only += 1
        else:
            out.neither += 1
    if out.n:
        out.agreement = out.agree / out.n
        out.low, out.high = wilson(out.agree, out.n)
    out.kappa = cohen_kappa(pairs)
    if out.kappa is not None:
        out.kappa_low, out.kappa_high = kappa_interval(pairs)
    return out


def flips(first: Sequence[Verdict], second: Sequence[Verdict]) -> Flips:
    """How many items decided both times got another verdict the second time."""
    pairs = [(a.met, b.met) for a, b in zip(first, second, strict=True) if a.decided and b.decided]
    k = sum(a != b for a, b in pairs)
    low, high = wilson(k, len(pairs))
    return Flips(n=len(pairs), flips=k, rate=k / len(pairs) if pairs else None, low=low, high=high)


def per_domain(items: Sequence[Item], verdicts: Sequence[Verdict]) -> list[Agreement]:
    """Agreement of the judge with each item's truth, one row per domain (sorted) and a last row "all"."""
    pairs: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    failed: dict[str, int] = defaultdict(int)
    for item, v in zip(items, verdicts, strict=True):
        if item.truth is None:
            continue
        if not v.decided:
            failed[item.domain] += 1
            continue
        pairs[item.domain].append((item.truth, v.met))
    domains = sorted(set(pairs) | set(failed))
    rows = [agreement(d, pairs[d], failed[d]) for d in domains]
    rows.append(agreement("all", [p for d in domains for p in pairs[d]], sum(failed.values())))
    return rows


# -- items ------------------------------------------------------------------------------------------------------
def as_text_only(criterion: Criterion) -> Criterion:
    """The criterion as the LLM judge sees one without a check.

    The judge's prompt holds the criterion's text only, never its weight or kind; the weight is made positive so
    that `Judge.score` does not call a group of pitfalls unscoreable (a warning that would mean nothing here).
    """
    return criterion.model_copy(update={"check": None, "weight": abs(criterion.weight), "kind": "important"})


def _keywords(check: Check) -> list[str]:
    """Phrases a response must hold for `check` to be met: the first of contains_any, all of contains_all."""
    if isinstance(check, ContainsAny):
        return check.phrases[:1]
    if isinstance(check, ContainsAll):
        return list(check.phrases)
    if isinstance(check, AllOf):
        return [p for c in check.checks for p in _keywords(c)]
    if isinstance(check, AnyOf):
        return _keywords(check.checks[0])
    return []


def keyword_answer(task: Task) -> str:
    """One sentence made of the keywords the task's positive criteria check for (a response without a reference)."""
    phrases: list[str] = []
    for c in task.criteria:
        if c.weight > 0 and c.check is not None:
            phrases += [p for p in _keywords(c.check) if p not in phrases]
    topic = str(task.meta.get("topic") or "this question")
    if not phrases:
        return f"Here are a few words about {topic}."
    return f"About {topic}: " + ", ".join(phrases) + "."


def candidate_responses(task: Task) -> list[tuple[str, str]]:
    """(source, response) candidates for a task without responses of its own, fixed so a rerun asks the same."""
    base_name, base = (
        ("reference", task.reference_answer) if task.reference_answer else ("keywords", keyword_answer(task))
    )
    sentences = [s.strip() for s in base.replace("; ", ". ").split(". ") if s.strip()]
    out = [
        (base_name, base),
        (f"{base_name} + preamble", PREAMBLE + base),
        (f"{base_name} as bullets", "\n".join(f"- {s.rstrip('.')}." for s in sentences)),
        (f"{base_name} cut to 4 words", " ".join(words(base)[:4])),
        ("off-topic", OFF_TOPIC),
        ("prompt echoed", task.user_prompt),
    ]
    if task.reference_answer:
        out.insert(1, ("keywords", keyword_answer(task)))
    return out


def check_truth(criterion: Criterion, response: str) -> bool | None:
    """The criterion's check on the response; None: it has no check, or the check could not decide."""
    if criterion.check is None:
        return None
    try:
        return criterion.check.evaluate(response)
    except CheckTimeout:
        return None


def interleave(tasks: Sequence[Task]) -> list[Task]:
    """Tasks by id within each domain, the domains taken in turn, so a small `max_items` still spans them all."""
    by_domain: dict[str, list[Task]] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.id):
        by_domain[t.domain].append(t)
    queues = [by_domain[d] for d in sorted(by_domain)]
    out: list[Task] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out += [q[i] for q in queues if i < len(q)]
    return out


def task_candidates(task: Task, index: int, k: int = CANDIDATES_PER_TASK) -> list[tuple[str, str]]:
    """`k` of the task's `candidate_responses`: the first (reference or keywords) and the next ones in turn.

    The turn moves with the task's `index`, so a budget spread over many tasks still meets every perturbation.
    """
    every = candidate_responses(task)
    rest = every[1:]
    start = (index * (k - 1)) % len(rest)
    return [every[0], *[rest[(start + j) % len(rest)] for j in range(min(k - 1, len(rest)))]]


def check_items(
    tasks: Sequence[Task], responses: dict[str, list[str]] | None, max_items: int = DEFAULT_MAX_ITEMS
) -> list[Item]:
    """Items for the checked criteria: each response of a task against each of its criteria that has a check.

    `responses` (task id -> responses, from `parse_responses`) limits the tasks to those it names; None:
    `task_candidates` of every task. Whole tasks are taken (domains in turn) until `max_items` is reached.
    """
    items: list[Item] = []
    for index, task in enumerate(interleave(tasks)):
        if responses is not None and task.id not in responses:
            continue
        pairs = (
            [("responses file", r) for r in responses[task.id]]
            if responses is not None
            else task_candidates(task, index)
        )
        checked = [c for c in task.criteria if c.check is not None]
        new = [
            Item(task.id, task.domain, task.user_prompt, c, r, source, check_truth(c, r))
            for source, r in pairs
            for c in checked
        ]
        new = [i for i in new if i.truth is not None]
        if items and len(items) + len(new) > max_items:
            break
        items += new
    return items


# -- files --------------------------------------------------------------------------------------------------------
def _rows(path: Path) -> list[tuple[int, dict[str, Any]] | RowError]:
    out: list[tuple[int, dict[str, Any]] | RowError] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DataError([RowError(str(path), 0, "", f"cannot read: {err}")]) from err
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            out.append(RowError(str(path), line_no, "", f"not JSON: {err.msg}"))
            continue
        if not isinstance(row, dict):
            out.append(RowError(str(path), line_no, "", f"expected a JSON object, got {type(row).__name__}"))
            continue
        out.append((line_no, row))
    return out


def _field(path: Path, line: int, row: dict[str, Any], name: str, kind: type, errors: list[RowError]) -> Any:
    value = row.get(name)
    if name not in row:
        errors.append(RowError(str(path), line, name, "missing"))
    elif not isinstance(value, kind) or (kind is str and not value.strip()):
        errors.append(RowError(str(path), line, name, f"expected a non-empty {kind.__name__}, got {value!r}"[:200]))
    else:
        return value
    return None


def parse_responses(path: Path, tasks: Sequence[Task]) -> dict[str, list[str]]:
    """Task id -> responses from a JSONL file of `{task_id, response}` rows; every bad row in one `DataError`."""
    by_id = {t.id: t for t in tasks}
    errors: list[RowError] = []
    out: dict[str, list[str]] = defaultdict(list)
    for entry in _rows(path):
        if isinstance(entry, RowError):
            errors.append(entry)
            continue
        line, row = entry
        tid = _field(path, line, row, "task_id", str, errors)
        response = _field(path, line, row, "response", str, errors)
        if tid is not None and tid not in by_id:
            errors.append(RowError(str(path), line, "task_id", f"no task {tid!r} in the suite"))
        elif tid is not None and response is not None:
            out[tid].append(response)
    if errors:
        raise DataError(errors)
    if not out:
        raise DataError([RowError(str(path), 0, "", "no rows")])
    return dict(out)


def parse_labels(path: Path, tasks: Sequence[Task]) -> list[Item]:
    """Labelled items from a JSONL file of `{task_id, criterion_id, response, verdict}` rows.

    `verdict` is a JSON boolean, the criterion one of the task's criteria or audit criteria; every bad row is
    named in one `DataError`.
    """
    by_id = {t.id: t for t in tasks}
    errors: list[RowError] = []
    items: list[Item] = []
    for entry in _rows(path):
        if isinstance(entry, RowError):
            errors.append(entry)
            continue
        line, row = entry
        tid = _field(path, line, row, "task_id", str, errors)
        cid = _field(path, line, row, "criterion_id", str, errors)
        response = _field(path, line, row, "response", str, errors)
        verdict = _field(path, line, row, "verdict", bool, errors)
        if tid is None:
            continue
        task = by_id.get(tid)
        if task is None:
            errors.append(RowError(str(path), line, "task_id", f"no task {tid!r} in the suite"))
            continue
        criteria = {c.id: c for c in [*task.criteria, *task.audit_criteria]}
        if cid is not None and cid not in criteria:
            errors.append(
                RowError(str(path), line, "criterion_id", f"task {tid!r} has no criterion {cid!r} ({sorted(criteria)})")
            )
            continue
        if cid is not None and response is not None and verdict is not None:
            items.append(Item(tid, task.domain, task.user_prompt, criteria[cid], response, "labels file", verdict))
    if errors:
        raise DataError(errors)
    if not items:
        raise DataError([RowError(str(path), 0, "", "no rows")])
    return items


# -- judging ------------------------------------------------------------------------------------------------------
async def judge_items(
    judge: Judge, items: Sequence[Item], *, reverse: bool = False, pad: bool = False
) -> list[Verdict]:
    """The judge's verdict on each item (an LLM judge's on the criterion as text only, the rule judge's by its check).

    Items of one (task, prompt) form one `Judge.score` group (its criteria × its responses, in item order, or with
    the responses reversed); groups are judged concurrently. `pad`: `PADDING` appended to every response.
    """
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[(item.task_id, item.prompt)].append(i)

    as_asked = as_text_only if judge.llm is not None else (lambda c: c)  # the rule judge decides by the checks

    async def one(idx: list[int]) -> dict[int, Verdict]:
        criteria = list({items[i].criterion.id: as_asked(items[i].criterion) for i in idx}.values())
        responses = list(dict.fromkeys(_padded(items[i].response, pad) for i in idx))
        if reverse:
            responses.reverse()
        results = await judge.score(criteria, items[idx[0]].prompt, responses)
        by_response = dict(zip(responses, results, strict=True))
        return {i: by_response[_padded(items[i].response, pad)].verdicts[items[i].criterion.id] for i in idx}

    found: dict[int, Verdict] = {}
    for part in await asyncio.gather(*(one(idx) for idx in groups.values())):
        found.update(part)
    return [found[i] for i in range(len(items))]


def _padded(response: str, pad: bool) -> str:
    return f"{response.rstrip()}\n\n{PADDING}" if pad else response


def verbosity(items: Sequence[Item], plain: Sequence[Verdict], padded: Sequence[Verdict]) -> Verbosity:
    """Flips between the plain and the padded judging, over items whose check verdict the padding leaves as it was."""
    out = Verbosity()
    for item, a, b in zip(items, plain, padded, strict=True):
        if check_truth(item.criterion, _padded(item.response, True)) != item.truth:
            out.excluded += 1
            continue
        if not (a.decided and b.decided):
            continue
        if a.met:
            out.n_met += 1
            out.met_to_unmet += not b.met
        else:
            out.n_unmet += 1
            out.unmet_to_met += b.met
    out.unmet_to_met_rate = out.unmet_to_met / out.n_unmet if out.n_unmet else None
    out.met_to_unmet_rate = out.met_to_unmet / out.n_met if out.n_met else None
    return out


async def ensure_reachable(llm: BaseChatModel, timeout_s: float = 120.0) -> None:
    """One call of at most one token; `JudgeUnreachable` with the client's error when it raises.

    A judge that answers badly is what the check measures; one that does not answer at all (nothing listening,
    a wrong model name, a refused key) leaves nothing to measure, so it is one error before any item is asked.
    """
    from langchain_core.messages import HumanMessage

    try:
        await asyncio.wait_for(llm.bind(max_tokens=1).ainvoke([HumanMessage("Reply OK.")]), timeout=timeout_s)
    except Exception as err:  # noqa: BLE001 - whatever the client raised is the reason, named in the error
        raise JudgeUnreachable(f"the judge did not answer a first call ({type(err).__name__}: {err})"[:600]) from err


async def acheck_judge(
    llm: BaseChatModel | None,
    items: Sequence[Item],
    *,
    labels: Sequence[Item] | None = None,
    responses_from: str,
    concurrency: int = 16,
) -> CheckReport:
    """Every measurement of the module docstring for `items` (from `check_items`) and `labels` (`parse_labels`).

    `llm=None` is the rule judge (`evolver.judge_model=rules`): the checks decide, text-only criteria are skipped.
    Its agreement with the checks is 1 and its order and padding flips 0 by construction (the run shows it); what
    it measures is its agreement with labels and how many labelled criteria it cannot decide (`failed`)."""
    if not items:
        raise ValueError("no items: the suite has no checked criteria for the tasks and responses given")
    judge = Judge(llm, concurrency=concurrency, cache_size=0)  # no cache: every pass asks the model again
    if llm is not None:
        await ensure_reachable(llm)
    forward = await judge_items(judge, items)
    report = CheckReport(responses_from=responses_from, items=len(items), by_domain=per_domain(items, forward))
    report.position = flips(forward, await judge_items(judge, items, reverse=True))
    report.repeat = flips(forward, await judge_items(judge, items))
    report.verbosity = verbosity(items, forward, await judge_items(judge, items, pad=True))
    if labels:
        report.labels = per_domain(labels, await judge_items(judge, labels))
        checked = [(i.truth, check_truth(i.criterion, i.response)) for i in labels]
        report.checks_vs_labels = agreement("all", [(t, c) for t, c in checked if t is not None and c is not None])
    report.judge_stats = asdict(judge.stats)
    return report


def check_judge(llm: BaseChatModel | None, items: Sequence[Item], **kw: Any) -> CheckReport:
    """Blocking `acheck_judge`."""
    return run_sync(acheck_judge(llm, items, **kw))
