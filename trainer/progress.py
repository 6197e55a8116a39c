"""The training console: one line per step, one readable summary per evolver round, library noise filtered.

Full metrics stay in `metrics.jsonl` (and `report_to`); the console carries only what a person follows
while a run goes: reward, dead-group share, harness version and step time per step (plus a warning line
when the step is flagged for judge failures, `judge_flag_line`, or for responses it could not score or criteria
it skipped, `scoring_flag_lines`), and per round what was accepted on
which task and why. TRL's raw log dicts (one `pass_rate/<task>/<criterion>` entry per
criterion) are not printed: `build_trainer` removes transformers' `PrinterCallback`.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

from transformers import TrainerCallback

from agents.decisions import readable
from agents.repair_ladder import climb_of
from graphs.round_record import AttemptLine, Brains, RoundRecord
from trainer.harness_run import HarnessRun
from trainer.step_metrics import StepMetrics

log = logging.getLogger("harnessrl")

# Warnings that say nothing a HarnessRL user can act on (deprecations inside the libraries we call, or
# advice about settings the trainer chose on purpose). Everything else still shows.
_QUIET_MODULES = r"(transformers|trl|accelerate|peft|torch|datasets|langchain\w*|langgraph\w*|chromadb|httpx)(\.|$)"


def quiet_library_warnings() -> None:
    """Hide library FutureWarnings/DeprecationWarnings and transformers' advisory log lines."""
    for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=_QUIET_MODULES)
    # transformers/TRL log advice ("generation flags are not valid...") at WARNING through their own loggers.
    for name in ("transformers", "trl", "accelerate", "peft"):
        logging.getLogger(name).setLevel(logging.ERROR)


def step_line(step: int, max_steps: int, record: StepMetrics, version: int, step_s: float) -> str:
    """`step 5/10  reward 0.412  dead 0.50  harness v3  31.2 s` (+ the pause when a round ran)."""
    parts = [
        f"step {step}/{max_steps}",
        "reward -" if record.reward is None else f"reward {record.reward:.3f}",
        "dead -" if record.dead_share is None else f"dead {record.dead_share:.2f}",
        f"harness v{version}",
        f"{step_s:.1f} s",
    ]
    if record.judge_warnings:
        parts.append(f"judge warnings {record.judge_warnings}")
    if record.judge_flagged:
        parts.append("JUDGE FLAGGED")
    return "  ".join(parts)


def scoring_flag_lines(step: int, record: StepMetrics) -> dict[str, str]:
    """Warnings, by flag, for a step whose responses could not be scored or whose criteria were skipped.

    The flags are "unscoreable" and "skipped" (`trainer/reward.py` flags them above
    `harness.max_judge_failure_share`).
    """
    lines = {}
    if record.unscoreable_flagged:
        lines["unscoreable"] = (
            f"step {step}: {record.unscoreable} response(s) could not be scored "
            f"(no positive criterion decided: no judge, or the judge failed) and got reward 0; "
            f"check the judge"
        )
    if record.skipped_flagged:
        lines["skipped"] = (
            f"step {step}: {record.criteria_skipped} verdict(s) skipped: text-only "
            f"criteria without an LLM judge (evolver.judge_model) are never scored"
        )
    return lines


def judge_flag_line(step: int, record: StepMetrics) -> str | None:
    """The warning for a step flagged in `trainer/reward.py` (too many verdicts left out), else None."""
    if not record.judge_flagged:
        return None
    return (
        f"step {step}: judge failed on {record.judge_left_out} verdict(s) "
        f"({record.judge_left_out_share:.0%} of the step's, over "
        f"harness.max_judge_failure_share): they are left out, so this step's rewards rest on fewer criteria; "
        f"check the judge server"
    )


def _txt(x: Any) -> str:
    return "-" if x is None or x == "" else str(x)


BRAIN_WORDS = {"rules": "rules", "llm": "LLM", "llm_fallback": "rules (LLM failed)"}


def brain_line(brains: Brains) -> str:
    """Which brains decided one event (`graphs.round_record.Brains`), as one line.

    The line reads like `attributor LLM, proposer LLM/rules (LLM failed), critic LLM`; "" when the rule brains
    made every decision (nothing to say) or nothing was recorded.
    """
    roles = {"attributor": [brains.attributor], "proposer": brains.proposer, "critic": brains.critic}
    if all(s in (None, "rules") for seq in roles.values() for s in seq):
        return ""
    line = ", ".join(
        f"{role} {'/'.join(BRAIN_WORDS.get(str(s), str(s)) for s in seq)}"
        for role, seq in roles.items()
        if any(s is not None for s in seq)
    )
    return line + (f"; {brains.llm_errors[0][:160]}" if brains.llm_errors else "")


