"""The judge's drift line: a fixed probe set re-judged at each pause, written to metrics.jsonl and the report.

At the run's start (`JudgeDrift.begin`) `harness.judge_drift_items` (task, criterion, response) items are drawn,
seeded by `train.seed`, from the train tasks of harness version 0: each criterion of a task against the fixed
candidate responses of `tools.judge_check.candidate_responses`. They are judged once by the run's LLM judge (every
criterion as text only, so checked criteria are judged by the LLM too) and stored with those first verdicts in
`judge_probe.json` in the run folder; a resumed run reads the same set back, and a set is never redrawn over an
existing file. At each pause (every `harness.evolve_every` steps, with or without the evolver; the main process
only) `JudgeDrift.at_pause` asks a fresh judge (no cache) about the same items and returns the `judge_drift`
field of that step's metrics.jsonl line (`DriftLine`): agreement with the first judging, the met rate, agreement
with the checks where the item's criterion has one, n, and the verdicts the judge could not give.

What it shows: a judge whose verdicts on the same inputs change during training (the served model swapped or
updated, its server's settings or template changed, sampling that is not deterministic). It does not show a policy
that learns to please a judge that stays the same; that needs another judge (`harnessrl judge check` against
labels). On by default only where an LLM judge is configured: checks cannot drift. A probe that fails (the judge
down, a damaged file) is a logged warning and an `error` in the line, never a stop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agents.context import RULES
from harness.types import Criterion
from tools.judge import Judge
from tools.judge_check import Item, candidate_responses, check_truth, judge_items
from trainer.config import RunConfig
from trainer.harness_run import HarnessRun, judge_endpoint
from trainer.io import atomic_write_json
from trainer.step_metrics import DriftLine

log = logging.getLogger(__name__)

PROBE_FILE = "judge_probe.json"
# LangChain pools an OpenAI-compatible model's HTTP client process-wide per (base URL, timeout), and a pooled
# connection belongs to the event loop that opened it: reused from another loop it fails ("Event loop is closed").
# So the probe runs on one loop of its own, kept for the run, with a timeout of its own, so that no other loop of
# the run (the reward's, a round's) shares its connections.
DRIFT_TIMEOUT_S = 90.0


class ProbeItem(BaseModel):
    """One probe: the item, its check's verdict (None: no check) and the first judging's verdict (None: failed)."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    domain: str
    prompt: str
    criterion: Criterion
    response: str
    source: str
    check: bool | None
    first: bool | None = None

    def item(self) -> Item:
        return Item(self.task_id, self.domain, self.prompt, self.criterion, self.response, self.source, self.check)


class ProbeSet(BaseModel):
    """`judge_probe.json`: the items, the judge that first judged them and when."""

    model_config = ConfigDict(extra="forbid")

    judge_model: str
    seed: int
    first_judged_step: int | None = None  # None: drawn, not judged yet (the judge failed at the start)
    items: list[ProbeItem]


def drift_enabled(cfg: RunConfig) -> bool:
    """`harness.judge_drift`, or where it is unset (None), whether an LLM judge is configured."""
    on = cfg.harness.judge_drift
    return cfg.evolver.judge_model != RULES if on is None else on


def choose_probes(tasks: Sequence, n: int, seed: int) -> list[ProbeItem]:
    """`n` items drawn (seeded) from every (train task, criterion, candidate response) of `tasks`."""
    pool = [
        (t, c, source, r)
        for t in sorted(tasks, key=lambda t: t.id)
        if t.split == "train"
        for source, r in candidate_responses(t)
        for c in t.criteria
    ]
    return [
        ProbeItem(
            task_id=t.id,
            domain=t.domain,
            prompt=t.user_prompt,
            criterion=c,
            response=r,
            source=source,
            check=check_truth(c, r),
        )
        for t, c, source, r in random.Random(seed).sample(pool, min(n, len(pool)))
    ]


def _line(items: list[ProbeItem], now: list[bool | None], seconds: float, first: bool) -> DriftLine:
    decided = [v for v in now if v is not None]
    both = [(p.first, v) for p, v in zip(items, now, strict=True) if p.first is not None and v is not None]
    checked = [(p.check, v) for p, v in zip(items, now, strict=True) if p.check is not None and v is not None]
    firsts = [p.first for p in items if p.first is not None]
    return DriftLine(
        items=len(items),
        n=len(both),
        failed=len(now) - len(decided),
        agreement=sum(a == b for a, b in both) / len(both) if both else None,
        met_rate=sum(decided) / len(decided) if decided else None,
        first_met_rate=sum(firsts) / len(firsts) if firsts else None,
        check_agreement=sum(a == b for a, b in checked) / len(checked) if checked else None,
        first=first,
        seconds=round(seconds, 3),
    )


