"""The Kineto home's reader: torch.profiler traces (``.json``/``.json.gz``) into events and shared passes.

``provider`` is the metrics provider; ``scan`` (with the optional C scanner ``_kineto_scan``),
``stream``, ``events`` and ``aggregate`` make the one pass a command takes over each trace;
``context`` and ``nesting`` read the trace's own metadata and call nesting. Nothing here imports
the Kineto analyses above it (``my_utils.profiling.kineto``); an import-linter contract says so.
"""
