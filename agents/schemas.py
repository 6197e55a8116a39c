"""Structured outputs of the three agents (pydantic), plus the plain-JSON fallback parser.

LLM brains ask for these through `with_structured_output`; servers without structured decoding get
the same schema in the prompt and their text goes through `parse_json_output` (the JSON extraction
itself is `tools.llm_json`, shared with the judge). Everything an LLM returns is validated data:
ids are checked against the harness by the agents, updates by `harness.ops.validate` — nothing is
ever executed.
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.checks import MAX_NESTING
from harness.types import OP_INTERFACE, HarnessUpdate, Interface
from tools.llm_json import first_json_object


class Attribution(BaseModel):
    """Which interface's update can repair the failure, and why."""

    model_config = ConfigDict(extra="forbid")

    interface: Interface = Field(description="the interface to update: sampling, guidance or criteria")
    diagnosis: str = Field(description="one or two sentences: why the reward failed on this task", max_length=2000)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0, description="confidence in the routing, 0..1")
    evidence_ids: list[str] = Field(default_factory=list, description="ids of the memory records relied on")
    source: Literal["rules", "llm", "llm_fallback"] = "rules"
    notes: list[str] = Field(default_factory=list, description="how the routing was decided (prior, overrides)")
    evidence_used: list[str] = Field(
        default_factory=list,
        description=(
            "filled by the rule brain, not the model: cross-task records that moved the routing off its prior"
        ),
    )


class ProposalOut(BaseModel):
    """What an LLM proposer returns: one minimal update on the attributed interface."""

    model_config = ConfigDict(extra="forbid")

    update: HarnessUpdate = Field(description="the candidate harness update (one interface, few ops)")
    rationale: str = Field(default="", max_length=2000, description="why this update fixes the failure")


class Proposal(BaseModel):
    """A candidate update with its provenance; `update` is None when no candidate could be made."""

    model_config = ConfigDict(extra="forbid")

    update: HarnessUpdate | None
    template: str = Field(default="", description="rule template (or 'llm') that produced it")
    rationale: str = ""
    source: Literal["rules", "llm", "llm_fallback"] = "rules"  # llm_fallback: the LLM failed, the rule brain answered
    error: str | None = Field(
        default=None, description="why no usable candidate came out (LLM failure, no template left)"
    )
    llm_error: str | None = Field(
        default=None, description="with source llm_fallback: why the LLM's answer was unusable"
    )
    evidence_used: list[str] = Field(
        default_factory=list,
        description=(
            "cross-task memory records that changed the rule brain's template choice, e.g. "
            "'proposal e1:r0 accepted on med-3: template hint_strong' (empty: the default order chose)"
        ),
    )


class Review(BaseModel):
    """The LLM critic's optional review. It may veto a measured improvement, never accept without one."""

    model_config = ConfigDict(extra="forbid")

    veto: bool = Field(default=False, description="true to refuse the candidate despite its measured improvement")
    review: str = Field(default="", max_length=4000, description="short review of the candidate and its numbers")


class Critique(BaseModel):
    """The critic's measured verdict on one candidate. `agents.decisions.after_critique` turns it into a decision."""

    model_config = ConfigDict(extra="forbid")

    failure_type: str
    measured_ok: bool = Field(description="the failure type's acceptance rule held on the measurement")
    primary: str = Field(default="", description="the primary metric of the rule, e.g. 'std_gain'")
    numbers: dict[str, float | None] = Field(default_factory=dict, description="the critic's real numbers")
    reasons: list[str] = Field(default_factory=list, description="why it passed or failed, with the numbers")
    measured: bool = Field(default=True, description="False when no measurement ran (invalid candidate, critic off)")
    invalid: bool = Field(default=False, description="the candidate did not validate against the harness")
    no_effect: bool = Field(
        default=False,
        description=(
            "a criteria candidate that changes no cached rollout's score (or, a reweight, no advantage): refused "
            "without costing a revision and not recorded as a failure of its template"
        ),
    )
    over_budget: bool = Field(
        default=False,
        description=(
            "not measured: its probes could exceed the lane's share of the round's probe budget; refused before any "
            "draw, without costing a revision and not recorded as a failure of its template"
        ),
    )
    veto: bool = False
    review: str = ""


