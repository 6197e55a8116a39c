"""Harness-driven task sampler feeding TRL: placeholder rows in the dataset, task draws at step time.

One group = one row `{"prompt", "task_id", "harness_version", "hinted", "hint_text", "sample_step"}`,
repeated `num_generations` times. TRL 1.16 turns an IterableDataset into groups itself
(`trl.trainer.utils.repeat_iterable_dataset`: it reads `generation_batch_size / num_generations` rows at a
time and repeats each row `num_generations` times, consecutively). Run it with `shuffle_dataset=False`:
TRL's buffered `dataset.shuffle` would pre-read 1000 rows (verified in the spike).

**Why the draw happens at step time, not in the dataset.** The dataloader reads ahead: accelerate's
`DataLoaderShard.__iter__` fetches batch s+1 before it yields batch s (to detect the last batch). A dataset
that drew tasks would therefore decide step s+1's tasks, hints and harness version during step s, before
the evolver round at the end of step s commits: an update committed at step s reached step s+2, and the
sampler state saved in checkpoint-s already held step s+1's draw, so a resumed run drew different tasks
than an uninterrupted one. So the dataset yields *placeholder* rows (no rng, no harness read), and
`HarnessGRPOTrainer.training_step` (trainer/grpo.py, a public `Trainer` method) replaces them by `fill`
right before TRL generates: every draw reads the harness in force at that step, and the state saved at
step s holds exactly the draws of steps 1..s. The read-ahead now holds no decision.

Rejected alternatives: a loader that does not read ahead (overriding `get_train_dataloader` without
accelerate) would have to re-implement TRL's stream wrapping and accelerate's per-rank sharding; re-drawing
a stale batch after a commit would still leave the read-ahead's rng draws in the saved state (resume drift).

Several processes: accelerate gives each rank a contiguous slice of the stream (`IterableDatasetShard`,
TRL forces `dispatch_batches=False`). `fill` mirrors that: every rank draws the whole global batch (same
seed, same broadcast harness, same dynamic-filtering multipliers since every rank observes every group: so
the same draws, which the reward checks with `fingerprint`) and keeps its own slice. TRL's generation
buffering must not span optimizer steps (`steps_per_generation`, `num_iterations`, gradient accumulation all 1;
checked by `trainer.grpo.check_one_generation_per_step`): one `training_step` = one generation = one optimizer step.

Rows carry the version they were drawn under; the reward scores them with that version's rubric.
Guidance is applied here, per the task's schedule (`harness.guidance.visible_hints` at the training step the
rows are drawn in, i.e. `global_step` before their update), into the prompt the policy is trained on.

Dynamic filtering (the DAPO-style baseline, `harness.dynamic_filtering`): a task whose last
`df_window` groups all had zero variance gets its sampling weight multiplied by `df_multiplier`
until a visit with variance is seen. It edits a multiplier in the sampler, never the harness.

Liveness weighting (`harness.liveness_weighting`): before each step's draw every drawable task's weight is
multiplied by its estimated live rate, 1 - `run.liveness.dead_rate` (harness/liveness.py), so a task predicted
dead is drawn less while it waits for a repair; a task without evidence (never seen, or just edited: an update
resets its estimate) keeps its full weight, so a repaired task returns to training at once, and `floor` keeps
every task reachable. Like dynamic filtering it edits multipliers only, and every rank computes the same ones
(every rank observes every group).

Skipping predicted-dead tasks (`harness.skip_dead`, the benchmark's zero-LLM `skip` control, harness/skip.py):
before each step's draw every drawable task's multiplier is its keep probability (max(p^z, floor) after z dead
groups in a row, 1 after a live one), and the exploration probability p adapts to the dead share of the groups
observed since the previous draw. Multipliers only, like the two above (the config allows one of the three).

Common random numbers with dynamic sampling (`harness.dynamic_sampling`): an over-sampled step draws N x
batch/G groups. Its first `crn_groups` = batch/G come from the main stream, so they are the draws a run without
over-sampling makes at the same seed, step after step (as long as the two harnesses and multipliers agree: a
fixed harness); the over-sampled rest comes from a second stream (`extra`, its own task and hint generators). DAPO
and the fixed arm then share their task draws at every step, not only at the first.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import random
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from harness.guidance import render_prompt, visible_hints
from harness.sampling import TaskSampler
from harness.skip import DeadRunSkip
from trainer.harness_run import HarnessRun

log = logging.getLogger(__name__)

# The second stream's seed offset (task and hint draws beyond `crn_groups`): far from the small offsets of the
# main stream's companions (hints: seed + 1, the pre-flight's hints: seed + 2) and from neighbouring train seeds.
EXTRA_STREAM = 1_000_003


class HarnessSampler:
    def __init__(
        self,
        run: HarnessRun,
        seed: int,
        *,
        floor: float = 0.1,
        dynamic_filtering: bool = False,
        df_window: int = 1,
        df_multiplier: float = 0.2,
        liveness_weighting: bool = False,
        skip: DeadRunSkip | None = None,
        crn_groups: int = 0,
    ) -> None:
        if sum((dynamic_filtering, liveness_weighting, skip is not None)) > 1:
            raise ValueError(
                "dynamic filtering, liveness weighting and skipping dead tasks all set the task multipliers: choose one"
            )
        if crn_groups < 0:
            raise ValueError(f"crn_groups must be >= 0 (0: every draw from the main stream), got {crn_groups}")
        self.run = run
        self.core = TaskSampler(lambda: run.state, seed=seed, floor=floor)
        self.guidance_rng = random.Random(seed + 1)  # separate stream: hint draws never shift task draws
        # The over-sampled draws of a step beyond its first `crn_groups` (see the module doc); 0: none.
        self.crn_groups = crn_groups
        self.extra = TaskSampler(lambda: run.state, seed=seed + EXTRA_STREAM, floor=floor)
        self.extra_guidance_rng = random.Random(seed + EXTRA_STREAM + 1)
        self.skip = skip
        self.step = 0  # global step the next draw belongs to (set by `fill` and the callback)
        self.dynamic_filtering = dynamic_filtering
        self.df_window = df_window
        self.df_multiplier = df_multiplier
        self.liveness_weighting = liveness_weighting
        self._dead: dict[str, deque[bool]] = {}
        run.sampler = self

    @classmethod
    def from_config(cls, run: HarnessRun) -> HarnessSampler:
        """The sampler `run.cfg` asks for.

        Seed, floor, dynamic filtering, liveness weighting, skipping dead tasks, common random numbers with dynamic
        sampling."""
        h, t = run.cfg.harness, run.cfg.train
        return cls(
            run,
            seed=t.seed,
            floor=h.sampler_floor,
            dynamic_filtering=h.dynamic_filtering,
            df_window=h.df_window,
            df_multiplier=h.df_multiplier,
            liveness_weighting=h.liveness_weighting,
            skip=DeadRunSkip(target=h.skip_target, floor=h.skip_floor) if h.skip_dead else None,
            crn_groups=t.batch_size // t.num_generations if h.dynamic_sampling else 0,
        )

    def draw_row(self, *, extra: bool = False) -> dict[str, Any]:
        """One group's row; `extra`: from the second stream (an over-sampled draw beyond `crn_groups`)."""
        state = self.run.state
        core, hint_rng = (self.extra, self.extra_guidance_rng) if extra else (self.core, self.guidance_rng)
        task_id = core.draw(1, step=self.step)[0]  # quarantines end by training step
        task = state.task(task_id)
        guidance = state.guidance_for(task_id)
        hints = visible_hints(guidance, self.step, hint_rng)
        return {
            "prompt": render_prompt(task, hints, guidance.schedule.placement),
            "task_id": task_id,
            "harness_version": state.version,
            "hinted": bool(hints),
            "hint_text": "\n".join(h.text for h in hints),
            "sample_step": self.step,
        }

    def generate(self) -> Iterator[dict[str, Any]]:
        """The dataset stream: placeholders only (see the module docstring); TRL stops at max_steps."""
        while True:
            yield placeholder_row()

    def fill(
        self,
        rows: list[dict[str, Any]],
        *,
        num_generations: int,
        step: int,
        process_index: int = 0,
        num_processes: int = 1,
    ) -> list[dict[str, Any]]:
        """This rank's batch for training step `step` (the global step before its update).

        The placeholder `rows` TRL hands to `training_step`, replaced by fresh groups drawn under the current
        harness.

        Every rank draws the whole global batch (`num_processes` slices of `len(rows)` rows) in the same
        order and keeps slice `process_index`, as accelerate slices the stream by rank."""
        if not rows or len(rows) % num_generations:
            raise ValueError(
                f"HarnessSampler.fill: got {len(rows)} rows, not a positive multiple of "
                f"num_generations={num_generations}"
            )
        drawn_already = [r.get("task_id") for r in rows if not is_placeholder(r)]
        if drawn_already:
            raise ValueError(
                f"HarnessSampler.fill: rows for {sorted(set(drawn_already))[:3]} are not placeholder "
                f"rows; the dataset must come from trainer.sampler.make_dataset (draws happen here)"
            )
        t0 = time.perf_counter()
        self.step = step
        if self.liveness_weighting:
            self._weigh_by_liveness(step)
        if self.skip is not None:
            self._weigh_by_skip(step)
        local = len(rows) // num_generations
        groups = [self.draw_row(extra=0 < self.crn_groups <= i) for i in range(local * num_processes)]
        mine = groups[process_index * local : (process_index + 1) * local]
        # Independent copies per rollout, as TRL's own repeat makes them.
        out = [copy.deepcopy(row) for row in mine for _ in range(num_generations)]
        # The harness's own cost per step (benchmarks report it as a share of step time); labelled like the
        # reward's record: the step this batch's update becomes.
        self.run.record_step(step + 1, {"sampler_s": time.perf_counter() - t0})
        return out

    def _weigh_by_liveness(self, step: int) -> None:
        liveness = self.run.liveness
        for tid in self.run.state.drawable_task_ids(step):
            live = 1.0 - liveness.dead_rate(tid) if liveness.evidence(tid) >= 1.0 else 1.0
            self._set_multiplier(tid, live)

    def _weigh_by_skip(self, step: int) -> None:
        assert self.skip is not None  # `fill` calls this only with skipping on
        share = self.skip.end_step()  # the groups observed since the last draw adapt the exploration probability
        for tid in self.run.state.drawable_task_ids(step):
            self._set_multiplier(tid, self.skip.keep(tid))
        self.run.record_step(step + 1, {"skip_explore": self.skip.explore, "skip_prev_dead_share": share})

    def _set_multiplier(self, task_id: str, m: float) -> None:
        # Both streams draw from one distribution: the extra stream differs from the main one only in its rng.
        self.core.set_multiplier(task_id, m)
        self.extra.set_multiplier(task_id, m)

    # -- dynamic filtering baseline --------------------------------------------------------------------
    def observe_group(self, task_id: str, dead: bool) -> None:
        if self.skip is not None:
            self.skip.observe(task_id, dead)  # the multipliers change at the next draw (`_weigh_by_skip`)
        if not self.dynamic_filtering:
            return
        window = self._dead.setdefault(task_id, deque(maxlen=self.df_window))
        window.append(dead)
        all_dead = len(window) == self.df_window and all(window)
        self._set_multiplier(task_id, self.df_multiplier if all_dead else 1.0)

    # -- resume ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        v, internal, gauss = self.guidance_rng.getstate()
        ev, einternal, egauss = self.extra_guidance_rng.getstate()
        return {
            "core": self.core.state_dict(),
            "guidance_rng": [v, list(internal), gauss],
            "extra": self.extra.state_dict(),
            "extra_guidance_rng": [ev, list(einternal), egauss],
            "skip": self.skip.state_dict() if self.skip is not None else None,
            "step": self.step,
            "dead": {t: list(d) for t, d in self._dead.items()},
        }

    def fingerprint(self) -> str:
        """A digest of everything the next draw depends on besides the harness (rngs, multipliers, windows).

        With several processes it must be equal on every rank at every step, or their slices are not slices
        of one global batch (the reward compares them).
        """
        blob = json.dumps(self.state_dict(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.core.load_state_dict(state["core"])
        v, internal, gauss = state["guidance_rng"]
        self.guidance_rng.setstate((v, tuple(internal), gauss))
        self.step = int(state["step"])
        self._dead = {t: deque(d, maxlen=self.df_window) for t, d in state["dead"].items()}
        if "extra" in state:
            self.extra.load_state_dict(state["extra"])
            ev, einternal, egauss = state["extra_guidance_rng"]
            self.extra_guidance_rng.setstate((ev, tuple(einternal), egauss))
        elif self.crn_groups:
            log.warning(
                "checkpoint sampler state has no second stream (written before it existed): the over-sampled draws "
                "start it again from its seed"
            )
        if self.skip is not None:
            if state.get("skip") is None:
                raise ValueError(
                    "checkpoint sampler state has no skip_dead state (its run did not skip dead tasks): resume it "
                    "with harness.skip_dead=false, or start a new run"
                )
            self.skip.load_state_dict(state["skip"])


# A placeholder has a real row's columns and types (the dataset's features are inferred from it) but names
# no task: a row that reached the reward without `fill` fails there on the unknown task "".
_PLACEHOLDER: dict[str, Any] = {
    "prompt": [{"role": "user", "content": ""}],
    "task_id": "",
    "harness_version": -1,
    "hinted": False,
    "hint_text": "",
    "sample_step": -1,
}


def placeholder_row() -> dict[str, Any]:
    return copy.deepcopy(_PLACEHOLDER)


def is_placeholder(row: dict[str, Any]) -> bool:
    return row.get("task_id") == "" and row.get("harness_version") == -1


# `datasets` fingerprints a generator by pickling it (dill); the live sampler holds unpicklable objects
# (Chroma client, model references), so the dataset gets a module-level function plus a registry key.
_SAMPLERS: dict[str, HarnessSampler] = {}


def _generate(sampler_key: str) -> Iterator[dict[str, Any]]:
    yield from _SAMPLERS[sampler_key].generate()


def make_dataset(sampler: HarnessSampler) -> Any:
    """The IterableDataset TRL reads (placeholder rows; generator re-entered per epoch; it never ends)."""
    from datasets import IterableDataset

    key = f"{id(sampler)}:{sampler.run.paths.root.resolve()}"
    _SAMPLERS[key] = sampler
    return IterableDataset.from_generator(_generate, gen_kwargs={"sampler_key": key})
