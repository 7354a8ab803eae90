"""Snapshots for tests on machines without a GPU: a model of the caching allocator and a Llama run recorded with it.

See ``allocator_model`` and ``llm_snapshot``; nothing here is imported by the rest of myutils-memory.
"""

from my_utils.memory.testing.allocator_model import CachingAllocatorModel, OutOfMemory
from my_utils.memory.testing.llm_snapshot import LlmShape, llm_training_snapshot

__all__ = ["CachingAllocatorModel", "LlmShape", "OutOfMemory", "llm_training_snapshot"]
