"""Studio path: a real `langgraph dev` server runs the evolver from `langgraph.json`, driven via `langgraph_sdk`.

Every test here shares the session's server (`langgraph_dev_url` in tests/conftest.py, started by
`tests/support/servers.py`: offline, its log in a temp folder, its process group killed at the end). The frozen
policy and the LLM brain are the OpenAI stub server of this test process (the server reaches it over HTTP),
except in the last test, which trains the tiny preset with its rounds on the server and its memory on the
session's `chroma run` server.
"""

from __future__ import annotations

import itertools
import json
import shutil
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.studio

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "fixtures" / "evolver_snapshot"
HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
TIGHT = {
    "type": "all_of",
    "checks": [
        {"type": "contains_any", "phrases": ["water"]},
        {"type": "word_count", "min": 8},
        {"type": "max_repeated_ngram", "n": 1, "max_count": 3},
    ],
}


@pytest.fixture
def server(langgraph_dev_url):
    """The session's `langgraph dev` URL."""
    return langgraph_dev_url


@pytest.fixture
def stub(openai_stub):
    """Policy replies alternate stuffing/honest; structured requests (the LLM proposer) get a valid update."""
    counter = itertools.count()

    def respond(request):
        if "response_format" in request:
            return {
                "update": {
                    "interface": "criteria",
                    "ops": [{"op": "edit_criterion", "task_id": "med-1", "criterion_id": "water", "check": TIGHT}],
                },
                "rationale": "llm",
            }
        return "water water water water water rest" if next(counter) % 2 else HONEST

    openai_stub.responder = respond
    return openai_stub


def _context(tmp_path, stub, name, **extra):
    run_dir = tmp_path / name
    shutil.copytree(SNAPSHOT / "harness", run_dir / "harness")
    # A fixed budget (sample_k_max = sample_k): the assertions read the group size the context chose.
    return {
        "run_dir": str(run_dir),
        "policy": f"openai:{stub.base_url}#stub",
        "memory_location": "none",
        "sample_k": 4,
        "sample_k_max": 4,
        "max_tokens": 16,
        **extra,
    }


def _input(*event_ids):
    data = json.loads((SNAPSHOT / "events.json").read_text())
    data["events"] = [e for e in data["events"] if not event_ids or e["id"] in event_ids]
    return data


def test_evolver_on_langgraph_dev(server, stub, tmp_path):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server)
    assert any(a["graph_id"] == "evolver" for a in client.assistants.search())

    # 1. A run on the recorded snapshot, then its state history.
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "evolver", input=_input(), context=_context(tmp_path, stub, "base"))
    assert {r["event_id"] for r in out["reports"]} == {e["id"] for e in _input()["events"]}
    stuffing = next(r for r in out["reports"] if r["event_id"] == "snap-stuffing-med-1")
    assert stuffing["decision"] == "accepted" and stuffing["attempts"][-1]["critique"]["numbers"]["k"] == 4
    history = client.threads.get_history(thread, limit=50)
    assert len(history) >= 3 and history[0]["values"]["reports"]

    # 2. Two assistants that differ only in the proposer brain.
    rules = client.assistants.create(graph_id="evolver", name="rules-brains", context={"proposer_model": "rules"})
    llm = client.assistants.create(
        graph_id="evolver", name="llm-proposer", context={"proposer_model": "openai:stub", "base_url": stub.base_url}
    )
    n_structured = sum("response_format" in r for r in stub.requests)
    for assistant, name in ((rules, "a-rules"), (llm, "a-llm")):
        t = client.threads.create()["thread_id"]
        res = client.runs.wait(
            t, assistant["assistant_id"], input=_input("snap-stuffing-med-1"), context=_context(tmp_path, stub, name)
        )
        attempt = res["reports"][0]["attempts"][-1]
        assert res["reports"][0]["decision"] == "accepted"
        assert attempt["source"] == ("rules" if assistant is rules else "llm")
    assert sum("response_format" in r for r in stub.requests) == n_structured + 1  # only the LLM assistant asked

    # 3. Approval: the run pauses at the interrupt; resuming commits the update.
    t = client.threads.create()["thread_id"]
    ctx = _context(tmp_path, stub, "approve", require_approval=True)
    client.runs.wait(t, "evolver", input=_input("snap-stuffing-med-1"), context=ctx)
    state = client.threads.get_state(t)
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    assert len(interrupts) == 1 and interrupts[0]["value"]["critique"]["measured_ok"] is True
    assert not (Path(ctx["run_dir"]) / "harness" / "versions" / "v000001.json").exists()
    done = client.runs.wait(t, "evolver", command={"resume": {"approve": True}}, context=ctx)
    assert done["reports"][0]["decision"] == "accepted"
    assert (Path(ctx["run_dir"]) / "harness" / "versions" / "v000001.json").exists()


