"""The real bundled all-MiniLM-L6-v2 embedder: loads offline (no socket opened), once per process, and ranks
by meaning rather than shared words; its ONNX backend gives the sentence-transformers vectors, exports
atomically, and reads stores written with the torch backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory import MiniLMEmbedding, ProposalRecord, TrainingMemory, make_embedding, minilm_onnx
from memory.embeddings import MINILM_NAME, load_minilm

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
            m.add_proposal(
                ProposalRecord(
                    proposal_id=task,
                    event_id=f"e{i}",
                    task_id=task,
                    failure_type="collapse_low",
                    interface="guidance",
                    outcome="accepted",
                    reasons=[text],
                    step=i,
                )
            )
        # No word in common with the medical record: only meaning connects them.
        hits = m.similar_cases("anticoagulant medication combined with analgesics is dangerous", k=3)
        assert [h.id for h in hits][0] == "med"
        assert hits[0].distance < hits[1].distance


@pytest.mark.slow  # a fresh interpreter imports torch: ~11 s on the shared 2-core box
@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_minilm_loads_without_touching_the_network(backend):
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
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), HARNESSRL_MINILM_BACKEND=backend)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "384 0 []"


TEXTS = [
    "a short sentence",
    "the answer never warns that the blood thinner interacts with the pain killer",
    "",  # only [CLS] [SEP]: pooling over two tokens
    "Héllo Wörld, ÜBER-long compound: naïve café résumé",
    "rubric criterion repeated " * 120,  # past max_seq_length (256 tokens): truncation must match
]


@pytest.mark.slow  # loads both backends (torch import, and the one-off ONNX export on a fresh machine)
def test_onnx_and_sentence_transformers_agree():
    onnx, ref = MiniLMEmbedding(backend="onnx"), MiniLMEmbedding(backend="torch")
    batched = np.stack(onnx(TEXTS))  # one padded batch of unequal lengths
    single = np.stack([onnx([t])[0] for t in TEXTS])
    expected = np.stack(ref(TEXTS))
    for got in (batched, single):
        cos = (got * expected).sum(axis=1)
        assert cos.min() > 0.999, cos
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    # Different texts must stay different: a broken mask or pooling would pull them together.
    assert float(batched[0] @ batched[1]) < 0.9


def test_backend_is_not_part_of_the_persisted_identity():
    # The store compares name+config on reopen; the backend must not be in either (see memory/embeddings.py).
    a, b = make_embedding("minilm-onnx"), make_embedding("minilm-torch")
    assert a.name() == b.name() == MINILM_NAME
    assert a.get_config() == b.get_config() == {"model": "all-MiniLM-L6-v2", "batch_size": 64}


@pytest.mark.parametrize("kind", ["minilm-cuda", "minilm-", "onnx"])
def test_unknown_embedding_names_the_choices(kind):
    with pytest.raises(ValueError, match="minilm-onnx"):
        make_embedding(kind)


def test_bad_backend_env_fails_when_the_store_opens(monkeypatch):
    monkeypatch.setenv("HARNESSRL_MINILM_BACKEND", "tensorflow")
    with pytest.raises(ValueError, match="HARNESSRL_MINILM_BACKEND='tensorflow'"):
        MiniLMEmbedding()


@pytest.mark.slow  # both backends embed the records
def test_store_written_with_torch_backend_is_read_with_onnx(tmp_path):
    cases = [
        ("med", "warfarin and ibuprofen together raise the bleeding risk"),
        ("poem", "the haiku task is saturated and should be sampled less"),
    ]
    with TrainingMemory.persistent(tmp_path / "mem", embedding="minilm-torch") as m:
        for i, (task, text) in enumerate(cases):
            m.add_proposal(
                ProposalRecord(
                    proposal_id=task,
                    event_id=f"e{i}",
                    task_id=task,
                    failure_type="collapse_low",
                    interface="guidance",
                    outcome="accepted",
                    reasons=[text],
                    step=i,
                )
            )
    with TrainingMemory.persistent(tmp_path / "mem", embedding="minilm-onnx") as m:
        assert m.embedding.backend == "onnx"
        hits = m.similar_cases("anticoagulant combined with an analgesic", k=2)
        assert [h.id for h in hits] == ["med", "poem"]


def test_export_is_reused_when_cached(tmp_path, monkeypatch):
    model_dir = Path(minilm_onnx_model_dir())
    final = tmp_path / f"all-MiniLM-L6-v2-{minilm_onnx.model_fingerprint(model_dir)}"
    final.mkdir()
    (final / minilm_onnx.ONNX_FILE).write_bytes(b"cached")

    def no_export(*a):
        raise AssertionError("exported although the cache had the model")

    monkeypatch.setattr(minilm_onnx, "_export", no_export)
    assert minilm_onnx.ensure_onnx_model(model_dir, cache_root=tmp_path) == final / minilm_onnx.ONNX_FILE


def test_failed_export_leaves_nothing_behind(tmp_path, monkeypatch):
    def half_export(model_dir, dest):
        dest.write_bytes(b"half a model")
        raise OSError("disk full")

    monkeypatch.setattr(minilm_onnx, "_export", half_export)
    with pytest.raises(OSError, match="disk full"):
        minilm_onnx.ensure_onnx_model(minilm_onnx_model_dir(), cache_root=tmp_path)
    # Neither a final folder a later process would trust, nor a stray temp folder.
    assert list(tmp_path.iterdir()) == []


def minilm_onnx_model_dir() -> str:
    from memory.embeddings import minilm_model_path

    return minilm_model_path()
