"""Shared pytest fixtures. Each owner keeps their fixtures in their own clearly marked block."""

from __future__ import annotations

import pytest

# ============================================================================================
# endpoints & models block (owner: frozen-policy endpoints / model preparation)
# ============================================================================================


@pytest.fixture
def openai_stub():
    """A started `tests.fakes.openai_stub.OpenAIStub` on 127.0.0.1 (free port), stopped after the test.

    Script it with ``stub.script([...])``, ``stub.responder = fn``, ``stub.fail_next(500, times=2)``,
    ``stub.malformed_next()``, ``stub.delay = 5.0``; point clients at ``stub.base_url`` (ends in /v1).
    """
    from tests.fakes.openai_stub import OpenAIStub

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
    """Real evolver `RunServices` over the two-task world of `tests.services_factories`, memory closed after."""
    from tests.services_factories import make_services

    s = make_services(tmp_path)
    memory = s.memory  # a test may swap or drop s.memory; close the one made here
    yield s
    memory.close()
