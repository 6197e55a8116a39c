"""The live state of one training run, shared by the sampler, the reward and the callback.

`HarnessRun` owns the run folder and the objects that outlive a single step:

    run_dir/
      config.yaml          resolved config (written at start)
      harness/             HarnessStore: versions/vNNNNNN.json + updates.jsonl (committed updates)
      events.jsonl         failure events from the detector (one line each)
      metrics.jsonl        one line per training step (reward, std, dead share, version, pause seconds, ...)
      rounds.jsonl         one line per evolver round (events in, accepted, pause, error, thread id)
      memory/              Chroma training memory (TrainingMemory.persistent)
      evolver.sqlite       LangGraph SQLite checkpoints of every evolver round (one thread per round)
      checkpoints/         TRL checkpoints; each checkpoint-N/ also holds harness_version.json + memory.jsonl
      abandoned/           harness versions / memory moved aside by a resume or a failed round
      eval.json, report.html
      .harnessrl.lock      one writer per run folder: the trainer's pid while it runs (trainer.run_lock)
      *.jsonl.torn         torn log tails a resume cut off (trainer.io.heal_jsonl)

`state` is the harness version training uses *now*; the pause replaces it after an evolver round
(or from a broadcast on other ranks). Earlier versions are loaded on demand (`state_for`) because a
row carries the version it was sampled under and must be scored under that version's rubric.

Several processes (`accelerate launch`): every rank opens a `HarnessRun` on the same folder (one machine,
or a shared filesystem), but only the main process writes: it creates the store and the config, opens the
memory (Chroma's folder admits one writer), logs and queues events and writes metrics, rounds and
checkpoint state. The other ranks read the store, score their own slice of each batch and hand their
groups to every rank (trainer.reward), so the detectors and samplers stay identical on all ranks.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.detector import Detector, DetectorConfig
from harness.liveness import Liveness
from harness.store import HarnessStore
from harness.types import FailureEvent, HarnessState
from trainer.config import ConfigError, RunConfig
from trainer.config_loader import save_config
from trainer.io import append_jsonl

log = logging.getLogger(__name__)

# Process-wide registry so a pickled RubricReward can find the live run again (same process) by run_dir.
_RUNS: dict[str, HarnessRun] = {}


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def harness(self) -> Path:
        return self.root / "harness"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def rounds(self) -> Path:
        return self.root / "rounds.jsonl"

    @property
    def memory(self) -> Path:
        return self.root / "memory"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def abandoned(self) -> Path:
        return self.root / "abandoned"


def suite_tasks(cfg: RunConfig) -> list:
    """Every task of `data.suite` (train and held-out), split as the run's config says."""
    from harness.data import load_suite

    suite = cfg.data.suite
    if not suite.startswith("hf:") and not Path(suite).exists():
        raise FileNotFoundError(
            f"data.suite: {suite} not found (a folder with train.jsonl and test.jsonl, a JSONL "
            f"file, or hf:<dataset id>; the bundled suite is data/rubric-mix-lite)"
        )
    return load_suite(suite, test_share=cfg.data.test_share, split_seed=cfg.data.split_seed)


def load_train_tasks(cfg: RunConfig) -> list:
    """The suite filtered by `data.tasks` / `data.domains` (test tasks are kept for eval)."""
    suite = cfg.data.suite
    tasks = suite_tasks(cfg)
    if cfg.data.domains:
        known = sorted({t.domain for t in tasks})
        bad = [d for d in cfg.data.domains if d not in known]
        if bad:
            raise ValueError(f"data.domains: unknown {bad} in {suite}; domains there: {known}")
        tasks = [t for t in tasks if t.domain in cfg.data.domains]
    if cfg.data.tasks:
        train_ids = {t.id for t in tasks if t.split == "train"}
        bad = [t for t in cfg.data.tasks if t not in train_ids]
        if bad:
            raise ValueError(f"data.tasks: {bad} are not train tasks of {suite} (after the domain filter)")
        keep = set(cfg.data.tasks)
        tasks = [t for t in tasks if t.split == "test" or t.id in keep]
    if not any(t.split == "train" for t in tasks):
        raise ValueError(f"no train tasks left in {suite} after data.domains/data.tasks filters")
    return tasks


