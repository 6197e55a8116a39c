"""Judge concurrency benchmark: 64 responses x 8 text-only criteria, 50 ms injected judge latency.

The chat model is `tests.support.fakes.fake_chat.FunctionChatModel`, whose async path sleeps 50 ms with
`asyncio.sleep` before answering, like a remote judge endpoint. The same batch is scored once with
`Judge(concurrency=1)` (serial) and once with `Judge(concurrency=32)`, each with a fresh cache, and
the speed-up is reported as a ratio from one run. Target: >= 20x at concurrency 32.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/judge_bench.py [--responses 64] [--criteria 8] \
        [--latency-ms 50] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere: repo root on the path

from harness.types import Criterion  # noqa: E402
from tests.support.fakes.fake_chat import FunctionChatModel  # noqa: E402
from tools.judge import Judge  # noqa: E402


def _respond(messages) -> str:
    # Deterministic verdict from the request so both runs produce identical scores (checked below).
    met = len(messages[-1].content) % 2 == 0
    return json.dumps({"met": met, "reason": "benchmark verdict"})


def run(n_responses: int, n_criteria: int, latency_s: float, concurrency: int) -> dict:
    criteria = [
        Criterion(
            id=f"t{i}",
            text=f"The response addresses aspect number {i} of the question.",
            weight=float(1 + i % 3),
            kind="important",
        )
        for i in range(n_criteria)
    ]
    responses = [f"Response {j}: " + "lorem ipsum " * (j % 7) for j in range(n_responses)]
    timings, scores = {}, {}
    for label, conc in (("serial", 1), ("concurrent", concurrency)):
        llm = FunctionChatModel(respond=_respond, latency_s=latency_s)
        judge = Judge(llm, concurrency=conc)
        t0 = time.perf_counter()
        results = judge.score_sync(criteria, "Explain the topic.", responses)
        timings[label] = time.perf_counter() - t0
        scores[label] = [r.score for r in results]
        assert llm.calls == n_responses * n_criteria, (label, llm.calls)
    assert scores["serial"] == scores["concurrent"], "concurrency changed the verdicts"
    calls = n_responses * n_criteria
    return {
        "responses": n_responses,
        "criteria": n_criteria,
        "calls": calls,
        "latency_ms": latency_s * 1000,
        "concurrency": concurrency,
        "serial_s": timings["serial"],
        "concurrent_s": timings["concurrent"],
        "ratio": timings["serial"] / timings["concurrent"],
        "ideal_concurrent_s": calls / concurrency * latency_s,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--responses", type=int, default=64)
    p.add_argument("--criteria", type=int, default=8)
    p.add_argument("--latency-ms", type=float, default=50.0)
    p.add_argument("--concurrency", type=int, default=32)
    a = p.parse_args()
    r = run(a.responses, a.criteria, a.latency_ms / 1000, a.concurrency)
    print(
        f"{r['calls']} judge calls ({r['responses']} responses x {r['criteria']} criteria), "
        f"{r['latency_ms']:.0f} ms latency each"
    )
    print(f"serial (concurrency 1):       {r['serial_s']:.2f} s")
    print(
        f"concurrent (concurrency {r['concurrency']}): {r['concurrent_s']:.2f} s "
        f"(ideal {r['ideal_concurrent_s']:.2f} s)"
    )
    print(f"speed-up: {r['ratio']:.1f}x (target >= 20x)")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
