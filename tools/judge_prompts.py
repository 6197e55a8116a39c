"""Prompt text for the LLM rubric judge (data, not code).

`tools/` may not import `agents/prompts.py` (imports point graphs -> agents -> tools), so the judge's
prompts live here. Templates use `str.format` fields only; the response and criterion text are
passed as values, so braces inside a rollout cannot break the template.
"""

from __future__ import annotations

JUDGE_SYSTEM = (
    "You are a strict grader for a rubric-based evaluation. You judge ONE criterion against ONE "
    "response. Decide only whether the response meets the criterion as written; ignore whether it "
    "meets other, unstated standards. A criterion describing something bad (a pitfall) is met when the "
    "response DOES the bad thing. Reply with a single JSON object and nothing else:\n"
    '{"met": true or false, "reason": "<one short sentence>"}'
)

JUDGE_USER = (
    "Task given to the model:\n<task>\n{prompt}\n</task>\n\n"
    "Response to grade:\n<response>\n{response}\n</response>\n\n"
    "Criterion:\n<criterion>\n{criterion}\n</criterion>\n\n"
    'Does the response meet the criterion? Answer with JSON only: {{"met": true|false, "reason": "..."}}'
)

# Sent after a reply that could not be parsed; the bad reply is kept in the conversation so the model
# sees what was wrong with it.
JUDGE_RETRY = (
    "Your previous reply was not valid. Reply with exactly one JSON object of the form "
    '{"met": true, "reason": "..."} or {"met": false, "reason": "..."} and no other text.'
)

# The verdict's JSON schema, sent as the structured-output format of the verdict call (guided decoding on
# vLLM). Field descriptions are model-visible. The reason is capped so a small model cannot ramble until
# its token limit and leave an unfinished object.
VERDICT_SCHEMA = {
    "title": "Verdict",
    "description": "Whether the response meets the criterion as written.",
    "type": "object",
    "properties": {
        "met": {"type": "boolean", "description": "true when the response meets the criterion, else false"},
        "reason": {"type": "string", "maxLength": 200, "description": "one short sentence saying why"},
    },
    "required": ["met", "reason"],
    "additionalProperties": False,
}