T = TypeVar("T", bound=BaseModel)


def guided_schema(model: type[BaseModel], depth: int = MAX_NESTING) -> dict[str, Any]:
    """`model`'s JSON schema with no recursive definition, for a server's guided decoding.

    Grammar backends differ on recursive `$defs` (the check union: `all_of`/`any_of` hold checks, `not` holds one),
    so none is sent: each definition on a reference cycle is unrolled into `<Name>__1` .. `<Name>__<depth>`;
    references inside level k point to level k+1, and the deepest level keeps only the non-recursive alternatives.
    With `depth` = `harness.checks.MAX_NESTING` (combinators at nesting levels 1..3, leaves down to level 4) it
    admits exactly the checks `parse_check` accepts. vLLM's xgrammar backend also refuses a string `pattern` beside
    `minLength`/`maxLength` (our ids): `_fold_lengths` moves the bounds into the pattern. The union tags become required
    (`_require_tags`). Pydantic still validates the decoded answer against `model` itself."""
    schema = model.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs", {})
    prefix = "#/$defs/"

    def refs(node: Any) -> set[str]:
        if isinstance(node, dict):
            out = {node["$ref"].removeprefix(prefix)} if isinstance(node.get("$ref"), str) else set()
            return out.union(*(refs(v) for k, v in node.items() if k != "$ref"))
        if isinstance(node, list):
            return set().union(*(refs(v) for v in node))
        return set()

    edges = {name: refs(d) for name, d in defs.items()}

    def reaches(start: str) -> set[str]:
        seen, todo = set(), list(edges.get(start, ()))
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(edges.get(n, ()))
        return seen

    cyclic = {name for name in defs if name in reaches(name)}
    gone = object()  # a reference past the deepest level: dropped from its union

    def rewrite(node: Any, level: int) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.removeprefix(prefix) in cyclic:
                return gone if level > depth else {**node, "$ref": f"{prefix}{ref.removeprefix(prefix)}__{level}"}
            out = {}
            for k, v in node.items():
                if k == "discriminator" and isinstance(v, dict):
                    mapping = {
                        tag: r for tag, r in v.get("mapping", {}).items() if rewrite({"$ref": r}, level) is not gone
                    }
                    v = {**v, "mapping": {tag: rewrite({"$ref": r}, level)["$ref"] for tag, r in mapping.items()}}
                else:
                    v = rewrite(v, level)
                out[k] = v
            return out
        if isinstance(node, list):
            return [x for x in (rewrite(v, level) for v in node) if x is not gone]
        return node

    out_defs = {name: rewrite(d, 1) for name, d in defs.items() if name not in cyclic}
    for name in cyclic:
        for k in range(1, depth + 1):
            out_defs[f"{name}__{k}"] = rewrite(defs[name], k + 1)
    return _require_tags(_fold_lengths({**rewrite(schema, 1), "$defs": out_defs}))


def proposal_schema(interface: str, *, max_ops: int = 2, max_text: int = 200, max_items: int = 4) -> dict[str, Any]:
    """The guided schema of one proposal on `interface` (what the LLM proposer is decoded with).

    `guided_schema` of `ProposalOut` narrowed to `update.interface` = `interface`, ops of that interface only
    (never the trainer's `restore_*` ops), at most `max_ops` of them, free-text strings of at most `max_text`
    characters and other lists (phrases, prompt messages, criteria) of at most `max_items` entries. Everything
    it admits is a `ProposalOut` (pydantic still validates); it only leaves out answers the proposer's gates refuse
    or that a small model loops on until its token limit.
    """
    schema = guided_schema(ProposalOut)
    update = schema["$defs"]["HarnessUpdate"]
    props = update["properties"]
    props["interface"] = {"const": interface, "title": "Interface", "type": "string"}
    update["required"] = sorted(set(update.get("required", [])) | {"interface", "ops"}, key=list(props).index)
    allowed = {op for op, iface in OP_INTERFACE.items() if iface == interface and not op.startswith("restore_")}
    items = props["ops"]["items"]
    mapping = {op: ref for op, ref in items["discriminator"]["mapping"].items() if op in allowed}
    items["discriminator"]["mapping"] = mapping
    items["oneOf"] = [r for r in items["oneOf"] if r["$ref"] in set(mapping.values())]
    props["ops"]["maxItems"] = min(max_ops, props["ops"].get("maxItems", max_ops))
    return _cap(schema, max_text, max_items)


