"""What the evolver's LLM roles may see: data with the hidden audit taken out.

The audit criteria (`Task.audit_criteria`) and the scores they give are the held-out yardstick of true
quality. The detector and the critic use them internally (a spurious-reward event, the gamed/honest
split of a measurement), but an LLM that proposes, attributes or reviews harness updates must never see
them: it could tune the harness to the measure that judges it. Everything an LLM role reads (tool
outputs, prompts, memory documents) passes through these helpers first.

- `redact(obj)`: a copy of JSON-like data without any key that carries audit information (a key naming
  the audit, or the gamed/honest rollout split, which is defined by audit scores);
- `redact_reasons(lines)`: the critic's reasons with every line that quotes audit-based numbers
  replaced by a fixed note (the candidate's verdict stays visible, the numbers do not);
- `public_event(event)`: a failure event as JSON with its hidden statistics removed (the failure type
  `spurious_audit` itself stays: it names what went wrong, not a score).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from harness.types import FailureEvent

# Substrings of keys (and words of critic reasons) that carry audit information.
HIDDEN_PARTS: tuple[str, ...] = ("audit", "gamed", "honest")
WITHHELD = "(withheld: a hidden quality measure)"
_HIDDEN_WORD = re.compile(r"audit|gamed|honest", re.IGNORECASE)


def hidden_key(key: object) -> bool:
    """Whether a mapping key names audit information (e.g. `audit_mean`, `control_audit_corr`, `gamed_drop`)."""
    return isinstance(key, str) and any(part in key.lower() for part in HIDDEN_PARTS)


def redact(obj: Any) -> Any:
    """`obj` without hidden keys, at any depth (dicts, lists and tuples are copied; other values kept)."""
    if isinstance(obj, dict):
        return {k: redact(v) for k, v in obj.items() if not hidden_key(k)}
    if isinstance(obj, list | tuple):
        return [redact(v) for v in obj]
    return obj


def redact_reasons(lines: Iterable[str]) -> list[str]:
    """The critic's reason lines, each one that mentions the audit (or the gamed/honest split) withheld.

    Such a line is replaced by `WITHHELD`; a failed guard keeps its "guard failed:" prefix so the verdict stays
    readable.
    """
    out = []
    for line in lines:
        if _HIDDEN_WORD.search(line.replace("spurious_audit", "")) is None:
            out.append(line)
        elif line.startswith("guard failed:"):
            out.append(f"guard failed: {WITHHELD}")
        else:
            out.append(WITHHELD)
    return out


def public_event(event: FailureEvent) -> dict[str, Any]:
    """The event as JSON for an LLM prompt: its audit statistics removed."""
    data = event.model_dump(mode="json")
    data["stats"] = redact(data["stats"])
    return data
