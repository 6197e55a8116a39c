"""The frozen policy of a pause (trainer/frozen.py): the per-round memo of seeded requests."""

from __future__ import annotations

import pytest

from trainer.frozen import MemoEndpoint

CONV = [{"role": "user", "content": "Say something."}]
OTHER = [{"role": "user", "content": "Say something else."}]


class CountingEndpoint:
    """A fake policy: a new text per call, so a repeated answer can only come from the memo."""

    name = "fake"

    def __init__(self):
        self.calls = 0

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        self.calls += 1
        return [[f"call{self.calls}-{i}-{j}" for j in range(n)] for i in range(len(messages_batch))]


@pytest.mark.parametrize(
    "first,second,memoised",
    [
        (dict(batch=[CONV], seed=0), dict(batch=[CONV], seed=0), True),  # the revision's control group
        (dict(batch=[CONV], seed=0), dict(batch=[CONV], seed=1), False),
        (dict(batch=[CONV], seed=None), dict(batch=[CONV], seed=None), False),  # unseeded: always fresh
        (dict(batch=[CONV], seed=0), dict(batch=[CONV, OTHER], seed=0), False),  # another batch, other random numbers
        (dict(batch=[CONV], seed=0, max_tokens=48), dict(batch=[CONV], seed=0, max_tokens=32), False),
    ],
)
def test_memo_answers_only_identical_seeded_requests(first, second, memoised):
    inner = CountingEndpoint()
    ep = MemoEndpoint(inner)

    def ask(req):
        return ep.sample(req["batch"], n=2, max_tokens=req.get("max_tokens", 48), temperature=1.0, seed=req["seed"])

    a = ask(first)
    b = ask(second)
    assert (inner.calls == 1) is memoised
    assert (b == a) is memoised
    assert ep.stats() == {"policy_requests": 2, "policy_memo_hits": int(memoised)}
    b[0][0] = "mutated"  # callers own their lists: the memo keeps its copy
    if memoised:
        assert ask(first)[0][0] == a[0][0]
