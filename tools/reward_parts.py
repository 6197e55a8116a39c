"""Reward parts beside the rubric (`train.rewards`) and `combined_reward`, the one place a rollout's reward is made.

A run's reward is `rubric + sum(weight_i * part_i)`: the rubric score (the harness's, which the evolver repairs) at
weight 1, plus each part's per-rollout value times its weight. The rubric keeps weight 1 because the evolver's
numbers (the detector's `tau_lo`/`tau_hi`, the critic's gains and guards) are in rubric units; a part's weight says
how much it counts next to the rubric, so a separate rubric weight would only rescale every other weight.

Kinds (each a pydantic model, one per entry of `train.rewards`; `name` and `weight` on all):

- `length`: `1 - min(1, gap / scale)` where gap is `|words - target|` (`over_only`: only words beyond `target`
  count, shorter completions get 1): a bonus for staying near a length, or, since a constant does not change a
  GRPO advantage, a penalty for exceeding it;
- `regex`: 1 when the completion matches `pattern` (a format reward), on the bounded engine of `harness.checks.Regex`
  (patterns vetted by `harness.regex_syntax`); a search that times out counts 0, with a warning;
- `reference`: 1 when the completion matches the task's `reference_answer` (`match`: `exact` after stripping,
  `normalised` word tokens casefolded, `contains` the normalised reference as a run of whole words); a task without a
  reference answer gets 0 for every rollout (a constant: no advantage);
- `python`: the user's own function `module:callable` with TRL's reward-function signature, called as
  `fn(prompts=[messages], completions=[[{"role": "assistant", "content": text}]], task_id=[...],
  reference_answer=[...])` returning one float (or None: TRL's "not applicable", counted 0) per completion. It is
  imported when the config is read, so a name that cannot be imported is a config error; it is code the user named
  in their config, never anything an LLM wrote.

`combined_reward` is called by training's reward (`trainer/reward.py`), the pre-flight probes (`trainer/preflight.py`)
and the critic's probe scoring (`tools.group_metrics.score_rows`), so what the detector, the critic and training's
grading (which reads the training groups' stats) see is what GRPO's advantages are computed on.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from harness.checks import CheckTimeout, Regex, words
from harness.regex_syntax import validate_safe_pattern
from harness.types import Task

log = logging.getLogger(__name__)

RUBRIC = "rubric"  # the rubric's own name among the parts (reserved)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    weight: float

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r} is not a name: letters, digits, '_', '.', '-', starting with a letter or '_'")
        if v == RUBRIC:
            raise ValueError(f"{RUBRIC!r} is the rubric's own name; pick another")
        return v


class LengthPart(_Part):
    kind: Literal["length"] = "length"
    target: int = Field(ge=0, description="words the completion should have")
    scale: float = Field(gt=0, description="words away from target at which the value reaches 0")
    over_only: bool = False  # only words beyond target count

    def values(self, rows: Rows) -> list[float]:
        out = []
        for t in rows.texts:
            n = len(words(t))
            gap = n - self.target if self.over_only else abs(n - self.target)
            out.append(1.0 - min(1.0, max(0, gap) / self.scale))
        return out


class RegexPart(_Part):
    kind: Literal["regex"] = "regex"
    pattern: str = Field(min_length=1)
    case_sensitive: bool = False

    @field_validator("pattern")
    @classmethod
    def _safe(cls, v: str) -> str:
        validate_safe_pattern(v)
        return v

    def values(self, rows: Rows) -> list[float]:
        check = Regex(pattern=self.pattern, case_sensitive=self.case_sensitive)
        out = []
        for t in rows.texts:
            try:
                out.append(float(check.evaluate(t)))
            except CheckTimeout as err:
                log.warning("reward part %s: %s; the rollout's value counts 0", self.name, err)
                out.append(0.0)
        return out


def _normalised(text: str) -> str:
    return " ".join(w.casefold() for w in words(text))


class ReferencePart(_Part):
    kind: Literal["reference"] = "reference"
    match: Literal["exact", "normalised", "contains"] = "normalised"

    def values(self, rows: Rows) -> list[float]:
        ref = rows.task.reference_answer
        if not ref or not ref.strip():
            return [0.0] * len(rows.texts)
        if self.match == "exact":
            return [float(t.strip() == ref.strip()) for t in rows.texts]
        r = _normalised(ref)
        if self.match == "normalised":
            return [float(_normalised(t) == r) for t in rows.texts]
        return [float(f" {r} " in f" {_normalised(t)} ") for t in rows.texts]


class PythonPart(_Part):
    kind: Literal["python"] = "python"
    function: str = Field(description="module:callable with TRL's reward-function signature")
    _fn: Callable[..., Any] = PrivateAttr()

    @field_validator("function")
    @classmethod
    def _importable(cls, v: str) -> str:
        _load(v)
        return v

    def model_post_init(self, context: Any) -> None:
        self._fn = _load(self.function)

    def values(self, rows: Rows) -> list[float]:
        n = len(rows.texts)
        got = self._fn(
            prompts=[list(p) for p in rows.prompts],
            completions=[[{"role": "assistant", "content": t}] for t in rows.texts],
            task_id=[rows.task.id] * n,
            reference_answer=[rows.task.reference_answer] * n,
        )
        if not isinstance(got, (list, tuple)) or len(got) != n:
            raise ValueError(
                f"reward part {self.name} ({self.function}) returned {type(got).__name__} "
                f"{got!r:.80}, not a list of {n} floats (one per completion)"
            )
        out = []
        for v in got:
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"reward part {self.name} ({self.function}) returned {v!r}, not a float or None")
            out.append(0.0 if v is None else float(v))  # None: not applicable (TRL adds it as 0, nansum)
        return out


def _load(spec: str) -> Callable[..., Any]:
    """`package.module:callable` imported; every way it can fail is a ValueError saying which."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{spec!r} is not 'module:callable' (e.g. my_rewards:brevity)")
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"cannot import module {module!r} ({err}); is it on PYTHONPATH?") from None
    obj: Any = mod
    for name in attr.split("."):
        try:
            obj = getattr(obj, name)  # the user's module, not our type
        except AttributeError:
            raise ValueError(f"module {module!r} has no {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"{spec!r} is a {type(obj).__name__}, not a function")
    if inspect.iscoroutinefunction(obj):
        raise ValueError(f"{spec!r} is async; a reward part must be a plain function")
    return obj


RewardPart = LengthPart | RegexPart | ReferencePart | PythonPart
KINDS: dict[str, type[_Part]] = {
    "length": LengthPart,
    "regex": RegexPart,
    "reference": ReferencePart,
    "python": PythonPart,
}


def parse_parts(raw: Sequence[Mapping[str, Any]], where: str = "train.rewards") -> tuple[RewardPart, ...]:
    """The typed parts of a config list; a bad entry is a ValueError naming it (`train.rewards[1].function: ...`)."""
    parts: list[RewardPart] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{at}: expected a mapping with name, weight and kind, got {entry!r}")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise ValueError(f"{at}.kind: {kind!r} is not one of {sorted(KINDS)}")
        try:
            part = KINDS[kind].model_validate(dict(entry))
        except ValidationError as err:
            e = err.errors()[0]
            field = ".".join(str(x) for x in e["loc"]) or "?"
            msg = e["msg"].removeprefix("Value error, ")
            raise ValueError(f"{at}.{field}: {msg}") from None
        if part.name in seen:
            raise ValueError(f"{at}.name: {part.name!r} names another part too; names must differ")
        seen.add(part.name)
        parts.append(part)  # type: ignore[arg-type]
    return tuple(parts)


def parts_to_json(raw: Sequence[Mapping[str, Any]]) -> list[str]:
    """The config's entries as JSON strings (how `EvolverContext.reward_parts` carries them: plain values)."""
    return [json.dumps(dict(e), sort_keys=True) for e in raw]


def parts_from_json(texts: Sequence[str], where: str = "reward_parts") -> tuple[RewardPart, ...]:
    """Parts back from `parts_to_json`'s strings, checked as at config load."""
    raw = []
    for i, t in enumerate(texts):
        try:
            raw.append(json.loads(t))
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}[{i}]: not a JSON object ({err})") from None
    return parse_parts(raw, where)


