"""The frozen policy of a pause, memoised: a repeated seeded request returns what re-sampling would.

Probe rollouts are the whole cost of an evolver round on a CPU (profiled on SmolLM2-135M + LoRA, one
torch thread: ~13 s per 4 x 48-token group under load, 6-8 groups per round; memory writes and queries,
the judge and the graph's SQLite checkpoints add ~3 s per round). Each revision of a candidate re-samples the task's control group: the same prompt, seed and
frozen policy, hence exactly the same texts (`LocalEndpoint` seeds every call; vLLM seeds per
request). `MemoEndpoint` answers such a repeat from memory, so the critic's numbers do not change at
all. Unseeded requests are always sampled afresh. One instance lives for one round: the policy
changes between rounds.

(Merging the LoRA adapter into a copy for sampling was measured too: ~5% faster per call under load
for ~4 s of copying per round; not worth it.)
"""

from __future__ import annotations

import json
import threading
from typing import Any

from measure.endpoint import TokenCounter


class MemoEndpoint:
    """A `PolicyEndpoint` wrapper that memoises seeded requests for the lifetime of one frozen policy."""

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint
        self.name = endpoint.name
        self.requests = 0  # seeded or not
        self.hits = 0
        self._memo: dict[str, list[list[str]]] = {}
        self._lock = threading.Lock()

    def sample(self, messages_batch: list[list[dict]], n: int = 1, max_tokens: int = 64, temperature: float = 1.0,
               seed: int | None = None) -> list[list[str]]:
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
        """The wrapped endpoint's token counts (`measure.endpoint.TokenCounter`), or None when it has none
        (the critic's cost then counts words and says so)."""
        return self.endpoint.count_tokens(texts) if isinstance(self.endpoint, TokenCounter) else None

    def stats(self) -> dict[str, int]:
        return {"policy_requests": self.requests, "policy_memo_hits": self.hits}