def test_project_runner_on_langgraph_dev_answers_the_approval(server, stub, tmp_path):
    """`graphs.runner.run_on_server` (what the trainer and `harnessrl evolve --server` call): a new thread, the
    approval interrupt answered by the approver, the accepted update committed by the server."""
    from langgraph_sdk import get_sync_client

    from agents.context import EvolverContext
    from graphs.runner import RUN_CONTEXT_KEYS, run_on_server

    ctx = EvolverContext(**_context(tmp_path, stub, "runner", require_approval=True))
    asked = []
    run = run_on_server(
        server,
        _input("snap-stuffing-med-1"),
        ctx,
        timeout_s=120,
        assistant_name="runner-test",
        approve=lambda payload: asked.append(payload) or True,
        metadata={"test": "runner"},
    )
    assert len(asked) == 1 and asked[0]["critique"]["measured_ok"] is True
    assert run.output["reports"][0]["decision"] == "accepted"
    assert run.output["reports"][0]["attempts"][-1]["critique"]["numbers"]["k"] == 4  # ctx's k, via its assistant
    assert (Path(ctx.run_dir) / "harness" / "versions" / "v000001.json").exists()
    client = get_sync_client(url=server)
    assert client.threads.get(run.thread_id)["metadata"]["test"] == "runner"
    # The graph id made an assistant holding ctx's choices; the run's own values are not part of it.
    assistant = client.assistants.get(run.assistant_id)
    assert assistant["name"] == "runner-test" and assistant["context"]["sample_k"] == 4
    assert not set(RUN_CONTEXT_KEYS) & set(assistant["context"])


