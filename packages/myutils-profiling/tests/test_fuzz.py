"""Truncated and garbled inputs of every format: one InputError naming the file, nothing else."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError
from my_utils.profiling import MetricsCollector
from my_utils.profiling.examples import example_config_path
from my_utils.profiling.formats.cprofile import read_pstats
from my_utils.profiling.formats.mytimer import read_profile_csv_events
from my_utils.profiling.formats.table_csv import TableCsvMetricsProvider
from my_utils.profiling.kineto.read.provider import parse_trace_file
from my_utils.profiling.ncu.provider import read_ncu_csv
from my_utils.profiling.nsys.provider import NsysSqliteMetricsProvider

_DATA = example_config_path().parent / "data"
# derandomize: the same examples on every run, so CI is deterministic (the seeded corpus
# fuzz in test_corpus_fuzz.py covers volume; this one adds Hypothesis' shrinking)
_FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


def _sample(rel: str) -> Callable[[Any], bytes]:
    """Bytes of a registry file (``real_fixtures / rel``: fetched, or the test skips saying why)."""
    return lambda real_fixtures: (real_fixtures / rel).read_bytes()


def _nsys(p: Path) -> object:
    return NsysSqliteMetricsProvider(p).collect()


def _yaml(p: Path) -> object:
    return MetricsCollector.from_config(p, output_dir=p.parent / "out")


CASES: dict[str, tuple[Callable[[Any], bytes], str, Callable[[Path], object]]] = {
    "trace_json": (_sample("kineto/kineto_repo/after_fix_trace.json"), "t.json", parse_trace_file),
    "trace_gz": (_sample("kineto/hta/cpu_only__rank-34.pt.trace.json.gz"), "t.json.gz", parse_trace_file),
    "ncu_csv": (_sample("ncu/ai4mat__metrics_713_paddle_.csv"), "n.csv", read_ncu_csv),
    "nsys_sqlite": (_sample("nsys/extrap__con_kernel.sqlite"), "n.sqlite", _nsys),
    "pstats": (_sample("cprofile/gprof2dot__print1.pstats"), "p.pstats", read_pstats),
    "profile_csv": (lambda _: (_DATA / "profile_rank_0.csv").read_bytes(), "profile_rank_0.csv",
                    read_profile_csv_events),
    "table_csv": (lambda _: (_DATA / "op_summary.csv").read_bytes(), "t.csv",
                  lambda p: TableCsvMetricsProvider(p).collect()),
    "yaml_config": (lambda _: b"output_dir: out\nrun_id: r\nproviders:\n  - provider: table_csv\n    input: t.csv\n"
                            b"    options: {unit: ms}\n", "c.yaml", _yaml),
}


def _check(name: str, data: bytes) -> None:
    _, filename, reader = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / filename
        path.write_bytes(data)
        (Path(tmp) / "t.csv").write_text("name,value\na,1\n")  # the yaml config's input
        try:
            reader(path)
        except InputError as exc:
            assert str(exc).startswith(str(Path(tmp))), exc  # names the file (or the config's input) first
            assert "\n" not in str(exc)


@pytest.mark.parametrize("name", sorted(CASES))
@_FUZZ
@given(data=st.data())
def test_truncated(name: str, data: st.DataObject, real_fixtures: Any) -> None:
    raw = CASES[name][0](real_fixtures)
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    _check(name, raw[:cut])


@pytest.mark.parametrize("name", sorted(CASES))
@_FUZZ
@given(data=st.data())
def test_garbled(name: str, data: st.DataObject, real_fixtures: Any) -> None:
    raw = bytearray(CASES[name][0](real_fixtures))
    for _ in range(data.draw(st.integers(min_value=1, max_value=8))):
        at = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw[at] = data.draw(st.integers(min_value=0, max_value=255))
    _check(name, bytes(raw))
