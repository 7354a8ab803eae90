"""DcgmDmonProvider on hand-built ``dcgmi dmon`` tables (no public real one exists) and bad input."""

from __future__ import annotations

import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import InputError, MyUtilsError, UnsupportedInputError
from my_utils.profiling.formats.dcgm import DcgmDmonProvider, read_dcgm_dmon

DATA = Path(__file__).resolve().parent / "data"
H100 = DATA / "dcgmi_dmon_2gpu_h100.txt"


def _column(path: Path, gpu: int, field: str) -> list[str]:
    """The cells of one column for one GPU, read with str.split (not the provider's column positions)."""
    header: list[str] = []
    cells = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "#Entity":
            header = parts[1:]
        elif parts[:2] == ["GPU", str(gpu)]:
            cells.append(parts[2 + header.index(field)])
    return cells


def test_per_gpu_per_sample_with_units() -> None:
    events = DcgmDmonProvider.from_input(H100).collect()
    assert len(events) == 2 * 16 * 8 and {e.source for e in events} == {"dcgm_dmon"}
    for gpu in (0, 1):
        sm = [e for e in events if e.name == f"dcgm.sm_active:gpu{gpu}"]
        cells = _column(H100, gpu, "SMACT")
        assert [e.attrs["sample"] for e in sm] == list(range(16)) == list(range(len(cells)))
        assert [e.value for e in sm] == [pytest.approx(float(c) * 100) for c in cells]
        assert {(e.unit, e.kind, e.attrs["gpu"], e.attrs["entity"]) for e in sm} == {("%", "ratio", gpu, f"GPU {gpu}")}
        power = [e for e in events if e.name == f"dcgm.power:gpu{gpu}"]
        assert [e.value for e in power] == [float(c) for c in _column(H100, gpu, "POWER")]
        assert {(e.unit, e.kind) for e in power} == {("W", "gauge")}
    mean_sm1 = statistics.fmean(float(c) * 100 for c in _column(H100, 1, "SMACT"))
    assert mean_sm1 < 25  # the starved GPU of this fixture
    units = {e.name.split(":")[0]: e.unit for e in events}
    assert units == {"dcgm.gr_engine_active": "%", "dcgm.sm_active": "%", "dcgm.sm_occupancy": "%",
                     "dcgm.tensor_active": "%", "dcgm.dram_active": "%", "dcgm.power": "W", "dcgm.gpu_temp": "C",
                     "dcgm.fb_used": "MiB"}


def test_na_is_not_measured_never_zero() -> None:
    events = read_dcgm_dmon(H100)
    (blank,) = [e for e in events if math.isnan(e.value)]
    line = 1 + next(i for i, t in enumerate(H100.read_text().splitlines()) if "N/A" in t)
    assert (blank.name, blank.attrs["status"], blank.attrs["line"]) == ("dcgm.tensor_active:gpu1", "N/A", line)


def test_time_stamps_and_the_dcgm3_layout() -> None:
    path = DATA / "dcgmi_dmon_v3_ts.txt"
    events = read_dcgm_dmon(path)
    stamps = [float(line.split()[0]) for line in path.read_text().splitlines() if " GPU " in line]
    assert sorted({e.ts or 0.0 for e in events}) == stamps and len(events) == 4 * 4
    assert [e.value for e in events if e.name == "dcgm.sm_active:gpu0"] == [70.2, 71.2, 72.2, 73.2]


def test_local_time_without_zone_is_kept_as_text(tmp_path: Path) -> None:
    src = (DATA / "dcgmi_dmon_v3_ts.txt").read_text().splitlines()
    path = tmp_path / "local.txt"
    path.write_text("\n".join(re.sub(r"^\d+\.\d+", "2024-12-02 12:00:00", line) for line in src) + "\n")
    events = read_dcgm_dmon(path)
    assert {e.ts for e in events} == {None} and {e.attrs["time"] for e in events} == {"2024-12-02 12:00:00"}
    zoned = tmp_path / "utc.txt"
    zoned.write_text("\n".join(re.sub(r"^\d+\.\d+", "2024-12-02T12:00:00+00:00", line) for line in src) + "\n")
    assert {e.ts for e in read_dcgm_dmon(zoned)} == {1733140800.0}


def test_the_same_table_with_commas(tmp_path: Path) -> None:
    path = tmp_path / "dmon.csv"
    rows = []
    for line in H100.read_text().splitlines():
        first = " ".join(line.split()[:2]) if line.startswith("GPU") else line.split()[0]
        rest = line.split()[2:] if line.startswith("GPU") else line.split()[1:]
        if line.startswith("ID"):
            rest = ["", "", "", "", "", "W", "C", ""]
        rows.append(",".join([first, *rest]))
    path.write_text("\n".join(rows) + "\n")
    def pairs(file: Path) -> list[tuple[str, float | None]]:
        return [(e.name, None if math.isnan(e.value) else e.value) for e in read_dcgm_dmon(file)]

    assert pairs(path) == pairs(H100)
    assert {e.unit for e in read_dcgm_dmon(path) if e.name.startswith("dcgm.power")} == {"W"}