def test_the_assistant_chooses_the_brains_of_trainer_and_evolve_runs(server, stub, tmp_path, capsys):
    """Runs started by the trainer (`trainer.evolver_round.run_round`) and by `harnessrl evolve --server` send only
    the run-specific context: the assistant they name decides the proposer, whatever the caller's own settings."""
    from langgraph_sdk import get_sync_client

    from graphs.round_record import summarize
    from harness.types import FailureEvent
    from tests.support.tiny_run import tiny_config
    from trainer.cli import main
    from trainer.evolver_round import evolver_context, run_round

    client = get_sync_client(url=server)
    limits = {"sample_k": 4, "sample_k_max": 4, "max_tokens": 16}
    # Unique names: `langgraph dev` keeps its assistants between sessions (.langgraph_api/), and a name must
    # name exactly one.
    tag = uuid.uuid4().hex[:8]
    rules = client.assistants.create(
        graph_id="evolver", name=f"studio-rules-{tag}", context={"proposer_model": "rules", **limits}
    )
    llm = client.assistants.create(
        graph_id="evolver",
        name=f"studio-llm-{tag}",
        context={"proposer_model": "openai:stub", "base_url": stub.base_url, **limits},
    )
    data = _input("snap-stuffing-med-1")
    events = [FailureEvent.model_validate(e) for e in data["events"]]

    def structured() -> int:
        return sum("response_format" in r for r in stub.requests)

    def trainer_round(name: str, assistant: str | None, proposer: str) -> dict:
        sets = [
            f"harness.langgraph_url={server}",
            "evolver.memory=false",
            f"evolver.proposer_model={proposer}",
            f"evolver.base_url={stub.base_url}",
        ] + ([f"harness.langgraph_assistant={assistant}"] if assistant else [])
        cfg = tiny_config(tmp_path / name, *sets)
        shutil.copytree(SNAPSHOT / "harness", cfg.run_path / "harness")
        ctx = evolver_context(cfg, services_key=None, policy_spec=f"openai:{stub.base_url}#stub")
        return run_round(cfg, events, data["harness_version"], data["step"], ctx, thread_id=f"{name}-round")

    def source(out: dict) -> str:
        assert out["reports"][0]["decision"] == "accepted", out["reports"]
        return out["reports"][0]["attempts"][-1]["source"]

    # 1. Trainer: the config asks for the LLM proposer, the assistant (by id) for rules: rules answer.
    before = structured()
    out = trainer_round("t-rules", rules["assistant_id"], "openai:stub")
    assert source(out) == "rules" and structured() == before
    assert summarize(out)["assistant_id"] == rules["assistant_id"]  # recorded in rounds.jsonl
    # What the server did not take from the config is named (the callback logs it at the first round, issue 20).
    notes = summarize(out)["server_settings"]
    assert any(n.startswith("harness.detector") for n in notes)  # tiny.yaml's overrides never reach the server
    assert "proposer_model: the server's assistant uses 'rules', not the config's 'openai:stub'" in notes
    # ... and the other way round, the assistant named by its name.
    out = trainer_round("t-llm", f"studio-llm-{tag}", "rules")
    assert source(out) == "llm" and structured() == before + 1 and out["assistant_id"] == llm["assistant_id"]
    # 2. Trainer, default (the graph id): an assistant made from the config, so the config's proposer answers.
    out = trainer_round("t-default", None, "openai:stub")
    assert source(out) == "llm" and structured() == before + 2
    made = client.assistants.get(out["assistant_id"])
    assert made["name"] == "harnessrl train run" and made["context"]["proposer_model"] == "openai:stub"
    assert [n for n in out["server_settings"] if not n.startswith("harness.detector")] == []  # made from the config

    # 3. `harnessrl evolve --server --assistant`: the assistant's proposer; model flags are refused beside it.
    policy, snapshot = f"openai:{stub.base_url}#stub", tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT / "harness", snapshot / "harness")
    (snapshot / "events.json").write_text(json.dumps(data))
    for assistant, expected in ((llm["assistant_id"], "llm"), (f"studio-rules-{tag}", "rules")):
        run_dir, out_json = tmp_path / f"e-{expected}", tmp_path / f"e-{expected}.json"
        rc = main(
            [
                "evolve",
                str(snapshot),
                "--run-dir",
                str(run_dir),
                "--policy",
                policy,
                "--server",
                server,
                "--assistant",
                assistant,
                "--json",
                str(out_json),
            ]
        )
        assert rc == 0
        assert source(json.loads(out_json.read_text())) == expected
    assert structured() == before + 3  # one more LLM proposal: the LLM assistant's evolve run
    capsys.readouterr()
    assert (
        main(
            [
                "evolve",
                str(snapshot),
                "--run-dir",
                str(tmp_path / "e-bad"),
                "--policy",
                policy,
                "--server",
                server,
                "--assistant",
                f"studio-llm-{tag}",
                "--proposer-model",
                "rules",
            ]
        )
        == 2
    )
    assert "--proposer-model" in capsys.readouterr().err


