"""The live infrastructure an evolver run uses (harness store, memory, frozen policy, judge) and its registry.

Two ways to get a `RunServices`:

- in process, the trainer builds one around live objects (its own model through a `LocalEndpoint`,
  the run's store, memory and judge) with `live_services(context, ...)` and calls
  `register_services(key, services)`; the evolver's context carries only the key
  (`EvolverContext.services_key`);
- on a LangGraph server (or `harnessrl evolve`) nothing live can be handed over, so
  `services_from_settings` builds them from plain strings (run folder, memory location, policy spec,
  judge model). `get_services` caches what it builds, one instance per settings per process, and shares
  the parts across settings: one memory per location (the persistent memory holds an exclusive folder
  lock, so opening it twice would fail) and one endpoint per policy spec. A training run served by
  `langgraph dev` sends a new `local:<run_dir>/frozen/step-N` folder every round: each is loaded once,
  and only the last `KEEP_LOCAL_POLICIES` stay in memory.

Policy specs: `openai:<base_url>#<served model name>` (a vLLM or other OpenAI-compatible server) and
`local:<folder>` (transformers in this process; a model folder or a LoRA adapter folder, see
`LocalEndpoint.from_path`). The bare `local` means "the trainer's live model" and only exists through
`register_services`.

The sampling numbers the agents' tools use (`max_tokens`, `temperature`, `seed`) are always
the context's: `live_services` copies them from the `EvolverContext`, and `get_services` reads them from
the context's settings, so a tool's probe rollouts and the critic's measurement sample alike. A value not
given takes `EvolverContext`'s default (no second copy of them here).

A judge model string is resolved by the `chat_model_factory` the caller passes in (the graph passes
`agents.chat_models.load_chat_model`; tests pass fakes).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.context import EvolverContext
from harness.detector import DetectorConfig
from harness.store import HarnessStore
from tools.endpoint import PolicyEndpoint
from tools.judge import Judge
from tools.probes import ProbeCache

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from memory.store import TrainingMemory

ChatModelFactory = Callable[..., "BaseChatModel"]
# The context's defaults are the only ones: services built without a value sample as a default context would.
_DEFAULT = EvolverContext()


@dataclass
class RunServices:
    """Everything an evolver run touches that is not a plain value, plus the context's sampling numbers.

    The agents' tools draw rollouts with the sampling numbers from here (max tokens, temperature, seed);
    `live_services` and `get_services` copy them from the context. How many rollouts a measurement draws is the
    critic's (`agents.critic.measure_settings`, from the context), not the services'.
    """

    store: HarnessStore
    endpoint: PolicyEndpoint
    judge: Judge
    memory: TrainingMemory | None = None
    detector_config: DetectorConfig = field(default_factory=DetectorConfig)
    max_tokens: int = _DEFAULT.max_tokens
    temperature: float = _DEFAULT.temperature
    seed: int = _DEFAULT.seed
    # Control probes drawn once per round and shared by every candidate (keyed by step: a new round's
    # policy never reuses an old round's texts, even in a long-lived server process).
    probe_cache: ProbeCache = field(default_factory=ProbeCache)


_REGISTRY: dict[str, RunServices] = {}
_LOCK = threading.Lock()
# Built from settings (all guarded by _LOCK): whole RunServices by settings, and their shared parts.
_BUILT: OrderedDict[str, RunServices] = OrderedDict()
_ENDPOINTS: OrderedDict[str, PolicyEndpoint] = OrderedDict()
_MEMORIES: dict[tuple[str, str], TrainingMemory | None] = {}
# A frozen policy folder is used by one training round (two with a retry); older models only cost memory.
KEEP_LOCAL_POLICIES = 2

# Settings `get_services` reads from a mapping (an `EvolverContext.to_dict()` has more keys: ignored).
_SETTINGS = (
    "run_dir",
    "memory_location",
    "memory_embedding",
    "policy",
    "judge_model",
    "base_url",
    "api_key_env",
    "max_tokens",
    "temperature",
    "seed",
)


def live_services(
    ctx: EvolverContext,
    *,
    store: HarnessStore,
    endpoint: PolicyEndpoint,
    judge: Judge,
    memory: TrainingMemory | None,
    detector_config: DetectorConfig,
) -> RunServices:
    """RunServices around live objects with the sampling numbers of `ctx` (what the critic measures with)."""
    return RunServices(
        store=store,
        endpoint=endpoint,
        judge=judge,
        memory=memory,
        detector_config=detector_config,
        max_tokens=ctx.max_tokens,
        temperature=ctx.temperature,
        seed=ctx.seed,
    )


def register_services(key: str, services: RunServices) -> None:
    """Make live `services` available under `key` (replacing any earlier registration)."""
    if not key:
        raise ValueError("services key must be a non-empty string")
    with _LOCK:
        _REGISTRY[key] = services


def unregister_services(key: str) -> RunServices | None:
    with _LOCK:
        return _REGISTRY.pop(key, None)


def parse_policy(spec: str) -> PolicyEndpoint:
    """An endpoint from a policy spec (see the module docstring)."""
    kind, sep, rest = spec.partition(":")
    if kind == "openai" and sep:
        base_url, hash_, model = rest.rpartition("#")
        if not hash_ or not base_url or not model:
            raise ValueError(f"policy spec {spec!r}: expected openai:<base_url>#<model>")
        from tools.openai_endpoint import OpenAIEndpoint

        return OpenAIEndpoint(base_url=base_url, model=model)
    if kind == "local" and sep and rest:
        path = Path(rest)
        if not path.is_dir():
            raise ValueError(f"policy spec {spec!r}: model folder {path} does not exist")
        from tools.local_endpoint import LocalEndpoint

        return LocalEndpoint.from_path(path)
    if spec == "local":
        raise ValueError(
            "policy 'local' is the trainer's live model: it is only available in process through "
            "register_services (pass services_key), not from settings; use local:<model folder> "
            "or openai:<base_url>#<model>"
        )
    raise ValueError(f"policy spec {spec!r}: expected openai:<base_url>#<model> or local:<model folder>")


def _open_memory(memory: str, embedding: str) -> TrainingMemory | None:
    if memory in ("", "none"):
        return None
    from memory.store import TrainingMemory

    if memory.startswith(("http://", "https://")):
        hostport = memory.split("://", 1)[1].rstrip("/")
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"memory URL {memory!r}: expected http://host:port")
        return TrainingMemory.http(host, int(port), embedding=embedding)
    return TrainingMemory.persistent(memory, embedding=embedding)


def _shared_endpoint(policy: str) -> PolicyEndpoint:
    """The endpoint for `policy`, built once.

    Beyond `KEEP_LOCAL_POLICIES` local models the oldest is dropped (with the cached services that hold it, so its
    weights are freed).
    """
    if policy in _ENDPOINTS:
        _ENDPOINTS.move_to_end(policy)
        return _ENDPOINTS[policy]
    endpoint = parse_policy(policy)
    _ENDPOINTS[policy] = endpoint
    local = [p for p in _ENDPOINTS if p.startswith("local:")]
    for old in local[: max(0, len(local) - KEEP_LOCAL_POLICIES)]:
        dropped = _ENDPOINTS.pop(old)
        for k in [k for k, svc in _BUILT.items() if svc.endpoint is dropped]:
            del _BUILT[k]
    return endpoint


def _shared_memory(memory: str, embedding: str) -> TrainingMemory | None:
    key = (memory, embedding)
    if key not in _MEMORIES:
        _MEMORIES[key] = _open_memory(memory, embedding)
    return _MEMORIES[key]


def services_from_settings(
    *,
    run_dir: str,
    memory_location: str = _DEFAULT.memory_location,
    memory_embedding: str = _DEFAULT.memory_embedding,
    policy: str,
    judge_model: str = _DEFAULT.judge_model,
    base_url: str | None = _DEFAULT.base_url,
    api_key_env: str = _DEFAULT.api_key_env,
    chat_model_factory: ChatModelFactory | None = None,
    detector_config: DetectorConfig | None = None,
    max_tokens: int = _DEFAULT.max_tokens,
    temperature: float = _DEFAULT.temperature,
    seed: int = _DEFAULT.seed,
    share: bool = False,
) -> RunServices:
    """Build services from plain values.

    The harness store is `run_dir/harness` and must be initialised. `base_url` and `api_key_env` are the judge's
    endpoint (`agents.chat_models.judge_settings`).

    `share=True` (what `get_services` uses; call it under `_LOCK`) reuses this process's endpoint and memory
    already built for the same policy spec / memory location instead of opening new ones.
    """
    store = HarnessStore(Path(run_dir) / "harness")
    if not store.versions():
        raise FileNotFoundError(
            f"no harness versions under {store.root}; initialise the run first (harnessrl train, or HarnessStore.init)"
        )
    llm = None
    if judge_model != "rules":
        if chat_model_factory is None:
            raise ValueError(
                f"judge_model {judge_model!r} needs a chat_model_factory "
                "(agents.chat_models.load_chat_model) to resolve it"
            )
        llm = chat_model_factory(judge_model, base_url=base_url, api_key_env=api_key_env)
    if share:
        endpoint, mem = _shared_endpoint(policy), _shared_memory(memory_location, memory_embedding)
    else:
        endpoint, mem = parse_policy(policy), _open_memory(memory_location, memory_embedding)
    return RunServices(
        store=store,
        endpoint=endpoint,
        judge=Judge(llm),
        memory=mem,
        detector_config=detector_config or DetectorConfig(),
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
    )


def get_services(
    key_or_settings: str | Mapping[str, Any], *, chat_model_factory: ChatModelFactory | None = None
) -> RunServices:
    """Registered services by key, or services built (once per process) from a settings mapping.

    A mapping with a registered `services_key` returns the registered services; otherwise the known
    settings (`_SETTINGS`) are picked from it, so an `EvolverContext.to_dict()` can be passed as is.
    """
    if isinstance(key_or_settings, str):
        with _LOCK:
            found = _REGISTRY.get(key_or_settings)
            known = sorted(_REGISTRY)
        if found is None:
            raise KeyError(
                f"no services registered under {key_or_settings!r} in this process (registered: {known}); "
                "the trainer registers them before an in-process evolver round"
            )
        return found
    key = key_or_settings.get("services_key")
    if key:
        with _LOCK:
            if key in _REGISTRY:
                return _REGISTRY[key]
    settings = {k: v for k, v in key_or_settings.items() if k in _SETTINGS and v is not None}
    missing = [k for k in ("run_dir", "policy") if not settings.get(k)]
    if missing:
        raise ValueError(
            f"services settings need {missing} (or a registered services_key); got keys {sorted(key_or_settings)}"
        )
    cache_key = json.dumps(settings, sort_keys=True, default=str)
    # Under the lock while building: concurrent graph nodes of one round wait for the one model load.
    with _LOCK:
        if cache_key not in _BUILT:
            _BUILT[cache_key] = services_from_settings(**settings, chat_model_factory=chat_model_factory, share=True)
        _BUILT.move_to_end(cache_key)
        return _BUILT[cache_key]
