"""harness.ops: every op applied, every rejection case named by op and field, inputs never mutated."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.ops import UpdateRejected, apply, validate
from harness.store import diff_states
from harness.types import OP_INTERFACE, HarnessState, HarnessUpdate
from tests.support.harness_factories import crit, state


def upd(*ops: dict) -> HarnessUpdate:
    return HarnessUpdate.model_validate({"interface": OP_INTERFACE[ops[0]["op"]], "ops": list(ops)})


def names(crits) -> list[str]:
    return [c.id for c in crits]


PROMPT = [{"role": "user", "content": "Explain headache care in exactly three bullet points."}]
CHECK = {"type": "word_count", "min": 20}

# (name, ops, assertion on the new state)
APPLIED: list[tuple[str, list[dict], Callable[[HarnessState], bool]]] = [
    (
        "reweight",
        [{"op": "reweight", "task_id": "med-001", "weight": 0.25}],
        lambda s: s.sampling["med-001"].weight == 0.25,
    ),
    (
        "reweight to zero leaves others",
        [{"op": "reweight", "task_id": "med-001", "weight": 0}],
        lambda s: "med-001" not in s.active_task_ids(),
    ),
    (
        "retire",
        [{"op": "retire", "task_id": "med-002"}],
        lambda s: s.sampling["med-002"].status == "retired" and "med-002" not in s.active_task_ids(),
    ),
    (
        "retire then revive",
        [{"op": "retire", "task_id": "med-002"}, {"op": "revive", "task_id": "med-002"}],
        lambda s: s.sampling["med-002"].status == "active",
    ),
    (
        "quarantine keeps the task in training, drawn again at until_step",
        [{"op": "quarantine", "task_id": "med-001", "until_step": 30}],
        lambda s: (
            s.sampling["med-001"].quarantined_until == 30
            and s.sampling["med-001"].weight == 1.0
            and "med-001" in s.active_task_ids()
            and "med-001" not in s.drawable_task_ids(29)
            and "med-001" in s.drawable_task_ids(30)
        ),
    ),
    (
        "revive ends a quarantine",
        [{"op": "quarantine", "task_id": "med-001", "until_step": 30}, {"op": "revive", "task_id": "med-001"}],
        lambda s: s.sampling["med-001"].quarantined_until is None and "med-001" in s.drawable_task_ids(18),
    ),
    (
        "add_variant inherits criteria",
        [
            {
                "op": "add_variant",
                "task_id": "med-003",
                "variant_id": "med-003-v1",
                "prompt": PROMPT,
                "extra_criteria": [crit("c9", 3, "important").model_dump()],
                "weight": 2.0,
                "parent_weight": 0.5,
            }
        ],
        lambda s: (
            s.variants["med-003-v1"].parent_id == "med-003"
            and s.sampling["med-003-v1"].weight == 2.0
            and s.sampling["med-003"].weight == 0.5
            and names(s.criteria("med-003-v1")) == ["c1", "c2", "p1", "c9"]
            and s.variants["med-003-v1"].meta["lineage"] == ["med-003"]
            and s.variants["med-003-v1"].reference_answer == s.tasks["med-003"].reference_answer
            and s.variants["med-003-v1"].split == "train"
            and "med-003-v1" in s.active_task_ids()
        ),
    ),
    (
        "add_variant of a variant extends lineage",
        [
            {"op": "add_variant", "task_id": "med-001", "variant_id": "v1", "prompt": PROMPT},
            {
                "op": "add_variant",
                "task_id": "v1",
                "variant_id": "v2",
                "prompt": PROMPT,
                "criteria": [crit("x", 4).model_dump()],
            },
        ],
        lambda s: (
            s.variants["v2"].meta["lineage"] == ["med-001", "v1"]
            and s.variants["v2"].meta["root_id"] == "med-001"
            and names(s.criteria("v2")) == ["x"]
        ),
    ),
    (
        "add_hint",
        [{"op": "add_hint", "task_id": "med-001", "hint": {"id": "h1", "text": "Mention hydration."}}],
        lambda s: [h.id for h in s.guidance["med-001"].hints] == ["h1"],
    ),
    (
        "edit_hint",
        [
            {"op": "add_hint", "task_id": "med-001", "hint": {"id": "h1", "text": "Mention hydration."}},
            {"op": "edit_hint", "task_id": "med-001", "hint_id": "h1", "text": "Mention fluids."},
        ],
        lambda s: s.guidance["med-001"].hints[0].text == "Mention fluids.",
    ),
    (
        "remove_hint",
        [
            {"op": "add_hint", "task_id": "med-001", "hint": {"id": "h1", "text": "Mention hydration."}},
            {"op": "remove_hint", "task_id": "med-001", "hint_id": "h1"},
        ],
        lambda s: s.guidance["med-001"].hints == [],
    ),
    (
        "set_schedule",
        [
            {
                "op": "set_schedule",
                "task_id": "med-001",
                "schedule": {"mode": "sigmoid", "start_step": 10, "end_step": 50, "hinted_share": 0.5},
            }
        ],
        lambda s: (
            s.guidance["med-001"].schedule.mode == "sigmoid" and s.guidance["med-001"].schedule.hinted_share == 0.5
        ),
    ),
    (
        "add_criterion",
        [{"op": "add_criterion", "task_id": "med-001", "criterion": crit("c4", 1, "optional").model_dump()}],
        lambda s: names(s.criteria_overrides["med-001"]) == ["c1", "c2", "p1", "c4"],
    ),
    (
        "add_pitfall",
        [{"op": "add_pitfall", "task_id": "med-001", "criterion": crit("p2", -2).model_dump()}],
        lambda s: s.criteria("med-001")[-1].weight == -2,
    ),
    (
        "edit_criterion text and check",
        [
            {
                "op": "edit_criterion",
                "task_id": "med-001",
                "criterion_id": "c2",
                "text": "Gives at least 20 words",
                "check": CHECK,
            }
        ],
        lambda s: (
            s.criteria("med-001")[1].text == "Gives at least 20 words"
            and s.criteria("med-001")[1].check.min == 20
            and s.criteria("med-001")[1].weight == 3
        ),
    ),
    (
        "edit_criterion clear_check",
        [{"op": "edit_criterion", "task_id": "med-001", "criterion_id": "c2", "clear_check": True}],
        lambda s: s.criteria("med-001")[1].check is None,
    ),
    (
        "split_criterion keeps position",
        [
            {
                "op": "split_criterion",
                "task_id": "med-001",
                "criterion_id": "c1",
                "into": [crit("c1a", 3).model_dump(), crit("c1b", 2).model_dump()],
            }
        ],
        lambda s: names(s.criteria("med-001")) == ["c1a", "c1b", "c2", "p1"],
    ),
    (
        "split reusing the split id",
        [
            {
                "op": "split_criterion",
                "task_id": "med-001",
                "criterion_id": "c1",
                "into": [crit("c1", 3).model_dump(), crit("c1b", 2).model_dump()],
            }
        ],
        lambda s: names(s.criteria("med-001")) == ["c1", "c1b", "c2", "p1"],
    ),
    (
        "remove_criterion",
        [{"op": "remove_criterion", "task_id": "med-001", "criterion_id": "c2"}],
        lambda s: names(s.criteria("med-001")) == ["c1", "p1"],
    ),
    (
        "remove pitfall",
        [{"op": "remove_criterion", "task_id": "med-001", "criterion_id": "p1"}],
        lambda s: names(s.criteria("med-001")) == ["c1", "c2"],
    ),
    (
        "reweight_criterion",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "p1", "weight": -6}],
        lambda s: s.criteria("med-001")[2].weight == -6,
    ),
    (
        "criteria ops on a variant use overrides",
        [{"op": "add_variant", "task_id": "med-001", "variant_id": "v1", "prompt": PROMPT}],
        lambda s: "v1" not in s.criteria_overrides,
    ),
    (
        "ops on a retired task",
        [{"op": "retire", "task_id": "med-002"}, {"op": "reweight", "task_id": "med-002", "weight": 3}],
        lambda s: s.sampling["med-002"].weight == 3 and s.sampling["med-002"].status == "retired",
    ),
    # restores: a revert puts a task's part back as an earlier version had it (agents/decisions.py)
    (
        "restore_sampling puts the entry back",
        [
            {"op": "reweight", "task_id": "med-001", "weight": 0.25},
            {"op": "restore_sampling", "task_id": "med-001", "from_version": 0, "sampling": {"weight": 1.0}},
        ],
        lambda s: s.sampling["med-001"].weight == 1.0 and s.sampling["med-001"].status == "active",
    ),
    (
        "restore_sampling without an entry retires a new variant, keeps it defined",
        [
            {"op": "add_variant", "task_id": "med-001", "variant_id": "v1", "prompt": PROMPT, "parent_weight": 0.5},
            {"op": "restore_sampling", "task_id": "v1", "from_version": 0},
            {"op": "restore_sampling", "task_id": "med-001", "from_version": 0, "sampling": {"weight": 1.0}},
        ],
        lambda s: s.sampling["v1"].status == "retired" and "v1" in s.variants and s.sampling["med-001"].weight == 1.0,
    ),
    (
        "restore_guidance to none",
        [
            {"op": "add_hint", "task_id": "med-001", "hint": {"id": "h1", "text": "Mention hydration."}},
            {"op": "restore_guidance", "task_id": "med-001", "from_version": 0},
        ],
        lambda s: "med-001" not in s.guidance and s.guidance_for("med-001").hints == [],
    ),
    (
        "restore_criteria to the seed list",
        [
            {"op": "remove_criterion", "task_id": "med-001", "criterion_id": "c2"},
            {"op": "restore_criteria", "task_id": "med-001", "from_version": 0},
        ],
        lambda s: "med-001" not in s.criteria_overrides and names(s.criteria("med-001")) == ["c1", "c2", "p1"],
    ),
    (
        "restore_criteria to an edited list",
        [
            {"op": "remove_criterion", "task_id": "med-001", "criterion_id": "c2"},
            {
                "op": "restore_criteria",
                "task_id": "med-001",
                "from_version": 3,
                "criteria": [crit("c1", 5).model_dump()],
            },
        ],
        lambda s: names(s.criteria("med-001")) == ["c1"],
    ),
]


@pytest.mark.parametrize("name,ops,check", APPLIED, ids=[a[0] for a in APPLIED])
def test_op_applied(name: str, ops: list[dict], check: Callable[[HarnessState], bool]) -> None:
    s0 = state()
    before = s0.model_dump_json()
    u = HarnessUpdate.model_validate({"interface": OP_INTERFACE[ops[0]["op"]], "ops": ops})
    s1 = apply(s0, u, step=17)
    assert check(s1)
    assert (s1.version, s1.parent_version, s1.step) == (1, 0, 17)
    assert s0.model_dump_json() == before  # pure
    assert validate(s0, u) == []
    HarnessState.model_validate_json(s1.model_dump_json())  # the result round-trips


def test_every_op_type_is_covered() -> None:
    covered = {op["op"] for _, ops, _ in APPLIED for op in ops}
    assert covered == set(OP_INTERFACE)


def test_criteria_edit_on_variant_writes_override() -> None:
    s1 = apply(state(), upd({"op": "add_variant", "task_id": "med-001", "variant_id": "v1", "prompt": PROMPT}))
    s2 = apply(s1, upd({"op": "remove_criterion", "task_id": "v1", "criterion_id": "c2"}))
    assert names(s2.criteria_overrides["v1"]) == ["c1", "p1"]
    assert names(s2.variants["v1"].criteria) == ["c1", "c2", "p1"]  # seed list untouched
    assert names(s2.criteria("med-001")) == ["c1", "c2", "p1"]  # parent untouched


LEAKY = "Drink plenty of water and rest in a dark quiet room for an hour"

# (name, ops, op_index, op, field, substring of the reason)
REJECTED: list[tuple[str, list[dict], int, str, str, str]] = [
    (
        "unknown task",
        [{"op": "reweight", "task_id": "nope", "weight": 1}],
        0,
        "reweight",
        "task_id",
        "unknown task 'nope'",
    ),
    (
        "held-out task",
        [{"op": "add_hint", "task_id": "med-900", "hint": {"id": "h", "text": "x"}}],
        0,
        "add_hint",
        "task_id",
        "held-out",
    ),
    (
        "unknown criterion",
        [
            {"op": "remove_criterion", "task_id": "med-003", "criterion_id": "c1"},
            {"op": "remove_criterion", "task_id": "med-003", "criterion_id": "c9"},
        ],
        1,
        "remove_criterion",
        "criterion_id",
        "'c9' is not a criterion of task 'med-003'",
    ),
    (
        "unknown criterion edit",
        [{"op": "edit_criterion", "task_id": "med-001", "criterion_id": "zz", "text": "t"}],
        0,
        "edit_criterion",
        "criterion_id",
        "'zz' is not a criterion",
    ),
    (
        "unknown criterion reweight",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "zz", "weight": 2}],
        0,
        "reweight_criterion",
        "criterion_id",
        "'zz'",
    ),
    (
        "unknown criterion split",
        [
            {
                "op": "split_criterion",
                "task_id": "med-001",
                "criterion_id": "zz",
                "into": [crit("a").model_dump(), crit("b").model_dump()],
            }
        ],
        0,
        "split_criterion",
        "criterion_id",
        "'zz'",
    ),
    (
        "unknown hint edit",
        [{"op": "edit_hint", "task_id": "med-001", "hint_id": "h9", "text": "x"}],
        0,
        "edit_hint",
        "hint_id",
        "'h9' is not a hint",
    ),
    (
        "unknown hint remove",
        [{"op": "remove_hint", "task_id": "med-001", "hint_id": "h9"}],
        0,
        "remove_hint",
        "hint_id",
        "'h9'",
    ),
    (
        "duplicate criterion id",
        [{"op": "add_criterion", "task_id": "med-001", "criterion": crit("c2", 1, "optional").model_dump()}],
        0,
        "add_criterion",
        "criterion.id",
        "'c2' already exists",
    ),
    (
        "duplicate pitfall id",
        [{"op": "add_pitfall", "task_id": "med-001", "criterion": crit("p1", -1).model_dump()}],
        0,
        "add_pitfall",
        "criterion.id",
        "'p1' already exists",
    ),
    (
        "split into existing id",
        [
            {
                "op": "split_criterion",
                "task_id": "med-001",
                "criterion_id": "c1",
                "into": [crit("c1a").model_dump(), crit("c2").model_dump()],
            }
        ],
        0,
        "split_criterion",
        "into[1].id",
        "'c2' already exists",
    ),
    (
        "split into duplicate ids",
        [
            {
                "op": "split_criterion",
                "task_id": "med-001",
                "criterion_id": "c1",
                "into": [crit("q").model_dump(), crit("q").model_dump()],
            }
        ],
        0,
        "split_criterion",
        "into[1].id",
        "'q' already exists",
    ),
    (
        "duplicate hint id",
        [
            {"op": "add_hint", "task_id": "med-001", "hint": {"id": "h1", "text": "a"}},
            {"op": "add_hint", "task_id": "med-001", "hint": {"id": "h1", "text": "b"}},
        ],
        1,
        "add_hint",
        "hint.id",
        "'h1' already exists",
    ),
    (
        "variant id is a task",
        [{"op": "add_variant", "task_id": "med-001", "variant_id": "med-002", "prompt": PROMPT}],
        0,
        "add_variant",
        "variant_id",
        "already exists",
    ),
    (
        "variant id is a variant",
        [
            {"op": "add_variant", "task_id": "med-001", "variant_id": "v", "prompt": PROMPT},
            {"op": "add_variant", "task_id": "med-002", "variant_id": "v", "prompt": PROMPT},
        ],
        1,
        "add_variant",
        "variant_id",
        "already exists",
    ),
    (
        "variant of unknown parent",
        [{"op": "add_variant", "task_id": "ghost", "variant_id": "v", "prompt": PROMPT}],
        0,
        "add_variant",
        "task_id",
        "unknown task 'ghost'",
    ),
    (
        "variant of a test task",
        [{"op": "add_variant", "task_id": "med-900", "variant_id": "v", "prompt": PROMPT}],
        0,
        "add_variant",
        "task_id",
        "held-out",
    ),
    (
        "variant prompt ends with assistant",
        [
            {
                "op": "add_variant",
                "task_id": "med-001",
                "variant_id": "v",
                "prompt": [{"role": "assistant", "content": "hi"}],
            }
        ],
        0,
        "add_variant",
        "value",
        "last message must be a user turn",
    ),
    (
        "variant without positive criterion",
        [
            {
                "op": "add_variant",
                "task_id": "med-001",
                "variant_id": "v",
                "prompt": PROMPT,
                "criteria": [crit("p", -2).model_dump()],
            }
        ],
        0,
        "add_variant",
        "value",
        "positive weight",
    ),
    (
        "variant extra criterion dup",
        [
            {
                "op": "add_variant",
                "task_id": "med-001",
                "variant_id": "v",
                "prompt": PROMPT,
                "extra_criteria": [crit("c1").model_dump()],
            }
        ],
        0,
        "add_variant",
        "value",
        "duplicate criterion ids",
    ),
    (
        "reweight_criterion out of bounds",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "c1", "weight": 11}],
        0,
        "reweight_criterion",
        "weight",
        "within [-10.0, 10.0]",
    ),
    (
        "reweight_criterion zero",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "c1", "weight": 0}],
        0,
        "reweight_criterion",
        "weight",
        "non-zero",
    ),
    (
        "reweight_criterion nan",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "c1", "weight": float("nan")}],
        0,
        "reweight_criterion",
        "weight",
        "non-zero",
    ),
    (
        "reweight_criterion sign flip",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "c1", "weight": -4}],
        0,
        "reweight_criterion",
        "weight",
        "needs a positive weight",
    ),
    (
        "reweight pitfall positive",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "p1", "weight": 2}],
        0,
        "reweight_criterion",
        "weight",
        "needs a negative weight",
    ),
    (
        "reweight_criterion no change",
        [{"op": "reweight_criterion", "task_id": "med-001", "criterion_id": "c1", "weight": 5}],
        0,
        "reweight_criterion",
        "weight",
        "already has weight",
    ),
    (
        "remove last positive",
        [{"op": "remove_criterion", "task_id": "med-002", "criterion_id": "only"}],
        0,
        "remove_criterion",
        "criterion_id",
        "last positive-weight criterion",
    ),
    (
        "remove last positive after removals",
        [
            {"op": "remove_criterion", "task_id": "med-001", "criterion_id": "c1"},
            {"op": "remove_criterion", "task_id": "med-001", "criterion_id": "c2"},
        ],
        1,
        "remove_criterion",
        "criterion_id",
        "last positive",
    ),
    (
        "split into no positive",
        [
            {
                "op": "split_criterion",
                "task_id": "med-002",
                "criterion_id": "only",
                "into": [crit("n1", -1).model_dump(), crit("n2", -2).model_dump()],
            }
        ],
        0,
        "split_criterion",
        "into",
        "without a positive-weight criterion",
    ),
    (
        "add_pitfall with positive kind",
        [{"op": "add_pitfall", "task_id": "med-001", "criterion": crit("x", 2).model_dump()}],
        0,
        "add_pitfall",
        "criterion.kind",
        "needs kind 'pitfall'",
    ),
    (
        "edit changes nothing",
        [{"op": "edit_criterion", "task_id": "med-001", "criterion_id": "c1"}],
        0,
        "edit_criterion",
        "text",
        "changes neither",
    ),
    (
        "edit check and clear_check",
        [{"op": "edit_criterion", "task_id": "med-001", "criterion_id": "c1", "check": CHECK, "clear_check": True}],
        0,
        "edit_criterion",
        "clear_check",
        "not both",
    ),
    (
        "retire every task",
        [
            {"op": "retire", "task_id": "med-001"},
            {"op": "retire", "task_id": "med-002"},
            {"op": "retire", "task_id": "med-003"},
        ],
        2,
        "retire",
        "task_id",
        "no active task",
    ),
    (
        "reweight every task to zero",
        [{"op": "reweight", "task_id": t, "weight": 0} for t in ("med-001", "med-002", "med-003")],
        2,
        "reweight",
        "task_id",
        "no active task",
    ),
    (
        "quarantine a held-out task",
        [{"op": "quarantine", "task_id": "med-900", "until_step": 5}],
        0,
        "quarantine",
        "task_id",
        "held-out",
    ),
    (
        "quarantine a retired task",
        [{"op": "retire", "task_id": "med-002"}, {"op": "quarantine", "task_id": "med-002", "until_step": 5}],
        1,
        "quarantine",
        "task_id",
        "only an active task can be quarantined",
    ),
    (
        "quarantine every task",
        [{"op": "quarantine", "task_id": t, "until_step": 5} for t in ("med-001", "med-002", "med-003")],
        2,
        "quarantine",
        "task_id",
        "not quarantined at step 0",
    ),
    (
        "retire the last task not quarantined",
        [
            {"op": "quarantine", "task_id": "med-001", "until_step": 5},
            {"op": "quarantine", "task_id": "med-002", "until_step": 5},
            {"op": "retire", "task_id": "med-003"},
        ],
        2,
        "retire",
        "task_id",
        "no active task",
    ),
    (
        "hint leaks reference",
        [{"op": "add_hint", "task_id": "med-003", "hint": {"id": "h", "text": f"Answer: {LEAKY.upper()}!"}}],
        0,
        "add_hint",
        "hint.text",
        "contains the reference answer of task 'med-003'",
    ),
    (
        "hint leaks a long run",
        [
            {
                "op": "add_hint",
                "task_id": "med-003",
                "hint": {"id": "h", "text": "Say: plenty of water and rest in a dark quiet room."},
            }
        ],
        0,
        "add_hint",
        "hint.text",
        "reference answer",
    ),
    (
        "edited hint leaks",
        [
            {"op": "add_hint", "task_id": "med-003", "hint": {"id": "h", "text": "Think about fluids."}},
            {"op": "edit_hint", "task_id": "med-003", "hint_id": "h", "text": LEAKY},
        ],
        1,
        "edit_hint",
        "text",
        "reference answer",
    ),
    (
        "restore that changes nothing",
        [{"op": "restore_criteria", "task_id": "med-001", "from_version": 0}],
        0,
        "restore_criteria",
        "criteria",
        "nothing to restore",
    ),
    (
        "restored guidance leaks",
        [
            {
                "op": "restore_guidance",
                "task_id": "med-003",
                "from_version": 0,
                "guidance": {"hints": [{"id": "h", "text": LEAKY}]},
            }
        ],
        0,
        "restore_guidance",
        "guidance.hints[0].text",
        "reference answer",
    ),
    (
        "restore on a held-out task",
        [{"op": "restore_sampling", "task_id": "med-900", "from_version": 0, "sampling": {"weight": 1.0}}],
        0,
        "restore_sampling",
        "task_id",
        "held-out",
    ),
]


@pytest.mark.parametrize("name,ops,index,op,field,reason", REJECTED, ids=[r[0] for r in REJECTED])
def test_op_rejected(name: str, ops: list[dict], index: int, op: str, field: str, reason: str) -> None:
    s0 = state()
    before = s0.model_dump_json()
    u = HarnessUpdate.model_validate({"interface": OP_INTERFACE[ops[0]["op"]], "ops": ops})
    with pytest.raises(UpdateRejected) as info:
        apply(s0, u)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.op_index, err.op, err.field) == (index, op, field)
    assert reason in err.reason
    assert str(err).startswith(f"ops[{index}] ({op}).{field}: ")
    assert s0.model_dump_json() == before  # state unchanged
    assert validate(s0, u) == [str(err)]


def test_error_message_format() -> None:
    u = upd(
        {"op": "remove_criterion", "task_id": "med-003", "criterion_id": "c1"},
        {"op": "remove_criterion", "task_id": "med-003", "criterion_id": "c9"},
    )
    with pytest.raises(
        UpdateRejected, match=r"^ops\[1\] \(remove_criterion\)\.criterion_id: 'c9' is not a criterion of task 'med-003'"
    ):
        apply(state(), u)


def test_variant_inherits_reference_for_leak_guard() -> None:
    s1 = apply(state(), upd({"op": "add_variant", "task_id": "med-003", "variant_id": "v", "prompt": PROMPT}))
    with pytest.raises(UpdateRejected, match="reference answer of task 'v'"):
        apply(s1, upd({"op": "add_hint", "task_id": "v", "hint": {"id": "h", "text": LEAKY}}))


def test_hint_derived_from_criterion_is_allowed() -> None:
    # Hints that restate a criterion are the point of guidance; only the reference answer is forbidden.
    s1 = apply(
        state(),
        upd(
            {
                "op": "add_hint",
                "task_id": "med-003",
                "hint": {"id": "h", "text": "Mention water or rest.", "source": "criterion:c1"},
            }
        ),
    )
    assert s1.guidance["med-003"].hints[0].source == "criterion:c1"


def test_interface_mismatch_is_refused_by_the_model() -> None:
    with pytest.raises(ValueError, match=r"ops\[0\] \(retire\) belongs to interface 'sampling'"):
        HarnessUpdate.model_validate({"interface": "criteria", "ops": [{"op": "retire", "task_id": "med-001"}]})


def test_apply_chains_versions() -> None:
    s1 = apply(state(), upd({"op": "reweight", "task_id": "med-001", "weight": 2}))
    s2 = apply(s1, upd({"op": "reweight", "task_id": "med-001", "weight": 3}))
    assert (s2.version, s2.parent_version) == (2, 1)
    assert s1.sampling["med-001"].weight == 2


def test_apply_refuses_untyped_update() -> None:
    with pytest.raises(TypeError, match="HarnessUpdate"):
        apply(state(), {"interface": "sampling", "ops": []})  # type: ignore[arg-type]


def test_quarantine_must_end_after_the_commit_step() -> None:
    u = upd({"op": "quarantine", "task_id": "med-001", "until_step": 10})
    with pytest.raises(
        UpdateRejected, match=r"^ops\[0\] \(quarantine\)\.until_step: 10 is not after the commit step 10"
    ):
        apply(state(), u, step=10)
    assert apply(state(), u, step=9).sampling["med-001"].quarantined_until == 10
    with pytest.raises(ValueError, match="until_step"):
        upd({"op": "quarantine", "task_id": "med-001", "until_step": 0})


def test_quarantine_shows_in_the_diff() -> None:
    s0 = state()
    s1 = apply(s0, upd({"op": "quarantine", "task_id": "med-001", "until_step": 12}), step=4)
    assert diff_states(s0, s1) == ["sampling med-001: quarantined until step None -> 12"]
