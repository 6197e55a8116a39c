"""LangChain-facing tools of the evolver: frozen-policy endpoints, the rubric judge, candidate
measurement and the agents' tools (the live-services registry of a run is `graphs.services`).

Kept import-light on purpose (no torch, transformers or chromadb at import): import the submodule
you need (`tools.judge`, `tools.measure`, `tools.agent_tools`, endpoints).
"""
