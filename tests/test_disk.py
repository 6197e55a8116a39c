"""The run folder's disk (trainer/disk.py): the budget at start, safe pruning, and a full disk said in one line.

The full-disk test writes with the real torch and safetensors writers onto a real 2 MiB tmpfs, mounted in a private
mount namespace (`unshare -rm`); it is skipped with the reason where the machine does not allow that.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainer.checkpoint import STATE_FILE
from trainer.config_loader import load_config
from trainer.disk import (
    DiskBudgetError,
    check_budget,
    checkpoint_bytes,
    disk_full,
    disk_full_error,
    kept_checkpoints,
    prune_checkpoints,
)

ROOT = Path(__file__).resolve().parents[1]


def _ckpt(root: Path, step: int, complete: bool = True) -> Path:
    p = root / "checkpoints" / f"checkpoint-{step}"
    p.mkdir(parents=True)
    (p / "model.safetensors").write_bytes(b"x" * 10)
    if complete:
        (p / STATE_FILE).write_text("{}")
    return p


def test_kept_checkpoints_counts_the_one_being_written_and_a_resumed_runs_own():
    assert kept_checkpoints(40, 8, None) == 5
    assert kept_checkpoints(40, 8, 2) == 3  # two kept plus the one being written before the oldest goes
    assert kept_checkpoints(40, 8, 10) == 5
    assert kept_checkpoints(40, 8, None, start_step=24) == 2  # the first three are on disk already
    assert kept_checkpoints(40, 8, 2, start_step=24) == 1  # two on disk, one more at the peak
    assert kept_checkpoints(40, 8, 2, start_step=40) == 0


def test_prune_keeps_the_newest_complete_checkpoints_and_leaves_a_partial_one(tmp_path):
    for s in (2, 4, 6):
        _ckpt(tmp_path, s)
    partial = _ckpt(tmp_path, 8, complete=False)
    gone = prune_checkpoints(tmp_path, 1)
    assert [p.name for p in gone] == ["checkpoint-2", "checkpoint-4"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["checkpoint-6", "checkpoint-8"]
    assert partial.is_dir()
    assert prune_checkpoints(tmp_path, 0) == []  # never the newest complete one
    assert prune_checkpoints(tmp_path, None) == []


def test_estimate_matches_what_torch_and_transformers_write(tmp_path):
    """One checkpoint's weights and AdamW state, estimated from the parameter count, against the real files."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.policy_models import resolve_model

    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny"))
    model.save_pretrained(tmp_path / "m")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    opt.step()
    torch.save(opt.state_dict(), tmp_path / "optimizer.pt")
    n = sum(p.numel() for p in model.parameters())
    ckpt, final = checkpoint_bytes(n, n, 4, lora=False, optimizer_per_param=8)
    real_weights = (tmp_path / "m" / "model.safetensors").stat().st_size
    real_opt = (tmp_path / "optimizer.pt").stat().st_size
    assert abs(final - real_weights) / real_weights < 0.05
    assert ckpt >= real_weights + real_opt  # the few-MB extra covers tokenizer, rng and trainer state
    assert ckpt - (real_weights + real_opt) <= 25 * 2**20


def test_a_run_that_cannot_fit_is_refused_with_the_numbers_and_the_fields(tmp_path):
    from transformers import AutoModelForCausalLM

    from trainer.policy_models import resolve_model

    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny"))
    cfg = load_config(
        ROOT / "configs/tiny.yaml",
        [f"run_dir={tmp_path / 'run'}", "train.max_steps=4000000", "train.save_steps=1"],
    )
    with pytest.raises(DiskBudgetError) as e:
        check_budget(cfg, model)
    msg = str(e.value)
    assert "does not fit its disk" in msg and "train.save_total_limit" in msg and "free" in msg
    assert not (tmp_path / "run").exists()  # refused before the run folder exists
    ok = load_config(ROOT / "configs/tiny.yaml", [f"run_dir={tmp_path / 'run'}", "train.save_total_limit=2"])
    assert check_budget(ok, model).kept == 3


@pytest.mark.parametrize(("preset", "n_params"), [("gpu-4b", 4.02e9), ("gpu-8b", 8.19e9)])
def test_gpu_presets_fit_a_terabyte(preset, n_params):
    """The presets' kept checkpoints of the full model under DeepSpeed ZeRO (12 optimizer bytes a parameter)."""
    cfg = load_config(ROOT / f"configs/{preset}.yaml")
    ckpt, final = checkpoint_bytes(int(n_params), int(n_params), 2, lora=False, optimizer_per_param=12)
    kept = kept_checkpoints(cfg.train.max_steps, cfg.train.save_steps, cfg.train.save_total_limit)
    assert kept * ckpt + final < 1e12 * 0.9


def test_disk_full_is_found_in_the_cause_chain():
    import errno

    inner = OSError(errno.ENOSPC, "No space left on device", "/x/y.bin")
    try:
        try:
            raise inner
        except OSError as e:
            raise RuntimeError("saving failed") from e
    except RuntimeError as outer:
        assert disk_full(outer) is inner
    assert disk_full(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 128 vs 64")) is not None
    assert disk_full(ValueError("a bad config value")) is None


_WRITERS = textwrap.dedent(
    """
    import json, subprocess, sys, torch
    from pathlib import Path
    from safetensors.torch import save_file
    from trainer.checkpoint import STATE_FILE
    from trainer.disk import disk_full, disk_full_error
    mnt, out = Path(sys.argv[1]), Path(sys.argv[2])
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    done = mnt / "checkpoints" / "checkpoint-2"
    done.mkdir(parents=True)
    (done / STATE_FILE).write_text("{}")
    part = mnt / "checkpoints" / "checkpoint-4"
    part.mkdir()
    res = {}
    big = {"w": torch.zeros(1024, 1024)}  # 4 MiB
    for name, write in [("safetensors", lambda: save_file(big, str(part / "model.safetensors"))),
                        ("torch", lambda: torch.save(big, part / "optimizer.pt"))]:
        try:
            write()
            res[name] = None
        except Exception as e:
            found = disk_full(e)
            res[name] = {"type": type(e).__name__, "found": found is not None,
                         "line": str(disk_full_error(mnt, found)) if found is not None else str(e)}
    out.write_text(json.dumps(res))
    """
)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1) to mount a private tmpfs")
def test_real_writers_on_a_full_tmpfs_give_one_line_naming_the_file(tmp_path):
    mnt, out = tmp_path / "mnt", tmp_path / "out.json"
    mnt.mkdir()
    script = tmp_path / "writers.py"
    script.write_text(_WRITERS)
    p = subprocess.run(
        ["unshare", "-rm", sys.executable, str(script), str(mnt), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if p.returncode != 0 and not out.exists():
        pytest.skip(f"this machine does not allow a private tmpfs mount: {p.stderr.strip()[-300:]}")
    res = json.loads(out.read_text())
    for name in ("safetensors", "torch"):
        r = res[name]
        assert r is not None, f"{name} wrote 4 MiB onto a 2 MiB tmpfs"
        assert r["found"], f"{name}'s error was not recognised as a full disk: {r}"
        line = r["line"]
        assert "the disk is full" in line and "checkpoint-4" in line and "checkpoint-2" in line, line
        assert "--resume" in line and "free under" in line and "\n" not in line


def test_disk_full_error_without_a_complete_checkpoint(tmp_path):
    import errno

    line = str(disk_full_error(tmp_path, OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "a.jsonl"))))
    assert "a.jsonl" in line and "start again" in line
