"""The real bundled all-MiniLM-L6-v2 embedder: loads offline (no socket opened), once per process, and ranks
by meaning rather than shared words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory import MiniLMEmbedding, ProposalRecord, TrainingMemory
from memory.embeddings import load_minilm

REPO = Path(__file__).resolve().parents[1]


def test_minilm_model_is_loaded_once_and_embeds_unit_vectors():
    a = MiniLMEmbedding.build_from_config({"model": "all-MiniLM-L6-v2"})
    b = MiniLMEmbedding.build_from_config({"model": "all-MiniLM-L6-v2"})
    v = a(["a short sentence"])[0]
    b(["another one"])
    assert load_minilm() is load_minilm()
    assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-4


def test_minilm_semantic_query_ranks_the_relevant_record_first():
    records = [
        ("med", "the answer never warns that the blood thinner interacts with the pain killer"),
        ("poem", "every poem already scores full marks, the task is saturated and should be sampled less"),
        ("code", "responses repeat the same keyword many times to satisfy the rubric"),
    ]
    with TrainingMemory.ephemeral(embedding="minilm") as m:
        for i, (task, text) in enumerate(records):
            m.add_proposal(ProposalRecord(
                proposal_id=task, event_id=f"e{i}", task_id=task, failure_type="collapse_low", interface="guidance",
                outcome="accepted", reasons=[text], step=i,
            ))
        # No word in common with the medical record: only meaning connects them.
        hits = m.similar_cases("anticoagulant medication combined with analgesics is dangerous", k=3)
        assert [h.id for h in hits][0] == "med"
        assert hits[0].distance < hits[1].distance


@pytest.mark.slow  # a fresh interpreter imports torch: ~11 s on the shared 2-core box
def test_minilm_loads_without_touching_the_network():
    # Attempts are counted, not only refused: a library that catches the error and carries on would
    # otherwise hide that it tried.
    code = (
        "import socket\nattempts = []\n"
        "def deny(*a, **k):\n    attempts.append(a[1:2])\n    raise OSError('network access attempted')\n"
        "socket.socket.connect = deny\nsocket.create_connection = deny\n"
        "from memory import MiniLMEmbedding\n"
        "print(len(MiniLMEmbedding()(['offline please'])[0]), len(attempts), attempts[:3])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "384 0 []"
