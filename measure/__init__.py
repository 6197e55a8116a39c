"""Measurement of the frozen policy.

Its endpoints, the rubric judge, probe rollouts, candidate measurement and the agents' tools (the live-services
registry of a run is `graphs.services`).

Kept import-light on purpose (no torch, transformers or chromadb at import): import the submodule
you need (`measure.judge`, `measure.candidate`, `measure.agent_tools`, endpoints).
"""
