"""HarnessRL's harness: the training configuration that co-evolves with the policy.

The configuration is task sampling, rollout guidance and rubric criteria; the package also holds scoring,
failure detection and the versioned store.

Import-light on purpose: nothing here loads torch, trl or chromadb (tests/test_harness_imports.py).
"""

from harness.checks import CHECK_TYPES, Check, parse_check
from harness.detector import BatchStats, Detector, DetectorConfig, GroupStats, RolloutRecord
from harness.guidance import hint_leaks_reference, render_prompt, reveal_fraction, visible_hints
from harness.ops import UpdateRejected, apply, validate
from harness.sampling import TaskSampler
from harness.scoring import ScoreResult, Verdict, aggregate, programmatic_verdicts, score_programmatic
from harness.store import HarnessStore, StoreCorrupt, UpdateRecord
from harness.types import (
    FAILURE_TYPES,
    INTERFACES,
    Criterion,
    FailureEvent,
    Guidance,
    HarnessState,
    HarnessUpdate,
    Hint,
    Message,
    Schedule,
    Task,
    TaskSampling,
)

__all__ = [
    "CHECK_TYPES",
    "FAILURE_TYPES",
    "INTERFACES",
    "BatchStats",
    "Check",
    "Criterion",
    "Detector",
    "DetectorConfig",
    "FailureEvent",
    "GroupStats",
    "Guidance",
    "HarnessState",
    "HarnessStore",
    "HarnessUpdate",
    "Hint",
    "Message",
    "RolloutRecord",
    "Schedule",
    "ScoreResult",
    "StoreCorrupt",
    "Task",
    "TaskSampler",
    "TaskSampling",
    "UpdateRecord",
    "UpdateRejected",
    "Verdict",
    "aggregate",
    "apply",
    "hint_leaks_reference",
    "parse_check",
    "programmatic_verdicts",
    "render_prompt",
    "reveal_fraction",
    "score_programmatic",
    "validate",
    "visible_hints",
]
