"""What the run-history tests share: reports with chosen numbers, and a real PostgreSQL server per session.

``make_report`` builds an ``AnalysisReport`` whose facts are the numbers given (and a GPU, GPU
count and world size in its headline context, as the analyzer writes them); the store tests check
what comes back against those numbers. ``postgres_server`` starts a throwaway cluster
(``history.testing.PostgresServer``) once per session and per xdist worker; where PostgreSQL is
absent it skips saying why, and fails instead where CI requires every service
(``MYUTILS_REQUIRE_REAL_FIXTURES=1``, set by ``.ci/run``, which installs ``postgresql``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from my_utils.profiling.model.report import REPORT_SCHEMA_VERSION, AnalysisReport, Fact

UNITS = {"step_time.median": "ms", "step_time.p90": "ms", "gpu.idle": "%", "gpu.busy": "%", "mfu": "%",
         "comm.exposed": "ms"}


def make_report(workload: str = "pretrain", values: Mapping[str, float] | None = None, *, gpu: str | None = "NVIDIA H100 80GB HBM3",
                gpu_count: int | None = 8, world_size: int | None = 16, tag: Any = None,
                operations: list[dict[str, Any]] | None = None) -> AnalysisReport:
    """A report with these fact values (``tag`` makes otherwise equal reports distinct)."""
    facts = [Fact(k, k, float(v), UNITS.get(k, "ms")) for k, v in (values or {}).items()]
    context = []
    for key, value in (("gpu", gpu), ("gpu_count", gpu_count), ("world_size", world_size)):
        if value is not None:
            context.append(Fact(f"context.{key}", key, value))
    facts += context
    headline = {"context": [f.to_dict() for f in context]}
    return AnalysisReport(REPORT_SCHEMA_VERSION, workload, {}, [], {"tag": tag}, facts=facts, headline=headline,
                          tables={"operations": operations or []})


def page_figures(html: str) -> list[dict[str, Any]]:
    """The plotly figures a history page embeds (its ``<script type="application/json">`` blocks), in order."""
    blocks = re.findall(r'<script type="application/json" id="[^"]+-data">(.*?)</script>', html, flags=re.S)
    return [json.loads(b) for b in blocks]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL server of this session (skips, or fails in CI, where none can start)."""
    from my_utils.profiling.history.testing import PostgresServer, missing_reason

    reason = missing_reason()
    if reason is not None:
        if os.environ.get("MYUTILS_REQUIRE_REAL_FIXTURES", "").strip().lower() in ("1", "true", "yes", "on"):
            pytest.fail(f"PostgreSQL unavailable: {reason} [MYUTILS_REQUIRE_REAL_FIXTURES=1: CI installs "
                        "postgresql, so the history's PostgreSQL tests may not skip]", pytrace=False)
        pytest.skip(f"PostgreSQL unavailable: {reason}")
    with PostgresServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """An empty store's location: a SQLite file, or a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    server = request.getfixturevalue("postgres_server")
    return str(server.create_database())