def check_criteria_are_judged(cfg: RunConfig, tasks: list) -> None:
    """Refuse, at run start, train tasks whose text-only criteria (no programmatic `check`) nothing would judge.

    Without `evolver.judge_model` the judge skips such criteria: they never count, and a task made only of
    them scores 0 in every group. `harness.allow_unjudged_criteria=true` accepts that knowingly."""
    if cfg.evolver.judge_model != "rules" or cfg.harness.allow_unjudged_criteria:
        return
    train = [t for t in tasks if t.split == "train"]
    unjudged = {t.id: sum(c.check is None for c in t.criteria) for t in train}
    unjudged = {tid: n for tid, n in unjudged.items() if n}
    if not unjudged:
        return
    blind = [
        t.id for t in train if t.id in unjudged and not any(c.check is not None and c.weight > 0 for c in t.criteria)
    ]
    raise ConfigError(
        f"evolver.judge_model is not set, but {sum(unjudged.values())} criteria in {len(unjudged)} of {len(train)} "
        f"train tasks of {cfg.data.suite} have no programmatic check and would be skipped (never scored)"
        f"{f'; {len(blind)} tasks would score 0 in every group' if blind else ''} "
        f"(e.g. {', '.join(sorted(unjudged)[:5])}). Set evolver.judge_model (e.g. openai:<model> with "
        f"evolver.base_url), or harness.allow_unjudged_criteria=true to train on the checked criteria only, "
        f"or narrow data.tasks / data.domains"
    )


