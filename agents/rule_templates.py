"""The rule proposer's templates, ordered per (interface, failure type) in `TEMPLATES`.

One function per kind of minimal `HarnessUpdate`, in one file per interface (`agents/sampling_templates.py`,
`agents/guidance_templates.py`, `agents/criteria_templates.py`).

Each template reads a `TemplateInput` (the event, the harness, the task, the attempts so far with the
critic's verdicts) and returns an update, or None when it does not apply. The templates make real updates:

- sampling: a harder variant of a saturated task (prompt + one constraint from
  `rules_bank.CONSTRAINTS` + the matching programmatic criterion), or a down-weight;
- guidance: hints derived from unmet criteria (phrased from their text and check phrases, never
  containing the reference answer) with a fade-out schedule; for leaks, a faster fade, removing the
  copied hint, or rewording it to the abstract requirement;
- criteria: word floors and repetition limits on stuffed / format-only criteria (`all_of`), pitfall
  criteria, tightening or loosening blind criteria, graded splits of coarse criteria, a full-and-partial split of
  a criterion no cached answer meets.

Templates that need a number (a word budget, a floor, a padding length) size it from the task's own cached
rollouts (`TemplateInput.signals`, `agents/rollout_signals.py`) when there are at least `MIN_SIGNAL_ROLLOUTS`,
so the update splits what the policy actually writes; criteria the gamed rollouts meet far more often than the
honest ones (criterion ids only) are the first targets of spurious-reward repairs. Some templates read the
critic's last numbers (a variant that came out dead-low steps to an easier constraint; a word budget every probe
kept to is re-sized to the median the policy writes under it; a tightening that cost honest rollouts too much
reward uses a lower word floor). Which template is tried when is `agents/proposer.py`'s
decision (`rule_proposal`).
"""

from __future__ import annotations

from agents.criteria_templates import (
    t_add_graded,
    t_blind_edit,
    t_blind_reweight,
    t_blind_split,
    t_loosen_hardest,
    t_pitfall_padding,
    t_pitfall_repeat,
    t_pitfall_short,
    t_reweight_contrast,
    t_reweight_format,
    t_split_graded,
    t_split_partial,
    t_tighten_contrast,
    t_tighten_format,
    t_tighten_repeat,
    t_tighten_repeat_strict,
)
from agents.guidance_templates import t_hint, t_hint_all, t_hint_strong, t_leak_abstract, t_leak_fade, t_leak_remove
from agents.sampling_templates import downweight, t_variant, t_variant_resized, t_variant_sized
from agents.template_input import Template

# A template that reads the critic's probes of the attempt before it (that attempt's template): a refusal of the
# first followed by an accepted second is one repair in two steps, not a failure of the first on similar cases
# (`agents.proposer.template_evidence`).
BUILDS_ON = {"variant_resized": "variant_sized"}

TEMPLATES: dict[str, dict[str, list[tuple[str, Template]]]] = {
    "sampling": {
        "collapse_high": [
            ("variant_sized", t_variant_sized),
            ("variant_resized", t_variant_resized),
            ("variant", t_variant),
            ("variant", t_variant),
            ("variant", t_variant),
            ("downweight", downweight(0.5)),
        ],
        "*": [("downweight", downweight(0.5)), ("downweight_more", downweight(0.25))],
    },
    "guidance": {
        "guidance_leak": [
            ("leak_fade", t_leak_fade),
            ("leak_abstract", t_leak_abstract),
            ("leak_remove", t_leak_remove),
        ],
        "*": [("hint", t_hint), ("hint_strong", t_hint_strong), ("hint_all", t_hint_all)],
    },
    "criteria": {
        "stuffing": [
            ("tighten_contrast", t_tighten_contrast),
            ("tighten_repeat", t_tighten_repeat),
            ("pitfall_repeat", t_pitfall_repeat),
            ("tighten_repeat_strict", t_tighten_repeat_strict),
        ],
        "spurious_length": [
            ("pitfall_padding", t_pitfall_padding),
            ("tighten_format", t_tighten_format),
            ("pitfall_short", t_pitfall_short),
        ],
        "spurious_audit": [
            ("tighten_contrast", t_tighten_contrast),
            ("reweight_contrast", t_reweight_contrast),
            ("tighten_format", t_tighten_format),
            ("pitfall_short", t_pitfall_short),
            ("reweight_format", t_reweight_format),
        ],
        "blind_criterion": [
            ("blind_edit", t_blind_edit),
            ("blind_split", t_blind_split),
            ("blind_reweight", t_blind_reweight),
        ],
        "flat": [
            ("split_graded", t_split_graded),
            ("split_partial", t_split_partial),
            ("add_graded", t_add_graded),
            ("tighten_format", t_tighten_format),
        ],
        "collapse_low": [
            ("split_graded", t_split_graded),
            ("split_partial", t_split_partial),
            ("loosen_hardest", t_loosen_hardest),
        ],
        "*": [("add_graded", t_add_graded), ("tighten_format", t_tighten_format), ("pitfall_short", t_pitfall_short)],
    },
}


def templates_for(interface: str, failure_type: str) -> list[tuple[str, Template]]:
    """The default template order for a failure type on an interface (its "*" row when it has none)."""
    table = TEMPLATES[interface]
    return table.get(failure_type, table["*"])
