"""Held-out evaluation: training-criteria score and hidden audit score per domain, Avg@k.

For every test task (never edited by the evolver: `harness.ops` refuses ops on test tasks) the policy
samples k responses at the training temperature with `top_k=0` (TRL's sampling, so eval and training
see the same distribution) and no hints. Avg@k = the mean score of the k samples, averaged over tasks;
`audit` is the same for the hidden audit criteria (None where a task has none). Results go to
`run_dir/eval.json` (one entry per evaluated model label, so base and trained can sit side by side).

Beside them, unless turned off, the external yardstick (`evaluate_ifeval`): our held-out instruction-following
prompts (`data/ifeval-heldout/`) answered greedily and scored by IFEval's own checkers (`tools/ifeval.py`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from trainer.io import atomic_write_json


def load_model(model_dir: Path, base: str | None, dtype: str = "float32") -> tuple[Any, Any]:
    """Model and left-padding tokenizer from a saved model folder; a LoRA adapter folder is merged into `base`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (model_dir / "adapter_config.json").is_file():
        from peft import PeftModel

        from trainer.policy_models import resolve_model

        base_dir = resolve_model(base or "smollm2")
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=getattr(torch, dtype))
        model = PeftModel.from_pretrained(model, str(model_dir)).merge_and_unload()  # merged: plain-model speed
        tok = AutoTokenizer.from_pretrained(base_dir, padding_side="left")
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
        tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    return model, tok


