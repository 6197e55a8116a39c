"""`harnessrl eval` / `trainer.evaluate`: held-out Avg@k and audit score per domain, eval.json, LoRA adapters.

No training loop is needed: a run folder is its resolved config plus a `final/` model, which is what
`harnessrl train` leaves; here `final/` is the tiny model itself or a LoRA adapter saved on top of it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.tiny_run import tiny_config
from trainer.cli import main
from trainer.config_loader import save_config
from trainer.evaluate import evaluate


class ScriptedEndpoint:
    """A fake policy that answers each prompt with a fixed list (the judge is real)."""

    name = "scripted"

    def __init__(self, by_prompt):
        self.by_prompt = by_prompt
        self.calls = []

    def sample(self, messages_batch, n=1, max_tokens=64, temperature=1.0, seed=None):
        self.calls.append((len(messages_batch), n, seed))
        return [self.by_prompt[conv[-1]["content"]][:n] for conv in messages_batch]


def _tasks(tmp_path):
    from harness.data import load_suite

    cfg = tiny_config(tmp_path)
    return [t for t in load_suite(cfg.data.suite) if t.split == "test"]


@pytest.mark.parametrize("batch_size,calls", [(1, [(1, 4, 7), (1, 4, 8)]), (2, [(2, 4, 7)]), (16, [(2, 4, 7)])])
def test_evaluate_scores_avg_at_k_and_audit_per_domain(tmp_path, batch_size, calls):
    from tools.judge import Judge

    tasks = _tasks(tmp_path)  # e-paris (science, audit "non-empty"), e-any (writing, no audit criteria)
    ep = ScriptedEndpoint(
        {"Name the capital of France.": ["Paris.", "", "Lyon", "Paris!"], "Write something.": ["a", "b", "c", "d"]}
    )
    res = evaluate(
        tasks, ep, Judge(), k=4, max_tokens=8, temperature=1.0, seed=7, progress=False, batch_size=batch_size
    )
    assert res["k"] == 4 and res["n_tasks"] == 2
    paris = res["tasks"]["e-paris"]
    assert paris["scores"] == [1.0, 0.0, 0.0, 1.0] and paris["avg"] == 0.5 and paris["pass_at_k"] == 1.0
    assert paris["audit"] == pytest.approx(0.75)  # the empty answer fails the hidden "non-empty" audit
    assert res["tasks"]["e-any"]["audit"] is None  # no audit criteria: no number, not a zero
    assert res["domains"]["science"] == {"n_tasks": 1, "avg_at_k": 0.5, "audit": pytest.approx(0.75)}
    assert res["domains"]["writing"]["avg_at_k"] == 1.0 and res["domains"]["writing"]["audit"] is None
    assert res["avg_at_k"] == pytest.approx(0.75) and res["audit"] == pytest.approx(0.75)
    assert ep.calls == calls  # (prompts, k, seed) per call: seed + index of the call's first task
    assert all("Hint:" not in t.user_prompt for t in tasks)


def _run_folder(tmp_path, tiny_model_dir, lora: bool):
    cfg = tiny_config(tmp_path, "model.lora=true" if lora else "model.lora=false", "train.max_completion_length=8")
    cfg.run_path.mkdir(parents=True)
    save_config(cfg, cfg.run_path / "config.yaml")
    final = cfg.run_path / "final"
    if lora:
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        peft = get_peft_model(
            base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
        )
        peft.save_pretrained(str(final))  # adapter files only, as GRPOTrainer.save_model writes for LoRA
        assert not (final / "config.json").exists()
    else:
        shutil.copytree(tiny_model_dir, final)
    return cfg


@pytest.mark.parametrize("lora", [False, True])
def test_cli_eval_of_a_run_writes_eval_json(tmp_path, tiny_model_dir, capsys, lora):
    cfg = _run_folder(tmp_path, tiny_model_dir, lora)
    # --no-ifeval: the yardstick has its own test below (it would triple this test's generation time).
    rc = main(["eval", "--run", str(cfg.run_path), "--k", "2", "--no-progress", "--no-ifeval"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    summary = json.JSONDecoder().raw_decode(out.out[out.out.index("{") :])[0]
    assert summary["n_tasks"] == 2 and summary["k"] == 2 and set(summary["domains"]) == {"science", "writing"}
    saved = json.loads((cfg.run_path / "eval.json").read_text())
    res = saved["trained"]
    assert res["k"] == 2 and all(len(t["scores"]) == 2 for t in res["tasks"].values())
    assert res["tasks"]["e-any"]["avg"] == 1.0  # "under 10000 words" holds for any 8-token answer
    assert 0.0 <= res["domains"]["science"]["avg_at_k"] <= 1.0 and res["domains"]["science"]["audit"] is not None

    # The base model was evaluated on the same draws (tasks, k, seeds) and kept beside the trained one.
    base = saved["base"]
    assert set(base["tasks"]) == set(res["tasks"]) and (base["k"], base["seed"]) == (res["k"], res["seed"])
    assert "base model on the same draws" in out.out
    # Evaluating again reuses that base result rather than sampling it twice.
    assert main(["eval", "--run", str(cfg.run_path), "--k", "2", "--no-progress", "--no-ifeval"]) == 0
    assert json.loads((cfg.run_path / "eval.json").read_text())["base"]["seconds"] == base["seconds"]

    # A second model goes next to the first under its own label; the first results stay.
    rc = main(
        [
            "eval",
            "--run",
            str(cfg.run_path),
            "--model",
            "tiny",
            "--label",
            "tiny-again",
            "--k",
            "2",
            "--no-progress",
            "--no-ifeval",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert set(json.loads((cfg.run_path / "eval.json").read_text())) == {"trained", "base", "tiny-again"}


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["eval", "--k", "2"], "give --run RUN or --model MODEL"),
        (["eval", "--run", "{tmp}/nope", "--k", "2"], "written by `harnessrl train`"),
        (["eval", "--model", "tiny", "--k", "0"], "--k and --batch-size must be >= 1"),
        (["eval", "--model", "tiny", "--batch-size", "0"], "--k and --batch-size must be >= 1"),
        (["eval", "--model", "tiny", "--k", "2"], "--suite"),
    ],
)
def test_cli_eval_errors_say_what_to_do(tmp_path, capsys, argv, fragment):
    rc = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert rc in (1, 2)
    assert fragment in capsys.readouterr().err


def test_cli_eval_of_an_unfinished_run_names_the_checkpoint_option(tmp_path, tiny_model_dir, capsys):
    cfg = _run_folder(tmp_path, tiny_model_dir, lora=False)
    shutil.rmtree(cfg.run_path / "final")
    rc = main(["eval", "--run", str(cfg.run_path), "--k", "2", "--no-progress"])
    assert rc == 1 and "--model" in capsys.readouterr().err


# -- the external yardstick (IFEval's own checkers on data/ifeval-heldout) -------------------------------------
def _ifeval_file(tmp_path, rows=None):
    rows = rows or [
        {
            "key": "a",
            "prompt": "Say hi without commas.",
            "instruction_id_list": ["punctuation:no_comma"],
            "kwargs": [{}],
        },
        {
            "key": "b",
            "prompt": "Say hi in lowercase.",
            "instruction_id_list": ["change_case:english_lowercase"],
            "kwargs": [{}],
        },
    ]
    f = tmp_path / "ifeval.jsonl"
    f.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return f


def test_evaluate_ifeval_scores_with_the_external_checkers(tmp_path, monkeypatch):
    from tools.ifeval import load_prompts
    from trainer.evaluate import evaluate_ifeval

    monkeypatch.setenv("HARNESSRL_NLTK_DATA", str(tmp_path / "nltk"))
    prompts = load_prompts(_ifeval_file(tmp_path))
    ep = ScriptedEndpoint(
        {
            "Say hi without commas.": ["hi there", "hi, there"],
            "Say hi in lowercase.": [
                "Hello there my friend, how are you today?",
                "hello there my friend, how are you today?",
            ],
        }
    )
    res = evaluate_ifeval(prompts, ep, max_tokens=8, k=2, temperature=1.0, seed=5, batch_size=1)
    assert ep.calls == [(1, 2, 5), (1, 2, 6)]  # one call per batch, seeded seed + index of its first prompt
    assert res["prompts"]["a"]["prompt_strict"] == 0.5 and res["prompts"]["b"]["prompt_strict"] == 0.5
    assert res["prompt_strict"] == 0.5 and res["instruction_strict"] == 0.5 and res["n_prompts"] == 2
    with pytest.raises(ValueError, match="sampling temperature"):
        evaluate_ifeval(prompts, ep, max_tokens=8, k=2, temperature=0.0)


def test_cli_eval_reports_ifeval_beside_the_audit(tmp_path, tiny_model_dir, capsys, monkeypatch):
    monkeypatch.setenv("HARNESSRL_NLTK_DATA", str(tmp_path / "nltk"))
    cfg = _run_folder(tmp_path, tiny_model_dir, lora=False)
    prompts = _ifeval_file(tmp_path)
    argv = [
        "eval",
        "--run",
        str(cfg.run_path),
        "--k",
        "1",
        "--no-progress",
        "--ifeval-prompts",
        str(prompts),
        "--ifeval-max-tokens",
        "4",
    ]
    assert main([*argv[:5], "--no-ifeval"]) == 0  # an earlier eval without the yardstick
    before = json.loads((cfg.run_path / "eval.json").read_text())["base"]
    assert "ifeval" not in before
    capsys.readouterr()
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, out.err
    summary = json.JSONDecoder().raw_decode(out.out[out.out.index("{") :])[0]
    assert summary["ifeval"]["n_prompts"] == 2 and 0.0 <= summary["ifeval"]["prompt_strict"] <= 1.0
    saved = json.loads((cfg.run_path / "eval.json").read_text())
    for label in ("trained", "base"):  # both models, greedy, with the settings that produced them
        ife = saved[label]["ifeval"]
        assert {k: v for k, v in ife["settings"].items() if k != "prompts_sha256"} == {
            "prompts_file": "ifeval.jsonl",
            "n_prompts": 2,
            "k": 1,
            "seed": 1234,
            "max_tokens": 4,
            "temperature": 0.0,
        }
        assert len(ife["settings"]["prompts_sha256"]) == 64 and set(ife["prompts"]) == {"a", "b"}
    # The base's rubric and audit result was reused (same settings); only its yardstick was added.
    assert saved["base"]["seconds"] == before["seconds"] and saved["base"]["tasks"] == before["tasks"]
    # The same weights under greedy decoding: trained (= the tiny model itself here) and base agree.
    assert saved["trained"]["ifeval"]["prompts"] == saved["base"]["ifeval"]["prompts"]
    assert "IFEval" in out.out

    # Turned off: no yardstick in the new result.
    assert main([*argv[:5], "--no-ifeval", "--label", "off"]) == 0
    assert "ifeval" not in json.loads((cfg.run_path / "eval.json").read_text())["off"]


def test_cli_eval_bad_ifeval_prompts_fail_before_any_model(tmp_path, capsys):
    bad = _ifeval_file(
        tmp_path, [{"key": "a", "prompt": "x", "instruction_id_list": ["keywords:existence"], "kwargs": [{}]}]
    )
    suite = Path(__file__).resolve().parents[1] / "data" / "rubric-mix-lite"
    rc = main(["eval", "--model", "tiny", "--suite", str(suite), "--ifeval-prompts", str(bad)])
    err = capsys.readouterr().err
    assert rc == 1 and f"{bad}:1: field 'kwargs[0]'" in err and "missing 'keywords'" in err
