"""Training-time memory: Chroma collections with our own offline embedding functions (docs/DESIGN.md §9).

The collections hold group summaries, failure events, attributions and proposals.

Importing this package registers `MiniLMEmbedding` and `HashEmbedding` with Chroma (so stored collections can
be reopened) and does not import torch: the MiniLM model loads on first use.
"""

from memory.embeddings import HashEmbedding, MiniLMEmbedding, make_embedding
from memory.records import (
    KINDS,
    OUTCOMES,
    AttributionRecord,
    EventRecord,
    GroupSummary,
    ProposalRecord,
    Record,
    ResponseSample,
    record_from_metadata,
)
from memory.store import MemoryStoreError, SimilarCase, TrainingMemory

__all__ = [
    "KINDS",
    "OUTCOMES",
    "AttributionRecord",
    "EventRecord",
    "GroupSummary",
    "HashEmbedding",
    "MemoryStoreError",
    "MiniLMEmbedding",
    "ProposalRecord",
    "Record",
    "ResponseSample",
    "SimilarCase",
    "TrainingMemory",
    "make_embedding",
    "record_from_metadata",
]
