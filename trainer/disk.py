"""The run folder's disk: a budget checked at start, checkpoints pruned safely, a full disk said in one line.

**Budget** (`check_budget`, called once the policy is loaded, before the run folder is touched): a checkpoint holds
the saved weights (every parameter, or only the trainable ones of a LoRA adapter) and AdamW's two moment buffers
per trainable parameter in the parameters' dtype, or fp32 moments and master weights under DeepSpeed (TRL's
`checkpoint-N/model.safetensors` and `optimizer.pt`; tokenizer, rng and trainer state are a few MB,
`CHECKPOINT_EXTRA`). The run keeps `train.save_total_limit`
checkpoints (all of them when unset), one more while the next one is written, plus `final/`; logs, harness versions
and memory snapshots add `RUN_EXTRA_SHARE` of that. A need above the free space of the run folder's filesystem is
refused with the numbers and the fields to change; above `WARN_SHARE` of it, a warning.

**Pruning** (`prune_checkpoints`, after the state file of a new checkpoint is written): HarnessRL keeps
`train.save_total_limit` *complete* checkpoints itself instead of handing the limit to transformers, whose rotation
runs before the state file exists: with a limit of 1 a kill at that moment would leave no checkpoint to resume.
The newest complete checkpoint is never pruned; a partial one (no state file) is left alone and named.

**Full disk** (`disk_full`): torch and safetensors report a full disk as `RuntimeError: [enforce fail at
inline_container.cc] . unexpected pos` or `SafetensorError: ... No space left on device`, neither an `OSError`.
`disk_full` recognises those, the project's own `ENOSPC`/`EDQUOT`, and any of them as the cause of another error,
and `DiskFull` states which file was being written, the free space, the partial checkpoint and the checkpoint
`--resume` continues from.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.checkpoint import STATE_FILE, checkpoints, complete_checkpoints

log = logging.getLogger(__name__)

CHECKPOINT_EXTRA = 20 * 2**20  # tokenizer, rng state, scheduler, trainer state, harness state: a few MB
RUN_EXTRA_SHARE = 0.05  # logs, harness versions, memory and its snapshots, beside the checkpoints
WARN_SHARE = 0.8  # warn when the run would use more than this share of the free space
_FULL_TEXTS = ("no space left on device", "disk quota exceeded", "unexpected pos", "pytorchstreamwriter failed")


class DiskBudgetError(ValueError):
    """The run cannot fit the free space of its run folder's filesystem; the message has the numbers and the fix."""


class DiskFull(OSError):
    """The disk filled while the run wrote; the message says what, where, and how `--resume` continues."""


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


@dataclass(frozen=True)
class Budget:
    """What the run will write, in bytes, against what its filesystem has free."""

    checkpoint: int  # one checkpoint
    kept: int  # new checkpoints on disk at the peak (`kept_checkpoints`)
    final: int  # final/: the weights
    free: int

    @property
    def need(self) -> int:
        return int((self.kept * self.checkpoint + self.final) * (1.0 + RUN_EXTRA_SHARE))


def optimizer_bytes_per_param(dtype_bytes: int) -> int:
    """AdamW's state per trained parameter.

    Two moments in the parameters' dtype, or under DeepSpeed (which `accelerate launch` announces in
    `ACCELERATE_USE_DEEPSPEED`) fp32 moments and an fp32 master copy.
    """
    return 12 if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true" else 2 * dtype_bytes


def checkpoint_bytes(
    n_params: int, n_trainable: int, dtype_bytes: int, *, lora: bool, optimizer_per_param: int | None = None
) -> tuple[int, int]:
    """(one checkpoint, final/) in bytes for a model of `n_params` parameters, `n_trainable` of them trained."""
    weights = (n_trainable if lora else n_params) * dtype_bytes
    per = optimizer_bytes_per_param(dtype_bytes) if optimizer_per_param is None else optimizer_per_param
    optimizer = per * n_trainable
    return weights + optimizer + CHECKPOINT_EXTRA, weights