def test_unknown_fields_keep_dcgmi_unit_and_text_fields_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "d.txt"
    path.write_text("#Entity   NEWFLD      DVNAM                   \n"
                    "ID        KB/s                                \n"
                    "GPU 3     12.500      NVIDIA H100 80GB HBM3   \n")
    (event,) = read_dcgm_dmon(path)
    assert (event.name, event.value, event.unit, event.kind) == ("dcgm.newfld:gpu3", 12.5, "KB/s", "gauge")


@pytest.mark.parametrize(("text", "kind", "match"), [
    ("GPU 0     0.500\n", InputError, r"d\.txt:line 1: a 'dcgmi dmon' table: a '#Entity' header line before"),
    ("#Entity   SMACT  TENSO\nID\nGPU 0 0.5 0.6 0.7\n", InputError,
     r"d\.txt:line 3: 2 values, one per header column \(SMACT TENSO\), in the header's columns; found 3"),
    ("#Entity   SMACT\nID\nError setting watches. Result: -29: Requires root\n", InputError,
     r"d\.txt:line 3: a 'dcgmi dmon' table: a '#Entity' header.* found 'Error setting watches"),
    ("h:1:1 [0] NCCL INFO NCCL version 2.21.5\n", InputError, r"d\.txt:line 1: a 'dcgmi dmon' table"),
    ("#Entity   SMACT\nID\n", UnsupportedInputError, r"d\.txt: a 'dcgmi dmon' table: .* found no sample"),
])
def test_bad_input(tmp_path: Path, text: str, kind: type, match: str) -> None:
    path = tmp_path / "d.txt"
    path.write_text(text)
    with pytest.raises(kind, match=match):
        DcgmDmonProvider.from_input(path).collect()


def test_cli_exit_2_one_line(real_fixtures: Path, tmp_path: Path) -> None:
    log = real_fixtures / "nccl/dsl__example_2.502726.o.nccl2.22.3.log"
    result = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "dcgm_dmon", "--input", str(log),
                             "--output-dir", str(tmp_path / "o")], capture_output=True, text=True, timeout=180)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert f"{log}:line 1: a 'dcgmi dmon' table" in line
    assert not (tmp_path / "o" / "metrics_events.jsonl").exists()
    ok = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "dcgm_dmon", "--input", str(H100),
                         "--output-dir", str(tmp_path / "ok")], capture_output=True, text=True, timeout=180)
    assert ok.returncode == 0, ok.stderr


_LINES = st.sampled_from([
    "#Entity         GRACT        SMACT", "ID                           W", "GPU 0           0.917        0.871",
    "GPU 1           N/A          0.2", "GPU-I 2         0.5", "", "1733140800.5 GPU 0     0.1   0.2",
    "dmon was stopped do to receiving a signal", "GPU 0 LINK 1    4", "junk",
])


