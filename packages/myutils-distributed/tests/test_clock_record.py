"""The CLOCK_SYNC row: written through GlobalLogger (offset applied first), read back, malformed rows refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from my_utils.core.errors import InputError
from my_utils.core.logger import GlobalLogger
from my_utils.core.profile_csv import PROFILE_CSV_COLUMNS, ProfileRow, read_profile_csv
from my_utils.distributed.clock_estimate import ClockEstimate
from my_utils.distributed.clock_record import clock_sync_metadata, parse_clock_sync_row, record_clock_sync


@pytest.fixture(autouse=True)
def fresh_logger() -> Iterator[None]:
    GlobalLogger._reset_for_tests()
    yield
    GlobalLogger._reset_for_tests()


ESTIMATE = ClockEstimate(offset_s=0.002345678912, uncertainty_s=4.1e-05, best_rtt_s=8.2e-05, samples=60, kept=1,
                         measured_at_s=1.0)


@pytest.mark.parametrize("apply", [True, False])
def test_row_is_written_and_read_back(tmp_path: Path, apply: bool) -> None:
    logger = GlobalLogger().setup(tmp_path, rank=3, world_size=4)
    record_clock_sync(ESTIMATE, reference_rank=0, step=7, apply=apply)
    logger.log_profile_event(7, "after", "START", 0.0, "", timestamp=1000.0)
    logger.close()
    rows = read_profile_csv(tmp_path / "profile_rank_3.csv")
    assert [r.event_type for r in rows] == ["CLOCK_SYNC", "START"]
    record = parse_clock_sync_row(rows[0])
    assert record is not None
    assert (record.offset_s, record.uncertainty_s, record.reference_rank, record.applied, record.best_rtt_s) == (
        0.002345678912, 4.1e-05, 0, apply, 8.2e-05)
    assert rows[0].step == 7 and rows[0].event_name == "clock_sync" and rows[0].duration_ms == 0.0
    assert GlobalLogger().time_offset == pytest.approx(ESTIMATE.offset_s if apply else 0.0, abs=1e-9)
    # the offset shifts every later timestamp (when applied)
    assert rows[1].timestamp_unix == pytest.approx(1000.0 + (ESTIMATE.offset_s if apply else 0.0), abs=1e-6)
    assert parse_clock_sync_row(rows[1]) is None
    assert len(PROFILE_CSV_COLUMNS) == 8  # the CSV's columns never change


def _row(metadata: str) -> ProfileRow:
    return ProfileRow(1.0, "", "host", 0, "clock_sync", "CLOCK_SYNC", 0.0, metadata, 12)


@pytest.mark.parametrize(("metadata", "message"), [
    ("uncertainty_s=1e-5;reference_rank=0", r"line 12: a CLOCK_SYNC row needs offset_s=<finite seconds>.*None"),
    ("offset_s=nan;uncertainty_s=1e-5;reference_rank=0", "offset_s=<finite seconds>.*'nan'"),
    ("offset_s=0.1;uncertainty_s=x;reference_rank=0", "uncertainty_s=<finite seconds>.*'x'"),
    ("offset_s=0.1;uncertainty_s=1e-5;reference_rank=zero", "reference_rank=<int> and applied=0|1"),
    ("offset_s=0.1;uncertainty_s=1e-5;reference_rank=0;applied=yes", "applied='yes'"),
])
def test_malformed_rows_are_input_errors(metadata: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_clock_sync_row(_row(metadata), "run/profile_rank_1.csv")


def test_metadata_keeps_full_precision() -> None:
    text = clock_sync_metadata(ESTIMATE, 2, True)
    assert text == ("offset_s=0.002345678912;uncertainty_s=4.1e-05;reference_rank=2;applied=1;best_rtt_s=8.2e-05")
    record = parse_clock_sync_row(_row(text))
    assert record is not None and record.offset_s == ESTIMATE.offset_s
