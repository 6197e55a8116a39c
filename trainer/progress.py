"""Rich progress bar for training: step, reward, dead-group share, harness version, pause time."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback


class RichTrainProgress(TrainerCallback):
    def __init__(self, run: Any, enabled: bool = True) -> None:
        self.run = run
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.enabled or not state.is_world_process_zero:
            return control
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._progress = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TimeRemainingColumn(), TextColumn("{task.fields[info]}"), transient=False)
        self._progress.start()
        self._task = self._progress.add_task("train", total=state.max_steps, completed=state.global_step, info="")
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self._progress is not None:
            last = self.run.last_record
            info = (f"reward {last.get('reward', float('nan')):.3f}  dead {last.get('dead_share', float('nan')):.2f}  "
                    f"harness v{self.run.state.version}  pause {last.get('pause_s', 0.0):.1f}s")
            self._progress.update(self._task, completed=state.global_step, info=info)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        return control
