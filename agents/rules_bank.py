"""Templates and banks the rule proposer draws from: constraint bank, hint phrasing, check tightening.

Pure functions over `harness` types; `agents/proposer.py` decides which template to use when.
Everything produced here is a typed harness object that `harness.ops.apply` validates again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.checks import (
    AllOf,
    AnyOf,
    BulletCount,
    CharClass,
    Check,
    ContainsAll,
    ContainsAny,
    EndsWith,
    Forbids,
    MaxRepeatedNgram,
    Not,
    NumberedCount,
    SentenceCount,
    StartsWith,
    WordCount,
)
from harness.guidance import hint_leaks_reference
from harness.types import Criterion, Task

# A response must carry at least this many words before format-only credit counts ("What?" met
# "ends with a question" in the SmolLM2 spike: credit without content).
WORD_FLOOR = 8
REPEAT_LIMIT = 3


@dataclass(frozen=True)
class Constraint:
    """An added requirement that makes a saturated task harder: prompt sentence + matching check."""

    name: str
    instruction: str
    criterion_text: str
    check: Check
    difficulty: int  # higher is harder; the proposer steps along it with the critic's feedback


CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint(
        "question",
        "End your answer with a follow-up question to the reader.",
        "Ends with a follow-up question after a real answer",
        EndsWith(text="?", min_words=WORD_FLOOR),
        1,
    ),
    Constraint(
        "opener",
        "Begin your answer with the words 'In short,'.",
        "Begins with 'In short,'",
        StartsWith(text="In short,"),
        1,
    ),
    Constraint(
        "bullets3", "Answer in exactly 3 bullet points.", "Uses exactly 3 bullet points", BulletCount(min=3, max=3), 2
    ),
    Constraint(
        "words25",
        "Answer in under 25 words.",
        "Stays under 25 words while still answering",
        WordCount(min=WORD_FLOOR, max=25),
        2,
    ),
    Constraint(
        "numbered2",
        "Give your answer as a numbered list of 2 steps.",
        "Is a numbered list of exactly 2 items",
        NumberedCount(min=2, max=2),
        3,
    ),
    Constraint(
        "lowercase",
        "Write your whole answer in lowercase letters only.",
        "Uses lowercase letters only",
        AllOf(checks=[CharClass(mode="all_lowercase"), WordCount(min=WORD_FLOOR)]),
        3,
    ),
)


def constraint_used(task: Task, c: Constraint) -> bool:
    """The task already asks for this (same check type in a criterion or the instruction in the prompt)."""
    if c.instruction in task.user_prompt:
        return True
    return any(cr.check is not None and cr.check.type == c.check.type for cr in task.criteria)


def criterion_signature(task: Task, criterion_ids: list[str | None]) -> str:
    """The criterion part of a failure signature.

    "<kind>/<check type>" of the first of `criterion_ids` that `task` has ("judge" when it has no check), or ""
    when none is there. Cross-task evidence and generalised repairs match on it, since a repair of a criterion
    carries over to a criterion of the same kind and check.
    """
    by_id = {c.id: c for c in task.criteria}
    return next((signature_of(by_id[cid]) for cid in criterion_ids if cid is not None and cid in by_id), "")


def signature_of(c: Criterion) -> str:
    return f"{c.kind}/{c.check.type if c.check is not None else 'judge'}"


def fresh_id(base: str, taken: set[str]) -> str:
    cid, n = base, 2
    while cid in taken:
        cid, n = f"{base}-{n}", n + 1
    return cid


# -- hints -----------------------------------------------------------------------------------------
def hint_texts(c: Criterion, strong: bool) -> list[str]:
    """Candidate hint phrasings for one unmet criterion, most specific first.

    Phrased from the criterion's text and check phrases; callers drop any that leak the reference.
    """
    out: list[str] = []
    chk = c.check
    if isinstance(chk, ContainsAny):
        out.append(f"Make sure your answer mentions {chk.phrases[0]!r}.")
    elif isinstance(chk, ContainsAll):
        out.append("Make sure your answer mentions " + ", ".join(repr(p) for p in chk.phrases[:4]) + ".")
    elif isinstance(chk, Forbids):
        out.append("Do not use the words " + ", ".join(repr(p) for p in chk.phrases[:4]) + ".")
    elif isinstance(chk, WordCount):
        lo, hi = chk.min, chk.max
        out.append(f"Use between {lo or 1} and {hi} words." if hi is not None else f"Use at least {lo} words.")
    elif isinstance(chk, SentenceCount):
        out.append(f"Write {chk.min or 1} to {chk.max or (chk.min or 1) + 2} sentences.")
    elif isinstance(chk, BulletCount):
        out.append(f"Format the answer as {chk.min or 1} bullet points starting with '- '.")
    elif isinstance(chk, NumberedCount):
        out.append(f"Format the answer as a numbered list of {chk.min or 1} items ('1.', '2.', ...).")
    elif isinstance(chk, StartsWith):
        out.append(f"Begin your answer with {chk.text!r}.")
    elif isinstance(chk, EndsWith):
        out.append(f"End your answer with {chk.text!r}, after at least {max(chk.min_words, 1)} words of real content.")
    elif isinstance(chk, MaxRepeatedNgram):
        out.append("Do not repeat the same words; say each point once.")
    elif isinstance(chk, CharClass):
        out.append(f"Follow this format rule: {chk.mode.replace('_', ' ')}.")
    text = c.text.rstrip(".")
    out.append(f"A good answer {text[0].lower() + text[1:]}." if strong else f"Think about this: {text}.")
    if strong:
        out.reverse()  # the strong hint states the requirement itself before the format detail
    return out


def safe_hint(c: Criterion, task: Task, strong: bool) -> str | None:
    """The first phrasing that does not leak the task's reference answer (None when all leak)."""
    for text in hint_texts(c, strong):
        if len(text) <= 400 and not hint_leaks_reference(text, task.reference_answer):
            return text
    return None


