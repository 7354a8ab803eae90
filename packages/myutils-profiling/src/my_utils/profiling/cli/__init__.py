"""``myutils-profile``: the profiling commands (also reachable as ``myutils profile``).

One module per command, each registering itself on the shared ``app`` of ``_app`` when
imported; the command implementations import their heavy dependencies inside the
command, so the CLI starts fast and ``--help`` imports neither pandas nor plotly.
"""

from my_utils.profiling.cli import analyze as _analyze  # noqa: F401  (each import registers its command)
from my_utils.profiling.cli import diff as _diff  # noqa: F401
from my_utils.profiling.cli import history as _history  # noqa: F401
from my_utils.profiling.cli import ingest as _ingest  # noqa: F401
from my_utils.profiling.cli import ncu as _ncu  # noqa: F401
from my_utils.profiling.cli import nsys as _nsys  # noqa: F401
from my_utils.profiling.cli import ops as _ops  # noqa: F401
from my_utils.profiling.cli import trace as _trace  # noqa: F401
from my_utils.profiling.cli._app import app, main

__all__ = ["app", "main"]
