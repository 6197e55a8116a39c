"""Shared helpers for the trainer tests (no tests here): a small task suite whose failures are certain
for the random tiny model, and a config builder for runs in a temp folder."""

from __future__ import annotations

import json
from pathlib import Path

from trainer.config import RunConfig
from trainer.config_loader import load_config

REPO = Path(__file__).resolve().parents[2]


def _task(
    tid: str,
    prompt: str,
    criteria: list[dict],
    split: str = "train",
    domain: str = "writing",
    audit: list[dict] | None = None,
) -> dict:
    return {
        "id": tid,
        "domain": domain,
        "split": split,
        "prompt": [{"role": "user", "content": prompt}],
        "criteria": criteria,
        "audit_criteria": audit or [],
    }


# A random 2M-parameter model never writes "Paris"/"photosynthesis" (collapse_low, all-0 groups) and
# always stays under 10,000 words (collapse_high, all-1 groups): both failures are certain.
# `t-long`: 16 tokens of the tiny model give 5-13 words (measured on 64 samples: median 8), so "at least
# 18 words" is never met (collapse_low), while the rule proposer's loosened check (min 9, as a partial form or
# in place of the criterion) is met by about half of the rollouts: with k=8 the critic measures a std gain.
TINY_TASKS = [
    _task(
        "t-long",
        "Write a long essay about rivers.",
        [
            {
                "id": "c1",
                "text": "At least 18 words",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "word_count", "min": 18},
            }
        ],
    ),
    _task(
        "t-paris",
        "What is the capital of France?",
        [
            {
                "id": "c1",
                "text": "Names Paris",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "contains_any", "phrases": ["Paris"]},
            }
        ],
        domain="science",
    ),
    _task(
        "t-photo",
        "Explain photosynthesis in one sentence.",
        [
            {
                "id": "c1",
                "text": "Mentions photosynthesis",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "contains_any", "phrases": ["photosynthesis"]},
            },
            {
                "id": "c2",
                "text": "Mentions light",
                "weight": 3,
                "kind": "important",
                "check": {"type": "contains_any", "phrases": ["light", "sun"]},
            },
        ],
        domain="science",
    ),
    _task(
        "t-any",
        "Say anything you like.",
        [
            {
                "id": "c1",
                "text": "Under 10000 words",
                "weight": 1,
                "kind": "optional",
                "check": {"type": "word_count", "max": 10000},
            }
        ],
    ),
    _task(
        "t-short",
        "Reply briefly.",
        [
            {
                "id": "c1",
                "text": "At most 10000 words",
                "weight": 3,
                "kind": "important",
                "check": {"type": "word_count", "max": 10000},
            }
        ],
    ),
    _task(
        "e-paris",
        "Name the capital of France.",
        [
            {
                "id": "c1",
                "text": "Names Paris",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "contains_any", "phrases": ["Paris"]},
            }
        ],
        split="test",
        domain="science",
        audit=[
            {
                "id": "a1",
                "text": "Non-empty",
                "weight": 1,
                "kind": "optional",
                "check": {"type": "word_count", "min": 1},
            }
        ],
    ),
    _task(
        "e-any",
        "Write something.",
        [
            {
                "id": "c1",
                "text": "Under 10000 words",
                "weight": 1,
                "kind": "optional",
                "check": {"type": "word_count", "max": 10000},
            }
        ],
        split="test",
    ),
]


def write_suite(root: Path, tasks: list[dict] = TINY_TASKS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        rows = [t for t in tasks if t["split"] == split]
        (root / f"{split}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in rows))
    return root


def tiny_config(tmp_path: Path, *overrides: str) -> RunConfig:
    suite = write_suite(tmp_path / "suite")
    return load_config(
        REPO / "configs" / "tiny.yaml", [f"run_dir={tmp_path / 'run'}", f"data.suite={suite}", *overrides]
    )


def grpo_args(tmp_path: Path, parts, **kw):
    """TRL's GRPOConfig matching `parts`' run config (trainer.api.HarnessParts) on CPU, `kw` overriding any field."""
    from trl import GRPOConfig

    t = parts.cfg.train
    base = dict(
        output_dir=str(tmp_path / "ck"),
        max_steps=t.max_steps,
        per_device_train_batch_size=t.batch_size,
        num_generations=t.num_generations,
        max_completion_length=t.max_completion_length,
        temperature=t.temperature,
        save_steps=t.save_steps,
        shuffle_dataset=False,
        use_cpu=True,
        bf16=False,
        report_to="none",
    )
    return GRPOConfig(**{**base, **kw})
