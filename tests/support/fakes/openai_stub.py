"""A small OpenAI-compatible HTTP server for tests: real HTTP, scripted replies, programmable failures.

Stdlib only (``ThreadingHTTPServer`` on 127.0.0.1, free port). It stands in for an LLM behind
``/v1/chat/completions`` so ``OpenAIEndpoint`` and LangChain's ``ChatOpenAI`` (judge, brains) are
exercised over the wire, including timeouts, 500s and malformed bodies.

Usage (the ``openai_stub`` fixture in ``tests/conftest.py`` starts and stops one per test)::

    stub.script(["reply 1", "reply 2"])        # FIFO: each *choice* takes the next reply
    stub.script([{"score": 1, "reason": "ok"}]) # a plain dict becomes JSON content (with_structured_output)
    stub.script([{"content": None, "tool_calls": [tool_call("add", {"a": 1, "b": 2})]}])  # a message dict
    stub.responder = lambda request: "text"      # used when the script queue is empty; called once per choice
    stub.fail_next(status=500, times=2)          # the next 2 requests get HTTP 500, then normal replies
    stub.malformed_next(times=1)                 # the next request gets a 200 with a body that is not JSON
    stub.delay = 5.0                             # every request waits 5 s before answering (a hanging server)
    stub.requests                                # every chat request body received, in order
    stub.lora_adapters                           # {name: path} loaded through /v1/load_lora_adapter

    ChatOpenAI(base_url=stub.base_url, api_key="x", model="stub", max_retries=0, timeout=5)

Reply values: a ``str`` is the message content; a dict with ``content`` or ``tool_calls`` is the
assistant message itself (tool-call ``arguments`` given as dicts are JSON-encoded, ids filled in); any
other dict is JSON-encoded as the content. With no script and no responder the reply is
``"stub reply <k>"`` for choice k. ``"stream": true`` requests get the same reply as SSE chunks.
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | dict
Responder = Callable[[dict], Reply]


def tool_call(name: str, args: dict, call_id: str | None = None) -> dict:
    """An OpenAI tool call entry for scripted replies."""
    return {
        "id": call_id or f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


class OpenAIStub:
    """Scriptable OpenAI-compatible server; see the module docstring for the API."""

    def __init__(self, model: str = "stub"):
        self.model = model
        self.responder: Responder | None = None
        self.delay = 0.0
        self.requests: list[dict] = []
        self.lora_adapters: dict[str, str] = {}
        self._replies: collections.deque[Reply] = collections.deque()
        self._failures: collections.deque[tuple[int, str]] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ programming the stub

    def script(self, replies: list[Reply]) -> None:
        """Queue replies; each choice of each request takes the next one."""
        with self._lock:
            self._replies.extend(replies)

    def fail_next(
        self, status: int = 500, times: int = 1, body: str = '{"error": {"message": "stub failure"}}'
    ) -> None:
        """The next ``times`` requests (any route) answer ``status`` with ``body``."""
        with self._lock:
            self._failures.extend([(status, body)] * times)

    def malformed_next(self, times: int = 1) -> None:
        """The next ``times`` requests answer 200 with a truncated, non-JSON body."""
        self.fail_next(status=200, times=times, body='{"id": "chatcmpl-broken", "choices": [')

    @property
    def pending_replies(self) -> int:
        return len(self._replies)

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        assert self._server is not None, "stub not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        """The ``/v1`` URL that OpenAI clients and ``ChatOpenAI(base_url=...)`` expect."""
        return f"{self.url}/v1"

    def start(self) -> OpenAIStub:
        handler = type("Handler", (_Handler,), {"stub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: the OS picks a free one
        self._server.daemon_threads = True  # a handler stuck in `delay` must not block shutdown
        # Short poll interval: shutdown() waits up to one interval, and tests start one stub each.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in `delay`
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ request handling (handler threads)

    def _next_failure(self) -> tuple[int, str] | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    def _reply(self, request: dict, k: int) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return f"stub reply {k}"

    def _chat(self, request: dict) -> dict:
        with self._lock:
            self.requests.append(request)
        n = int(request.get("n") or 1)
        choices = []
        for k in range(n):
            message = _as_message(self._reply(request, k))
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            choices.append({"index": k, "message": message, "finish_reason": finish, "logprobs": None})
        prompt_words = sum(len(str(m.get("content") or "").split()) for m in request.get("messages", []))
        completion_words = sum(len(str(c["message"].get("content") or "").split()) for c in choices)
        return {
            "id": f"chatcmpl-stub-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": completion_words,
                "total_tokens": prompt_words + completion_words,
            },
        }


def _as_message(reply: Reply) -> dict:
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    if not isinstance(reply, dict):
        raise TypeError(f"stub reply must be str or dict, got {type(reply).__name__}")
    if "content" not in reply and "tool_calls" not in reply:
        return {"role": "assistant", "content": json.dumps(reply)}
    message = {"role": "assistant", "content": None, **reply}
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = dict(call["function"])
        if not isinstance(fn.get("arguments"), str):
            fn["arguments"] = json.dumps(fn.get("arguments") or {})
        calls.append({"id": call.get("id") or f"call_{i}", "type": "function", "function": fn})
    if calls:
        message["tool_calls"] = calls
    else:
        message.pop("tool_calls", None)
    return message


class _Handler(BaseHTTPRequestHandler):
    stub: OpenAIStub
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers (httpx pools connections)

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, body: str, content_type: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, json.dumps({"error": {"message": message, "type": "BadRequestError", "code": status}}))

    def _prelude(self) -> bool:
        """Apply delay and scripted failures; True when the request was already answered."""
        if self.stub.delay and self.stub._stopping.wait(self.stub.delay):
            return True  # server stopping: drop the request
        failure = self.stub._next_failure()
        if failure is not None:
            self._send(*failure)
            return True
        return False

    def do_GET(self) -> None:
        if self._prelude():
            return
        if self.path.rstrip("/") != "/v1/models":
            return self._error(404, f"no route GET {self.path}")
        data = [{"id": self.stub.model, "object": "model", "owned_by": "stub", "root": self.stub.model, "parent": None}]
        data += [
            {"id": name, "object": "model", "owned_by": "stub", "root": path, "parent": self.stub.model}
            for name, path in self.stub.lora_adapters.items()
        ]
        self._send(200, json.dumps({"object": "list", "data": data}))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)  # read before any failure reply so keep-alive stays in sync
        if self._prelude():
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError as e:
            return self._error(400, f"request body is not JSON: {e}")
        route = self.path.rstrip("/")
        if route == "/v1/chat/completions":
            try:
                reply = self.stub._chat(request)
            except Exception as e:  # a broken test responder: surface it as a 500 with the reason
                return self._error(500, f"stub responder failed: {type(e).__name__}: {e}")
            if request.get("stream"):
                return self._stream(reply)
            return self._send(200, json.dumps(reply))
        if route == "/v1/load_lora_adapter":
            name, path = request.get("lora_name"), request.get("lora_path")
            if not name or not path:
                return self._error(400, "lora_name and lora_path are required")
            if name in self.stub.lora_adapters and not request.get("load_inplace"):
                return self._error(
                    400,
                    f"The lora adapter '{name}' has already been loaded. If you want to load "
                    f"the adapter in place, set 'load_inplace' to True.",
                )
            self.stub.lora_adapters[name] = path
            return self._send(200, f"Success: LoRA adapter '{name}' added successfully.", "text/plain")
        if route == "/v1/unload_lora_adapter":
            name = request.get("lora_name")
            if self.stub.lora_adapters.pop(name, None) is None:
                return self._error(404, f"The lora adapter '{name}' cannot be found.")
            return self._send(200, f"Success: LoRA adapter '{name}' removed successfully.", "text/plain")
        self._error(404, f"no route POST {self.path}")

    def _stream(self, reply: dict) -> None:
        """Server-sent events: one delta chunk per choice, then a finish chunk and [DONE]."""
        base = {
            "id": reply["id"],
            "object": "chat.completion.chunk",
            "created": reply["created"],
            "model": reply["model"],
        }
        events = []
        for c in reply["choices"]:
            delta = {k: v for k, v in c["message"].items() if v is not None}
            if "tool_calls" in delta:
                delta["tool_calls"] = [{**tc, "index": i} for i, tc in enumerate(delta["tool_calls"])]
            events.append({**base, "choices": [{"index": c["index"], "delta": delta, "finish_reason": None}]})
            events.append(
                {**base, "choices": [{"index": c["index"], "delta": {}, "finish_reason": c["finish_reason"]}]}
            )
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send(200, body, "text/event-stream")
