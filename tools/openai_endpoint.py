"""Frozen policy behind an OpenAI-compatible HTTP server (vLLM, including the CPU build).

Plain httpx against ``/v1/chat/completions`` so every request has explicit timeouts and a bounded
number of retries: an endpoint that is down or hangs raises `EndpointError` within about
``timeout * (retries + 1)`` plus the backoff sleeps, never hangs the trainer's pause.

For LoRA runs the trainer hot-loads each checkpoint's adapter under a per-step name
(``load_lora_adapter``; the server needs ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and
``--enable-lora``) and samples through ``with_model(name)``, so the critic hits exactly that checkpoint.
Use a new adapter folder per checkpoint: vLLM's prefix-cache key includes the adapter path
(reloading from the same folder does not invalidate cached prefix blocks).
"""

from __future__ import annotations

import copy
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tools.endpoint import EndpointError, validate_request

# Bodies quoted in error messages are cut to this many characters (a 500 page can be huge).
_SNIPPET = 300


class OpenAIEndpoint:
    """`PolicyEndpoint` over an OpenAI-compatible chat-completions server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "EMPTY",
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        concurrency: int = 8,
    ):
        if retries < 0 or timeout <= 0 or concurrency < 1:
            raise ValueError(
                f"need retries >= 0, timeout > 0, concurrency >= 1; got {retries}, {timeout}, {concurrency}"
            )
        # Accept both "http://host:port" and the "/v1" form that ChatOpenAI uses.
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.model = model
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.concurrency = int(concurrency)
        self._client = httpx.Client(
            base_url=self.root,
            timeout=httpx.Timeout(self.timeout),
            headers={"Authorization": f"Bearer {api_key}"},
            limits=httpx.Limits(max_connections=self.concurrency),
        )

    @property
    def name(self) -> str:
        return f"openai:{self.model}@{self.root}"

    def __repr__(self) -> str:
        return f"OpenAIEndpoint({self.root!r}, model={self.model!r})"

    # ---------------------------------------------------------------------------------- sampling

    def with_model(self, model: str) -> OpenAIEndpoint:
        """The same server under another served name (e.g. a hot-loaded adapter).

        A view: it shares the connection pool, so closing either endpoint closes both. That lets callers
        keep only the adapter view (``ep = ep.with_model(name)``) and still close it.
        """
        other = copy.copy(self)
        other.model = model
        return other

    def sample(
        self,
        messages_batch: list[list[dict]],
        n: int = 1,
        max_tokens: int = 64,
        temperature: float = 1.0,
        seed: int | None = None,
        model: str | None = None,
    ) -> list[list[str]]:
        """One list of ``n`` completions per conversation; requests for the batch run concurrently.

        Conversation ``i`` gets seed ``seed + i`` so different prompts draw different but reproducible
        streams. ``model`` overrides the served name for this call (e.g. an adapter name).
        """
        validate_request(messages_batch, n, max_tokens, temperature)
        target = model or self.model

        def one(i: int) -> list[str]:
            body: dict[str, Any] = {
                "model": target,
                "messages": messages_batch[i],
                "n": n,
                "max_tokens": max_tokens,
                "temperature": float(temperature),
                "top_p": 1.0,
            }
            if seed is not None:
                body["seed"] = seed + i
            data = self._request("POST", "/v1/chat/completions", body, idempotent=True)
            return _completions(data, n, where=f"conversation {i} ({target})")

        if len(messages_batch) <= 1:
            return [one(i) for i in range(len(messages_batch))]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(messages_batch))) as pool:
            return list(pool.map(one, range(len(messages_batch))))

    # ---------------------------------------------------------------------------------- admin

    def models(self) -> list[str]:
        """Served model ids (the base model and any loaded LoRA adapters)."""
        data = self._request("GET", "/v1/models", None, idempotent=True)
        try:
            return [m["id"] for m in data["data"]]
        except (KeyError, TypeError) as e:
            raise EndpointError(f"GET {self.root}/v1/models: unexpected reply {str(data)[:_SNIPPET]!r}") from e

    def load_lora_adapter(self, name: str, path: str | Path, load_inplace: bool = False) -> None:
        """Hot-load the adapter folder ``path`` under ``name``; then sample with ``with_model(name)``."""
        path = Path(path).resolve()
        if not (path / "adapter_config.json").is_file():
            raise EndpointError(
                f"LoRA adapter folder {path} has no adapter_config.json (save it with peft's save_pretrained)"
            )
        body: dict[str, Any] = {"lora_name": name, "lora_path": str(path)}
        if load_inplace:
            body["load_inplace"] = True
        # Not idempotent: a retry after a timed-out load would answer 400 "already loaded".
        self._request("POST", "/v1/load_lora_adapter", body, idempotent=False, expect_json=False)

    def unload_lora_adapter(self, name: str) -> None:
        self._request("POST", "/v1/unload_lora_adapter", {"lora_name": name}, idempotent=False, expect_json=False)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------------- transport

    def _request(self, method: str, path: str, body: dict | None, idempotent: bool, expect_json: bool = True) -> Any:
        """One HTTP call with bounded retries.

        Retried: connection failures always; timeouts and 5xx only for idempotent calls. Never retried:
        4xx (the request itself is wrong) and malformed bodies (a server bug, not a transient state).
        """
        url = f"{self.root}{path}"
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                status, text = self._send(method, path, body)
            except httpx.ConnectError as e:
                last = f"cannot connect ({e}); is the server running at {self.root}?"
                continue
            except (httpx.TimeoutException, _DeadlineExceeded) as e:
                last = f"no complete reply within {self.timeout:g} s ({type(e).__name__})"
                if idempotent:
                    continue
                break
            except httpx.HTTPError as e:  # protocol errors, closed connections mid-reply
                last = f"{type(e).__name__}: {e}"
                if idempotent:
                    continue
                break
            if status >= 500:
                last = f"HTTP {status}: {text[:_SNIPPET]!r}"
                if idempotent:
                    continue
                break
            if status >= 400:
                raise EndpointError(f"{method} {url} -> HTTP {status}: {text[:_SNIPPET]!r}")
            if not expect_json:
                return text
            try:
                return json.loads(text)
            except json.JSONDecodeError as e:
                raise EndpointError(
                    f"{method} {url}: reply is not valid JSON ({e.msg} at char {e.pos}): {text[:_SNIPPET]!r}"
                ) from e
        attempts = attempt + 1
        raise EndpointError(f"{method} {url} failed after {attempts} attempt{'s' * (attempts > 1)}: {last}")

    def _send(self, method: str, path: str, body: dict | None) -> tuple[int, str]:
        # httpx's timeout bounds each read, not the whole reply: stream and enforce a wall-clock deadline
        # too, so a server that trickles bytes cannot stretch one attempt much past `timeout`.
        deadline = time.monotonic() + self.timeout
        with self._client.stream(method, path, json=body) as resp:
            chunks = []
            for chunk in resp.iter_bytes():
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _DeadlineExceeded()
            return resp.status_code, b"".join(chunks).decode("utf-8", errors="replace")


class _DeadlineExceeded(Exception):
    """The reply kept arriving past the per-attempt deadline."""


def _completions(data: Any, n: int, where: str) -> list[str]:
    """Extract ``n`` completion texts, ordered by choice index, from a chat-completions reply."""
    try:
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        texts = [c["message"]["content"] or "" for c in choices]
    except (KeyError, TypeError, AttributeError) as e:
        raise EndpointError(f"{where}: reply has no choices[].message.content: {str(data)[:_SNIPPET]!r}") from e
    if len(texts) != n:
        raise EndpointError(f"{where}: asked for n={n} completions, got {len(texts)}")
    return texts
