"""A run folder's logs read back typed: metrics.jsonl, rounds.jsonl, events.jsonl and the harness's updates.jsonl.

The report, the replay and the benchmarks read these files; each line becomes its type
(`trainer.step_metrics.StepMetrics`, `graphs.round_record.RoundRecord`, `harness.types.FailureEvent`,
`harness.store.UpdateRecord`). A line that is not
JSON is skipped with a warning naming file and line (`trainer.io.read_jsonl`: a killed writer leaves a torn tail);
a JSON line that is not a record of its type raises `ValueError` naming file, line and field.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from graphs.round_record import RoundRecord
from harness.store import UpdateRecord
from harness.types import FailureEvent
from trainer.io import read_jsonl
from trainer.step_metrics import StepMetrics

T = TypeVar("T")


def _typed(path: Path, parse: Callable[[dict[str, Any]], T]) -> list[T]:
    path = Path(path)
    bad: list[int] = []
    lines = read_jsonl(path, bad=bad)
    if not lines:
        return []
    numbers = [i for i, raw in enumerate(path.read_bytes().split(b"\n"), 1) if raw.strip() and i not in bad]
    out = []
    for i, line in zip(numbers, lines):
        try:
            out.append(parse(line))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "(line)"
            raise ValueError(f"{path}:{i}: field {field}: {err['msg']}") from None
    return out


def read_metrics(path: Path) -> list[StepMetrics]:
    """metrics.jsonl: one `StepMetrics` per training step ([] when there is no file)."""
    return _typed(path, StepMetrics.model_validate)


def read_rounds(path: Path) -> list[RoundRecord]:
    """rounds.jsonl: one `RoundRecord` per pause ([] when there is no file)."""
    return _typed(path, RoundRecord.model_validate)


def read_events(path: Path) -> list[FailureEvent]:
    """events.jsonl: the detector's events (the harness version each line carries is dropped)."""
    return _typed(path, FailureEvent.from_log_line)


def read_updates(path: Path) -> list[UpdateRecord]:
    """The harness's updates.jsonl, recovery records (no update) included."""
    return _typed(path, UpdateRecord.model_validate)