def _cap(node: Any, text: int, items: int) -> Any:
    """Cap free strings (no pattern, enum or const) at `text` characters and arrays at `items` entries.

    An array's cap is never below its own minimum.
    """
    if isinstance(node, list):
        return [_cap(v, text, items) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _cap(v, text, items) for k, v in node.items()}
    if out.get("type") == "string" and not {"pattern", "enum", "const"} & set(out):
        out["maxLength"] = min(text, out.get("maxLength", text))
    if out.get("type") == "array":
        out["maxItems"] = max(out.get("minItems", 0), min(items, out.get("maxItems", items)))
    return out


def _require_tags(node: Any) -> Any:
    """Every property with a `const` (the discriminator tags: `op`, `type`) becomes required.

    Pydantic's schema leaves a defaulted tag optional, a grammar then lets the model skip it, and pydantic cannot
    pick the union member of an answer without its tag.
    """
    if isinstance(node, list):
        return [_require_tags(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _require_tags(v) for k, v in node.items()}
    props = out.get("properties")
    if isinstance(props, dict):
        tags = [k for k, v in props.items() if isinstance(v, dict) and "const" in v]
        required = list(out.get("required", []))
        out["required"] = required + [t for t in tags if t not in required]
    return out


# `^[class]+$` or `^[class]*$`: one character class repeated, the form of our id patterns.
_REPEATED_CLASS = re.compile(r"\^(\[[^\]\[]{1,200}\])[+*]\$")


def _fold_lengths(node: Any) -> Any:
    """Fold the length bounds of string schemas that have a `pattern`, which vLLM's xgrammar backend refuses.

    xgrammar refuses a "pattern combined with minLength/maxLength": the bounds move into the pattern
    (`^[A-Za-z0-9_.:-]{1,64}$`, the same strings) where it is one repeated character class; elsewhere they are
    dropped (pydantic still checks the decoded answer).
    """
    if isinstance(node, list):
        return [_fold_lengths(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _fold_lengths(v) for k, v in node.items()}
    if isinstance(out.get("pattern"), str) and ("minLength" in out or "maxLength" in out):
        lo, hi = out.pop("minLength", 0), out.pop("maxLength", None)
        m = _REPEATED_CLASS.fullmatch(out["pattern"])
        if m:
            lo = max(lo, 1) if out["pattern"].endswith("+$") else lo
            out["pattern"] = f"^{m.group(1)}{{{lo},{'' if hi is None else hi}}}$"
    return out


def parse_json_output(text: str, schema: type[T]) -> T:
    """Parse an LLM's plain-text answer into `schema`; raises ValueError naming the bad field.

    The first JSON object in the text is taken (`tools.llm_json`: fences and prose allowed, bounded size and work).
    """
    return validate_output(first_json_object(text), schema)


def validate_output(obj: Any, schema: type[T]) -> T:
    """Validate an already-decoded answer; the error names the schema and the first bad field."""
    try:
        return schema.model_validate(obj)
    except ValidationError as err:
        e = err.errors()[0]
        loc = ".".join(str(p) for p in e["loc"]) or "value"
        raise ValueError(f"{schema.__name__}.{loc}: {e['msg']}") from None
