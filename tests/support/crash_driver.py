"""Fault injection for `tests/test_crash_consistency.py`: `harnessrl train` with one fault armed (not a test).

    python tests/support/crash_driver.py POINT MARKER STEP -- <harnessrl train arguments>

At POINT, on step STEP or later, the driver does the fault's partial work, writes MARKER and sleeps until the
test SIGKILLs it (so the kill lands exactly there), except `enospc`, which fails the write and lets the trainer
exit on its own:

- `reward`: in the middle of a step's reward: two of its groups are in the training memory (and their events
  logged), the rest of the step is not;
- `torn`: half of the step's `metrics.jsonl` line is written (a kill in the middle of an append);
- `enospc`: the disk is full half-way through the step's `metrics.jsonl` line;
- `round`: an evolver round has run (its versions committed, its memory records written), not yet recorded;
- `commit`: inside a harness commit: the version file is written, its `updates.jsonl` line is not (the round's
  own commit, or, when its round accepts nothing, one made here so the point is always reached);
- `save`: inside a checkpoint save: TRL's files and the memory snapshot are written, the state file is not.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _hang(marker: Path) -> None:
    marker.write_text(str(os.getpid()))
    while True:
        time.sleep(60)


def arm(point: str, marker: Path, at_step: int) -> None:
    from harness.store import HarnessStore
    from harness.types import AddHint, HarnessUpdate, Hint
    from trainer import callback, checkpoint, evolver_round

    if point in ("torn", "enospc"):
        real = callback.append_jsonl

        def append(path, record):
            if Path(path).name != "metrics.jsonl" or int(record.get("step", 0)) < at_step:
                return real(path, record)
            if point == "enospc":  # the real append meets a full disk half-way through its write
                real_write = os.write

                def full(fd, data):
                    real_write(fd, data[: len(data) // 2])
                    raise OSError(errno.ENOSPC, "No space left on device")

                os.write = full
                try:
                    return real(path, record)
                finally:
                    os.write = real_write
            line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
            with open(path, "ab") as f:
                f.write(line[: len(line) // 2])
                f.flush()
                os.fsync(f.fileno())
            _hang(marker)

        callback.append_jsonl = append
    elif point in ("round", "commit"):
        real_round = evolver_round.run_round
        real_append = HarnessStore._append

        def append(self, record):
            if record.step >= at_step:
                _hang(marker)  # the version file is on disk, its log line is not
            return real_append(self, record)

        def run_round(cfg, events, before, step, *a, **k):
            out = real_round(cfg, events, before, step, *a, **k)
            if step >= at_step and point == "commit":
                store = HarnessStore(Path(cfg.run_dir) / "harness")
                task = store.latest().drawable_task_ids(step)[0]
                store.commit(
                    HarnessUpdate(
                        interface="guidance",
                        ops=[AddHint(task_id=task, hint=Hint(id="crash", text="Answer the question directly."))],
                    ),
                    step=step,
                )
            if step >= at_step:
                _hang(marker)
            return out

        if point == "commit":
            HarnessStore._append = append
        evolver_round.run_round = run_round
    elif point == "reward":
        from memory.store import TrainingMemory

        real_add, seen = TrainingMemory.add_group, []

        def add_group(self, summary, *a, **k):
            out = real_add(self, summary, *a, **k)
            if int(summary.step) >= at_step:  # a group of that step (steps count from 1)
                seen.append(out)
                if len(seen) == 2:
                    _hang(marker)
            return out

        TrainingMemory.add_group = add_group
    elif point == "save":
        real = checkpoint.atomic_write_json

        def write(path, data):
            if Path(path).name == checkpoint.STATE_FILE and int(data["step"]) >= at_step:
                _hang(marker)
            return real(path, data)

        checkpoint.atomic_write_json = write
    else:
        raise SystemExit(f"unknown fault point {point!r}")


def main() -> int:
    point, marker, at_step, sep, *args = sys.argv[1:]
    if sep != "--":
        raise SystemExit(__doc__)
    arm(point, Path(marker), int(at_step))
    from trainer.cli import main as cli

    return cli(["train", *args])


if __name__ == "__main__":
    raise SystemExit(main())
