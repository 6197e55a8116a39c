"""The repair ladder of a dead task: every (interface, template) rung in order, a failure recorded per rung.

A task whose groups are dead (collapse_low, collapse_high, flat) teaches nothing until a repair revives it, so a
failed repair must lead to the next one, not to giving up. The ladder of a failure type is its interfaces in the
attributor's preference order (`agents.attributor.PREFERENCE`), each with its rule templates in order
(`agents.rule_templates.templates_for`): for collapse_low, hints from the task's essential criteria, then fuller
hints, then hints on every criterion, then criteria edits (a graded split, a full-and-partial split of a criterion no
answer meets, a loosened check), then down-weighting; for flat, graded criteria edits (the same two splits, a graded
addition), then hints (which state the format a criterion asks for), then down-weighting;
for collapse_high, harder variants, then criteria and guidance. One reordering (`order_for`): a flat task whose
newest best rollout still misses a positive format-only criterion (bullets, a word count, a start or an end) never
produces that form, so re-grading its identical answers cannot make them differ, while a hint that states the form
can; its guidance rungs come first.

A rung is spent when a proposal of its template on this task was rejected, invalid, reverted by training, or
accepted (a dead event after it says that repair did not keep the task alive), whichever dead type it answered
(the task's proposal records in memory, `evidence["proposals"]`); a round whose proposer found no candidate on an
interface spends every rung there. The next event on the task starts at the first rung not spent: the attributor
takes that rung's interface (`agents.attributor.rule_attribution`) and the proposer skips the spent templates
(`agents.proposer.rule_proposal`).
Within a round the critic's rejections move down the rungs of one interface (the revisions). For an all-low or
flat task the round's sampling fallback waits while an interface other than sampling still has a rung
(`rung_elsewhere`; the report says which): the fallback is the sampling rung itself (a down-weight or a quarantine,
acted on only when the frozen policy reproduces the failure), the last resort for a task that should come back.
The waiting event then climbs to that rung in the same round, up to `evolver.ladder_hops` times (`climb`): a dead
task trains nothing until a rung holds, a criteria rung costs no probes (it re-scores cached rollouts), and with one
interface per round a task dead from step 1 would reach its guidance rungs only rounds later. The climb is the same
failure under its own id (`<event id>:hop<k>`), so its candidates are memory records of their own and the rungs the
first part spent are read back from memory like any earlier round's. It skips the interfaces its earlier parts
worked on (`climbed_from`): their rungs left wait for the task's next round, as does the next interface past the
budget. A saturated task (collapse_high) keeps its fallback: drawing it
less is a fitting answer there. When every rung has failed the ladder starts again from the prior, since the
policy has changed since the first tries (said in the attribution's notes).

Other failure types keep the attributor's per-interface memory (`REJECTED_LIMIT`): their groups still teach, and
moving off an interface that keeps failing is the cheaper answer there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from agents.rule_templates import templates_for
from agents.rules_bank import FORMAT_ONLY
from harness.types import FailureEvent

DEAD_TYPES = frozenset({"collapse_low", "collapse_high", "flat"})
FAILED_OUTCOMES = frozenset({"rejected", "invalid", "reverted"})
# A rung is spent by a failure, or by an accepted repair the task went dead after (its proposal outcome stays
# "accepted" while training confirms it, so a dead event on the task is what says it did not hold).
SPENT_OUTCOMES = FAILED_OUTCOMES | {"accepted"}


def family(label: str) -> str:
    """A template label's template name ("variant:bullets3" -> "variant")."""
    return label.split(":", 1)[0]


def rungs(failure_type: str, order: tuple[str, ...], enabled: list[str]) -> list[tuple[str, str]]:
    """The ladder of `failure_type` over the enabled interfaces of `order` (the attributor's preference order).

    Its rungs are (interface, template name), one per template slot.
    """
    return [(i, name) for i in order if i in enabled for name, _ in templates_for(i, failure_type)]


def failed_proposals(evidence: dict[str, Any], interface: str | None = None) -> list[dict[str, Any]]:
    """This task's spent rule proposals on dead failures (on `interface` only, if given), oldest first."""
    return [
        p
        for p in evidence.get("proposals", [])
        if p.get("failure_type") in DEAD_TYPES
        and p.get("outcome") in SPENT_OUTCOMES
        and p.get("template") not in (None, "", "llm")
        and (interface is None or p.get("interface") == interface)
    ]