# -- criteria edits --------------------------------------------------------------------------------
FORMAT_ONLY = (
    "ends_with",
    "starts_with",
    "word_count",
    "sentence_count",
    "bullets",
    "numbered",
    "char_class",
    "forbid_chars",
    "forbids",
    "max_repeated_ngram",
)


def is_format_only(c: Criterion) -> bool:
    """Met by form alone, so a content-free answer can collect it (the commonest spurious reward)."""
    return c.check is not None and c.check.type in FORMAT_ONLY


def tightened(check: Check | None, word_floor: int, repeat_limit: int | None) -> Check:
    """`check` and a word floor (and optionally a repeated-word limit), flattened into one all_of."""
    parts: list[Check] = []
    if isinstance(check, AllOf):
        parts.extend(check.checks)
    elif check is not None:
        parts.append(check)
    parts = [p for p in parts if not (isinstance(p, WordCount) and p.max is None)]
    parts.append(WordCount(min=word_floor))
    if repeat_limit is not None and not any(isinstance(p, MaxRepeatedNgram) for p in parts):
        parts.append(MaxRepeatedNgram(n=1, max_count=repeat_limit))
    return AllOf(checks=parts[:8])


def loosened(check: Check) -> Check | None:
    """A strictly easier version of a never-met check, or None when there is no obvious one."""
    if isinstance(check, ContainsAll) and len(check.phrases) > 1:
        return ContainsAny(phrases=check.phrases, case_sensitive=check.case_sensitive)
    if isinstance(check, ContainsAny | ContainsAll) and check.whole_word:
        return check.model_copy(update={"whole_word": False})
    if isinstance(check, WordCount | SentenceCount | BulletCount | NumberedCount):
        lo = None if check.min is None else max(0, check.min // 2)
        hi = None if check.max is None else check.max * 2
        if (lo, hi) != (check.min, check.max):
            return type(check)(min=lo, max=hi)
    if isinstance(check, EndsWith) and check.min_words > 0:
        return check.model_copy(update={"min_words": check.min_words // 2})
    if isinstance(check, AllOf) and len(check.checks) > 1:
        return AnyOf(checks=check.checks) if len(check.checks) == 2 else AllOf(checks=check.checks[:-1])
    return None


def partial_forms(check: Check) -> list[Check]:
    """Strictly easier forms of `check`, each met by every text that meets `check`: its partial credit.

    The loosened check (`loosened`), and where the ask has a part that can be met alone: the end or start mark
    anywhere in the answer, a list of any length, any one of several combined checks. Checks with no obvious part
    (a character class, a regex, a negation) have none.
    """
    forms: list[Check] = []
    loose = loosened(check)
    if loose is not None:
        forms.append(loose)
    if isinstance(check, EndsWith | StartsWith):
        forms.append(ContainsAny(phrases=[check.text], case_sensitive=check.case_sensitive, whole_word=False))
    if isinstance(check, BulletCount | NumberedCount) and check.min is not None and check.min > 1:
        forms.append(type(check)(min=1))
    if isinstance(check, AllOf) and len(check.checks) > 2:
        forms.append(AnyOf(checks=check.checks))
    out: list[Check] = []
    for f in forms:
        if f != check and f not in out:
            out.append(f)
    return out


def partial_split(c: Criterion, form: Check, taken: set[str]) -> list[Criterion]:
    """A criterion as a graded pair: its full form and a partial form (`partial_forms`), its weight shared.

    An answer that meets it in full earns both halves, as before; one that meets only the partial form earns half.
    """
    return _half_pair(c, taken, ("full", "part"), f"{c.text} (partly: {describe(form)})", form)


def describe(check: Check) -> str:
    """A partial form in words, for its criterion's text (a hint phrased from the criterion reads it too)."""
    if isinstance(check, ContainsAny):
        return "mentions " + " or ".join(repr(p) for p in check.phrases[:6])
    if isinstance(check, EndsWith):
        return f"ends with {check.text!r}" + (f" after at least {check.min_words} words" if check.min_words else "")
    if isinstance(check, WordCount | SentenceCount | BulletCount | NumberedCount):
        unit = {
            "word_count": "words",
            "sentence_count": "sentences",
            "bullets": "bullets",
            "numbered": "numbered items",
        }
        span = f"at least {check.min}" if check.max is None else f"{check.min or 0} to {check.max}"
        return f"{unit[check.type]}: {span}"
    if isinstance(check, AnyOf):
        return "meets any one of its parts"
    if isinstance(check, AllOf):
        return f"meets its first {len(check.checks)} parts"
    fields = check.model_dump(exclude_defaults=True, exclude={"type"})
    return f"{check.type} {fields}" if fields else check.type


def graded_parts(c: Criterion, taken: set[str]) -> list[Criterion] | None:
    """Split a multi-phrase criterion into one criterion per phrase (partial credit), weights shared."""
    chk = c.check
    if not isinstance(chk, ContainsAll | ContainsAny) or len(chk.phrases) < 2:
        return None
    phrases = chk.phrases[:6]
    w = _split_weight(c.weight, len(phrases))
    out = []
    for i, p in enumerate(phrases):
        cid = fresh_id(f"{c.id}.{i + 1}", taken)
        taken.add(cid)
        out.append(
            Criterion(
                id=cid,
                text=f"{c.text} (part {i + 1}: mentions {p!r})"[:500],
                weight=w,
                kind=c.kind,
                check=ContainsAny(phrases=[p], case_sensitive=chk.case_sensitive, whole_word=chk.whole_word),
                origin="evolver:split",
            )
        )
    return out


def strict_split(c: Criterion, taken: set[str], word_floor: int) -> list[Criterion]:
    """Split an always-met criterion into the original (half weight) and a stricter, content-bearing half."""
    text = f"{c.text}, developed in at least {word_floor} words without repetition"
    return _half_pair(c, taken, ("base", "strict"), text, tightened(c.check, word_floor, REPEAT_LIMIT))


def _half_pair(c: Criterion, taken: set[str], suffixes: tuple[str, str], text: str, check: Check) -> list[Criterion]:
    """`c` at half its weight, and a second criterion of the same kind and half weight with `text` and `check`."""
    w = _split_weight(c.weight, 2)
    kept_id, new_id = (fresh_id(f"{c.id}.{s}", taken) for s in suffixes)
    return [
        c.model_copy(update={"id": kept_id, "weight": w, "origin": "evolver:split"}),
        Criterion(id=new_id, text=text[:500], weight=w, kind=c.kind, check=check, origin="evolver:split"),
    ]


def _split_weight(weight: float, n: int) -> float:
    # Weights stay within the harness bound and never reach 0; one decimal keeps them readable.
    w = math.copysign(max(0.1, round(abs(weight) / n, 1)), weight)
    return w


def pitfall_repetition(taken: set[str]) -> Criterion:
    return Criterion(
        id=fresh_id("evo-pitfall-repeat", taken),
        text="Repeats the same word many times to collect credit",
        weight=-3.0,
        kind="pitfall",
        check=Not(check=MaxRepeatedNgram(n=1, max_count=REPEAT_LIMIT)),
        origin="evolver:pitfall",
    )


def pitfall_too_short(taken: set[str], floor: int = WORD_FLOOR) -> Criterion:
    return Criterion(
        id=fresh_id("evo-pitfall-empty", taken),
        text=f"Gives almost no content (fewer than {floor} words)",
        weight=-3.0,
        kind="pitfall",
        check=WordCount(max=floor - 1),
        origin="evolver:pitfall",
    )


def pitfall_padding(taken: set[str], limit: int) -> Criterion:
    return Criterion(
        id=fresh_id("evo-pitfall-padding", taken),
        text=f"Pads the answer beyond {limit} words",
        weight=-2.0,
        kind="pitfall",
        check=WordCount(min=limit + 1),
        origin="evolver:pitfall",
    )
