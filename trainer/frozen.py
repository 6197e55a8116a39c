"""The frozen policy of a pause: the policy an evolver round samples, published the way its endpoint needs it.

`publish_policy` picks by `RunConfig.frozen_policy_source`:

- `local` (default): a `LocalEndpoint` over the live model (it samples under `no_grad` in eval mode and restores
  train mode); when the evolver runs on a LangGraph server (a separate process that cannot see the live model),
  the policy is saved atomically instead (`save_frozen_policy`: `run_dir/frozen/step-N-<id>/`, a LoRA adapter
  plus the tokenizer, or the full model when training all weights; the last `KEEP_FROZEN` are kept) and the
  server loads `local:<that folder>` once per round;
- `training_server`: the HTTP endpoint is TRL's vLLM server; every rank first pushes the weights there
  (`push_weights_to_training_server`, a collective);
- `lora_adapter`: another HTTP endpoint with LoRA: the step's adapter is saved to `run_dir/adapters/step-N-<id>/`
  and hot-loaded into that vLLM server under that name (`hot_load_adapter`).

The config refuses an HTTP policy that follows the trained weights neither way. Every in-process endpoint is
wrapped in a `MemoEndpoint` for the round.

Probe rollouts are the whole cost of an evolver round on a CPU (profiled on SmolLM2-135M + LoRA, one torch thread:
~13 s per 4 x 48-token group under load, 6-8 groups per round; memory writes and queries, the judge and the graph's
SQLite checkpoints add ~3 s per round). Each revision of a candidate re-samples the task's control group: the same
prompt, seed and frozen policy, hence exactly the same texts (`LocalEndpoint` seeds every call; vLLM seeds per
request). `MemoEndpoint` answers such a repeat from memory, so the critic's numbers do not change at all. Unseeded
requests are always sampled afresh. One instance lives for one round: the policy changes between rounds.

(Merging the LoRA adapter into a copy for sampling was measured too: ~5% faster per call under load
for ~4 s of copying per round; not worth it.)
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.endpoint import TokenCounter
from trainer.config import RunConfig

if TYPE_CHECKING:
    from transformers import Trainer

    from tools.local_endpoint import LocalEndpoint
    from tools.openai_endpoint import OpenAIEndpoint


class MemoEndpoint:
    """A `PolicyEndpoint` wrapper that memoises seeded requests for the lifetime of one frozen policy."""

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint
        self.name = endpoint.name
        self.requests = 0  # seeded or not
        self.hits = 0
        self._memo: dict[str, list[list[str]]] = {}
        self._lock = threading.Lock()

    def sample(
        self,
        messages_batch: list[list[dict]],
        n: int = 1,
        max_tokens: int = 64,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> list[list[str]]:
        with self._lock:
            self.requests += 1
        if seed is None:  # the caller wants fresh samples
            return self.endpoint.sample(messages_batch, n=n, max_tokens=max_tokens, temperature=temperature, seed=None)
        # The whole request is the key: a conversation sampled inside a different batch draws other random numbers.
        key = json.dumps([messages_batch, n, max_tokens, float(temperature), seed], sort_keys=True)
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self.hits += 1
                return [list(texts) for texts in found]
        out = self.endpoint.sample(messages_batch, n=n, max_tokens=max_tokens, temperature=temperature, seed=seed)
        with self._lock:
            self._memo[key] = [list(texts) for texts in out]
        return out

    def count_tokens(self, texts: list[str]) -> int | None:
        """The wrapped endpoint's token counts (`tools.endpoint.TokenCounter`), or None when it has none.

        Without them the critic's cost counts words and says so.
        """
        return self.endpoint.count_tokens(texts) if isinstance(self.endpoint, TokenCounter) else None

    def stats(self) -> dict[str, int]:
        return {"policy_requests": self.requests, "policy_memo_hits": self.hits}


# -- publishing the policy of a pause ---------------------------------------------------------------------------
def push_weights_to_training_server(cfg: RunConfig, trainer: Trainer | None) -> bool:
    """Collective, on EVERY rank: push the trained weights into TRL's vLLM server when the critic samples it.

    TRL pushes lazily, before the next generation, so at a pause its server still holds the weights of the
    step's start. Public TRL surface only: `trainer.vllm_generation.sync_weights()` is one call for LoRA
    (merged, pushed, unmerged) and full weights, and it gathers parameters with collectives under
    ZeRO-3/FSDP, so every rank must call it (rank 0 alone deadlocks). TRL's record of the last pushed step
    is private and is not written: TRL pushes the same weights again before the next step's generation
    (one redundant push per round). Not run in CI (no GPU vLLM); LoRA hot-loading is (test_vllm_cpu)."""
    if cfg.frozen_policy_source != "training_server":
        return False
    if trainer is None:
        raise RuntimeError("the training-server frozen policy needs the trainer (HarnessCallback.trainer is None)")
    trainer.vllm_generation.sync_weights()
    return True


def publish_policy(cfg: RunConfig, trainer: Trainer | None, step: int) -> tuple[MemoEndpoint | None, str]:
    """(endpoint object for in-process use, endpoint spec string for a LangGraph server), on rank 0.

    With `harness.langgraph_url` and the local policy there is no in-process endpoint (None): the policy
    is saved to disk and the spec names that folder. How an HTTP policy follows the trained weights is
    `RunConfig.frozen_policy_source` (the config refuses one that would not)."""
    h = cfg.harness
    source = cfg.frozen_policy_source
    if source == "local":
        if trainer is None:
            raise RuntimeError("local frozen policy needs the trainer (HarnessCallback.trainer is None)")
        if h.langgraph_url is not None:
            model = trainer.accelerator.unwrap_model(trainer.model)
            folder = save_frozen_policy(model, trainer.processing_class, cfg.run_path / "frozen", step)
            return None, f"local:{folder}"
        return MemoEndpoint(live_endpoint(trainer, step)), "local"
    from tools.openai_endpoint import OpenAIEndpoint

    base = h.policy_endpoint
    name = h.policy_model or cfg.model.name
    endpoint = OpenAIEndpoint(base_url=base, model=name)
    # "training_server": `push_weights_to_training_server` ran on every rank before this round.
    if source == "lora_adapter":
        if trainer is None:
            raise RuntimeError(
                "hot-loading the step's LoRA adapter needs the trainer (HarnessCallback.trainer is None)"
            )
        endpoint = hot_load_adapter(endpoint, trainer, cfg.run_path / "adapters", step)
        name = endpoint.model
    return MemoEndpoint(endpoint), f"openai:{base}#{name}"


def live_endpoint(trainer: Trainer, step: int) -> LocalEndpoint:
    """The trainer's live model as a policy endpoint (in process; it samples whatever the weights are now)."""
    from tools.local_endpoint import LocalEndpoint

    model = trainer.accelerator.unwrap_model(trainer.model)
    return LocalEndpoint(model, trainer.processing_class, name=f"local:step-{step}")