def exhausted_interfaces(evidence: dict[str, Any]) -> set[str]:
    """Interfaces where a round's proposer found no candidate at all for this dead task: their rungs are spent.

    Every template there gave nothing or had been tried.
    """
    return {
        str(p.get("interface"))
        for p in evidence.get("proposals", [])
        if p.get("failure_type") in DEAD_TYPES and p.get("outcome") in FAILED_OUTCOMES and p.get("template") == ""
    }


def failed_labels(evidence: dict[str, Any], interface: str | None = None) -> list[str]:
    """Template labels of this task's failed rule proposals on dead failures (on `interface` only, if given)."""
    return [p["template"] for p in failed_proposals(evidence, interface)]


def next_rung(
    failure_type: str, order: tuple[str, ...], evidence: dict[str, Any], enabled: list[str]
) -> tuple[int, str, str] | None:
    """(index, interface, template name) of the first rung that has not failed on this task; None when all have.

    A template slot that appears several times (each "variant" slot is one constraint) fails once per failed
    proposal of that template.
    """
    failed = Counter((p["interface"], family(p["template"])) for p in failed_proposals(evidence))
    spent = exhausted_interfaces(evidence)
    for i, (iface, name) in enumerate(rungs(failure_type, order, enabled)):
        if iface in spent:
            continue
        if failed[(iface, name)] > 0:
            failed[(iface, name)] -= 1
            continue
        return i, iface, name
    return None


def skipped_templates(failure_type: str, evidence: dict[str, Any], interface: str) -> list[str]:
    """The template labels the proposer skips on `interface`.

    The failed rungs there of a dead task that has a rung left on it; none for other failure types, and none once
    every rung there failed (the ladder starts again).
    """
    if failure_type not in DEAD_TYPES or next_rung(failure_type, (interface,), evidence, [interface]) is None:
        return []
    return failed_labels(evidence, interface)


def order_for(failure_type: str, order: tuple[str, ...], evidence: dict[str, Any]) -> tuple[str, ...]:
    """The ladder's interface order for this event: `order`, or guidance first (see the module doc).

    Guidance goes first for a flat task whose best recent rollout misses a positive format-only criterion.
    """
    if failure_type != "flat" or "guidance" not in order:
        return order
    unmet = set(evidence.get("unmet") or [])
    criteria = (evidence.get("task") or {}).get("criteria") or []
    if any(
        c.get("id") in unmet and (c.get("weight") or 0) > 0 and (c.get("check") or {}).get("type") in FORMAT_ONLY
        for c in criteria
    ):
        return ("guidance", *(i for i in order if i != "guidance"))
    return order


def rung_elsewhere(
    failure_type: str, order: tuple[str, ...], evidence: dict[str, Any], enabled: list[str], interface: str
) -> tuple[int, str, str] | None:
    """The first rung not yet failed on an enabled interface other than `interface` and sampling.

    None when there is none, or for a failure other than collapse_low and flat. The round's attempts on `interface`
    are not in `evidence` yet; the other interfaces' rungs are what the task's next round would climb to.
    """
    if failure_type not in ("collapse_low", "flat"):
        return None
    return next_rung(failure_type, order, evidence, [i for i in enabled if i not in (interface, "sampling")])


HOP_MARK = ":hop"  # an event id's suffix for a climb within the round (`climb`)


def climb_of(event_id: str) -> tuple[str, int]:
    """(the id of the event the round took, how many climbs this one is): ("e", 0) for "e", ("e", 2) for "e:hop2"."""
    base, sep, k = event_id.rpartition(HOP_MARK)
    return (base, int(k)) if sep and base and k.isdigit() else (event_id, 0)


def climbed_from(event: FailureEvent, evidence: dict[str, Any]) -> set[str]:
    """The interfaces this event's earlier parts in the round worked on (empty for an event the round took).

    A climb goes to another interface: the rungs left where it came from wait for the task's next round."""
    base, k = climb_of(event.id)
    if k == 0:
        return set()
    parts = {base, *(f"{base}{HOP_MARK}{j}" for j in range(1, k))}
    return {str(p.get("interface")) for p in evidence.get("proposals", []) if p.get("event_id") in parts}


def climb(event: FailureEvent, *, deferred: bool, budget: int) -> FailureEvent | None:
    """The event's next climb in this round (`<id>:hop<k>`: the same failure, a fresh lane state), or None.

    It climbs when the fallback `deferred` to a rung on another interface and fewer than `budget`
    (`evolver.ladder_hops`) climbs were taken."""
    base, k = climb_of(event.id)
    if not deferred or k >= budget:
        return None
    return event.model_copy(update={"id": f"{base}{HOP_MARK}{k + 1}"})
