"""all-MiniLM-L6-v2 through onnxruntime: a one-off ONNX export of the bundled weights, then torch-free encoding.

Why: encoding one query with sentence-transformers in eager PyTorch on one thread costs ~20 ms CPU, which alone
is the whole 20 ms budget of a cross-task memory query (benchmarks/MEMORY.md); the same network under
onnxruntime costs ~7 ms. onnxruntime and `tokenizers` already come with chromadb, so running needs nothing new.

- Export (`ensure_onnx_model`): the bundled `BertModel` is traced with `torch.onnx.export` (the TorchScript
  exporter, which needs the `onnx` package) into `$HARNESSRL_CACHE/onnx/` (or `~/.cache/harnessrl/onnx/`), only
  when the file is missing. The folder name carries a fingerprint of the weights and of this export recipe, so a
  changed model or recipe gets a fresh export instead of a stale one. The export is written into a temp folder
  next to its final place and renamed, so a crash or a concurrent export never leaves a half-written model that
  a later process would load. torch/transformers are imported only here.
- Encoding (`OnnxMiniLM`): the model folder's `tokenizer.json` via `tokenizers` (truncation at the
  sentence-transformers `max_seq_length`, padding to the longest text of the batch), the ONNX graph giving
  token embeddings, then mean pooling over the attention mask and L2 normalisation computed exactly as the
  sentence-transformers `Pooling` and `Normalize` modules do (clamps 1e-9 and 1e-12 included). Texts are sorted by
  length before batching, as sentence-transformers does, so short texts are not padded to a long neighbour.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

# Bump when the export recipe (inputs, outputs, opset, wrapper) changes: it is part of the cache key.
EXPORT_RECIPE = "minilm-onnx-v1"
OPSET = 17
ONNX_FILE = "model.onnx"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

_export_lock = threading.Lock()


class OnnxExportError(RuntimeError):
    """The ONNX model could not be produced or loaded; the message says which file or package is at fault."""


def onnx_cache_root() -> Path:
    """`$HARNESSRL_CACHE/onnx` (next to the prepared models) or `~/.cache/harnessrl/onnx`."""
    env = os.environ.get("HARNESSRL_CACHE")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "harnessrl"
    return base / "onnx"


def model_fingerprint(model_dir: Path) -> str:
    """Short hash of what determines the exported graph.

    That is the export recipe, config.json and the weights' size and first/last MiB (hashing all 90 MB on every
    process start would cost more than an encode saves).
    """
    h = hashlib.sha256(EXPORT_RECIPE.encode())
    h.update((model_dir / "config.json").read_bytes())
    weights = model_dir / "model.safetensors"
    size = weights.stat().st_size
    h.update(str(size).encode())
    with open(weights, "rb") as f:
        h.update(f.read(1 << 20))
        f.seek(max(0, size - (1 << 20)))
        h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


def _export(model_dir: Path, dest: Path) -> None:
    """Trace the bundled BertModel into `dest` (an ONNX file). Token embeddings out; pooling stays in numpy."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as e:
        raise OnnxExportError(
            f"exporting {model_dir} to ONNX needs torch and transformers ({e}); install them once (the export "
            f"is cached in {onnx_cache_root()}), or set HARNESSRL_MINILM_BACKEND=torch"
        ) from e
    try:
        import onnx  # noqa: F401 - torch's TorchScript exporter needs it at export time only
    except ImportError as e:
        raise OnnxExportError(
            f"exporting {model_dir} to ONNX needs the `onnx` package ({e}): `.venv/bin/pip install onnx`, or set "
            "HARNESSRL_MINILM_BACKEND=torch to encode with sentence-transformers instead"
        ) from e

    class TokenEmbeddings(torch.nn.Module):
        # Positional inputs in a fixed order, one plain tensor out: the ONNX signature the encoder feeds.
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    # Eager attention: it traces to plain MatMul/Softmax; the SDPA path adds masking branches the tracer would
    # bake in. The example batch has padding so the mask path is the one traced.
    bert = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager", local_files_only=True).eval()
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.long)
    axes = {n: {0: "batch", 1: "sequence"} for n in (*_INPUTS, "token_embeddings")}
    # The tracer warns about Python-bool conversions in transformers' mask helpers; they concern shapes fixed by
    # the example batch's *rank*, not its sizes (dynamic_axes), and the equivalence test checks the result.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            TokenEmbeddings(bert),
            (ids, mask, torch.zeros_like(ids)),
            str(dest),
            input_names=list(_INPUTS),
            output_names=["token_embeddings"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def ensure_onnx_model(model_dir: str | os.PathLike[str], cache_root: Path | None = None) -> Path:
    """Path of the ONNX export of `model_dir`, exporting it first if the cache does not have it (atomic)."""
    model_dir = Path(model_dir)
    root = cache_root or onnx_cache_root()
    final = root / f"all-MiniLM-L6-v2-{model_fingerprint(model_dir)}"
    if (final / ONNX_FILE).is_file():
        return final / ONNX_FILE
    with _export_lock:
        if (final / ONNX_FILE).is_file():
            return final / ONNX_FILE
        try:
            root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=root))
        except OSError as e:
            raise OnnxExportError(f"cannot create the ONNX cache folder {root} ({e}); set HARNESSRL_CACHE") from e
        try:
            _export(model_dir, tmp / ONNX_FILE)
            tmp.chmod(0o755)  # mkdtemp makes it private; the finished cache folder is an ordinary readable one
            (tmp / "source.json").write_text(
                json.dumps({"model_dir": str(model_dir), "recipe": EXPORT_RECIPE, "opset": OPSET})
            )
            try:
                os.rename(tmp, final)
            except OSError:
                # Another process finished the same export first (rename onto a non-empty folder fails): use
                # theirs. Anything else is a real failure.
                if not (final / ONNX_FILE).is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # no-op after a successful rename
    return final / ONNX_FILE


class OnnxMiniLM:
    """Sentence embeddings from the ONNX export: tokenizer.json + onnxruntime + numpy mean pooling/normalising."""

    def __init__(self, model_dir: str | os.PathLike[str], threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        st_cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise OnnxExportError(f"{model_dir / '1_Pooling' / 'config.json'}: expected mean pooling, got {pooling}")
        self.max_seq_length = int(st_cfg["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json ships with truncation at 128 and fixed padding to 128; sentence-transformers truncates at
        # max_seq_length (256) and pads to the longest text of the batch. Match it.
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        pad_id = self.tokenizer.token_to_id("[PAD]")
        self.tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
        self.path = ensure_onnx_model(model_dir)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(self.path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own untyped errors; re-raised with the path
            raise OnnxExportError(
                f"cannot load the ONNX model {self.path} ({type(e).__name__}: {e}); delete {self.path.parent} to "
                "re-export it"
            ) from e

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """(len(texts), 384) float32, unit rows, in the order of `texts`."""
        out = np.empty((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            feeds = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
            }
            tokens = self.session.run(None, feeds)[0]
            # sentence_transformers.models.Pooling (mean) then Normalize (F.normalize), in float32.
            mask = feeds["attention_mask"][..., None].astype(np.float32)
            summed = (tokens * mask).sum(axis=1)
            vecs = summed / np.clip(mask.sum(axis=1), 1e-9, None)
            vecs = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
            out[idx] = vecs
        return out
