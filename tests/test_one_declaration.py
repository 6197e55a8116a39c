"""Each evolver knob is declared once, in `agents.context.EvolverContext` (issue 18 item 2).

The config's `evolver:` section is typed by it, `harnessrl evolve` builds its flags from its fields, and no other
config section, hand-written flag or literal default in `graphs/services.py` or in the measurement's settings
(`tools/candidate.py`, below agents: its budget defaults are constants there that the context's fields take)
declares one again."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import warnings
from pathlib import Path

import pytest

from agents.context import PER_RUN, EvolverContext
from trainer.config import SECTIONS, SET_BY_TRAINER, ConfigError, describe
from trainer.config_loader import config_from_dict, load_config
from trainer.config_migrations import MOVED_TO_EVOLVER

REPO = Path(__file__).resolve().parents[1]
KNOBS = {f.name for f in dataclasses.fields(EvolverContext)}


def redeclared_in_sections(sections: dict[str, type]) -> list[str]:
    """`section.field` for each context field another config section declares too.

    Allowed only where the trainer fills the context field from exactly that field (`train.seed` -> `seed`)."""
    return [
        f"{s}.{f.name}"
        for s, cls in sections.items()
        if cls is not EvolverContext
        for f in dataclasses.fields(cls)
        if f.name in KNOBS and SET_BY_TRAINER.get(f.name) != f"{s}.{f.name}"
    ]


def handwritten_flags(source: str) -> list[str]:
    """Literal `add_argument("--x-y", ...)` flags whose field is a context knob (per-run fields are the caller's)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and node.args
        ):
            continue
        if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value.removeprefix("--").replace("-", "_")
            if name in KNOBS and name not in PER_RUN:
                found.append(node.args[0].value)
    return found