class JudgeDrift:
    """The drift probe of one run (main process): `begin` at the start, `at_pause` at each pause."""

    def __init__(self, run: HarnessRun) -> None:
        self.run = run
        self.cfg = run.cfg
        self.enabled = drift_enabled(run.cfg)
        self.path: Path = run.paths.root / PROBE_FILE
        self._loop: asyncio.AbstractEventLoop | None = None  # made at the first probe (see DRIFT_TIMEOUT_S)

    def begin(self, step: int) -> None:
        """Draw and first-judge the probe set unless the run folder has one (a resumed run keeps its own)."""
        if not self.enabled or self.path.exists():
            return
        line = self._probe(step)
        if line.error:
            log.warning(
                "judge drift: the probe set's first judging failed (%s); the next pause tries again", line.error
            )

    def at_pause(self, step: int, max_steps: int) -> dict[str, dict]:
        """`{"judge_drift": ...}` for the step's metrics line at a pause step, else {}."""
        if not self.enabled or step % self.cfg.harness.evolve_every or step >= max_steps:
            return {}
        line = self._probe(step)
        if line.error:
            log.warning("judge drift at step %d: the probe failed (%s); training goes on", step, line.error)
        elif line.agreement is not None and line.agreement < 1.0:
            log.warning(
                "judge drift at step %d: %d of %d probe verdicts differ from their first judging (met rate %s -> %s)",
                step,
                round((1 - line.agreement) * line.n),
                line.n,
                _pct(line.first_met_rate),
                _pct(line.met_rate),
            )
        return {"judge_drift": line.model_dump(exclude_none=True)}

    def _probe(self, step: int) -> DriftLine:
        t0 = time.monotonic()
        try:
            probes = self._load_or_choose()
            first = probes.first_judged_step is None
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            verdicts = self._loop.run_until_complete(judge_items(self._judge(), [p.item() for p in probes.items]))
            now = [v.met if v.decided else None for v in verdicts]
            line = _line(probes.items, now, time.monotonic() - t0, first)  # before a first judging is stored
            if first:
                if all(v is None for v in now):
                    reasons = {v.reason for v in verdicts}
                    return DriftLine(
                        items=len(now), failed=len(now), error=f"no verdict on any item: {sorted(reasons)[:2]}"
                    )
                for p, v in zip(probes.items, now, strict=True):
                    p.first = v
                probes.first_judged_step = step
                atomic_write_json(self.path, probes.model_dump(mode="json"))
            return line
        except Exception as err:  # noqa: BLE001 - a drift probe never stops training: logged and recorded instead
            return DriftLine(error=f"{type(err).__name__}: {str(err)[:300]}", seconds=round(time.monotonic() - t0, 3))

    def _judge(self) -> Judge:
        """A fresh judge (an empty cache: every pause asks the model again) for the run's judge model."""
        from agents.chat_models import load_chat_model

        base_url, api_key_env = judge_endpoint(self.cfg)
        model = load_chat_model(
            self.cfg.evolver.judge_model, base_url=base_url, api_key_env=api_key_env, timeout_s=DRIFT_TIMEOUT_S
        )
        return Judge(model)

    def _load_or_choose(self) -> ProbeSet:
        model = self.cfg.evolver.judge_model
        if self.path.exists():
            try:
                probes = ProbeSet.model_validate_json(self.path.read_text(encoding="utf-8"))
            except ValidationError as err:
                raise ValueError(
                    f"{self.path}: not a judge probe set ({err.errors()[0]['loc']}: {err.errors()[0]['msg']}); move "
                    "it aside to draw a new set (the drift line then starts again)"
                ) from err
            if probes.judge_model != model:
                log.warning(
                    "judge drift: %s was first judged by %s, the run's judge is now %s; the line compares the two",
                    self.path,
                    probes.judge_model,
                    model,
                )
            return probes
        tasks = self.run.state_for(0).tasks.values()
        seed = self.cfg.train.seed
        probes = ProbeSet(
            judge_model=model, seed=seed, items=choose_probes(list(tasks), self.cfg.harness.judge_drift_items, seed)
        )
        if not probes.items:
            raise ValueError("the suite has no train task to draw judge probes from")
        atomic_write_json(self.path, probes.model_dump(mode="json"))
        return probes


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def drift_sentence(lines: Mapping[int, Mapping[str, Any]]) -> str | None:
    """The report's line about the judge's drift from pause step -> `DriftLine` fields (None: no drift probe)."""
    if not lines:
        return None
    points = [(step, DriftLine.model_validate(lines[step])) for step in sorted(lines)]
    ran = [(s, d) for s, d in points if d.error is None and not d.first]
    errors = [s for s, d in points if d.error is not None]
    parts = [
        f"Judge drift ({points[0][1].items} fixed probe items re-judged at each pause, metrics.jsonl judge_drift):"
    ]
    if ran:
        parts.append(
            "agreement with their first judging "
            + ", ".join(f"{_pct(d.agreement)} at step {s}" for s, d in ran)
            + f"; met rate {_pct(ran[0][1].first_met_rate)} at first, {_pct(ran[-1][1].met_rate)} at step {ran[-1][0]}"
            + (
                f"; agreement with the checks {_pct(ran[-1][1].check_agreement)}"
                if ran[-1][1].check_agreement is not None
                else ""
            )
            + "."
        )
    else:
        parts.append("no pause re-judged the set.")
    if errors:
        parts.append(f"The probe failed at {len(errors)} pause(s) (steps {', '.join(map(str, errors))}).")
    return " ".join(parts)
