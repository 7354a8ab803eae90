"""The ``memory_monitor`` provider on real samples files: the plugin contract kit, values, following a live file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from my_utils.core.errors import InputError
from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import load_component
from my_utils.core.providers import run_provider_on_input
from my_utils.core.testing import check_metrics_provider
from my_utils.memory.gpu_tracker import GPU_Performance_Tracker
from my_utils.memory.samples_file import Sample, SamplesWriter, read_samples
from my_utils.memory.samples_provider import MonitorSamplesMetricsProvider

pytest.importorskip("psutil", reason="psutil is not installed (the [system] extra)")


@pytest.fixture
def samples_file(tmp_path: Path) -> Path:
    tracker = GPU_Performance_Tracker("run", interval=0.02, output_dir=tmp_path / "mon",
                                      track_hardware_metrics=False)
    tracker.start_monitoring()
    import time

    time.sleep(0.15)
    tracker.stop_monitoring()
    return tracker.samples_path


def test_contract_by_registered_name(samples_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad_samples.jsonl"
    lines = samples_file.read_text().splitlines(keepends=True)
    bad.write_text(lines[0] + lines[1] + '{"ts": "noon", "metrics": {}}\n')
    other = tmp_path / "other.jsonl"
    other.write_text('{"name": "x"}\n')
    assert load_component(PluginKind.METRICS_PROVIDER, "memory_monitor") is MonitorSamplesMetricsProvider
    report = check_metrics_provider("memory_monitor", samples_file, bad_input=bad, unsupported_input=other,
                                    min_events=4)
    _, samples, _, _ = read_samples(samples_file)
    assert len(report.events) == 2 * len(samples)
    rss = [e for e in report.events if e.name == "monitor/host_rss_bytes"]
    assert [e.value for e in rss] == [s.metrics["host_rss_bytes"] for s in samples]
    assert {(e.unit, e.kind, e.rank) for e in rss} == {("bytes", "gauge", 0)}
    assert [e.ts for e in rss] == [pytest.approx(s.ts) for s in samples]


def test_bad_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "x_samples.jsonl"
    with _Writer(path) as w:
        w.sample(Sample(1.0, 0.0, {"power_w": 3.0}))
    with open(path, "a") as fh:
        fh.write("{not json\n")
    with pytest.raises(InputError, match=r"x_samples.jsonl:line 3: expected a JSON object"):
        MonitorSamplesMetricsProvider.from_input(path).collect()


class _Writer:
    """A samples writer closed at the end of a ``with`` block."""
    def __init__(self, path: Path) -> None:
        self.w = SamplesWriter(path, {"prefix": "x", "rank": 1})

    def __enter__(self) -> SamplesWriter:
        return self.w

    def __exit__(self, *exc: object) -> None:
        self.w.close()


def test_follows_a_file_being_written(tmp_path: Path) -> None:
    """collect() returns only new lines; a torn last line waits for its newline."""
    path = tmp_path / "live_samples.jsonl"
    w = SamplesWriter(path, {"prefix": "live", "rank": 2})
    w.sample(Sample(10.0, 0.0, {"energy_j": 1.0}))
    provider = MonitorSamplesMetricsProvider.from_input(tmp_path)
    (first,) = provider.collect(step=7)
    assert (first.name, first.kind, first.unit, first.rank, first.step) == ("monitor/energy_j", "counter", "J", 2, 7)
    with open(path, "a") as fh:
        fh.write('{"ts": 11.0, "t": 1.0, "metr')
    assert provider.collect() == []
    with open(path, "a") as fh:
        fh.write('ics": {"energy_j": 2.0}}\n')
    assert [e.value for e in provider.collect()] == [2.0]
    w.close()


def test_cli_ingest_through_the_core_runner(samples_file: Path, tmp_path: Path) -> None:
    out, count = run_provider_on_input("memory_monitor", samples_file.parent, tmp_path / "events")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert count == len(rows) > 0 and {r["source"] for r in rows} == {"memory_monitor"}


def test_empty_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no \*_samples\.jsonl files"):
        MonitorSamplesMetricsProvider.from_input(tmp_path)


def test_samples_file_is_strict_json_and_refuses_non_finite_numbers(tmp_path: Path) -> None:
    """A NaN/Infinity metric is left out of the line (not measured), never written as a bare NaN; reading one back
    from a hand-edited file is refused on its line."""

    path = tmp_path / "x_rank0_samples.jsonl"
    writer = SamplesWriter(path, {"prefix": "x", "rank": 0})
    writer.sample(Sample(1.0, 0.0, {"power_w": float("nan"), "energy_j": float("inf"), "host_rss_bytes": 5.0}))
    writer.close()
    for line in path.read_text().splitlines():
        json.loads(line, parse_constant=lambda token: pytest.fail(f"bare {token}"))
    _, samples, _, _ = read_samples(path)
    assert [s.metrics for s in samples] == [{"host_rss_bytes": 5.0}]
    for bad in ('{"ts": 1, "t": 0, "metrics": {"power_w": NaN}}', '{"ts": 1e999, "t": 0, "metrics": {}}',
                '{"ts": 1, "t": 0, "metrics": {"x": ' + "9" * 400 + "}}"):
        with path.open("a") as fh:
            fh.write(bad + "\n")
        with pytest.raises(InputError, match="line 3"):
            read_samples(path)
        path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")


def test_gpu_metrics_carry_their_canonical_name(tmp_path: Path) -> None:
    """The readings other tools record too (NVML utilisation, power, energy) say which canonical metric
    they are, so one rule reads utilisation whether the monitor, DCGM or nsys measured it."""
    path = tmp_path / "g_samples.jsonl"
    with _Writer(path) as w:
        w.sample(Sample(1.0, 0.0, {"gpu_util_pct": 35.0, "mem_bw_util_pct": 10.0, "power_w": 250.0,
                                   "energy_j": 100.0, "host_rss_bytes": 1e9}))
    events = {e.name: e for e in MonitorSamplesMetricsProvider.from_input(path).collect()}
    assert {n: e.attrs.get("metric") for n, e in events.items()} == {
        "monitor/gpu_util_pct": "gpu.utilization", "monitor/mem_bw_util_pct": "gpu.memory_bandwidth_utilization",
        "monitor/power_w": "gpu.power", "monitor/energy_j": "gpu.energy", "monitor/host_rss_bytes": None}
    assert {n: e.kind for n, e in events.items()} == {
        "monitor/gpu_util_pct": "ratio", "monitor/mem_bw_util_pct": "ratio", "monitor/power_w": "gauge",
        "monitor/energy_j": "counter", "monitor/host_rss_bytes": "gauge"}