def hot_load_adapter(endpoint: OpenAIEndpoint, trainer: Trainer, root: Path, step: int) -> OpenAIEndpoint:
    """Hot-load the live model's LoRA adapter into the vLLM server behind `endpoint`; return the endpoint to it.

    The adapter is saved to `root/step-N-<id>/` and loaded under that name.

    Exactly this step's adapter, under a new name and folder per publish: vLLM caches by path, and a resumed run
    that repeats step N must not collide with the adapter loaded the first time."""
    name = f"step-{step}-{time.time_ns() % 10**6:06d}"
    adapter_dir = root / name
    trainer.accelerator.unwrap_model(trainer.model).save_pretrained(str(adapter_dir))
    endpoint.load_lora_adapter(name, adapter_dir)
    return endpoint.with_model(name)


# -- the frozen policy on disk (for a LangGraph server process) ---------------------------------------------
KEEP_FROZEN = 2


def save_frozen_policy(model: Any, tokenizer: Any, root: Path, step: int, keep: int = KEEP_FROZEN) -> Path:
    """Save the paused policy to a new folder under `root` atomically and return its absolute path.

    A PEFT model saves only its adapter (a few MB for SmolLM2-135M at r=16, written in milliseconds, no copy
    of the live model) and the server merges it into its base once at load; merging here instead would mean
    copying the model (merge is in place) and writing ~0.5 GB per round. A plain model (the tiny preset)
    saves its weights. The tokenizer goes along so the server samples with the trainer's pad token and
    chat template. The folder name is unique per save (`step-N-<id>`): a server caches models by folder, and
    a resumed run that repeats step N must not be answered by the model cached for the first attempt.
    The newest `keep` folders stay (the last rounds' policies, for inspection); older ones are deleted.
    """
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}-{time.time_ns() % 10**9:09d}"
    tmp = root / f".{final.name}.tmp"
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        adapter_cfg = tmp / "adapter_config.json"
        if adapter_cfg.is_file():
            # The server may run in another working directory: record the base model as an absolute folder.
            data = json.loads(adapter_cfg.read_text())
            base = data.get("base_model_name_or_path")
            if base and Path(base).is_dir():
                data["base_model_name_or_path"] = str(Path(base).resolve())
                adapter_cfg.write_text(json.dumps(data, indent=2))
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    saved = sorted((p for p in root.glob("step-*") if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)
    for old in saved[: -max(1, keep)]:  # never the folder just saved: the round is about to load it
        shutil.rmtree(old)
    for stale in root.glob(".step-*.tmp"):  # a save killed before its rename
        shutil.rmtree(stale)
    return final
