"""The suite's content tables: typed views of the YAML files in `suitegen/content/`.

The facts (conditions and their treatments, phenomena and their key terms, personas, verifiable
constraints) are data, kept apart from the templates in `suitegen/domains.py` that turn them into tasks.
Each file is validated on load, so a typo in a field name or a missing field fails with the file and the
field path instead of a KeyError deep inside a template.
"""

from __future__ import annotations

from importlib import resources
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

Level = Literal["easy", "medium", "hard"]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QuickQuestion(_Row):
    """An easy one-line question with its answer terms and a wrong answer (pitfall)."""

    question: str
    answer_terms: list[str]
    answer_desc: str
    wrong_terms: list[str]
    reference: str


class Condition(_Row):
    name: str
    key_terms: list[str]  # what it is
    key_desc: str
    treatment_terms: list[str]
    treatment_desc: str
    symptom_terms: list[str]
    pitfall_phrases: list[str]  # harmful advice
    pitfall_desc: str
    reference: str
    level: Level


class Drug(_Row):
    name: str
    use_terms: list[str]
    side_effect_terms: list[str]
    pitfall_phrases: list[str]
    reference: str
    level: Level


class Medical(_Row):
    conditions: list[Condition]
    quick: list[QuickQuestion]
    drugs: list[Drug]
    relations: list[str]  # who was diagnosed ("My mother was just diagnosed with ...")
    clinician_terms: list[str]  # any of these = the answer involves a clinician


class Phenomenon(_Row):
    topic: str
    key_terms: list[str]
    key_desc: str
    second_terms: list[str]
    second_desc: str
    misconception_phrases: list[str]
    misconception_desc: str
    rare_term: str  # asked for in the prompt, or only in the rubric (the hidden-term variant)
    reference: str
    level: Level


class Science(_Row):
    phenomena: list[Phenomenon]
    quick: list[QuickQuestion]


class Topic(_Row):
    topic: str
    terms: list[str]  # any of these = the text is on topic


class Email(_Row):
    recipient: str
    name: str  # the greeting: "Dear {name},"
    purpose: str
    terms: list[str]


class Product(_Row):
    product: str
    terms: list[str]


class Writing(_Row):
    topics: list[Topic]
    emails: list[Email]
    products: list[Product]
    acrostic_words: list[str]
    lipogram_letters: list[str]


class Persona(_Row):
    persona: str
    name: str  # the character's name; what an introduction should mention
    system: str
    voice_phrases: list[str]  # in-character phrases, matched as word starts
    voice_words: list[str]  # short in-character words, matched as whole words only
    voice_desc: str
    rare_word: str
    opener: str


class Scenario(_Row):
    message: str
    terms: list[str] | None  # None: the reply should name the character instead
    desc: str


class Roleplay(_Row):
    personas: list[Persona]
    scenarios: list[Scenario]


class Constraint(_Row):
    prompt: str  # may hold {k1}/{k2}: filled with the topic's first two terms
    criterion: str
    check: dict[str, Any] | None  # a `harness.checks` Check as JSON; None: built from the topic terms
    rank: int  # 0 easy, 1 medium, 2 hard


class InstructionFollowing(_Row):
    topics: list[Topic]
    leads: list[str]  # the request, "{t}" = the topic
    constraints: dict[str, Constraint]  # order matters: it is the generator's draw order
    clashes: list[list[str]]  # constraint pairs no answer can meet together


class Common(_Row):
    preamble_openers: list[str]  # chatty openings ("Sure", "Here is") that a pitfall catches
    ai_break_phrases: list[str]  # a character calling itself an AI


M = TypeVar("M", bound=BaseModel)


def load(name: str, model: type[M]) -> M:
    """Read and validate `suitegen/content/<name>.yaml` (shipped as package data)."""
    path = resources.files("suitegen") / "content" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"suite content {path} is invalid:\n{e}") from None
