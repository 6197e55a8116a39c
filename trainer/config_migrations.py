"""One-release config migrations: keys that moved or were removed, and how an old config is read.

Issue 18 moved the evolver's knobs from `harness:` to `evolver:` (`MOVED_TO_EVOLVER`): an old key, in a file or
an override, is read as its new one with a `FutureWarning` naming the new key, until the next release. Context
fields that were deleted (`REMOVED_FROM_EVOLVER`) are refused by the loader with why and what to set instead.
The loader (`trainer/config_loader.py`) calls `migrate` on every mapping it reads and `migrate_override` on every
override before anything is validated, so the schema (`trainer/config.py`) only ever sees the current keys.
Deleting this file, and its two calls, ends the migration.
"""

from __future__ import annotations

import warnings
from typing import Any

from agents.context import LLM_ROLES
from trainer.config import ConfigError

# Keys that moved from `harness:` to `evolver:` (issue 18); the old ones are read, with a warning, for one release.
MOVED_TO_EVOLVER = {
    name: name
    for name in (
        "interfaces",
        "memory",
        "critic",
        "sample_k",
        "sample_k_max",
        "critic_alpha",
        "max_revisions",
        "generalise_max_tasks",
        "attributor_model",
        "proposer_model",
        "critic_model",
        "judge_model",
        "memory_embedding",
        "require_approval",
        *(f"{role}_{part}" for role in LLM_ROLES for part in ("base_url", "api_key_env")),
    )
}
MOVED_TO_EVOLVER |= {"llm_base_url": "base_url", "llm_api_key_env": "api_key_env"}
# Context fields deleted (issue 18): a key naming one is refused with why and what to set instead.
REMOVED_FROM_EVOLVER = {"dead_eps": "it was never read; a group is dead when its reward std < harness.detector.eps"}


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Move the old `harness.<knob>` keys to `evolver.<knob>` with a warning naming the new key (one release)."""
    old = data.get("harness")
    if not isinstance(old, dict) or not set(old) & set(MOVED_TO_EVOLVER):
        return data
    harness, evolver = dict(old), dict(data.get("evolver") or {})
    for key in [k for k in harness if k in MOVED_TO_EVOLVER]:
        new, value = MOVED_TO_EVOLVER[key], harness.pop(key)
        if new in evolver:
            raise ConfigError(f"{where}harness.{key} and evolver.{new} are both set: keep only evolver.{new}")
        if key == "judge_model" and value is None:  # the old "no LLM judge" is the rule judge's name now
            value = "rules"
        evolver[new] = value
        # stacklevel 3: the warning points at the caller of `load_config` / `config_from_dict`, not at the loader.
        warnings.warn(
            f"{where}harness.{key} is deprecated: it is evolver.{new} now (the old key is read until the next release)",
            FutureWarning,
            stacklevel=3,
        )
    return {**data, "harness": harness, "evolver": evolver}


def migrate_override(text: str) -> str:
    """`harness.sample_k=8` -> `evolver.sample_k=8` with the same warning (so an override still wins over the file)."""
    key, sep, value = text.partition("=")
    section, dot, name = key.strip().partition(".")
    if section != "harness" or not dot or name not in MOVED_TO_EVOLVER:
        return text
    new = MOVED_TO_EVOLVER[name]
    if name == "judge_model" and value.strip() in ("", "null", "~", "None"):
        value = "rules"
    warnings.warn(
        f"override {text!r}: harness.{name} is deprecated: it is evolver.{new} now (the old key is read "
        f"until the next release)",
        FutureWarning,
        stacklevel=3,
    )
    return f"evolver.{new}{sep}{value}"