def kept_checkpoints(max_steps: int, save_steps: int, save_total_limit: int | None, start_step: int = 0) -> int:
    """New checkpoints on disk at the peak: all the saves still to come, or the limit plus the one being written.

    A resumed run's checkpoints already on disk are outside the free space; the limit counts them."""
    remaining = max(max_steps // save_steps - start_step // save_steps, 0)
    if save_total_limit is None:
        return remaining
    on_disk = min(start_step // save_steps, save_total_limit)
    return max(min(save_total_limit + 1, on_disk + remaining) - on_disk, 0)


def free_bytes(path: Path) -> int:
    """Free bytes of the filesystem that holds `path` (or its nearest existing parent)."""
    p = Path(path).absolute()
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def budget(cfg: Any, model: Any, start_step: int = 0) -> Budget:
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    dtype_bytes = params[0].element_size() if params else 4
    if cfg.model.lora:  # the adapter is not attached yet: estimate it from its rank on the targeted layers
        trainable = lora_parameters(model, cfg.model.lora_r, cfg.model.lora_targets)
    t = cfg.train
    ckpt, final = checkpoint_bytes(n, trainable, dtype_bytes, lora=cfg.model.lora)
    kept = kept_checkpoints(t.max_steps, t.save_steps, t.save_total_limit, start_step)
    return Budget(checkpoint=ckpt, kept=kept, final=final, free=free_bytes(cfg.run_path))


def lora_parameters(model: Any, rank: int, targets: Any) -> int:
    """Parameters of a LoRA adapter of `rank` on every linear layer whose name ends with one of `targets`."""
    names = tuple(targets)
    total = 0
    for name, module in model.named_modules():
        if name.split(".")[-1] in names and hasattr(module, "in_features") and hasattr(module, "out_features"):
            total += rank * (module.in_features + module.out_features)
    return total


def check_budget(cfg: Any, model: Any, start_step: int = 0) -> Budget:
    """Refuse a run its disk cannot hold, warn when it is close; returns the estimate."""
    b = budget(cfg, model, start_step)
    t = cfg.train
    numbers = (
        f"{b.kept} checkpoints of about {gib(b.checkpoint)} at the peak (train.save_total_limit="
        f"{t.save_total_limit}, train.save_steps={t.save_steps}, train.max_steps={t.max_steps}) and final/ "
        f"({gib(b.final)}) need about {gib(b.need)}; {cfg.run_path} has {gib(b.free)} free"
    )
    if b.need > b.free:
        raise DiskBudgetError(
            f"the run does not fit its disk: {numbers}. Keep fewer checkpoints (e.g. --set train.save_total_limit=2), "
            f"save less often (train.save_steps), or choose a run_dir on a larger disk"
        )
    if b.need > WARN_SHARE * b.free:
        log.warning(
            "disk: close to full: %s; a full disk stops training (--resume continues once space is freed)", numbers
        )
    return b


def prune_checkpoints(run_dir: Path, keep: int | None) -> list[Path]:
    """Delete the oldest complete checkpoints beyond the newest `keep` (never the newest); returns what went."""
    if keep is None:
        return []
    complete = [p for _, p in complete_checkpoints(run_dir)]
    gone = complete[: max(len(complete) - max(keep, 1), 0)]
    for p in gone:
        shutil.rmtree(p)
    if gone:
        log.info("checkpoints: deleted %s (train.save_total_limit=%d)", ", ".join(p.name for p in gone), keep)
    return gone


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def disk_full(exc: BaseException) -> BaseException | None:
    """The error in `exc`'s chain that says the disk is full (torch, safetensors or an OSError), else None."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return e
        if any(s in str(e).lower() for s in _FULL_TEXTS):
            return e
    return None


def disk_full_error(run_dir: Path, cause: BaseException) -> DiskFull:
    """One line: the file being written, the folder, the free space, the partial checkpoint and the way on."""
    run_dir = Path(run_dir)
    complete = complete_checkpoints(run_dir)
    last = complete[-1][0] if complete else None
    partial = [p for n, p in checkpoints(run_dir) if not (p / STATE_FILE).is_file() and (last is None or n > last)]
    target = getattr(cause, "filename", None)
    if not target and partial:
        files = [f for f in partial[-1].iterdir() if f.is_file()]
        target = max(files, key=lambda f: f.stat().st_mtime) if files else partial[-1]
    where = f"writing {target}" if target else f"writing under {run_dir}"
    part = (
        f"; the partial {partial[-1]} has no {STATE_FILE}: resume skips it (delete it to free space)" if partial else ""
    )
    then = (
        f"free space, then `harnessrl train --resume` continues from checkpoint-{last}"
        if last is not None
        else "free space, then start again (no complete checkpoint yet)"
    )
    return DiskFull(
        f"the disk is full: {where} ({type(cause).__name__}: {str(cause).strip().splitlines()[0][:160]}); "
        f"{gib(free_bytes(run_dir))} free under {run_dir}{part}; {then}",
    )