class HarnessRun:
    """Run folder + harness store + detector + memory + judge + the per-step/per-round buffers."""

    def __init__(
        self,
        cfg: RunConfig,
        *,
        memory: Any = None,
        judge: Any = None,
        open_memory: bool = True,
        main_process: bool | None = None,
    ) -> None:
        self.cfg = cfg
        # Several processes (accelerate/torchrun): the main one owns every writer (harness store, memory, logs);
        # the others score their slice and follow its harness. None: rank from the launcher's RANK variable.
        self.main_process = is_main_rank() if main_process is None else main_process
        self.paths = RunPaths(Path(cfg.run_dir))
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.store = HarnessStore(self.paths.harness)
        if not self.store.versions():
            if not self.main_process:
                raise RuntimeError(
                    f"{self.paths.harness}: no harness version yet, and only the main process creates "
                    f"it; build the run on the main process first (trainer.grpo.build_trainer does "
                    f"this under `args.main_process_first()`)"
                )
            tasks = load_train_tasks(cfg)
            check_criteria_are_judged(cfg, tasks)  # a fresh run: refused at start, not discovered late
            self.store.init(HarnessState.from_tasks(tasks))
            save_config(cfg, self.paths.config)
        self._state = self.store.latest()
        self._versions: OrderedDict[int, HarnessState] = OrderedDict()
        self.detector = Detector(DetectorConfig(**cfg.harness.detector))
        self.liveness = Liveness()  # per-task dead-rate estimate: ranks the round's events (trainer.round_events)
        # Chroma's local folder admits one writer (a second process fails on its lock): main process only.
        self.memory = (
            memory if memory is not None else (self._open_memory() if open_memory and self.main_process else None)
        )
        self.judge = judge if judge is not None else self.new_judge()
        # The reward runs on TRL's async-loop thread, the callback (and its pause) on the main one.
        self.lock = threading.Lock()
        self.pending_events: list[FailureEvent] = []
        self.step_metrics: dict[int, dict[str, Any]] = {}
        self.sampler: Any = None  # set by trainer.sampler.HarnessSampler
        self.rounds_done: list[dict[str, Any]] = []
        self.last_record: dict[str, Any] = {}  # last metrics.jsonl line (progress bar)
        self.group_counts: dict[tuple[str, int], int] = {}  # (task, step) -> groups seen: memory record ids
        # The run folder's lock (trainer.run_lock.RunLock) when the builder took it: released by `close`.
        self.folder_lock: Any = None
        _RUNS[str(self.paths.root.resolve())] = self

    # -- live objects -----------------------------------------------------------------------------------
    def _open_memory(self) -> Any:
        from memory.store import TrainingMemory

        url, embedding = self.cfg.harness.memory_url, self.cfg.evolver.memory_embedding
        if url:
            from urllib.parse import urlparse

            u = urlparse(url)
            return TrainingMemory.http(u.hostname or "127.0.0.1", u.port or 8000, embedding=embedding)
        return TrainingMemory.persistent(self.paths.memory, embedding=embedding)

    def new_judge(self) -> Any:
        """A fresh judge for the run's judge model and endpoint.

        The evolver gets its own: its stats must not mix with the training reward's.
        """
        return make_judge(self.cfg.evolver.judge_model, *judge_endpoint(self.cfg))

    @classmethod
    def lookup(cls, run_dir: str | Path) -> HarnessRun | None:
        return _RUNS.get(str(Path(run_dir).resolve()))

    def close(self) -> None:
        try:
            if self.memory is not None:
                self.memory.close()
            _RUNS.pop(str(self.paths.root.resolve()), None)
        finally:
            if self.folder_lock is not None:
                self.folder_lock.release()
                self.folder_lock = None

    # -- harness versions ---------------------------------------------------------------------------------
    @property
    def state(self) -> HarnessState:
        return self._state

    def set_state(self, state: HarnessState) -> None:
        self._state = state
        self._versions[state.version] = state

    def refresh(self) -> HarnessState:
        """Re-read the latest committed version (the evolver graph commits to the store itself)."""
        self.set_state(self.store.latest())
        return self._state

    def state_for(self, version: int) -> HarnessState:
        if version == self._state.version:
            return self._state
        if version not in self._versions:
            self._versions[version] = self.store.load(version)
            while len(self._versions) > 8:  # rows lag at most one batch: a few versions suffice
                self._versions.popitem(last=False)
        return self._versions[version]

    # -- buffers ------------------------------------------------------------------------------------------
    def add_events(self, events: list[FailureEvent], harness_version: int) -> None:
        """Log and queue events for the next round, on the main process only.

        It runs the rounds; every process observes the same groups, so the others would only repeat these events.
        """
        if not self.main_process:
            return
        for e in events:
            append_jsonl(self.paths.events, e.log_line(harness_version))
            if self.memory is not None:
                domain = self._domain(e.task_id)
                self.memory.add_event(e, domain=domain, harness_version=harness_version)
        with self.lock:
            self.pending_events.extend(events)

    def put_back_events(self, events: list[FailureEvent]) -> None:
        with self.lock:
            self.pending_events = list(events) + self.pending_events

    def record_step(self, step: int, values: dict[str, Any]) -> None:
        with self.lock:
            self.step_metrics.setdefault(step, {}).update(values)

    def pop_step(self, step: int) -> dict[str, Any]:
        with self.lock:
            return self.step_metrics.pop(step, {})

    def _domain(self, task_id: str) -> str:
        try:
            return self._state.task(task_id).domain
        except KeyError:
            return ""


def is_main_rank() -> bool:
    """Rank 0 of the launch, from the `RANK` variable that torchrun/accelerate/deepspeed set (absent: one process).

    Read from the environment because a run is built before the trainer's process group exists."""
    return int(os.environ.get("RANK", "0")) == 0


def judge_endpoint(cfg: RunConfig) -> tuple[str | None, str]:
    """(base URL, API-key variable) of the run's judge, resolved by `agents.chat_models.role_endpoint`.

    `evolver.judge_base_url` / `judge_api_key_env`, else the shared `evolver.base_url` / `api_key_env`. Here, in the
    run hub that builds every judge of the run (the reward's, the pause's, a replay's), not in the pause above it.
    """
    from agents.chat_models import role_endpoint  # langchain and the provider SDKs load only when a judge is built

    return role_endpoint(cfg.evolver, "judge")


def make_judge(judge_model: str | None, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY") -> Any:
    """The rubric judge: programmatic checks, plus an LLM for text-only criteria when a model is set."""
    from tools.judge import Judge

    if not judge_model or judge_model == "rules":
        return Judge()
    from agents.chat_models import load_chat_model

    return Judge(llm=load_chat_model(judge_model, base_url=base_url, api_key_env=api_key_env))
