"""Helpers shared by the tests, none of them a test: builders of harness states and tiny runs, the LLM fakes,
the fault-injection driver, real server processes and the session-scoped servers `tests/conftest.py` shares."""