def evaluate(
    tasks: list,
    endpoint: Any,
    judge: Any,
    *,
    k: int,
    max_tokens: int,
    temperature: float,
    seed: int,
    progress: bool = True,
    batch_size: int = 1,
) -> dict[str, Any]:
    """Score `tasks` (held-out) with `endpoint`; returns per-task, per-domain and overall Avg@k.

    `batch_size` tasks share one `endpoint.sample` call, seeded `seed + index of its first task` (so
    `batch_size=1` seeds task i with `seed + i`). Batching is much cheaper per sequence on a CPU (one
    batched decode instead of many small ones); results depend on the batch size through the seeds.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.guidance import render_prompt

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    per_task: dict[str, dict[str, Any]] = {}
    with Progress(
        TextColumn("[bold]eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        disable=not progress,
    ) as bar:
        job = bar.add_task("eval", total=len(tasks), info="")
        for start in range(0, len(tasks), batch_size):
            chunk = tasks[start : start + batch_size]
            batch = endpoint.sample(
                [render_prompt(t, []) for t in chunk],
                n=k,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed + start,
            )
            for task, responses in zip(chunk, batch, strict=True):
                scores = [r.score for r in judge.score_sync(task.criteria, task.user_prompt, responses)]
                audits = [a for a in judge.audit_sync(task, responses) if a is not None]
                per_task[task.id] = {
                    "domain": task.domain,
                    "avg": float(np.mean(scores)),
                    "scores": scores,
                    "audit": float(np.mean(audits)) if audits else None,
                    "pass_at_k": float(max(scores) >= 1.0),
                }
                bar.update(job, advance=1, info=f"{task.id}: {per_task[task.id]['avg']:.2f}")
    domains: dict[str, dict[str, Any]] = {}
    for d in sorted({v["domain"] for v in per_task.values()}):
        rows = [v for v in per_task.values() if v["domain"] == d]
        audits = [v["audit"] for v in rows if v["audit"] is not None]
        domains[d] = {
            "n_tasks": len(rows),
            "avg_at_k": float(np.mean([v["avg"] for v in rows])),
            "audit": float(np.mean(audits)) if audits else None,
        }
    all_audits = [v["audit"] for v in per_task.values() if v["audit"] is not None]
    return {
        "k": k,
        "n_tasks": len(per_task),
        "avg_at_k": float(np.mean([v["avg"] for v in per_task.values()])),
        "audit": float(np.mean(all_audits)) if all_audits else None,
        "domains": domains,
        "tasks": per_task,
    }


def evaluate_ifeval(
    prompts: list,
    endpoint: Any,
    *,
    max_tokens: int,
    k: int = 1,
    temperature: float = 0.0,
    seed: int = 1234,
    batch_size: int = 16,
) -> dict[str, Any]:
    """IFEval's metrics of `endpoint` on `prompts` (`tools.ifeval.IFEvalPrompt`s).

    k responses per prompt, `batch_size` prompts per `endpoint.sample` call seeded `seed + index of its first
    prompt`; k = 1 at temperature 0 is IFEval's own protocol (greedy). Per-prompt verdicts are kept; responses
    are not.
    """
    from tools.ifeval import score

    if k < 1 or batch_size < 1 or (k > 1 and temperature == 0):
        raise ValueError(
            f"IFEval eval: k={k}, batch_size={batch_size}, temperature={temperature} "
            f"(k > 1 needs a sampling temperature)"
        )
    t0 = time.monotonic()
    responses: list[list[str]] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        responses += endpoint.sample(
            [p.messages() for p in chunk], n=k, max_tokens=max_tokens, temperature=temperature, seed=seed + start
        )
    gen_s = time.monotonic() - t0
    res = score(prompts, responses)
    res.update(
        max_tokens=max_tokens, temperature=temperature, seed=seed, generate_s=gen_s, seconds=time.monotonic() - t0
    )
    return res


def run_eval(
    *,
    run_dir: Path | None,
    model: str | None,
    base: str | None,
    suite: str | None,
    split: str,
    k: int,
    max_tokens: int | None,
    temperature: float | None,
    seed: int,
    judge_model: str | None,
    label: str | None,
    progress: bool = True,
    torch_threads: int = 1,
    batch_size: int = 16,
    with_base: bool = False,
    ifeval: bool = True,
    ifeval_prompts: str | None = None,
    ifeval_max_tokens: int = 128,
    ifeval_k: int = 1,
) -> dict[str, Any]:
    """Evaluate one model (a run's final model by default) and, with `with_base`, the run's base model.

    The base model runs on the same tasks, seeds and batches (common random numbers: the two differ only by the
    weights). Both land in `run_dir/eval.json` under their labels; a base result with the same tasks and settings
    is reused.
    With `ifeval`, each result also holds `ifeval` (`evaluate_ifeval` on `ifeval_prompts`, default the
    bundled `data/ifeval-heldout/prompts.jsonl`; greedy when `ifeval_k` is 1, else at the eval temperature)."""
    import torch

    from harness.data import load_suite
    from tools.local_endpoint import LocalEndpoint
    from trainer.config_loader import config_from_dict
    from trainer.harness_run import make_judge, suite_tasks
    from trainer.policy_models import resolve_model

    torch.set_num_threads(torch_threads)
    cfg = None
    if run_dir is not None:
        import yaml

        saved = Path(run_dir) / "config.yaml"
        if not saved.is_file():
            raise FileNotFoundError(
                f"{saved} not found: --run must be a folder written by `harnessrl train` "
                f"(or pass --model MODEL --suite DIR)"
            )
        cfg = config_from_dict(yaml.safe_load(saved.read_text()))
    suite_dir = suite or (cfg.data.suite if cfg else None)
    if suite_dir is None:
        raise ValueError("eval needs --run RUN or --suite DIR")
    if cfg is not None and suite is None:
        tasks = [t for t in suite_tasks(cfg) if t.split == split]  # the run's own split of its suite
    else:
        tasks = [t for t in load_suite(suite_dir) if t.split == split]
    if cfg and split == "test" and cfg.data.eval_tasks:
        tasks = [t for t in tasks if t.id in set(cfg.data.eval_tasks)]
    if cfg and cfg.data.domains:
        tasks = [t for t in tasks if t.domain in cfg.data.domains]
    if not tasks:
        raise ValueError(f"no {split} tasks in {suite_dir}")
    if model is None:
        if run_dir is None:
            raise ValueError("eval needs --run RUN or --model MODEL")
        model = str(Path(run_dir) / "final")
        if not Path(model).is_dir():
            raise FileNotFoundError(f"{model} not found: the run has not finished; pass --model <checkpoint folder>")
    base = base or (cfg.model.name if cfg else None)
    judge = make_judge(judge_model or (cfg.evolver.judge_model if cfg else None))
    settings = {
        "split": split,
        "k": k,
        "seed": seed,
        "batch_size": batch_size,
        "max_tokens": max_tokens or (cfg.train.max_completion_length if cfg else 48),
        "temperature": temperature if temperature is not None else (cfg.train.temperature if cfg else 1.0),
    }
    dtype = cfg.model.dtype if cfg else "float32"
    if_prompts, if_settings = None, None
    if ifeval:  # loaded (and validated) before any model: a bad prompts file fails in a second
        from tools.ifeval import DEFAULT_PROMPTS, load_prompts

        if_file = Path(ifeval_prompts) if ifeval_prompts else DEFAULT_PROMPTS
        if_prompts = load_prompts(if_file)
        import hashlib

        if_settings = {
            "prompts_file": if_file.name,
            "n_prompts": len(if_prompts),
            "k": ifeval_k,
            "seed": seed,
            "prompts_sha256": hashlib.sha256(if_file.read_bytes()).hexdigest(),  # edited prompts: rerun
            "max_tokens": ifeval_max_tokens,
            "temperature": 0.0 if ifeval_k == 1 else settings["temperature"],
        }

    def ifeval_of(endpoint: Any) -> dict[str, Any]:
        res = evaluate_ifeval(
            if_prompts,
            endpoint,
            max_tokens=ifeval_max_tokens,
            k=ifeval_k,
            temperature=if_settings["temperature"],
            seed=seed,
            batch_size=batch_size,
        )
        return {**res, "settings": if_settings}

    def one(model_dir: Path, adapter_base: str | None) -> dict[str, Any]:
        m, tok = load_model(model_dir, adapter_base, dtype)
        endpoint = LocalEndpoint(m, tok, name=f"local:{model_dir.name}")
        t0 = time.monotonic()
        res = evaluate(
            tasks,
            endpoint,
            judge,
            k=k,
            max_tokens=settings["max_tokens"],
            temperature=settings["temperature"],
            seed=seed,
            progress=progress,
            batch_size=batch_size,
        )
        res.update(model=str(model_dir), seconds=time.monotonic() - t0, **settings)
        if if_prompts is not None:
            res["ifeval"] = ifeval_of(endpoint)
        return res

    model_dir = Path(model) if Path(model).is_dir() else resolve_model(model)
    result = one(model_dir, base)
    if run_dir is None:
        return result
    import json

    out = Path(run_dir) / "eval.json"
    try:
        data = json.loads(out.read_text()) if out.is_file() else {}
    except ValueError as e:  # a damaged eval.json must not be overwritten silently: say which file, and the way out
        raise ValueError(
            f"{out}: not readable JSON ({e}); move it aside and run the eval again (a new one is written)"
        ) from None
    data[label or ("trained" if model_dir.name == "final" else model_dir.name)] = result
    if with_base:
        if base is None:
            raise ValueError("--with-base needs the run's model.name (or --base MODEL)")
        prev = data.get("base") or {}
        same = all(prev.get(key) == val for key, val in settings.items()) and set(prev.get("tasks") or {}) == set(
            result["tasks"]
        )
        if same and if_prompts is not None and (prev.get("ifeval") or {}).get("settings") != if_settings:
            m, tok = load_model(resolve_model(base), None, dtype)  # only the yardstick is missing or stale
            prev = {**prev, "ifeval": ifeval_of(LocalEndpoint(m, tok, name="local:base"))}
        data["base"] = prev if same else one(resolve_model(base), None)
    atomic_write_json(out, data)
    return result
