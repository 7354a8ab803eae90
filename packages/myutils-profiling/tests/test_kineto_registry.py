"""The registered Kineto analyses: listed without importing them, selected by name, each run alone."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from my_utils.core.errors import UsageError
from my_utils.profiling.kineto import analyze_traces
from my_utils.profiling.kineto.registry import ANALYSES, names, select


def test_every_analysis_names_its_hta_reference_and_tables() -> None:
    assert len(set(names())) == len(ANALYSES) >= 11
    for a in ANALYSES:
        assert a.summary and a.reference and a.tables
        module = a.factory.partition(":")[0]
        doc = __import__(module, fromlist=["_"]).__doc__ or ""
        assert "HTA" in doc or "Holistic Trace Analysis" in doc, module  # the HTA reference in the docstring


def test_listing_imports_nothing_heavy() -> None:
    code = ("import sys; from my_utils.profiling.kineto.registry import names; names(); "
            "print(sorted(m for m in ('numpy', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_name_is_refused_once() -> None:
    with pytest.raises(UsageError, match="unknown Kineto analysis 'nope'; known: critical_path"):
        select(["nope"])


def test_a_failing_analysis_is_named_and_the_others_still_report(real_fixtures: Any) -> None:
    """A window that does not exist makes the critical path fail: its tables are missing, a warning says
    which analysis and why, and every other analysis's tables are there."""
    a = analyze_traces(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz", executor="serial",
                       options={"critical_path": {"annotation": "no such range"}})
    rows = a.to_rows()
    assert "kineto_critical_path" not in rows and "kineto_queue_length" in rows and "kineto_idle_host_ops" in rows
    assert any("Kineto analysis 'critical_path' failed (LookupError" in w for w in a.warnings)
    only = analyze_traces(real_fixtures / "kineto" / "hta/critical_path__simple_add.json.gz", executor="serial",
                          analyses=["queue_length"]).to_rows()
    assert "kineto_queue_length" in only and "kineto_critical_path" not in only