@dataclass(frozen=True)
class Rows:
    """The rollouts of one group that a part reads: one task, each rollout's prompt (messages) and text."""

    task: Task
    prompts: Sequence[Sequence[Mapping[str, str]]]
    texts: Sequence[str]


@dataclass(frozen=True)
class Combined:
    """One group's rewards: `rewards[i] = rubric[i] + sum(weight * parts[name][i])`; part values unweighted."""

    rewards: list[float]
    rubric: list[float]
    parts: dict[str, list[float]]


def combined_reward(
    rubric: Sequence[float],
    parts: Sequence[RewardPart],
    *,
    task: Task,
    prompts: Sequence[Sequence[Mapping[str, str]]],
    texts: Sequence[str],
) -> Combined:
    """The reward of each rollout of one group of `task`: its rubric score plus each part's weighted value."""
    if not (len(rubric) == len(prompts) == len(texts)):
        raise ValueError(f"combined_reward: {len(rubric)} scores, {len(prompts)} prompts, {len(texts)} texts")
    rows = Rows(task=task, prompts=prompts, texts=texts)
    values = {p.name: p.values(rows) for p in parts}
    rewards = [float(r) + sum(p.weight * values[p.name][i] for p in parts) for i, r in enumerate(rubric)]
    return Combined(rewards=rewards, rubric=[float(r) for r in rubric], parts=values)
