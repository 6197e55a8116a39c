"""The static gates of a candidate update, beyond `harness.ops.validate`: its scope, interface and size.

A candidate must stay on the interface the attributor chose (and one the run enables), touch only the event's task,
never use the restore ops (those are the trainer's reverts, `agents/decisions.py` `revert_update`), and hold at most
`MAX_OPS` ops. `graphs/nodes.py` `validate` adds these errors to the harness's own before the critic measures.
"""

from __future__ import annotations

from harness.types import FailureEvent, HarnessUpdate

MAX_OPS = 8  # ops in one lane candidate (one task's repair); HarnessUpdate's own limit is a generalised batch's


def scope_errors(update: HarnessUpdate, event: FailureEvent, interface: str, enabled: list[str]) -> list[str]:
    """Why `update` may not be a candidate for `event` attributed to `interface` (empty: it may)."""
    errors = []
    if update.interface != interface:
        errors.append(f"update.interface: {update.interface!r} but the attribution chose {interface!r}")
    if update.interface not in enabled:
        errors.append(f"update.interface: {update.interface!r} is disabled in this run")
    for i, op in enumerate(update.ops):
        if op.task_id != event.task_id:
            errors.append(f"ops[{i}] ({op.op}).task_id: {op.task_id!r} is not the event's task {event.task_id!r}")
        if op.op.startswith("restore_"):
            errors.append(f"ops[{i}] ({op.op}): restore ops are reserved for reverting a provisional update")
    if len(update.ops) > MAX_OPS:
        errors.append(f"ops: {len(update.ops)} ops, at most {MAX_OPS} per update")
    return errors
