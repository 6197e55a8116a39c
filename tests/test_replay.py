"""`harnessrl evolve RUN_DIR --step N`: replay a training run's round with other brains, in a scratch folder.

Slow path: a real 4-step tiny run (TRL GRPO, a round at step 2 that commits, checkpoints carrying the harness
and memory) replayed with two brain sets, the rule brains and an LLM proposer served by the OpenAI stub.
Fast path: a run folder written by hand (an older run without `event_ids`, a failed round) with the stub as
the frozen policy, and the graph's refusal of a round whose store moved past the version it was given.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.store import HarnessStore
from harness.types import HarnessState, HarnessUpdate
from tests.support.fakes.evolver_fakes import PromptPolicy, event, make_run
from tests.support.tiny_run import tiny_config
from trainer.cli import main
from trainer.io import read_jsonl

HONEST = "Drink water and rest in a dark room, and see a doctor if it persists."
LLM_ANSWER = '{"update": null, "rationale": "the stub brain has no idea"}'


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` (and the set of paths): what "byte for byte unchanged" compares."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def brain_responder(policy_text: str = HONEST):
    """The stub answers the frozen policy (model 'policy') with text and the LLM brain (model 'brain') with JSON."""
    return lambda request: LLM_ANSWER if request.get("model") == "brain" else policy_text


# -- slow: a real tiny run -------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["full", "lora"])
def tiny_run(request, tmp_path_factory):
    """checkpoint-2 holds the full model, or a LoRA adapter (loaded onto its base and merged by the replay)."""
    from trainer.grpo import train

    tmp = tmp_path_factory.mktemp(f"replay-{request.param}")
    # As in test_trainer_e2e: t-long's loosened check is measurably better, so the round at step 2 commits.
    cfg = tiny_config(
        tmp,
        "train.max_steps=4",
        "data.tasks=[t-long,t-any]",
        "evolver.interfaces=[sampling,criteria]",
        "evolver.sample_k=8",
        f"model.lora={str(request.param == 'lora').lower()}",
    )
    train(cfg, progress=False)
    return cfg.run_path


@pytest.mark.slow
def test_replay_tiny_run_with_rules_and_llm_brain(tiny_run, tmp_path, openai_stub, capsys, monkeypatch):
    (rnd,) = read_jsonl(tiny_run / "rounds.jsonl")
    assert rnd["step"] == 2 and rnd["event_ids"] and rnd["n_events"] == len(rnd["event_ids"])
    before = rnd["version_before"]
    run_store = HarnessStore(tiny_run / "harness")
    assert run_store.latest().version > before, "precondition: the run holds versions after the round's start"
    hashes = tree_hashes(tiny_run)
    openai_stub.responder = brain_responder()
    out = tmp_path / "cmp"
    monkeypatch.chdir(tmp_path)
    rc = main(
        [
            "evolve",
            str(tiny_run),
            "--step",
            "2",
            "--proposer-model",
            "rules",
            "--proposer-model",
            "openai:brain",
            "--base-url",
            openai_stub.base_url,
            "--out",
            str(out),
            "--json",
            str(tmp_path / "cmp.json"),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert tree_hashes(tiny_run) == hashes  # the original run is byte-for-byte unchanged

    data = json.loads((tmp_path / "cmp.json").read_text())
    sets = data["brain_sets"]
    assert [s["brains"]["proposer"] for s in sets] == ["rules", "openai:brain"]
    assert data["harness_version"] == before and data["events_source"] == "rounds.jsonl event_ids"
    ckpt = tiny_run / "checkpoints" / "checkpoint-2"
    assert data["policy"] == f"local:{ckpt.resolve()}"
    assert (ckpt / "adapter_config.json").is_file() == (tiny_run.parent.name.startswith("replay-lora"))
    assert [r["event_id"] for r in data["rows"]] == rnd["event_ids"]
    for row in data["rows"]:
        assert len(row["runs"]) == 2 and all(c["decision"] != "–" for c in row["runs"])
        assert row["recorded"]["decision"] != "–"
    # The rule brains on the rebuilt round reproduce what the run recorded (same policy, seeds, harness and
    # memory), decisions, templates and numbers alike: the round is rebuilt faithfully.
    for key in ("decision", "answer", "numbers", "cost"):
        assert [row["runs"][0][key] for row in data["rows"]] == [row["recorded"][key] for row in data["rows"]], key
    # The LLM brain was asked (through the stub) and its answer shows in its column.
    assert any(r.get("model") == "brain" for r in openai_stub.requests)
    assert any(c["answer"].startswith("llm:") for row in data["rows"] for c in row["runs"][1:])
    # Both sets started from the round's version, not the run's latest: their stores hold exactly 0..before
    # from the run, byte for byte, and every later version is their own commit on top of it.
    for s in sets:
        store = HarnessStore(out / s["folder"] / "harness")
        for v in range(before + 1):
            assert store.path(v).read_bytes() == run_store.path(v).read_bytes()
        own = [r for r in store.history() if r.version > before]
        assert all(r.step == 2 for r in own) and [r.parent_version for r in own[:1]] in ([], [before])
        assert (out / s["folder"] / "trace.html").is_file()
    assert "rules" in printed and "openai:brain" in printed and "recorded in the run" in printed
    page = (out / "comparison.html").read_text()
    assert page.count('href="') >= 4 and f"{sets[1]['folder']}/trace.html" in page and "<script" not in page
    for eid in rnd["event_ids"]:
        assert eid in page


def test_replay_refuses_an_out_folder_inside_the_run(tmp_path):
    from trainer.replay import check_out_dir

    (tmp_path / "run").mkdir()
    with pytest.raises(ValueError, match="inside the run folder"):
        check_out_dir(tmp_path / "run" / "replays" / "x", tmp_path / "run")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "f").write_text("x")
    with pytest.raises(FileExistsError, match="already holds files"):
        check_out_dir(tmp_path / "used", tmp_path / "run")


# -- fast: a hand-written run folder ----------------------------------------------------------------------------
def _fake_run(
    root: Path, *, event_ids: bool, reports: bool, probe_budget: int | None = None
) -> tuple[Path, list[dict]]:
    """A run folder as `harnessrl train` writes it: store with v0..v2 (v1, v2 committed by the round at step 10),
    events.jsonl, rounds.jsonl, checkpoint-10 with its state and memory snapshot (incl. the round's own records)."""
    from memory.records import AttributionRecord
    from memory.store import TrainingMemory
    from tests.support.fakes.evolver_fakes import suite
    from trainer.config_loader import save_config

    run = root / "run"
    cfg = tiny_config(root / "cfg", f"run_dir={run}", "evolver.memory_embedding=hash")
    store = HarnessStore(run / "harness")
    store.init(HarnessState.from_tasks(suite()))
    save_config(cfg, run / "config.yaml")
    evs = [
        event("stuffing:med-1:10", "stuffing", "med-1", criterion_id="water"),
        event("collapse_low:med-2:9", "collapse_low", "med-2", step=9, mean=0.0, std=0.0),
    ]
    early = event("flat:geo-1:3", "flat", "geo-1", step=3)
    (run / "events.jsonl").write_text("".join(json.dumps({"harness_version": 0, **e}) + "\n" for e in [early, *evs]))
    for w in (0.5, 0.25):  # the round's later commits: the replay must not start from them
        store.commit(
            HarnessUpdate.model_validate(
                {"interface": "sampling", "ops": [{"op": "reweight", "task_id": "med-2", "weight": w}]}
            ),
            step=10,
        )
    line = {"step": 10, "version_before": 0, "version_after": 2, "n_events": 2, "thread_id": "orig"}
    if probe_budget is not None:
        line["probe_budget"] = probe_budget
    if event_ids:
        line["event_ids"] = [e["id"] for e in evs]
    if reports:
        line["reports"] = [
            {"event_id": e["id"], "task_id": e["task_id"], "decision": "rejected", "attempts": []} for e in evs
        ]
    (run / "rounds.jsonl").write_text(
        json.dumps({"step": 4, "n_events": 1, "version_before": 0}) + "\n" + json.dumps(line) + "\n"
    )
    ckpt = run / "checkpoints" / "checkpoint-10"
    ckpt.mkdir(parents=True)
    (ckpt / "harness_version.json").write_text(
        json.dumps({"harness_version": 2, "step": 10, "memory_snapshot": "memory.jsonl"})
    )
    with TrainingMemory.persistent(root / "orig-memory", embedding="hash") as mem:
        for e in [early, *evs]:
            mem.add_event(event_record(e))
        mem.add_attribution(
            AttributionRecord(
                event_id=evs[0]["id"],
                task_id="med-1",
                step=10,
                interface="criteria",
                diagnosis="the round's own",
                confidence=0.5,
                failure_type="stuffing",
            )
        )
        mem.add_attribution(
            AttributionRecord(
                event_id=early["id"],
                task_id="geo-1",
                step=4,
                interface="sampling",
                diagnosis="an earlier round's",
                confidence=0.5,
                failure_type="flat",
            )
        )
        mem.snapshot(ckpt / "memory.jsonl")
    return run, evs


def event_record(e: dict):
    from harness.types import FailureEvent
    from memory.records import EventRecord

    return EventRecord(event=FailureEvent.model_validate(e), domain="medical", harness_version=0)


@pytest.mark.parametrize(
    "event_ids, reports, source",
    [
        (True, True, "rounds.jsonl event_ids"),
        (False, True, "rounds.jsonl reports"),
        (False, False, "events.jsonl lines of steps 5..10"),
    ],
)
def test_round_events_come_from_the_best_record_available(tmp_path, event_ids, reports, source):
    from trainer.replay import load_round

    run, evs = _fake_run(tmp_path, event_ids=event_ids, reports=reports)
    rr = load_round(run, 10)
    assert rr.events_source.startswith(source) and rr.version_before == 0
    assert sorted(e.id for e in rr.events) == sorted(e["id"] for e in evs)  # not the step-3 event of the round at 4
    with pytest.raises(ValueError, match=r"no evolver round at step 7; rounds with events ran at steps \[4, 10\]"):
        load_round(run, 7)


def test_replay_fake_run_two_brain_sets_from_the_given_version(tmp_path, openai_stub, capsys):
    from memory.store import TrainingMemory

    run, evs = _fake_run(tmp_path, event_ids=True, reports=True)
    hashes = tree_hashes(run)
    openai_stub.responder = brain_responder("water water water water water rest dark")
    out = tmp_path / "cmp"
    rc = main(
        [
            "evolve",
            str(run),
            "--step",
            "10",
            "--policy",
            f"openai:{openai_stub.base_url}#policy",
            "--proposer-model",
            "rules,openai:brain",
            "--base-url",
            openai_stub.base_url,
            "--sample-k",
            "4",
            "--max-revisions",
            "0",
            "--out",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert tree_hashes(run) == hashes
    data = json.loads((out / "comparison.json").read_text())
    assert [s["folder"] for s in data["brain_sets"]] == ["1-rules", "2-proposer-openai_brain"]
    by_event = {r["event_id"]: r for r in data["rows"]}
    assert set(by_event) == {e["id"] for e in evs}
    stuffing = by_event["stuffing:med-1:10"]["runs"]
    assert stuffing[0]["answer"] == "tighten_repeat" and "rollouts" in stuffing[0]["cost"]
    assert stuffing[1]["answer"].startswith("llm:")
    for s in data["brain_sets"]:
        folder = out / s["folder"]
        store = HarnessStore(folder / "harness")
        # Started from v0 although the run holds v2: v1 here is this replay's own commit (or none at all).
        own = store.history()
        assert [r.parent_version for r in own[:1]] in ([], [0])
        assert all(r.meta.get("event_id") in by_event for r in own)
        # The memory is the checkpoint's without the round's own attribution; earlier rounds' records stay.
        with TrainingMemory.persistent(folder / "memory", embedding="hash") as mem:
            assert [a.diagnosis for a in mem.task_history("geo-1", kinds=("attributions",))] == ["an earlier round's"]
            mine = mem.task_history("med-1", kinds=("attributions",))  # written by this replay
            assert len(mine) == 1 and mine[0].diagnosis != "the round's own"
        lines = (folder / "memory-before-round.jsonl").read_text()
        assert "the round's own" not in lines and "an earlier round's" in lines


def test_a_replay_keeps_the_rounds_probe_budget(tmp_path, openai_stub, capsys):
    run, _ = _fake_run(tmp_path, event_ids=True, reports=True, probe_budget=0)
    openai_stub.responder = brain_responder("I am not sure.")
    out = tmp_path / "cmp"
    args = ["evolve", str(run), "--step", "10", "--policy", f"openai:{openai_stub.base_url}#policy"]
    assert main([*args, "--sample-k", "4", "--out", str(out)]) == 0, capsys.readouterr().err
    data = json.loads((out / "comparison.json").read_text())
    low = next(r for r in data["rows"] if r["event_id"] == "collapse_low:med-2:9")["runs"][0]
    assert low["cost"].startswith("0 rollouts"), low  # the recorded budget of 0 left nothing to draw
    assert main([*args, "--sample-k", "4", "--probe-budget", "64", "--out", str(tmp_path / "cmp2")]) == 0
    data = json.loads((tmp_path / "cmp2" / "comparison.json").read_text())
    low = next(r for r in data["rows"] if r["event_id"] == "collapse_low:med-2:9")["runs"][0]
    assert 0 < int(low["cost"].split()[0]) <= 64, low


def test_graph_refuses_a_round_whose_store_moved_past_its_version(tmp_path):
    from graphs.evolver import graph

    key, svc = make_run(tmp_path, PromptPolicy(lambda p, i: HONEST))
    svc.store.commit(
        HarnessUpdate.model_validate(
            {"interface": "sampling", "ops": [{"op": "reweight", "task_id": "med-2", "weight": 0.5}]}
        ),
        step=3,
    )
    with pytest.raises(ValueError, match=r"harness_version=0, but the harness store .* is at v1"):
        graph.invoke(
            {"events": [event("e1", "stuffing", "med-1", criterion_id="water")], "harness_version": 0, "step": 10},
            {"configurable": {"thread_id": "t"}},
            context={"services_key": key, "sample_k": 4},
        )
    assert svc.store.latest().version == 1  # nothing committed
