"""The README's list of config fields is the config's (issue 20 item 8): every field of every section of
`trainer/config.py`, no more, in the block between the `config-fields` markers."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from trainer.config import SECTIONS, RunConfig

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- config-fields:", "<!-- end config-fields -->"


def listed(text: str) -> dict[str, list[str]]:
    """Section -> field names of the README block (`- top level:` is the `RunConfig` field outside the sections)."""
    if START not in text or END not in text:
        raise AssertionError(f"README.md has no config-fields block ({START} ... {END})")
    block = text[text.index(START) : text.index(END)]
    out: dict[str, list[str]] = {}
    for line in block.splitlines()[1:]:
        m = re.match(r"- (?:`(\w+)`|top level):(.*)$", line.strip())
        if m:
            out[m.group(1) or ""] = re.findall(r"`(\w+)`", m.group(2))
    return out


def config_fields() -> dict[str, list[str]]:
    top = [f.name for f in dataclasses.fields(RunConfig) if f.name not in SECTIONS]
    return {"": top, **{s: [f.name for f in dataclasses.fields(cls)] for s, cls in SECTIONS.items()}}


def test_readme_lists_every_config_field_and_no_other():
    got, want = listed(README.read_text(encoding="utf-8")), config_fields()
    problems = []
    for section in sorted(set(got) | set(want)):
        missing = [f for f in want.get(section, []) if f not in got.get(section, [])]
        extra = [f for f in got.get(section, []) if f not in want.get(section, [])]
        name = section or "top level"
        if missing:
            problems.append(f"{name}: README lacks {missing}")
        if extra:
            problems.append(f"{name}: README lists {extra}, which the config does not have")
    assert not problems, "README.md config-fields block differs from trainer/config.py: " + "; ".join(problems)


@pytest.mark.parametrize(
    "edit, expect",
    [
        (lambda t: t.replace("`max_failed_rounds`", "`max_failed_round`"), "README lacks ['max_failed_rounds']"),
        (lambda t: t.replace("`dtype`", "`dtype`, `precision`"), "README lists ['precision']"),
    ],
)
def test_a_drifted_list_fails(edit, expect):
    got, want = listed(edit(README.read_text(encoding="utf-8"))), config_fields()
    missing = [f for s in want for f in want[s] if f not in got.get(s, [])]
    extra = [f for s in got for f in got[s] if f not in want.get(s, [])]
    assert expect in (f"README lacks {missing}" if missing else "") + (f"README lists {extra}" if extra else "")
