"""The evolver-quality benchmark's policy endpoint: counts every rollout the evolver asks for (its probe cost)
and serves a repeated request from a cache, charging it the seconds its first generation took, so "s / decision"
is what each arm would cost alone (`benchmarks/evolver_quality.py`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class ProbeCounter:
    requested: int = 0  # rollouts asked for (the evolver's probe cost)
    generated: int = 0  # rollouts actually generated (not served from the cache)
    calls: int = 0
    gen_seconds: float = 0.0
    charged_seconds: float = 0.0  # generation seconds of cache hits, charged to whoever asked again

    def snapshot(self) -> dict[str, float]:
        return {
            "requested": self.requested,
            "generated": self.generated,
            "calls": self.calls,
            "gen_seconds": self.gen_seconds,
            "charged_seconds": self.charged_seconds,
        }


class ProbeEndpoint:
    """Counts every rollout requested and memoises identical requests (generation is seeded: same request,
    same texts), charging a cache hit the seconds its first generation took."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = inner.name
        self.count = ProbeCounter()
        self._cache: dict[str, tuple[list[list[str]], float]] = {}
        self._lock = threading.Lock()

    def sample(
        self,
        messages_batch: list[list[dict]],
        n: int = 1,
        max_tokens: int = 64,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> list[list[str]]:
        key = json.dumps([messages_batch, n, max_tokens, temperature, seed], sort_keys=True)
        with self._lock:
            self.count.calls += 1
            self.count.requested += n * len(messages_batch)
            if key in self._cache:
                texts, secs = self._cache[key]
                self.count.charged_seconds += secs
                return [list(t) for t in texts]
            t0 = time.perf_counter()
            texts = self.inner.sample(messages_batch, n=n, max_tokens=max_tokens, temperature=temperature, seed=seed)
            secs = time.perf_counter() - t0
            self.count.generated += n * len(messages_batch)
            self.count.gen_seconds += secs
            self._cache[key] = ([list(t) for t in texts], secs)
            return texts
