"""Harness-driven task sampler feeding TRL as a `datasets.IterableDataset`.

One row = one GRPO group: `{"prompt", "task_id", "harness_version", "hinted", "hint_text", "sample_step"}`.
TRL 1.16 turns an IterableDataset into groups itself (`trl.trainer.utils.repeat_iterable_dataset`:
it reads `generation_batch_size / num_generations` rows at a time and repeats each row
`num_generations` times, consecutively), so the generator must yield each task *once* per group.
Run it with `shuffle_dataset=False`: TRL's buffered `dataset.shuffle` would pre-read 1000 rows and
hide every harness update (verified in the spike); the sampler owns randomness (seeded).

Every draw reads the run's *current* harness, so an update committed by the callback at step N
reaches the prompts of step N+2 (the dataloader prefetches one batch). Rows carry the version they
were drawn under; the reward scores them with that version's rubric.

Guidance is applied here, per the task's schedule (`harness.guidance.visible_hints` at the current
training step), into the prompt the policy is trained on (on-policy guidance).

Dynamic filtering (the DAPO-style baseline, `harness.dynamic_filtering`): a task whose last
`df_window` groups all had zero variance gets its sampling weight multiplied by `df_multiplier`
until a visit with variance is seen. It edits a multiplier in the sampler, never the harness.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from typing import Any

from harness.guidance import render_prompt, visible_hints
from harness.sampling import TaskSampler


class HarnessSampler:
    def __init__(self, run: Any, seed: int, *, floor: float = 0.1, dynamic_filtering: bool = False,
                 df_window: int = 1, df_multiplier: float = 0.2) -> None:
        self.run = run
        self.core = TaskSampler(lambda: run.state, seed=seed, floor=floor)
        self.guidance_rng = random.Random(seed + 1)  # separate stream: hint draws never shift task draws
        self.step = 0  # training step the next draw belongs to (set by the callback)
        self.dynamic_filtering = dynamic_filtering
        self.df_window = df_window
        self.df_multiplier = df_multiplier
        self._dead: dict[str, deque[bool]] = {}
        run.sampler = self

    def draw_row(self) -> dict[str, Any]:
        state = self.run.state
        task_id = self.core.draw(1)[0]
        task = state.task(task_id)
        guidance = state.guidance_for(task_id)
        hints = visible_hints(guidance, self.step, self.guidance_rng)
        return {
            "prompt": render_prompt(task, hints, guidance.schedule.placement),
            "task_id": task_id,
            "harness_version": state.version,
            "hinted": bool(hints),
            "hint_text": "\n".join(h.text for h in hints),
            "sample_step": self.step,
        }

    def generate(self) -> Iterator[dict[str, Any]]:
        while True:  # infinite: TRL stops at max_steps
            yield self.draw_row()

    # -- dynamic filtering baseline --------------------------------------------------------------------
    def observe_group(self, task_id: str, dead: bool) -> None:
        if not self.dynamic_filtering:
            return
        window = self._dead.setdefault(task_id, deque(maxlen=self.df_window))
        window.append(dead)
        all_dead = len(window) == self.df_window and all(window)
        self.core.set_multiplier(task_id, self.df_multiplier if all_dead else 1.0)

    # -- resume ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        v, internal, gauss = self.guidance_rng.getstate()
        return {"core": self.core.state_dict(), "guidance_rng": [v, list(internal), gauss], "step": self.step,
                "dead": {t: list(d) for t, d in self._dead.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.core.load_state_dict(state["core"])
        v, internal, gauss = state["guidance_rng"]
        self.guidance_rng.setstate((v, tuple(internal), gauss))
        self.step = int(state["step"])
        self._dead = {t: deque(d, maxlen=self.df_window) for t, d in state["dead"].items()}


# `datasets` fingerprints a generator by pickling it (dill); the live sampler holds unpicklable objects
# (Chroma client, model references), so the dataset gets a module-level function plus a registry key.
_SAMPLERS: dict[str, HarnessSampler] = {}


def _generate(sampler_key: str) -> Iterator[dict[str, Any]]:
    yield from _SAMPLERS[sampler_key].generate()


def make_dataset(sampler: HarnessSampler) -> Any:
    """The IterableDataset TRL trains on (generator re-entered per epoch; it never ends)."""
    from datasets import IterableDataset

    key = f"{id(sampler)}:{sampler.run.paths.root.resolve()}"
    _SAMPLERS[key] = sampler
    return IterableDataset.from_generator(_generate, gen_kwargs={"sampler_key": key})
