"""The ncu CSV reader lives with the Nsight Compute analyses; the ``ncu_csv`` provider reads through it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from my_utils.profiling.ncu import csv_read
from my_utils.profiling.ncu import provider as provider
from my_utils.profiling.ncu.launches import read_launches


def test_the_provider_reads_through_the_ncu_package(real_fixtures: Any) -> None:
    assert provider.read_ncu_csv is csv_read.read_ncu_csv
    path = real_fixtures / "ncu/ai4mat__metrics_713_paddle_.csv"
    events = provider.NcuCsvMetricsProvider.from_input(path).collect()
    assert [(e.name, e.value, e.attrs) for e in events] == [(e.name, e.value, e.attrs)
                                                             for e in csv_read.read_ncu_csv(path)]
    launches = read_launches(path)
    assert len(launches) == 2 and sum(len(x.metrics) for x in launches) == len(events) == 20


def test_the_analyses_never_import_the_provider(real_fixtures: Any) -> None:
    # the dependency points from the ncu home's provider to its analyses, never back (before: ncu.launches
    # imported the provider; the import contracts in pyproject.toml now say so for the whole home)
    path = real_fixtures / "ncu/ai4mat__metrics_713_paddle_.csv"
    code = ("import sys; from my_utils.profiling.ncu.analysis import analyze_files; "
            f"a = analyze_files([{str(path)!r}]); assert a.kernels; "
            "print(sorted(m for m in sys.modules if m.startswith('my_utils.profiling.ncu.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == ("['my_utils.profiling.ncu.analysis', 'my_utils.profiling.ncu.csv_read', "
                                  "'my_utils.profiling.ncu.launches']")
