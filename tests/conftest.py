"""Shared pytest fixtures. Each owner keeps their fixtures in their own clearly marked block."""

from __future__ import annotations

import pytest

# ============================================================================================
# endpoints & models block (owner: frozen-policy endpoints / model preparation)
# ============================================================================================


@pytest.fixture
def openai_stub():
    """A started `tests.support.fakes.openai_stub.OpenAIStub` on 127.0.0.1 (free port), stopped after the test.

    Script it with ``stub.script([...])``, ``stub.responder = fn``, ``stub.fail_next(500, times=2)``,
    ``stub.malformed_next()``, ``stub.delay = 5.0``; point clients at ``stub.base_url`` (ends in /v1).
    """
    from tests.support.fakes.openai_stub import OpenAIStub

    with OpenAIStub() as stub:
        yield stub


@pytest.fixture(scope="session")
def tiny_model_dir():
    """The tiny random Qwen2 test model folder, built once into the model cache (~7 s) if missing."""
    from trainer.policy_models import resolve_model

    return resolve_model("tiny")


# ============================================================================================
# end of endpoints & models block
# ============================================================================================


# ============================================================================================
# evolver services block (owner: agent tools / services tests)
# ============================================================================================


@pytest.fixture
def services(tmp_path):
    """Real evolver `RunServices` over the two-task world of `tests.support.services_factories`; memory closed
    after."""
    from tests.support.services_factories import make_services

    s = make_services(tmp_path)
    memory = s.memory  # a test may swap or drop s.memory; close the one made here
    yield s
    memory.close()


# ============================================================================================
# shared servers block (owner: test infrastructure; the servers are in tests/support/servers.py)
# ============================================================================================
# Session scope: a pytest process (one xdist worker) starts each server at the first test that asks for it and
# stops it when the session ends. `--dist loadfile` keeps a file's tests on one worker, so the tests that share a
# server most live in one file (vLLM: test_vllm_cpu.py; `langgraph dev`: test_studio.py).


@pytest.fixture(scope="session")
def langgraph_dev_url(tmp_path_factory):
    """URL of a `langgraph dev` server on the repo's `langgraph.json` (it keeps threads and assistants between
    tests and sessions: give each test's names a unique part)."""
    from tests.support.servers import langgraph_dev

    with langgraph_dev(tmp_path_factory.mktemp("langgraph-dev")) as url:
        yield url


@pytest.fixture(scope="session")
def _chroma_process(tmp_path_factory):
    from tests.support.servers import chroma_run

    with chroma_run(tmp_path_factory.mktemp("chroma")) as url:
        yield url


@pytest.fixture
def chroma_url(_chroma_process):
    """URL of the session's `chroma run` server, emptied of every collection before the test."""
    from tests.support.servers import empty_chroma

    empty_chroma(_chroma_process)
    return _chroma_process


@pytest.fixture(scope="session")
def tiny_vllm(tiny_model_dir, tmp_path_factory):
    """vllm-cpu serving the tiny model as `tiny` with runtime LoRA loading (rank <= 8): a `VLLMServer`. Adapters
    other tests loaded may still be listed; load yours under a name of its own."""
    from tests.support.servers import tiny_vllm as serve

    with serve(tiny_model_dir, tmp_path_factory.mktemp("tiny-vllm")) as server:
        yield server


# ============================================================================================
# end of shared servers block
# ============================================================================================