@settings(derandomize=True, database=None, max_examples=60, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=30)), max_size=10))
def test_any_text_gives_events_or_one_input_error(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "d.txt"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        events = read_dcgm_dmon(path)
    except MyUtilsError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert events and all(e.source == "dcgm_dmon" for e in events)


def test_provider_contract(tmp_path: Path) -> None:
    from my_utils.core.testing import check_metrics_provider

    bad = tmp_path / "bad.txt"
    bad.write_text("GPU 0     0.5\n")
    unsupported = tmp_path / "empty.txt"
    unsupported.write_text("#Entity   SMACT\nID\n")
    report = check_metrics_provider("dcgm_dmon", DATA, bad_input=bad, unsupported_input=unsupported)
    assert {e.attrs["file"] for e in report.events} == {H100.name, "dcgmi_dmon_v3_ts.txt"}


# -- units and boundaries (issue 36): every field dcgmi prints, with a value whose scale error shows. The expected
# units and scales come from DCGM's field documentation: the profiling fields 1001-1014 are ratios 0.0-1.0 (shown
# here in percent), 203/204 are already percent, power in W, temperatures in C, clocks in MHz, frame buffer in MiB
# and PCIe/NVLink throughput in bytes per second.
_DCGM_DOC = {  # short name: (event field, unit, kind, printed value, expected value)
    "GRACT": ("gr_engine_active", "%", "ratio", "0.250", 25.0),
    "SMACT": ("sm_active", "%", "ratio", "0.375", 37.5),
    "SMOCC": ("sm_occupancy", "%", "ratio", "0.125", 12.5),
    "TENSO": ("tensor_active", "%", "ratio", "0.050", 5.0),
    "DRAMA": ("dram_active", "%", "ratio", "0.999", 99.9),
    "FP64A": ("fp64_active", "%", "ratio", "0.001", 0.1),
    "FP32A": ("fp32_active", "%", "ratio", "0.600", 60.0),
    "FP16A": ("fp16_active", "%", "ratio", "1.000", 100.0),
    "TIMMA": ("tensor_imma_active", "%", "ratio", "0.010", 1.0),
    "THMMA": ("tensor_hmma_active", "%", "ratio", "0.020", 2.0),
    "GPUTL": ("gpu_util", "%", "ratio", "85", 85.0),
    "MCUTL": ("mem_copy_util", "%", "ratio", "3", 3.0),
    "PCITX": ("pcie_tx", "B/s", "gauge", "1200000000", 1.2e9),
    "PCIRX": ("pcie_rx", "B/s", "gauge", "250000", 2.5e5),
    "NVLTX": ("nvlink_tx", "B/s", "gauge", "4500000000", 4.5e9),
    "NVLRX": ("nvlink_rx", "B/s", "gauge", "0", 0.0),
    "POWER": ("power", "W", "gauge", "301.250", 301.25),
    "POWINST": ("power_instant", "W", "gauge", "299.5", 299.5),
    "TMPTR": ("gpu_temp", "C", "gauge", "62", 62.0),
    "MMTMP": ("memory_temp", "C", "gauge", "71", 71.0),
    "SMCLK": ("sm_clock", "MHz", "gauge", "1980", 1980.0),
    "MMCLK": ("mem_clock", "MHz", "gauge", "2619", 2619.0),
    "FBTTL": ("fb_total", "MiB", "gauge", "81559", 81559.0),
    "FBFRE": ("fb_free", "MiB", "gauge", "10323", 10323.0),
    "FBUSD": ("fb_used", "MiB", "gauge", "71236", 71236.0),
}


def test_every_known_field_has_its_unit_kind_and_scale(tmp_path: Path) -> None:
    shorts = list(_DCGM_DOC)
    units = {"POWER": "W", "POWINST": "W", "TMPTR": "C", "MMTMP": "C", "SMCLK": "MHZ", "MMCLK": "MHZ",
             "FBTTL": "MB", "FBFRE": "MB", "FBUSD": "MB"}
    width = 12
    path = tmp_path / "all.txt"
    path.write_text("#Entity   " + "".join(s.ljust(width) for s in shorts) + "\n"
                    + "ID        " + "".join(units.get(s, "").ljust(width) for s in shorts) + "\n"
                    + "GPU 3     " + "".join(_DCGM_DOC[s][3].ljust(width) for s in shorts) + "\n")
    got = {e.attrs["field"]: e for e in read_dcgm_dmon(path)}
    assert set(got) == set(shorts)
    for short, (field, unit, kind, _printed, value) in _DCGM_DOC.items():
        e = got[short]
        assert (e.name, e.unit, e.kind) == (f"dcgm.{field}:gpu3", unit, kind), short
        assert e.value == pytest.approx(value, rel=1e-12), short  # a ratio not scaled (0.25) or a percent scaled (8500)


@pytest.mark.parametrize(("header", "ok"), [("#Entity   SMACT", True), ("#Entity", False), ("#Entity    ", False)])
def test_a_header_needs_one_field_at_least(tmp_path: Path, header: str, ok: bool) -> None:
    path = tmp_path / "d.txt"
    path.write_text(f"{header}\nID\nGPU 0     0.500\n")
    if ok:
        (event,) = read_dcgm_dmon(path)
        assert (event.name, event.value) == ("dcgm.sm_active:gpu0", 50.0)
    else:
        with pytest.raises(InputError, match=r"d\.txt:line 1: a '#Entity' header naming at least one field"):
            read_dcgm_dmon(path)


@pytest.mark.parametrize(("stamp", "ts"), [("999999999.5", 999999999.5), ("1733140800", 1733140800.0),
                                           ("17331408001.25", 17331408001.25)])
def test_unix_time_stamps_of_9_to_11_digits(tmp_path: Path, stamp: str, ts: float) -> None:
    path = tmp_path / "d.txt"
    path.write_text(f"#Entity   SMACT\nID\n{stamp} GPU 0     0.500\n")
    (event,) = read_dcgm_dmon(path)
    assert event.ts == ts and event.value == 50.0


def test_samples_are_counted_per_entity_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "d.txt"
    path.write_text("#Entity   SMACT\nID\nGPU 0     0.5\nGPU 1     0.25\nGPU 0     0.75\nGPU 0 LINK 2   0.1\n")
    got = [(e.name, e.attrs["sample"], e.attrs.get("gpu")) for e in read_dcgm_dmon(path)]
    assert got == [("dcgm.sm_active:gpu0", 0, 0), ("dcgm.sm_active:gpu1", 0, 1), ("dcgm.sm_active:gpu0", 1, 0),
                   ("dcgm.sm_active:gpu0_link2", 0, None)]
