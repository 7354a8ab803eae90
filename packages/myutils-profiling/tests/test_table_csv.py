"""TableCsvMetricsProvider: default mapping, explicit mapping, and errors naming line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from my_utils.core.errors import ConfigError, InputError
from my_utils.profiling.formats.table_csv import TableCsvMetricsProvider


def test_default_mapping(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("name,step,rank,value,mem_mb,note\nfwd,1,0,12.5,100,warm\nbwd,1,0,20,,\nfwd,2,1,13,\"1,024\",x\n")
    events = TableCsvMetricsProvider.from_input(path).collect()
    got = [(e.name, e.step, e.rank, e.value) for e in events]
    assert got == [("fwd", 1, 0, 12.5), ("fwd/mem_mb", 1, 0, 100.0), ("bwd", 1, 0, 20.0),
                   ("fwd", 2, 1, 13.0), ("fwd/mem_mb", 2, 1, 1024.0)]
    assert events[0].attrs["note"] == "warm" and events[0].attrs["line"] == 2


def test_explicit_mapping(tmp_path: Path) -> None:
    path = tmp_path / "module_profile.csv"
    path.write_text("module_name,mean_ms,total_ms,run_count\nmodel.attn,12.5,1250.0,100\nmodel.ffn,8.3,830,100\n")
    provider = TableCsvMetricsProvider(path, name_column="module_name", value_columns=["mean_ms"], unit="ms",
                                       kind="duration", name_prefix="module:")
    events = provider.collect()
    assert [(e.name, e.value, e.unit, e.kind) for e in events] == [
        ("module:model.attn", 12.5, "ms", "duration"), ("module:model.ffn", 8.3, "ms", "duration")]
    assert events[0].attrs["run_count"] == "100"


@pytest.mark.parametrize(("text", "match"), [
    ("name,value\nx,1\ny,abc\n", None),
    ("name,step,value\nx,one,1\n", r"line 2: an integer in column 'step'"),
    ("name,value\nx,1,2,3\n", r"line 2: at most 2 cells"),
    ("name,value\n,1\n", r"line 2: a name in column 'name'"),
])
def test_bad_rows(tmp_path: Path, text: str, match: str | None) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    if match is None:  # a non-number in an auto-detected column is just not a metric
        assert [e.name for e in TableCsvMetricsProvider.from_input(path).collect()] == ["x"]
        with pytest.raises(InputError, match=r"line 3: a number in column 'value'"):
            TableCsvMetricsProvider(path, value_columns=["value"]).collect()
    else:
        with pytest.raises(InputError, match=match):
            TableCsvMetricsProvider.from_input(path).collect()


def test_missing_mapped_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"line 1: value column\(s\) \['ms'\]"):
        TableCsvMetricsProvider(path, value_columns=["ms"]).collect()
    with pytest.raises(ConfigError, match="metrics provider 'table_csv' has no option 'colour'; known options: "):
        TableCsvMetricsProvider(path, colour="red")
