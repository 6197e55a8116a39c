"""Reading and writing a run config: YAML files, dotted overrides, strict types, errors that say where.

The schema is `trainer/config.py` (its dataclasses, their help and their own refusals); this file turns text into
it and back. Loading is strict:

- an unknown key is an error that names the key, the file and the closest valid keys;
- a wrong type names the field and the expected type;
- a schema refusal (`__post_init__`) is prefixed with the file (and the overrides) it came from.

Old keys are migrated first (`trainer/config_migrations.py`), so the schema sees only current keys. Overrides
use dotted paths: `--set train.max_steps=4` or bare `train.max_steps=4`; values are parsed as YAML
scalars/lists (`evolver.interfaces=[sampling,criteria]`).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from agents.context import EvolverContext
from harness.atomic import atomic_write_text
from trainer.config import SET_BY_TRAINER, ConfigError, RunConfig
from trainer.config_migrations import REMOVED_FROM_EVOLVER, migrate, migrate_override


def _suggest(key: str, options: list[str]) -> str:
    close = difflib.get_close_matches(key, options, n=3, cutoff=0.5)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else f"; valid keys: {sorted(options)}"


def _check_type(path: str, value: Any, annotation: Any, where: str) -> Any:
    """Validate (and lightly coerce int->float) one value against its annotation."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _check_type(path, value, a, where)
            except ConfigError as e:
                errors.append(str(e))
        raise errors[0] if len(errors) == 1 else ConfigError(f"{where}{path}: {value!r} does not match {annotation}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}{path}: {value!r} is not one of {list(args)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}{path}: expected a list, got {type(value).__name__} {value!r}")
        return [_check_type(f"{path}[{i}]", v, args[0], where) for i, v in enumerate(value)] if args else value
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}{path}: expected a mapping, got {type(value).__name__} {value!r}")
        return value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is float and isinstance(value, str):
        try:  # YAML 1.1 reads "1e-3" (no dot) as a string
            return float(value)
        except ValueError:
            pass
    if annotation in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{where}{path}: expected {annotation.__name__}, got a boolean {value!r}")
    if annotation in (int, float, str, bool) and not isinstance(value, annotation):
        raise ConfigError(f"{where}{path}: expected {annotation.__name__}, got {type(value).__name__} {value!r}")
    return value


def _build(cls: type, data: dict[str, Any], prefix: str, where: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if cls is EvolverContext and key in SET_BY_TRAINER:
            raise ConfigError(
                f"{where}{prefix}{key} is not a config setting: the trainer sets it for each round "
                f"from {SET_BY_TRAINER[key]}"
            )
        if cls is EvolverContext and key in REMOVED_FROM_EVOLVER:
            raise ConfigError(f"{where}{prefix}{key} was removed: {REMOVED_FROM_EVOLVER[key]}")
        if key not in names:
            raise ConfigError(f"{where}unknown key '{prefix}{key}'{_suggest(key, names)}")
        if dataclasses.is_dataclass(hints[key]):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}{prefix}{key}: expected a mapping (section), got {value!r}")
            kwargs[key] = _build(hints[key], value, f"{prefix}{key}.", where)
        else:
            kwargs[key] = _check_type(f"{prefix}{key}", value, hints[key], where)
    try:
        return cls(**kwargs)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from None
    except ValueError as e:
        if cls is not EvolverContext:
            raise
        # The context's own checks name its class; a config names the section (and the way out of an empty list).
        hint = "; or set harness.evolver=false" if "interfaces is empty" in str(e) else ""
        raise ConfigError(f"{where}{str(e).replace('EvolverContext.', prefix)}{hint}") from None


def parse_override(text: str) -> tuple[list[str], Any]:
    """`train.max_steps=4` -> (["train", "max_steps"], 4). Values are YAML scalars/lists."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value (e.g. train.max_steps=4)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {text!r}: value is not valid YAML ({e})") from None
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    out = _deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = out
        for part in path[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {text!r}: {part!r} is not a section")
            node = nxt
        node[path[-1]] = value
    return out


def _deepcopy(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _deepcopy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deepcopy(v) for v in d]
    return d


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Load a YAML run config, apply dotted overrides, validate. Errors name the file and the field."""
    data: dict[str, Any] = {}
    where = ""
    overrides = [migrate_override(o) for o in overrides or []]
    if path is not None:
        p = Path(path)
        where = f"{p}: "
        if not p.is_file():
            raise ConfigError(f"config file {p} not found (see configs/ for presets)")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{where}invalid YAML: {e}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{where}top level must be a mapping of sections, got {type(loaded).__name__}")
        data = migrate(loaded, where)
    if overrides:
        data = apply_overrides(data, overrides)
        where = f"{where}(with overrides {overrides}) " if where else f"overrides {overrides}: "
    return _build(RunConfig, data, "", where)


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Rebuild a config saved as a dict (e.g. a run's config.yaml)."""
    return _build(RunConfig, migrate(data, ""), "", "")


def save_config(cfg: RunConfig, path: Path) -> None:
    atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