def _waiting_thread(client, round_id: str, timeout_s: float = 180.0) -> dict:
    """The trainer's thread of round `round_id` (its metadata names it), once it waits at an interrupt."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        threads = client.threads.search(metadata={"round": round_id})
        if threads and threads[0]["status"] == "interrupted":
            return threads[0]
        time.sleep(0.5)
    raise AssertionError(f"round {round_id}: no thread waiting at an interrupt after {timeout_s:.0f} s")


def test_trainer_rounds_wait_for_a_person_and_an_unanswered_approval_is_a_rejection(
    server, stub, tmp_path, caplog, monkeypatch
):
    """evolver.require_approval on a server round (issue 20 item 5): the trainer's round waits at the interrupt; a
    second client (what Studio and `harnessrl evolve --server --thread T --approve` do) approves it and the server
    commits; a round nobody answers is resumed with a rejection when harness.max_pause_s is spent: nothing committed,
    and rounds.jsonl's summary and the console say so."""
    import logging
    import threading
    import time

    from langgraph_sdk import get_sync_client

    from graphs.round_record import summarize
    from harness.types import FailureEvent
    from tests.support.tiny_run import tiny_config
    from trainer.config import ConfigError
    from trainer.evolver_round import evolver_context, run_round

    client = get_sync_client(url=server)
    data = _input("snap-stuffing-med-1")
    events = [FailureEvent.model_validate(e) for e in data["events"]]
    tag = uuid.uuid4().hex[:8]  # `langgraph dev` keeps threads between sessions: round names must be new

    def trainer_round(name: str, budget: int) -> tuple:
        cfg = tiny_config(
            tmp_path / name,
            f"harness.langgraph_url={server}",
            "evolver.memory=false",
            "evolver.require_approval=true",
            f"harness.max_pause_s={budget}",
            f"evolver.base_url={stub.base_url}",
            "evolver.sample_k=4",
            "evolver.sample_k_max=4",
        )
        shutil.copytree(SNAPSHOT / "harness", cfg.run_path / "harness")
        ctx = evolver_context(cfg, services_key=None, policy_spec=f"openai:{stub.base_url}#stub")
        assert ctx.require_approval
        result: dict = {}

        def go() -> None:
            try:
                result["out"] = run_round(
                    cfg, events, data["harness_version"], data["step"], ctx, thread_id=f"{name}-{tag}"
                )
            except Exception as e:  # noqa: BLE001 - the test thread reports it
                result["error"] = e

        thread = threading.Thread(target=go)
        thread.start()
        return cfg, thread, result

    def committed(cfg) -> bool:
        return (cfg.run_path / "harness" / "versions" / "v000001.json").exists()

    # 1. Approved by a second client: the round waits (nothing committed) until the resume, then the server commits.
    cfg, worker, result = trainer_round("approved", budget=600)
    waiting = _waiting_thread(client, f"approved-{tag}")
    time.sleep(2 * 1.0)  # the trainer keeps polling; still nothing committed while nobody answered
    assert worker.is_alive() and not committed(cfg)
    state = client.threads.get_state(waiting["thread_id"])
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    assert len(interrupts) == 1 and interrupts[0]["value"]["event"]["id"] == "snap-stuffing-med-1"
    first = client.runs.list(waiting["thread_id"])[-1]  # the trainer's run: its assistant and run-specific context
    client.runs.wait(
        waiting["thread_id"],
        first["assistant_id"],
        command={"resume": {"approve": True}},
        context=first["kwargs"]["context"],
    )
    worker.join(120)
    assert not worker.is_alive() and "error" not in result, result
    summary = summarize(result["out"])
    assert summary["n_accepted"] == 1 and committed(cfg)
    assert summary["approvals"] == [
        {"event_id": "snap-stuffing-med-1", "interrupt_id": interrupts[0]["id"], "answer": "approved", "by": "person"}
    ]

    # 2. Unanswered: at the budget the trainer resumes with a rejection; the candidate is never committed.
    caplog.set_level(logging.WARNING, logger="trainer.evolver_round")
    budget = 25
    t0 = time.monotonic()
    cfg, worker, result = trainer_round("unanswered", budget=budget)
    _waiting_thread(client, f"unanswered-{tag}")
    worker.join(budget + 90)
    assert not worker.is_alive() and "error" not in result, result
    assert time.monotonic() - t0 < budget + 60  # bounded by the pause budget (plus the rejection's own run)
    summary = summarize(result["out"])
    assert summary["n_accepted"] == 0 and not committed(cfg)
    assert summary["outcomes"] == {"rejected_by_human": 1}
    assert [(a["event_id"], a["answer"], a["by"]) for a in summary["approvals"]] == [
        ("snap-stuffing-med-1", "unanswered", "deadline")
    ]
    assert any(
        "was not answered within harness.max_pause_s=25s" in r.getMessage()
        and "rejected, not committed" in r.getMessage()
        for r in caplog.records
    )
    thread = client.threads.search(metadata={"round": f"unanswered-{tag}"})[0]
    assert thread["status"] == "idle"  # no interrupt left waiting on the server

    # 3. `harnessrl evolve SNAPSHOT --server URL --thread T --approve` answers a waiting trainer round (a person types
    # y): the waiting thread is resumed, not run again, and the round commits.
    from trainer.cli import main

    cfg, worker, result = trainer_round("cli", budget=600)
    waiting = _waiting_thread(client, f"cli-{tag}")
    snapshot = tmp_path / "cli-snapshot"
    shutil.copytree(SNAPSHOT / "harness", snapshot / "harness")
    (snapshot / "events.json").write_text(json.dumps(data))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "y")
    assert (
        main(
            [
                "evolve",
                str(snapshot),
                "--run-dir",
                str(cfg.run_path),
                "--policy",
                f"openai:{stub.base_url}#stub",
                "--server",
                server,
                "--thread",
                waiting["thread_id"],
                "--approve",
            ]
        )
        == 0
    )
    worker.join(120)
    assert not worker.is_alive() and "error" not in result, result
    summary = summarize(result["out"])
    assert summary["n_accepted"] == 1 and committed(cfg)
    assert [(a["answer"], a["by"]) for a in summary["approvals"]] == [("approved", "person")]
    assert len(client.runs.list(waiting["thread_id"])) == 2  # the trainer's run and the resume, no second input run

    # In process nobody could answer: the config refuses it.
    with pytest.raises(ConfigError, match="require_approval needs harness.langgraph_url"):
        tiny_config(tmp_path / "in-process", "evolver.require_approval=true")


