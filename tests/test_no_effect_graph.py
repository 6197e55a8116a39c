"""A criteria candidate that changes no score, through the whole evolver graph: it costs no revision (the lane's
decision, `agents/decisions.py`) and is not written to memory as a failure of its template (`graphs/nodes.py`)."""

from __future__ import annotations

from agents.context import EvolverContext
from graphs.evolver import graph
from harness.detector import GroupStats, RolloutRecord
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."


def test_a_no_effect_attempt_is_not_written_to_memory_as_a_failure(tmp_path):
    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: HONEST))
    texts = [HONEST] * 4  # every cached rollout meets every criterion: no edit or reweight of one can change a score
    recs = [RolloutRecord(text=t, reward=0.0) for t in texts]
    svc.memory.add_group(GroupStats.from_rollouts("med-1", 9, recs), harness_version=0, texts=texts)
    ev = event("e-b", "blind_criterion", "med-1", criterion_id="water", pass_rate=1.0)
    out = graph.invoke(
        {"events": [ev], "harness_version": 0, "step": 10},
        {"configurable": {"thread_id": "t"}},
        context={"services_key": key, "sample_k": 4, "interfaces": ["criteria"]},
    )
    (report,) = out["reports"]
    free = [a for a in report["attempts"] if a["critique"]["no_effect"]]
    assert len(free) >= 2, [a["critique"]["reasons"][-1] for a in report["attempts"]]
    # Charged, these would have used up R = 2 revisions after three attempts; free, the proposer goes on.
    assert len(report["attempts"]) > EvolverContext().max_revisions + 1
    stored = svc.memory.proposals_for("med-1")
    assert {p.template for p in stored}.isdisjoint({a["template"] for a in free}), stored
