"""`harnessrl export RUN`: a run's harness at a step written as a suite, with provenance, and its refusals.

The run folder is real: the tiny suite, its resolved config and a `HarnessStore` with commits as the evolver makes
them (a criteria edit, a split, a variant, a hint with a schedule, a revert, a fallback), plus rounds.jsonl lines
carrying training's verdicts. The exported folder is read back with the project's loader and `harnessrl data
validate`, and (slow) trained on by `harnessrl train`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data import load_suite
from harness.store import HarnessStore
from harness.types import OP_INTERFACE, HarnessState, HarnessUpdate
from tests.support.tiny_run import REPO, tiny_config
from trainer.cli import main
from trainer.config_loader import save_config
from trainer.harness_run import load_train_tasks

WORDS = {"type": "word_count", "min": 9}
PHOTO = {"type": "contains_any", "phrases": ["photosynthesis"]}


def upd(*ops: dict, event: str | None = None) -> HarnessUpdate:
    return HarnessUpdate.model_validate(
        {"interface": OP_INTERFACE[ops[0]["op"]], "ops": list(ops), "rationale": "test", "event_id": event}
    )


def provisional(event: str, task: str) -> dict:
    return {
        "event_id": event,
        "proposal_id": f"{event}:r0",
        "source": "rules",
        "template": "test-template",
        "failure_type": "collapse_low",
        "provisional": {"proposal_id": f"{event}:r0", "targets": [{"task_id": task}]},
    }


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """v1 edit (step 2, reverted at 6 by v5), v2 split (2, confirmed), v3 variant (4, provisional), v4 hint (4),
    v5 revert of v1 (6), v6 fallback retire (6)."""
    cfg = tiny_config(tmp_path)
    cfg.run_path.mkdir(parents=True)
    save_config(cfg, cfg.run_path / "config.yaml")
    store = HarnessStore(cfg.run_path / "harness")
    store.init(HarnessState.from_tasks(load_train_tasks(cfg)))
    edit = {"op": "edit_criterion", "task_id": "t-long", "criterion_id": "c1", "text": "At least 9 words"}
    store.commit(upd({**edit, "check": WORDS}, event="e1"), step=2, meta=provisional("e1", "t-long"))
    split = {
        "op": "split_criterion",
        "task_id": "t-photo",
        "criterion_id": "c1",
        "into": [
            {"id": "c1a", "text": "Names photosynthesis", "weight": 3, "kind": "important", "check": PHOTO},
            {"id": "c1b", "text": "One sentence", "weight": 2, "kind": "important", "origin": "evolver:split"},
        ],
    }
    store.commit(upd(split, event="e2"), step=2, meta=provisional("e2", "t-photo"))
    variant = {
        "op": "add_variant",
        "task_id": "t-any",
        "variant_id": "t-any-v1",
        "prompt": [{"role": "user", "content": "Say anything you like, in at most 5 words."}],
        "extra_criteria": [{"id": "c9", "text": "At most 5 words", "weight": 3, "kind": "important"}],
    }
    store.commit(upd(variant, event="e3"), step=4, meta=provisional("e3", "t-any-v1"))
    hint = {"op": "add_hint", "task_id": "t-paris", "hint": {"id": "h1", "text": "Name the city."}}
    schedule = {"op": "set_schedule", "task_id": "t-paris", "schedule": {"mode": "linear", "end_step": 20}}
    store.commit(upd(hint, schedule, event="e4"), step=4, meta={"event_id": "e4", "source": "rules"})
    restore = {"op": "restore_criteria", "task_id": "t-long", "from_version": 0}
    store.commit(upd(restore, event="e1"), step=6, meta={"source": "revert", "revert_of": 1, "targets": ["t-long"]})
    retire = {"op": "retire", "task_id": "t-short"}
    store.commit(upd(retire, event="e6"), step=6, meta={"event_id": "e6", "failure_type": "flat", "fallback": True})
    rounds = [
        {"step": 4, "provisional": {"verdicts": [{"version": 2, "task_id": "t-photo", "verdict": "confirm"}]}},
        {"step": 6, "provisional": {"verdicts": [{"version": 1, "task_id": "t-long", "verdict": "revert"}]}},
    ]
    (cfg.run_path / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rounds))
    return cfg.run_path


def export(run_dir: Path, out: Path, *args: str, capsys) -> tuple[int, str, str]:
    rc = main(["export", str(run_dir), "--out", str(out), *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def by_id(tasks) -> dict:
    return {t.id: t for t in tasks}


@pytest.mark.parametrize(
    "step,version,train_ids",
    [
        (3, 2, ["t-long", "t-paris", "t-photo", "t-any", "t-short"]),
        (4, 2, ["t-long", "t-paris", "t-photo", "t-any", "t-short"]),  # v3, v4 came in the pause after step 4
        (5, 4, ["t-long", "t-paris", "t-photo", "t-any", "t-short", "t-any-v1"]),
    ],
)
def test_export_at_a_step_is_the_version_training_drew_under(run_dir, tmp_path, capsys, step, version, train_ids):
    out = tmp_path / f"at-{step}"
    rc, said, err = export(run_dir, out, "--step", str(step), capsys=capsys)
    assert rc == 0, err
    committed = {2: 2, 4: 4}[version]
    assert said.startswith(f"harness v{version} of {run_dir} (--step {step}: committed at step {committed}")
    # The files read back with the project's loader and pass `harnessrl data validate`.
    tasks = load_suite(out)
    assert main(["data", "validate", str(out / "train.jsonl"), str(out / "test.jsonl")]) == 0
    train = [t for t in tasks if t.split == "train"]
    assert [t.id for t in train] == train_ids
    state = HarnessStore(run_dir / "harness").load(version)
    for t in train:  # criteria (weights included) exactly as the version in force has them
        assert t.criteria == state.task(t.id).criteria, t.id
    photo = by_id(tasks)["t-photo"]
    assert [(c.id, c.weight) for c in photo.criteria] == [("c1a", 3.0), ("c1b", 2.0), ("c2", 3.0)]
    assert by_id(tasks)["t-long"].criteria[0].text == "At least 9 words"  # v1 not yet reverted at this step
    # Held-out tasks travel unchanged, audit criteria included.
    suite = by_id(load_suite(run_dir.parent / "suite"))
    assert [t for t in tasks if t.split == "test"] == [suite["e-paris"], suite["e-any"]]
    assert by_id(tasks)["e-paris"].audit_criteria[0].id == "a1"

    prov = json.loads((out / "provenance.json").read_text())
    assert prov["harness_version"] == version
    long_c1 = prov["tasks"]["t-long"]["criteria"]["c1"]
    assert (long_c1["version"], long_c1["step"], long_c1["event_id"], long_c1["proposal_id"]) == (1, 2, "e1", "e1:r0")
    assert long_c1["outcome"] == "reverted" and long_c1["template"] == "test-template"
    photo_prov = prov["tasks"]["t-photo"]["criteria"]
    assert photo_prov["c1a"]["version"] == 2 and photo_prov["c1a"]["outcome"] == "confirmed"
    assert photo_prov["c2"] == {"version": 0, "step": 0, "source": "suite"}
    assert "reverted by training later (v5, step 6): still in this export: v1" in said
    assert "confirmed: v2" in said


def test_variants_and_hints_travel_with_their_provenance(run_dir, tmp_path, capsys):
    out = tmp_path / "at-5"
    assert export(run_dir, out, "--step", "5", capsys=capsys)[0] == 0
    variant = by_id(load_suite(out))["t-any-v1"]
    assert variant.parent_id == "t-any" and variant.meta["lineage"] == ["t-any"]
    assert [c.id for c in variant.criteria] == ["c1", "c9"]
    sidecar = json.loads((out / "harness.json").read_text())
    assert sidecar["guidance"]["t-paris"]["hints"] == [{"id": "h1", "text": "Name the city.", "source": ""}]
    assert sidecar["guidance"]["t-paris"]["schedule"]["end_step"] == 20
    assert sidecar["sampling"]["t-any-v1"] == {"weight": 1.0, "status": "active"}
    assert "ignores this file" in sidecar["note"] and sidecar["suite"] == str(run_dir.parent / "suite")
    prov = json.loads((out / "provenance.json").read_text())["tasks"]
    assert prov["t-any-v1"]["task"]["version"] == 3 and prov["t-any-v1"]["task"]["outcome"] == "provisional"
    assert prov["t-any-v1"]["criteria"]["c1"]["version"] == 3  # the variant's own seed list came with it
    assert prov["t-paris"]["hints"]["h1"]["version"] == 4 and prov["t-paris"]["schedule"]["version"] == 4
    assert prov["t-paris"]["sampling"]["version"] == 0 and "sampling" not in prov["e-paris"]


def test_latest_export_undoes_the_revert_and_names_the_retired_task(run_dir, tmp_path, capsys):
    out = tmp_path / "latest"
    rc, said, _ = export(run_dir, out, capsys=capsys)
    assert rc == 0 and said.startswith(f"harness v6 of {run_dir} (latest: committed at step 6, in force from step 7")
    tasks = by_id(load_suite(out))
    assert "t-short" not in tasks and "t-short (retired, weight 1)" in said and "--include-retired" in said
    assert json.loads((out / "harness.json").read_text())["left_out"] == {
        "t-short": {"weight": 1.0, "status": "retired"}
    }
    suite = by_id(load_suite(run_dir.parent / "suite"))
    assert tasks["t-long"].criteria == suite["t-long"].criteria  # the revert restored the seed criterion
    c1 = json.loads((out / "provenance.json").read_text())["tasks"]["t-long"]["criteria"]["c1"]
    assert (c1["version"], c1["source"], c1["revert_of"]) == (5, "revert", 1)
    assert "reverted by training, undone here (by v5): v1" in said and "fallback: v6" in said

    again = tmp_path / "all"
    assert export(run_dir, again, "--include-retired", capsys=capsys)[0] == 0
    assert "t-short" in by_id(load_suite(again))
    # --version names one; a version replaced in the same pause was never drawn under.
    rc, said, _ = export(run_dir, tmp_path / "v5", "--version", "5", capsys=capsys)
    assert rc == 0 and "training never drew under it" in said


def test_force_replaces_only_an_earlier_export(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert export(run_dir, out, "--step", "3", capsys=capsys)[0] == 0
    rc, _, err = export(run_dir, out, "--step", "5", capsys=capsys)
    assert rc == 1 and "is not empty" in err and "--force" in err
    assert "t-any-v1" not in by_id(load_suite(out))  # refused: the earlier export is untouched
    assert export(run_dir, out, "--step", "5", "--force", capsys=capsys)[0] == 0
    assert "t-any-v1" in by_id(load_suite(out))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # nothing left beside it
    (out / "notes.txt").write_text("mine")
    rc, _, err = export(run_dir, out, "--force", capsys=capsys)
    assert rc == 1 and "notes.txt" in err and (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "break_it,args,message",
    [
        (lambda run: (run / "config.yaml").unlink(), [], "not a run folder written by `harnessrl train`: missing"),
        (lambda run: [p.unlink() for p in (run / "harness" / "versions").iterdir()], [], "harness store's versions"),
        (lambda run: (run / "harness" / "versions" / "v000000.json").unlink(), [], "versions [0] are missing"),
        (lambda run: None, ["--step", "0"], "step 0 is before the first harness version"),
        (lambda run: None, ["--version", "9"], "harness version 9 is not in"),
        (
            lambda run: (run / "harness" / "versions" / "v000002.json").write_text('{"version": 2, "tasks": '),
            ["--step", "5"],
            "v000002.json: not a valid harness state",
        ),
    ],
)
def test_refusals_name_what_is_wrong(run_dir, tmp_path, capsys, break_it, args, message):
    break_it(run_dir)
    out = tmp_path / "out"
    rc, _, err = export(run_dir, out, *args, capsys=capsys)
    assert rc == 1 and message in err, err
    assert not out.exists()


def test_a_folder_that_is_no_run_is_refused(tmp_path, capsys):
    rc, _, err = export(tmp_path / "nope", tmp_path / "out", capsys=capsys)
    assert rc == 1 and "no such folder" in err
    (tmp_path / "empty").mkdir()
    rc, _, err = export(tmp_path / "empty", tmp_path / "out", capsys=capsys)
    assert rc == 1 and "config.yaml" in err and "v000000.json" in err


def test_step_and_version_exclude_each_other(run_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["export", str(run_dir), "--out", str(tmp_path / "o"), "--step", "3", "--version", "1"])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


@pytest.mark.slow
def test_train_accepts_the_exported_suite(run_dir, tmp_path, capsys, tiny_model_dir):
    out = tmp_path / "exported"
    assert export(run_dir, out, "--step", "5", capsys=capsys)[0] == 0
    new_run = tmp_path / "next-run"
    rc = main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            f"run_dir={new_run}",
            f"data.suite={out}",
            "train.max_steps=1",
            "harness.evolver=false",
            "evolver.memory_embedding=hash",
            "--no-progress",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    seed = HarnessStore(new_run / "harness").load(0)
    assert [c.id for c in seed.task("t-photo").criteria] == ["c1a", "c1b", "c2"]  # the split is the new suite's
    assert "t-any-v1" in seed.tasks and seed.sampling["t-any-v1"].weight == 1.0  # harness.json is not read