def round_lines(step: int, record: RoundRecord, before: int, after: int, pause_s: float, n_events: int) -> list[str]:
    """A round as sentences.

    The verdicts on earlier rounds' provisional updates (agents/decisions.py), what happened to each event (and
    its batched repair), then a failed round's error. Missing values read "-".
    """
    lines = [
        f"evolver round after step {step}: {n_events} event(s), harness v{before} -> v{after}, pause {pause_s:.1f} s"
    ]
    if pre := record.preflight:
        lines[0] = lines[0].replace("evolver round after step 0", "pre-flight round before step 1", 1)
        lines.append(
            f"  pre-flight: probed {len(pre.probed)} of {_txt(pre.pool_size)} pool tasks on the "
            f"initial policy in {pre.probe_s:.1f} s; dead: {', '.join(pre.dead) or 'none'}"
        )
        if pre.dead_by_chance:
            lines.append(
                f"  pre-flight: a dead probe group on {', '.join(pre.dead_by_chance)} left unrepaired: most of the "
                "task's probe groups vary"
            )
    if values := record.event_values:
        lines.append(
            "  slots by the dead groups a repair could revive: "
            + "; ".join(
                f"{eid} {v.value:.1f} (dead rate {v.dead_rate:.2f} x {v.groups_left:.1f} groups left)"
                for eid, v in values.items()
            )
        )
    if live := record.live_dropped:
        lines.append(
            f"  dropped {len(live)} dead group(s) seen once on a task whose recent groups are mostly live "
            f"(trainer.round_events.live_check; the detector fires again if the task stays dead): {', '.join(live)}"
        )
    if (prov := record.provisional) is not None:
        lines += [f"  provisional {v.line}" for v in prov.verdicts]
        if prov.error:
            lines.append(f"  provisional: grading failed, updates stay provisional: {prov.error}")
        if prov.waiting:
            lines.append(
                f"  provisional: {prov.waiting} accepted update target(s) wait for {prov.window} training groups"
            )
    for r in record.reports:
        last = r.attempts[-1] if r.attempts else AttemptLine()
        reasons = (last.decision.reasons if last.decision is not None else []) or last.reasons or []
        what = last.template or "no candidate"
        why = f" ({'; '.join(readable(str(x)) for x in reasons[:2])})" if reasons else ""
        version = f" v{r.committed_version}" if r.committed_version is not None else ""
        # A fallback is a sampling change made after the attributed interface's candidates were all refused.
        how = f" (sampling) after {len(r.attempts)} candidate(s) on" if r.decision == "fallback" else " on"
        # A dead task's climb to another interface within the round (agents/repair_ladder.py) follows its first part.
        climbed = " (climbed from the interface above)" if r.event_id and climb_of(r.event_id)[1] else ""
        lines.append(
            f"  {_txt(r.task_id)}: {_txt(r.failure_type)}{climbed} -> {_txt(r.decision)}{version}{how} "
            f"{_txt(r.interface)}: {what}{why}"
        )
        if brains := brain_line(r.brains):
            lines.append(f"    brains: {brains}")
        gen = r.generalised
        if gen is not None and gen.targets:
            at = f" v{gen.version}" if gen.version is not None else ""
            why_gen = (list(gen.verdict.reasons) if gen.verdict is not None else []) or ([gen.note] if gen.note else [])
            lines.append(
                f"    batched to {', '.join(gen.targets)}: {_txt(gen.decision)}{at}"
                + (f" ({'; '.join(str(x) for x in why_gen[:2])})" if why_gen else "")
            )
    if record.error:
        lines.append(f"  round failed, harness left at v{before}: {record.error}")
    elif record.skipped:
        lines.append(f"  {record.skipped}")
    return lines


class ConsoleProgress(TrainerCallback):
    """Prints one line per step on the main process (logging, so it interleaves with round summaries)."""

    def __init__(self, run: HarnessRun, enabled: bool = True) -> None:
        self.run = run
        self.enabled = enabled
        self._t0 = time.perf_counter()
        self._skipped_said = False

    def on_step_begin(self, args, state, control, **kwargs):
        self._t0 = time.perf_counter()
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.enabled and state.is_world_process_zero:
            record = StepMetrics.model_validate(self.run.last_record)
            log.info(
                step_line(
                    state.global_step, state.max_steps, record, self.run.state.version, time.perf_counter() - self._t0
                )
            )
            if flag := judge_flag_line(state.global_step, record):
                log.warning(flag)
            for kind, line in scoring_flag_lines(state.global_step, record).items():
                # Skipped criteria the config allows (allow_unjudged_criteria) are said once, then summed in the report.
                if kind == "skipped" and self.run.cfg.harness.allow_unjudged_criteria:
                    if self._skipped_said:
                        continue
                    self._skipped_said = True
                    line += " (harness.allow_unjudged_criteria: said once; the report sums them)"
                log.warning(line)
        return control
