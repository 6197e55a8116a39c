"""Frozen policy in process: transformers ``generate`` on a given model (the CPU default).

During a training pause the trainer passes its live model (plain or PEFT-wrapped); nothing trains while
the evolver runs, so sampling it under ``no_grad`` *is* the frozen checkpoint, with no copy and no server.
A LangGraph server process gets the paused policy as a folder the trainer saved (`from_path`: a full
model, or a LoRA adapter on its base model). Sampling follows TRL's GRPO defaults (``top_k=0``,
``top_p=1``) so the critic sees the same distribution the trainer samples from. torch is imported lazily so
``import tools`` stays light.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tools.endpoint import EndpointError, validate_request


class LocalEndpoint:
    """`PolicyEndpoint` over an in-memory causal LM and its tokenizer."""

    def __init__(
        self, model: Any, tokenizer: Any, device: str | None = None, batch_size: int = 16, name: str | None = None
    ):
        import torch  # lazy: only the trainer side pays for torch

        self._torch = torch
        self.model = model
        self.tokenizer = tokenizer
        if device is not None:
            model.to(device)
        self.batch_size = int(batch_size)
        # torch's RNG and the model's train/eval flag are process-wide: concurrent calls (the evolver runs one
        # lane per task in threads) would interleave their seeds and could restore the trainer's RNG wrongly.
        # One CPU-bound generate at a time is also no slower on a shared 2-core box.
        self._lock = threading.Lock()
        self.name = (
            name or f"local:{getattr(getattr(model, 'config', None), 'name_or_path', '') or type(model).__name__}"
        )
        if tokenizer.chat_template is None:
            raise EndpointError(f"{self.name}: the tokenizer has no chat template; the endpoint samples chat prompts")

    @classmethod
    def from_path(cls, path: str | Path, device: str = "cpu", dtype: str = "float32", **kwargs: Any) -> LocalEndpoint:
        """Load a HF model folder or a PEFT LoRA adapter folder and wrap it.

        A model folder is e.g. what `trainer.policy_models.resolve_model` returns.

        An adapter folder (it holds `adapter_config.json`, as the trainer's frozen LoRA policy does) is loaded
        onto its base model (`base_model_name_or_path`, a local folder: we are offline) and merged once, so
        sampling runs at the plain model's speed. The tokenizer comes from the folder itself when it has one
        (the trainer saves its own, pad token included), else from the base model.
        """
        import json

        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path)
        adapter_cfg = path / "adapter_config.json"
        tok_dir = path
        if adapter_cfg.is_file():
            from peft import PeftModel

            base = json.loads(adapter_cfg.read_text()).get("base_model_name_or_path")
            if not base or not Path(base).is_dir():
                raise EndpointError(
                    f"{adapter_cfg}: base_model_name_or_path {base!r} is not a local model folder; "
                    "the LoRA adapter needs its base model on this machine"
                )
            model = AutoModelForCausalLM.from_pretrained(base, dtype=getattr(torch, dtype))
            model = PeftModel.from_pretrained(model, str(path)).merge_and_unload()
            if not (path / "tokenizer_config.json").is_file():
                tok_dir = Path(base)
        else:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
        tokenizer = AutoTokenizer.from_pretrained(tok_dir)
        return cls(model, tokenizer, device=device, name=kwargs.pop("name", f"local:{path.name}"), **kwargs)

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens of `texts` under the policy's tokenizer (`tools.endpoint.TokenCounter`)."""
        if not texts:
            return 0
        return sum(len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"])

    def sample(
        self,
        messages_batch: list[list[dict]],
        n: int = 1,
        max_tokens: int = 64,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> list[list[str]]:
        validate_request(messages_batch, n, max_tokens, temperature)
        with self._lock:
            return self._sample(messages_batch, n, max_tokens, temperature, seed)

    def _sample(
        self, messages_batch: list[list[dict]], n: int, max_tokens: int, temperature: float, seed: int | None
    ) -> list[list[str]]:
        torch = self._torch
        was_training = self.model.training
        self.model.eval()
        # fork_rng: seeding here must not shift the trainer's own random stream.
        device = next(self.model.parameters()).device
        devices = [device] if device.type == "cuda" else []
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices):
                if seed is not None:
                    torch.manual_seed(seed)
                out: list[list[str]] = []
                for start in range(0, len(messages_batch), self.batch_size):
                    out.extend(
                        self._generate(
                            messages_batch[start : start + self.batch_size], n, max_tokens, temperature, device
                        )
                    )
                return out
        finally:
            self.model.train(was_training)

    def _generate(
        self, convs: list[list[dict]], n: int, max_tokens: int, temperature: float, device: Any
    ) -> list[list[str]]:
        tok = self.tokenizer
        texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in convs]
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        saved_side = tok.padding_side
        tok.padding_side = "left"  # generation continues from the right edge of every row
        try:
            # The chat template already holds the special tokens; adding BOS again would shift the prompt.
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        finally:
            tok.padding_side = saved_side
        greedy = temperature == 0
        kwargs: dict[str, Any] = dict(max_new_tokens=max_tokens, pad_token_id=pad_id, use_cache=True)
        if greedy:
            # Greedy decoding cannot return several sequences; all n would be identical anyway.
            kwargs.update(do_sample=False, num_return_sequences=1, temperature=None, top_k=None, top_p=None)
        else:
            kwargs.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0, num_return_sequences=n)
        seqs = self.model.generate(**enc, **kwargs)
        new = seqs[:, enc["input_ids"].shape[1] :]
        decoded = tok.batch_decode(new, skip_special_tokens=True)
        if greedy:
            return [[d] * n for d in decoded]
        # generate() returns the n samples of each prompt consecutively.
        return [decoded[i * n : (i + 1) * n] for i in range(len(convs))]