def literal_defaults(source: str) -> list[str]:
    """Parameters and dataclass fields named after a context field that carry a literal default of their own.

    None aside: `RunServices.memory` is the live memory, not the `memory` switch."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.args[len(a.args) - len(a.defaults) :]
            pairs = list(zip(positional, a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
            found += [
                f"{node.name}({arg.arg}=...)"
                for arg, d in pairs
                if arg.arg in KNOBS and isinstance(d, ast.Constant) and d.value is not None
            ]
        if isinstance(node, ast.ClassDef):
            found += [
                f"{node.name}.{st.target.id}"
                for st in node.body
                if isinstance(st, ast.AnnAssign)
                and isinstance(st.target, ast.Name)
                and st.target.id in KNOBS
                and isinstance(st.value, ast.Constant)
                and st.value.value is not None
            ]
    return found


def test_no_config_section_declares_a_context_knob_again():
    assert redeclared_in_sections(SECTIONS) == []


def test_evolve_flags_are_built_from_the_context_not_written_by_hand():
    from trainer.cli import build_parser

    assert handwritten_flags((REPO / "trainer" / "commands" / "evolve.py").read_text(encoding="utf-8")) == []
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    evolve = sub.choices["evolve"]
    by_dest = {a.dest: a for a in evolve._actions}
    for f in dataclasses.fields(EvolverContext):
        if f.name in PER_RUN or f.name == "require_approval":  # require_approval is --approve (asks a person)
            continue
        assert f.name in by_dest, f"harnessrl evolve has no flag for EvolverContext.{f.name}"
        assert f.metadata["description"] in by_dest[f.name].help, f.name


def test_services_copy_no_context_default():
    assert literal_defaults((REPO / "graphs" / "services.py").read_text(encoding="utf-8")) == []


def test_measure_settings_copy_no_knob_default():
    """`MeasureSettings` sits below agents and cannot read the context: its budget defaults are the constants the
    context's fields take. The fields the trainer fills per round (`max_tokens`, `temperature`, `seed`) are no
    knobs: `agents.critic.measure_settings` always passes them."""
    from tools.measure_settings import SAMPLE_K, SAMPLE_K_MAX, MeasureSettings

    found = literal_defaults((REPO / "tools" / "measure_settings.py").read_text(encoding="utf-8"))
    assert [f for f in found if f.rpartition(".")[2] not in SET_BY_TRAINER] == []
    ctx, settings = EvolverContext(), MeasureSettings()
    assert (ctx.sample_k, ctx.sample_k_max) == (settings.sample_k, settings.sample_k_max) == (SAMPLE_K, SAMPLE_K_MAX)


@pytest.mark.parametrize(
    "check, text_or_sections, expect",
    [
        ("sections", None, ["harness.sample_k"]),
        ("flags", 'p.add_argument("--sample-k", type=int)\np.add_argument("--run-dir")', ["--sample-k"]),
        (
            "services",
            "def f(*, sample_k: int = 8, policy: str): ...\nclass S:\n    seed: int = 0\n",
            ["f(sample_k=...)", "S.seed"],
        ),
    ],
)
def test_a_second_declaration_is_found(check, text_or_sections, expect):
    if check == "sections":
        extra = dataclasses.make_dataclass("Harness", [("sample_k", int, dataclasses.field(default=8))])
        assert redeclared_in_sections({**SECTIONS, "harness": extra}) == expect
    elif check == "flags":
        assert handwritten_flags(text_or_sections) == expect
    else:
        assert literal_defaults(text_or_sections) == expect


def test_config_and_help_show_the_context_default_and_description():
    text = describe()
    for name in ("sample_k", "min_std_gain", "critic_alpha"):
        f = next(f for f in dataclasses.fields(EvolverContext) if f.name == name)
        assert f"evolver.{name} = {f.default!r}\n      {f.metadata['description']}" in text
    assert "evolver.seed" not in text  # the trainer fills it from train.seed


def test_critic_thresholds_are_settable_from_yaml(tmp_path):
    cfg = load_config(REPO / "configs" / "tiny.yaml", ["evolver.min_std_gain=0.2", "evolver.max_mean_drop=0.3"])
    assert (cfg.evolver.min_std_gain, cfg.evolver.max_mean_drop) == (0.2, 0.3)


@pytest.mark.parametrize("key", sorted(SET_BY_TRAINER))
def test_fields_the_trainer_fills_are_refused_naming_their_source(key):
    with pytest.raises(ConfigError, match=f"evolver.{key} is not a config setting"):
        load_config(REPO / "configs" / "tiny.yaml", [f"evolver.{key}=x"])


def test_a_removed_context_field_is_refused_naming_what_to_set():
    with pytest.raises(ConfigError, match=r"evolver.dead_eps was removed: .*harness.detector.eps"):
        load_config(REPO / "configs" / "tiny.yaml", ["evolver.dead_eps=0.1"])


def test_old_harness_keys_are_read_with_a_warning_naming_the_new_key(tmp_path):
    with pytest.warns(FutureWarning, match="harness.llm_base_url is deprecated: it is evolver.base_url now"):
        cfg = load_config(REPO / "configs" / "tiny.yaml", ["harness.llm_base_url=http://x/v1", "harness.sample_k=6"])
    assert (cfg.evolver.base_url, cfg.evolver.sample_k) == ("http://x/v1", 6)
    # A run saved before the move (every harness field, judge_model null) still loads, e.g. for a replay.
    old = load_config(REPO / "configs" / "tiny.yaml").to_dict()
    evolver = old.pop("evolver")
    old["harness"].update({key: evolver[new] for key, new in MOVED_TO_EVOLVER.items()}, judge_model=None)
    with pytest.warns(FutureWarning, match="harness.judge_model is deprecated"):
        assert config_from_dict(old) == load_config(REPO / "configs" / "tiny.yaml")
    p = tmp_path / "both.yaml"
    p.write_text("harness:\n  sample_k: 4\nevolver:\n  sample_k: 8\n")
    with warnings.catch_warnings(), pytest.raises(ConfigError, match="keep only evolver.sample_k"):
        warnings.simplefilter("ignore")
        load_config(p)
