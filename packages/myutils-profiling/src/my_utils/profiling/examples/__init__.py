"""Examples shipped with myutils-profiling: the collector config and its small sample inputs.

``collector_config_example.json`` reads the files in ``data/`` (a MyTimer profile CSV, a
CPU torch.profiler trace and an operator table, all recorded on a CPU with this toolkit).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["example_config_path"]


def example_config_path() -> Path:
    """The path of the shipped ``collector_config_example.json``."""
    return Path(__file__).resolve().parent / "collector_config_example.json"
