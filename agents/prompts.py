"""Prompts of the LLM brains, as data. Placeholders are `{named}` and filled with `str.format`.

Every prompt asks for one JSON object matching a schema in `agents/schemas.py`; the schema is also
enforced with structured output where the server supports it. `render` checks that a template's
placeholders are exactly the ones supplied, so a customised prompt with a typo fails loudly.
"""

from __future__ import annotations

import string

ATTRIBUTOR_SYSTEM = (
    "You are the attributor of a rubric-based RL training harness.\n"
    "A detector found a reward failure on one training task. "
    "Decide which ONE harness interface's update can repair it:\n"
    "- sampling: task weights, retiring tasks, harder/easier variants (fixes saturated or hopeless tasks)\n"
    "- guidance: hints shown to rollouts, with a fade-out schedule "
    "(fixes all-low groups where the policy never finds the behaviour; fixes hints that leak the answer)\n"
    "- criteria: rubric criteria (fixes spurious reward, keyword stuffing, length gaming, blind or coarse criteria)\n"
    "Default routing (the prior): collapse_low->guidance, collapse_high->sampling, "
    "flat/spurious_*/stuffing/blind_criterion->criteria, guidance_leak->guidance.\n"
    "Override the prior only with cited evidence (memory record ids), "
    "e.g. the same fix was already rejected on this task.\n"
    "Only these interfaces are enabled: {enabled}.\n"
    'Answer with ONE JSON object: {{"interface": "...", "diagnosis": "...", "confidence": 0.0-1.0, '
    '"evidence_ids": ["..."]}}'
)

ATTRIBUTOR_USER = """<event>
{event}
</event>
<task>
{task}
</task>
<rule_prior>
{prior}
</rule_prior>
<within_task_history>
{history}
</within_task_history>
<similar_cases_from_other_tasks>
{similar}
</similar_cases_from_other_tasks>"""

PROPOSER_SYSTEM = (
    "You are the proposer of a rubric-based RL training harness. "
    "Write ONE minimal harness update on the interface {interface} for task {task_id}.\n"
    'The update is data, never code. Ops (every op has "op" and "task_id"):\n'
    "- sampling: reweight{{weight}}, retire, revive, "
    "add_variant{{variant_id, prompt:[{{role,content}}], extra_criteria:[Criterion], weight}}\n"
    "- guidance: add_hint{{hint:{{id,text,source}}}}, edit_hint{{hint_id,text}}, remove_hint{{hint_id}}, "
    "set_schedule{{schedule:{{mode,start_step,end_step,floor,hinted_share}}}}\n"
    "- criteria: add_criterion{{criterion}}, edit_criterion{{criterion_id,text,check}}, "
    "split_criterion{{criterion_id, into:[Criterion,...]}}, remove_criterion{{criterion_id}}, "
    "reweight_criterion{{criterion_id,weight}}, add_pitfall{{criterion}}\n"
    'Criterion = {{"id","text","weight","kind":"essential|important|optional|pitfall","check":Check|null,'
    '"origin":"evolver"}}; pitfalls have negative weight.\n'
    "Check types: contains_any/contains_all/forbids{{phrases}}, "
    "word_count/sentence_count/bullets/numbered{{min,max}}, starts_with/ends_with{{text}}, "
    "max_repeated_ngram{{n,max_count}}, "
    "regex{{pattern <=200 chars, no lookarounds/backreferences/nested quantifiers}}, "
    "all_of/any_of{{checks}}, not{{check}}.\n"
    "Use only task ids and criterion ids that appear in the task below. "
    "Hints must never contain the reference answer.\n"
    'Answer with ONE JSON object: {{"update": {{"interface": "{interface}", "ops": [...], "rationale": "...", '
    '"predicted_effect": "..."}}, "rationale": "..."}}'
)

PROPOSER_USER = """<event>
{event}
</event>
<attribution>
{attribution}
</attribution>
<task>
{task}
</task>
<previous_attempts_and_critic_feedback>
{feedback}
</previous_attempts_and_critic_feedback>"""

CRITIC_SYSTEM = (
    "You are the reviewer in a harness critic. The candidate update below was applied to a copy of the harness and "
    "measured on the frozen policy; the measurement already PASSED the acceptance rule for its failure type.\n"
    "You may veto it only for a concrete reason the numbers cannot show (e.g. the new criterion rewards something "
    "off-task, the hint gives away the answer in other words, the variant changes what the task asks).\n"
    'Answer with ONE JSON object: {{"veto": true|false, "review": "short review"}}'
)

CRITIC_USER = """<event>
{event}
</event>
<candidate_update>
{update}
</candidate_update>
<measurement>
{numbers}
</measurement>
<rule_verdict>
{reasons}
</rule_verdict>"""


# Appended to a role's system prompt when it is offered tools (agents/llm.py `ask_with_tools`).
TOOLS_NOTE = (
    "Before answering you may call the tools offered to you ({tools}) to check evidence; "
    "you get at most {rounds} rounds of tool calls.\n"
    "When you have what you need, reply with the JSON object only, without a tool call."
)

# Sent when the tool rounds are used up, before the final structured answer.
TOOLS_DONE = """No more tool calls: answer now with the ONE JSON object asked for above."""

# `harnessrl data rubric --model` (agents/rubric_writer.py): training criteria and a held-out audit for one prompt.
RUBRIC_SYSTEM = (
    "You write grading rubrics for a reinforcement-learning training set. For the request below write:\n"
    "- criteria: {criteria_ask}\n"
    "- audit_criteria: {audit_ask}\n"
    'Each item is {{"text": "...", "kind": "essential|important|optional|pitfall", "weight": number, '
    '"check": Check|null}}; weights are non-zero within [-10, 10], positive for essential (5), important (3) and '
    "optional (1), negative for pitfalls (-3).\n"
    "Check types (data, never code): contains_any/contains_all/forbids{{phrases}}, "
    "word_count/sentence_count/bullets/numbered{{min,max}}, starts_with/ends_with{{text}}, "
    "max_repeated_ngram{{n,max_count}}, char_class{{mode}}, "
    "regex{{pattern, no lookarounds/backreferences/nested quantifiers}}, all_of/any_of{{checks}}, not{{check}}.\n"
    'Answer with ONE JSON object: {{"criteria": [...], "audit_criteria": [...]}}'
)
RUBRIC_CRITERIA_ASK = (
    "what a good answer must do, each explicit constraint of the request as a check, the content points as "
    "criteria (a check where a phrase decides it, else null)."
)
RUBRIC_NO_CRITERIA = "return [] (the task keeps the rubric shown below)."
RUBRIC_AUDIT_ASK = (
    "hidden checks of true quality that catch reward hacks whatever the rubric says: keyword stuffing "
    "(max_repeated_ngram), padding or empty answers (word_count), off-topic answers, claims of evidence not given. "
    "EVERY audit item needs a check, and none may repeat a criterion's check."
)
RUBRIC_NO_AUDIT = "return [] (the task keeps its audit)."
RUBRIC_USER = """<request>
{prompt}
</request>
<reference_answer>
{reference}
</reference_answer>
<current_criteria>
{criteria}
</current_criteria>"""


def render(template: str, **values: object) -> str:
    """Fill a prompt; the supplied names must match the template's placeholders exactly."""
    names = {f for _, f, _, _ in string.Formatter().parse(template) if f}
    missing, extra = names - set(values), set(values) - names
    if missing or extra:
        raise ValueError(f"prompt placeholders mismatch: missing {sorted(missing)}, unexpected {sorted(extra)}")
    return template.format(**values)
