"""Run-time context of the harness evolver: everything the caller picks, as plain values.

`EvolverContext` is the LangGraph `context_schema` of `graphs/evolver.py`. It holds only strings,
numbers, booleans and lists of strings so that a LangGraph server can receive it as a run's `context` (Studio renders
it as the editable assistant configuration) and `harnessrl evolve` can build it from flags. Live
objects (the harness store, memory, frozen-policy endpoint, judge) are resolved from these values by
`graphs.services`; nothing here opens a file or a socket.

This dataclass is the one declaration of every evolver knob, with its default and help text: a training
config's `evolver:` section is typed by it (`trainer/config.py`), `harnessrl evolve` builds its flags from
its fields (`trainer/commands/evolve.py`) and Studio shows the same defaults and descriptions. The
`PER_RUN` fields say where one run happens; each caller fills them, they are no config settings.

Each model role is a `provider:model` string resolved in `agents/chat_models.py`; the value `rules`
selects that agent's deterministic rule brain (the offline default and an ablation baseline). Each LLM role
(`LLM_ROLES`) may name its own OpenAI-compatible server and API-key variable (`<role>_base_url`,
`<role>_api_key_env`); unset, it uses the shared `base_url` / `api_key_env` (`agents.chat_models.role_endpoint`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from harness.types import INTERFACES
from tools.measure_settings import SAMPLE_K, SAMPLE_K_MAX

RULES = "rules"
# The roles that may be LLMs; each can have its own endpoint (`<role>_base_url`, `<role>_api_key_env`).
LLM_ROLES = ("attributor", "proposer", "critic", "judge")
# Where one run happens (its folder, memory, frozen policy, live services): the trainer fills them for each round,
# `harnessrl evolve` from its snapshot flags; a config's `evolver:` section refuses them.
PER_RUN = ("run_dir", "memory_location", "policy", "services_key")


def _f(default: Any, help: str) -> Any:
    if isinstance(default, list):
        return field(default_factory=lambda d=default: list(d), metadata={"description": help})
    return field(default=default, metadata={"description": help})


@dataclass(kw_only=True)
class EvolverContext:
    """What one evolver run uses. Defaults are the offline CPU setup (rule brains, local memory)."""

    # -- brains --------------------------------------------------------------------------------
    attributor_model: str = _f(RULES, "'rules' or provider:model (e.g. openai:Qwen/Qwen3-8B) for the attributor")
    proposer_model: str = _f(RULES, "'rules' or provider:model for the proposer")
    critic_model: str = _f(RULES, "'rules' or provider:model for the critic's review (it may veto, never accept)")
    base_url: str | None = _f(None, "OpenAI-compatible base URL for the brains (e.g. a vLLM server's /v1)")
    api_key_env: str = _f("OPENAI_API_KEY", "environment variable holding the brains' API key ('EMPTY' if unset)")
    # Per-role endpoints (a proposer on one server, critic and judge on another); None: the shared values above.
    attributor_base_url: str | None = _f(None, "the attributor's own OpenAI-compatible base URL (None: base_url)")
    attributor_api_key_env: str | None = _f(None, "the attributor's API-key variable (None: api_key_env)")
    proposer_base_url: str | None = _f(None, "the proposer's own OpenAI-compatible base URL (None: base_url)")
    proposer_api_key_env: str | None = _f(None, "the proposer's API-key variable (None: api_key_env)")
    critic_base_url: str | None = _f(None, "the critic's own OpenAI-compatible base URL (None: base_url)")
    critic_api_key_env: str | None = _f(None, "the critic's API-key variable (None: api_key_env)")
    judge_base_url: str | None = _f(None, "the judge's own OpenAI-compatible base URL (None: base_url)")
    judge_api_key_env: str | None = _f(None, "the judge's API-key variable (None: api_key_env)")
    llm_timeout_s: float = _f(60.0, "per-call timeout of a brain LLM, seconds")
    llm_max_tokens: int = _f(2048, "max tokens of one brain LLM answer")
    llm_temperature: float = _f(0.0, "sampling temperature of the brain LLMs")
    max_tool_rounds: int = _f(3, "turns of memory/policy tool calls an LLM brain may make before its answer (0: none)")

    # -- infrastructure (resolved by graphs.services) -------------------------------------------
    run_dir: str = _f("runs/evolve", "run folder holding harness/ (the versioned store)")
    memory_location: str = _f("none", "training memory: a Chroma folder, a http://host:port Chroma server, or 'none'")
    memory_embedding: Literal["minilm", "hash"] = _f(
        "minilm", "embedding of the memory: 'minilm' (bundled, offline) or 'hash' (tests)"
    )
    policy: str = _f("", "frozen-policy endpoint spec understood by graphs.services (e.g. openai:<url>#<model>)")
    judge_model: str = _f(RULES, "'rules' (programmatic checks only) or provider:model for the LLM judge")
    services_key: str | None = _f(None, "key of live services registered in-process (the trainer sets it)")

    # -- critic measurement ----------------------------------------------------------------------
    sample_k: int = _f(SAMPLE_K, "k: rollouts per affected task and side a measurement starts with")
    sample_k_max: int = _f(
        SAMPLE_K_MAX, "cap: the group doubles from sample_k up to this while the critic's test is undecided"
    )
    probe_budget: int | None = _f(
        None,
        "rollouts of the frozen policy this round's measurements may generate, dealt to its lanes in event order "
        "in units of two groups of sample_k (graphs/evolver.py lane_budgets); a candidate whose probes could exceed "
        "its lane's share is refused unmeasured and uncharged (None: no bound; a training run sets what is left of "
        "harness.max_extra_generation)",
    )
    critic_alpha: float = _f(0.1, "error rate of the critic's sequential test (stopping early on noise)")
    # 0.25: a dead-group repair worth its slot turns about one rollout in four into a hit (a mixed group of 4 has
    # one); smaller gains make groups of 4 mixed too rarely to pay for a harness change, and the futility bound of
    # the exact test (tools/sequential.py) is sized for this gain.
    min_rate_gain: float = _f(
        0.25,
        "dead-group repairs: the hit-rate gain over the control the exact test's futility "
        "stop is powered for (a true repair of this size is failed early <= alpha)",
    )
    history_rollouts: int = _f(64, "cached training rollouts per task (newest first) a measurement pools from memory")
    max_tokens: int = _f(48, "max new tokens of each frozen-policy rollout")
    temperature: float = _f(1.0, "sampling temperature of the frozen policy in the critic")
    seed: int = _f(0, "seed of the frozen-policy rollouts (critic and agent tools; candidate and control share it)")
    reward_parts: list[str] = _f(
        [], "reward parts beside the rubric (train.rewards), a JSON object each: the critic's probes use them"
    )

    # -- acceptance thresholds (agents/critic.py documents each rule) ----------------------------
    min_std_gain: float = _f(
        0.05,
        "collapse/flat: a re-scored or reweighted candidate's reward std must exceed the control's by this (a hint "
        "or variant passes the exact hit test instead and needs only a std no lower than the control's)",
    )
    max_mean_drop: float = _f(0.15, "guard: honest (audit-passing) rollouts may lose at most this much reward")
    max_audit_drop: float = _f(0.05, "guard: audit score of the candidate may drop at most this much")
    min_audit_delta: float = _f(0.05, "spurious: corr(reward, audit) or the gamed-rollout reward gap must move by this")
    min_corr_drop: float = _f(0.1, "spurious_length: corr(reward, length) must fall by at least this")
    min_gamed_drop: float = _f(0.1, "stuffing/spurious: mean reward of gamed rollouts must fall by at least this")

    # -- loop --------------------------------------------------------------------------------------
    max_revisions: int = _f(2, "R: a rejected candidate is revised at most this many times, then the fallback")
    require_approval: bool = _f(False, "pause at an approval interrupt before committing an accepted update")
    memory: bool = _f(
        True,
        "ablation: False: the agents read no memory (history, similar cases, repair ladder), generalise is off and "
        "the critic's controls are fresh probes, not cached training groups; a training round in process (or on a "
        "server without harness.memory_url) gets no memory at all (events are still recorded)",
    )
    critic: bool = _f(
        True,
        "ablation: False accepts every valid proposal without measuring it; a fallback then commits unprobed",
    )
    apply_fallback: bool = _f(True, "after R rejected revisions, apply the safe sampling fallback")
    ladder_hops: int = _f(
        1,
        "dead tasks: when every revision on one interface is refused and the repair ladder has a rung on another, "
        "the event climbs to it in the same round, at most this many times (0: it waits for the task's next round)",
    )
    interfaces: list[str] = _f(list(INTERFACES), "interfaces the evolver may update (ablation: leave some out)")
    history_last_n: int = _f(10, "within-task memory records shown to the attributor")
    similar_k: int = _f(5, "cross-task similar cases shown to the attributor")
    generalise_max_tasks: int = _f(
        4,
        "an accepted repair is proposed, as one batched update, for at most this many "
        "other tasks with the same failure signature (0: off, the ablation)",
    )

    def __post_init__(self) -> None:
        for name in ("attributor_model", "proposer_model", "critic_model", "judge_model"):
            value = getattr(self, name)
            if value != RULES and ":" not in value:
                raise ValueError(f"EvolverContext.{name}: expected 'rules' or 'provider:model', got {value!r}")
        if self.max_revisions < 0:
            raise ValueError(f"EvolverContext.max_revisions must be >= 0, got {self.max_revisions}")
        if self.ladder_hops < 0:
            raise ValueError(f"EvolverContext.ladder_hops must be >= 0, got {self.ladder_hops}")
        if self.generalise_max_tasks < 0:
            raise ValueError(f"EvolverContext.generalise_max_tasks must be >= 0, got {self.generalise_max_tasks}")
        if self.max_tool_rounds < 0:
            raise ValueError(f"EvolverContext.max_tool_rounds must be >= 0, got {self.max_tool_rounds}")
        if self.sample_k < 2:
            raise ValueError(f"EvolverContext.sample_k must be >= 2 (std needs two rollouts), got {self.sample_k}")
        if self.sample_k_max < self.sample_k:
            raise ValueError(f"EvolverContext.sample_k_max ({self.sample_k_max}) must be >= sample_k ({self.sample_k})")
        if not 0.0 < self.min_rate_gain <= 1.0:
            raise ValueError(f"EvolverContext.min_rate_gain must be in (0, 1], got {self.min_rate_gain}")
        if self.probe_budget is not None and self.probe_budget < 0:
            raise ValueError(f"EvolverContext.probe_budget must be >= 0 or None, got {self.probe_budget}")
        if self.history_rollouts < 0:
            raise ValueError(f"EvolverContext.history_rollouts must be >= 0, got {self.history_rollouts}")
        if not 0.0 < self.critic_alpha < 1.0:
            raise ValueError(f"EvolverContext.critic_alpha must be in (0, 1), got {self.critic_alpha}")
        unknown = [i for i in self.interfaces if i not in INTERFACES]
        if unknown:
            raise ValueError(f"EvolverContext.interfaces: unknown {unknown}; choose from {list(INTERFACES)}")
        if not self.interfaces:
            raise ValueError(f"EvolverContext.interfaces is empty; enable at least one of {list(INTERFACES)}")

    def enabled_interfaces(self) -> list[str]:
        """Interfaces the evolver may update, in the attributor's preference order."""
        return [i for i in INTERFACES if i in self.interfaces]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_any(cls, value: EvolverContext | dict[str, Any] | None) -> EvolverContext:
        """Accept the dataclass, a plain dict (as a LangGraph server passes it) or None (defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"EvolverContext: unknown fields {unknown}; known: {sorted(known)}")
        return cls(**value)
