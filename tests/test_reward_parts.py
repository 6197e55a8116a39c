"""Reward parts beside the rubric (issue 33 item 2): `train.rewards` checked at load naming the field; the combined
reward (rubric + weighted parts) is what TRL gets, what the detector reads and what the critic's probes measure; the
own-script path refuses a second reward function, saying how to add it as a part."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from harness.checks import words
from harness.detector import DetectorConfig
from harness.types import HarnessState, HarnessUpdate, Message, Task
from memory.store import TrainingMemory
from tests.support import reward_funcs
from tests.support.fakes.fake_chat import ScriptedPolicy
from tests.support.tiny_run import REPO, grpo_args, tiny_config
from tools.candidate import measure_candidate
from tools.group_metrics import score_rows
from tools.judge import Judge
from tools.measure_settings import MeasureSettings
from tools.reward_parts import combined_reward, parse_parts, parts_from_json, parts_to_json
from trainer.config import ConfigError
from trainer.config_loader import load_config
from trainer.harness_run import HarnessRun
from trainer.reward import RubricReward
from trainer.round_events import take_events
from trainer.sampler import HarnessSampler

LENGTH = {"name": "brevity", "weight": 0.5, "kind": "length", "target": 3, "scale": 4}
REGEX = {"name": "format", "weight": 0.25, "kind": "regex", "pattern": "capital"}
PYTHON = {"name": "chars", "weight": 0.1, "kind": "python", "function": "tests.support.reward_funcs:chars"}


def _rewards(*parts: dict) -> str:
    return "train.rewards=" + json.dumps(list(parts))


# -- config ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "parts, expect",
    [
        ([LENGTH, {"name": "x", "weight": 1, "kind": "vibes"}], r"train.rewards\[1\].kind: 'vibes' is not one of"),
        ([{"name": "x", "weight": 1, "kind": "length", "target": 3}], r"train.rewards\[0\].scale: Field required"),
        ([{"name": "x", "kind": "regex", "pattern": "a"}], r"train.rewards\[0\].weight: Field required"),
        (
            [LENGTH, {"name": "y", "weight": 1, "kind": "python", "function": "no_such_module:f"}],
            r"train.rewards\[1\].function: cannot import module 'no_such_module'",
        ),
        (
            [{"name": "y", "weight": 1, "kind": "python", "function": "tests.support.reward_funcs:missing"}],
            r"train.rewards\[0\].function: module 'tests.support.reward_funcs' has no 'missing'",
        ),
        (
            [{"name": "y", "weight": 1, "kind": "python", "function": "tests.support.reward_funcs:NOT_A_FUNCTION"}],
            r"train.rewards\[0\].function: .* is a int, not a function",
        ),
        (
            [{"name": "y", "weight": 1, "kind": "python", "function": "tests.support.reward_funcs:async_reward"}],
            r"train.rewards\[0\].function: .* is async",
        ),
        ([{"name": "y", "weight": 1, "kind": "python", "function": "no_colon"}], r"\[0\].function: .*module:callable"),
        ([{"name": "y", "weight": 1, "kind": "regex", "pattern": "(a+)+"}], r"\[0\].pattern: .*nested quantifier"),
        ([{"name": "y", "weight": 1, "kind": "reference", "match": "fuzzy"}], r"train.rewards\[0\].match"),
        ([LENGTH, {**REGEX, "name": "brevity"}], r"train.rewards\[1\].name: 'brevity' names another part"),
        ([{**LENGTH, "name": "rubric"}], r"train.rewards\[0\].name: 'rubric' is the rubric's own name"),
        ([{**LENGTH, "extra": 1}], r"train.rewards\[0\].extra: Extra inputs are not permitted"),
    ],
)
def test_bad_parts_are_refused_at_load_naming_the_field(parts, expect):
    with pytest.raises(ConfigError, match=expect):
        load_config(REPO / "configs" / "tiny.yaml", [_rewards(*parts)])


def test_parts_round_trip_through_the_context_strings():
    parts = parse_parts([LENGTH, REGEX, PYTHON])
    assert parts_from_json(parts_to_json([LENGTH, REGEX, PYTHON])) == parts
    with pytest.raises(ValueError, match=r"reward_parts\[0\]: not a JSON object"):
        parts_from_json(["{"])


# -- the values of each kind -------------------------------------------------------------------------------------
def _task(reference=None):
    return Task(
        id="q",
        domain="science",
        prompt=[Message(role="user", content="Capital of France?")],
        criteria=[
            {
                "id": "c1",
                "text": "Names Paris",
                "weight": 5,
                "kind": "essential",
                "check": {"type": "contains_any", "phrases": ["Paris"]},
            }
        ],
        reference_answer=reference,
    )


@pytest.mark.parametrize(
    "part, texts, values",
    [
        (LENGTH, ["one two three", "one", "a b c d e f g"], [1.0, 0.5, 0.0]),
        ({**LENGTH, "over_only": True}, ["one", "a b c d e"], [1.0, 0.5]),
        (REGEX, ["The capital is Paris", "Paris"], [1.0, 0.0]),
        ({"name": "r", "weight": 1, "kind": "reference", "match": "exact"}, [" Paris ", "paris"], [1.0, 0.0]),
        ({"name": "r", "weight": 1, "kind": "reference"}, ["PARIS.", "It is Paris"], [1.0, 0.0]),
        (
            {"name": "r", "weight": 1, "kind": "reference", "match": "contains"},
            ["It is Paris!", "Parisian"],
            [1.0, 0.0],
        ),
        (PYTHON, ["ab", "abcd"], [0.02, 0.04]),
        ({**PYTHON, "function": "tests.support.reward_funcs:not_applicable"}, ["a", "b"], [0.0, 0.0]),
    ],
)
def test_each_kind_values_the_completions(part, texts, values):
    (p,) = parse_parts([part])
    got = combined_reward([0.0] * len(texts), [p], task=_task("Paris"), prompts=[[]] * len(texts), texts=texts)
    assert got.parts[p.name] == pytest.approx(values)
    assert got.rewards == pytest.approx([p.weight * v for v in values])


def test_reference_part_is_constant_without_a_reference_and_python_part_gets_trl_arguments():
    ref, py = parse_parts([{"name": "r", "weight": 1, "kind": "reference"}, PYTHON])
    prompt = [{"role": "user", "content": "Capital of France?"}]
    got = combined_reward([1.0, 0.0], [ref, py], task=_task(), prompts=[prompt, prompt], texts=["Paris", "no"])
    assert got.parts["r"] == [0.0, 0.0] and got.rubric == [1.0, 0.0]
    call = reward_funcs.CALLS[-1]
    assert call["completions"] == [
        [{"role": "assistant", "content": "Paris"}],
        [{"role": "assistant", "content": "no"}],
    ]
    assert (
        call["prompts"] == [prompt, prompt] and call["task_id"] == ["q", "q"] and call["reference_answer"] == [None] * 2
    )


def test_a_python_part_returning_the_wrong_number_of_values_is_an_error():
    (p,) = parse_parts([{**PYTHON, "function": "tests.support.reward_funcs:too_few"}])
    with pytest.raises(ValueError, match=r"chars \(tests.support.reward_funcs:too_few\) returned list"):
        combined_reward([0.0, 0.0], [p], task=_task(), prompts=[[], []], texts=["a", "b"])


# -- training's reward ---------------------------------------------------------------------------------------------
def _run(tmp_path, *parts):
    cfg = tiny_config(tmp_path, _rewards(*parts)) if parts else tiny_config(tmp_path)
    r = HarnessRun(cfg, memory=TrainingMemory.ephemeral())
    HarnessSampler(r, seed=0)
    return r


def _call(reward, task_ids, texts):
    n = len(texts)
    metrics: dict = {}
    out = asyncio.run(
        reward(
            prompts=[[{"role": "user", "content": "x"}]] * n,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            task_id=task_ids,
            harness_version=[0] * n,
            hinted=[False] * n,
            hint_text=[""] * n,
            trainer_state=SimpleNamespace(global_step=0),
            log_extra=lambda *a: None,
            log_metric=lambda k, v: metrics.setdefault(k, v),
        )
    )
    return out, metrics


def test_training_reward_is_rubric_plus_weighted_parts_and_the_step_records_each(tmp_path):
    run = _run(tmp_path, LENGTH, REGEX, PYTHON)
    try:
        texts = ["Paris is the capital.", "Paris.", "No idea at all, sorry.", "capital"]
        out, metrics = _call(RubricReward(run, num_generations=4), ["t-paris"] * 4, texts)
        rubric = [1.0, 1.0, 0.0, 0.0]  # the judge's checks: "Names Paris"
        length = [1 - min(1, abs(len(words(t)) - 3) / 4) for t in texts]
        regex = [1.0, 0.0, 0.0, 1.0]
        chars = [len(t) / 100 for t in texts]
        want = [r + 0.5 * a + 0.25 * b + 0.1 * c for r, a, b, c in zip(rubric, length, regex, chars)]
        assert out == pytest.approx(want)
        stats = run.detector.window("t-paris")[-1]
        assert stats.rewards == pytest.approx(want) and stats.rubric == rubric
        assert stats.parts["brevity"] == pytest.approx(length) and stats.parts["format"] == regex
        assert stats.pass_rates == {"c1": 0.5}  # criterion-level signals keep reading the rubric's verdicts
        rec = run.pop_step(1)
        assert rec["reward"] == pytest.approx(sum(want) / 4) and rec["reward_rubric"] == 0.5
        assert rec["reward_parts"] == pytest.approx(
            {"brevity": sum(length) / 4, "format": 0.5, "chars": sum(chars) / 4}
        )
        assert metrics["reward_parts/format"] == 0.5 and metrics["reward_parts/rubric"] == 0.5
    finally:
        run.close()


@pytest.mark.parametrize(
    "parts, events",
    [
        ((), [("collapse_low", "t-photo")]),  # the rubric alone: all 0, dead
        ((LENGTH,), []),  # the length part makes the rubric-dead group vary: GRPO learns from it, no collapse
        # A constant part keeps the group dead; its kind is the rubric's level (all 0), not the combined mean's 0.25
        (({**REGEX, "pattern": "."},), [("collapse_low", "t-photo")]),
    ],
)
def test_the_detector_reads_the_combined_reward(tmp_path, parts, events):
    run = _run(tmp_path, *parts)
    try:
        texts = ["nothing", "nothing here at all", "no", "a b c d e f g h"]
        out, _ = _call(RubricReward(run, num_generations=4), ["t-photo"] * 4, texts)
        assert [(e.type, e.task_id) for e in take_events(run, 10).taken] == events
        stats = run.detector.window("t-photo")[-1]
        assert stats.rewards == out and run.detector.is_dead(stats) == bool(events)
    finally:
        run.close()


# -- the critic ----------------------------------------------------------------------------------------------------
def test_probe_scoring_is_trainings_combined_reward():
    task = _task("Paris")
    parts = parse_parts([LENGTH, PYTHON])
    prompt = [{"role": "user", "content": "Capital of France?"}]
    texts = ["Paris is the capital.", "no"]
    rows = asyncio.run(score_rows(task, [], texts, Judge(None), DetectorConfig(), parts=parts, messages=prompt))
    want = combined_reward([1.0, 0.0], parts, task=task, prompts=[prompt] * 2, texts=texts)
    assert [r.reward for r in rows] == want.rewards and rows[0].reward > 1.0
    assert rows[1].parts == {"brevity": want.parts["brevity"][1], "chars": 0.02}
    assert reward_funcs.CALLS[-1]["prompts"] == [prompt, prompt]


def test_the_critics_measurement_sees_the_parts():
    state = HarnessState.from_tasks([_task("Paris")])
    policy = ScriptedPolicy(lambda p, i: ["Paris", "The capital is Paris, a big old city on a wide river"][i % 2])
    update = HarnessUpdate.model_validate(
        {
            "interface": "criteria",
            "ops": [
                {
                    "op": "add_pitfall",
                    "task_id": "q",
                    "criterion": {
                        "id": "city",
                        "text": "Says city",
                        "weight": -5,
                        "kind": "pitfall",
                        "check": {"type": "contains_any", "phrases": ["city"]},
                    },
                }
            ],
        }
    )
    plain = measure_candidate(state, update, policy, Judge(None), MeasureSettings(k=4, seed=1))
    parts = parse_parts([{**LENGTH, "target": 1, "scale": 10}])
    mixed = measure_candidate(state, update, policy, Judge(None), MeasureSettings(k=4, seed=1, reward_parts=parts))
    assert plain.per_task["q"]["control"].rewards == [1.0, 1.0, 1.0, 1.0]  # the rubric alone: dead
    ctrl = mixed.per_task["q"]["control"]
    assert ctrl.rewards == pytest.approx([1.5, 1.0, 1.5, 1.0]) and not ctrl.dead  # brevity 1 vs 0 (11 words off)
    assert mixed.per_task["q"]["candidate"].rewards == pytest.approx([1.5, 0.0, 1.5, 0.0])


def test_the_rounds_context_carries_the_parts_to_the_critics_settings(tmp_path):
    from agents.critic import measure_settings
    from trainer.evolver_round import evolver_context

    cfg = tiny_config(tmp_path, _rewards(LENGTH, PYTHON))
    ctx = evolver_context(cfg, services_key=None)
    assert measure_settings(ctx, 4, DetectorConfig()).reward_parts == parse_parts([LENGTH, PYTHON])


# -- own script ------------------------------------------------------------------------------------------------------
@pytest.fixture
def parts(tmp_path):
    from trainer.api import harness_parts

    p = harness_parts(tiny_config(tmp_path / "r", _rewards(LENGTH)))
    yield p
    p.close()


def test_harness_parts_takes_the_parts_as_a_keyword(tmp_path):
    from trainer.api import harness_parts

    p = harness_parts(REPO / "configs" / "tiny.yaml", run_dir=str(tmp_path / "run"), rewards=[LENGTH])
    try:
        assert p.cfg.train.rewards == [LENGTH] and p.reward._parts == parse_parts([LENGTH])
    finally:
        p.close()


@pytest.mark.parametrize(
    "extra, weights, expect",
    [
        ([reward_funcs.chars], None, r"reward_funcs hold \['chars'\] besides HarnessRL's reward: .*kind: python"),
        ([], [2.0], r"reward_weights=\[2.0\] rescale the reward GRPO sees"),
        ([], None, None),
    ],
)
def test_attach_refuses_rewards_it_would_not_see(tmp_path, parts, extra, weights, expect):
    funcs = [parts.reward, *extra]
    trainer = SimpleNamespace(
        args=grpo_args(tmp_path, parts, reward_weights=weights),
        reward_funcs=funcs,
        reward_func_names=[f.__name__ for f in funcs],
    )
    if expect is None:
        parts.attach(trainer)
        assert parts.callback.trainer is trainer
        return
    with pytest.raises(ConfigError, match=expect):
        parts.attach(trainer)
    assert parts.callback.trainer is None


@pytest.mark.slow
def test_a_real_trainer_with_a_second_reward_func_is_refused(tmp_path, parts, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir, padding_side="left")
    kwargs = {**parts.trainer_kwargs(), "reward_funcs": [parts.reward, reward_funcs.chars]}
    trainer = parts.trainer_class(model=model, processing_class=tok, args=grpo_args(tmp_path, parts), **kwargs)
    with pytest.raises(ConfigError) as err:
        parts.attach(trainer)
    msg = str(err.value)
    assert "reward_funcs hold ['chars'] besides HarnessRL's reward" in msg
    assert "train.rewards: [{name: ..., weight: ..., kind: python" in msg and parts.callback.trainer is None


# -- a real run ------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_run_with_reward_parts_writes_each_parts_mean(tmp_path):
    from trainer.grpo import train
    from trainer.run_logs import read_metrics

    cfg = tiny_config(
        tmp_path, "train.max_steps=2", "harness.evolver=false", "data.tasks=[t-photo,t-paris]", _rewards(LENGTH, REGEX)
    )
    train(cfg, progress=False)
    lines = read_metrics(cfg.run_path / "metrics.jsonl")
    assert [m.step for m in lines] == [1, 2]
    for m in lines:
        assert set(m.reward_parts) == {"brevity", "format"} and m.reward_rubric is not None
        assert m.reward == pytest.approx(
            m.reward_rubric + 0.5 * m.reward_parts["brevity"] + 0.25 * m.reward_parts["format"]
        )
