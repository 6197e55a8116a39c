"""Test doubles that stand in for LLMs (only LLMs are faked; see AGENTS.md)."""