# -- training with the rounds on the server and the memory on `chroma run` ---------------------------------------------
STEPS = 6
# As in test_trainer_e2e: guidance off (a random model cannot follow hints), so t-long's collapse goes to the
# criteria interface, where the loosened length check is measurably better on the frozen tiny model.
OVERRIDES = (
    f"train.max_steps={STEPS}",
    "data.tasks=[t-long,t-any]",
    "evolver.interfaces=[sampling,criteria]",
    "evolver.sample_k=8",
)


@pytest.mark.chroma_server
def test_training_with_the_evolver_on_langgraph_dev(langgraph_dev_url, chroma_url, tmp_path):
    from langgraph_sdk import get_sync_client

    from harness.store import HarnessStore
    from memory import TrainingMemory
    from tests.support.tiny_run import tiny_config
    from trainer.grpo import train
    from trainer.io import read_jsonl

    cfg = tiny_config(
        tmp_path,
        *OVERRIDES,
        f"harness.langgraph_url={langgraph_dev_url}",
        f"harness.memory_url={chroma_url}",
    )
    assert cfg.harness.policy_endpoint == "local"
    summary = train(cfg, progress=False)
    root = cfg.run_path
    assert summary["steps"] == STEPS

    rounds = read_jsonl(root / "rounds.jsonl")
    assert [r["step"] for r in rounds] == [2, 4]
    assert all("error" not in r for r in rounds), [r.get("traceback") for r in rounds]

    # Each round is a thread on the server, with the round's reports in its state.
    client = get_sync_client(url=langgraph_dev_url)
    for r in rounds:
        if r.get("skipped"):
            continue
        thread = client.threads.get(r["thread_id"])
        assert thread["metadata"]["run_dir"] == str(cfg.run_path) and thread["metadata"]["step"] == r["step"]
        # The default assistant (the graph id) became one made from the config; the round ran on it.
        assistant = client.assistants.get(r["assistant_id"])
        assert assistant["name"] == f"harnessrl train {cfg.run_path.name}" and assistant["context"]["sample_k"] == 8
        assert thread["metadata"]["assistant_id"] == r["assistant_id"]
        values = client.threads.get_state(r["thread_id"])["values"]
        assert {rep["event_id"] for rep in values["reports"]} == {rep["event_id"] for rep in r["reports"]}

    # The server committed an accepted update; the trainer trained on it.
    accepted = [(r["step"], rep) for r in rounds for rep in r["reports"] if rep["decision"] == "accepted"]
    step, rep = next((s, rep) for s, rep in accepted if rep["task_id"] == "t-long" and rep["interface"] == "criteria")
    version = rep["committed_version"]
    store = HarnessStore(root / "harness")
    # A loosened word floor: the partial form of a full-and-partial split, or the loosened criterion.
    assert min(c.check.min for c in store.load(version).criteria("t-long")) < 18
    metrics = read_jsonl(root / "metrics.jsonl")
    assert next(m for m in metrics if m["step"] == step)["harness_version_after"] >= version
    assert summary["harness_version"] == store.latest().version >= version
    # That the rewards sampled under the committed version follow it is the trainer's part, the same whichever
    # process ran the round: test_trainer_e2e.py::test_rounds_accept_an_update_that_changes_following_rewards.

    # The policy went through disk (the last two saves kept) and the memory through the Chroma server.
    frozen = sorted(p.name for p in (root / "frozen").iterdir())
    assert len(frozen) == 2 and all(n.startswith(("step-2-", "step-4-")) for n in frozen)
    assert not (root / "memory").exists()
    host, port = chroma_url.rsplit(":", 1)
    with TrainingMemory.http(host.split("//")[1], int(port), embedding="hash") as mem:
        counts = mem.count()
    assert counts["groups"] > 0 and counts["proposals"] > 0  # written by the trainer and by the server
