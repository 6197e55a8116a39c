"""LangChain-facing tools of the evolver: frozen-policy endpoints, the rubric judge, candidate
measurement, live services and the agents' tools.

Kept import-light on purpose (no torch, transformers or chromadb at import): import the submodule
you need (`tools.judge`, `tools.measure`, `tools.services`, `tools.agent_tools`, endpoints).
"""
