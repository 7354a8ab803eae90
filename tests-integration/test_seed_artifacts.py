"""The seed's ``my_utils.artifacts`` part: names from core (dumps) and profiling (NCU CSV), resolved lazily.

Each check runs in a fresh interpreter: the whole install (every name resolves to its home,
or, for the NCU analyses a myutils-profiling release may not ship yet, names the upgrade),
and an interpreter that sees only myutils-core's source (the dumper works on plain data, the
NCU names say ``pip install myutils-profiling``).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.artifacts import ARTIFACT_NAMES

REPO = Path(__file__).resolve().parents[1]
CORE_SRC = REPO / "packages" / "myutils-core" / "src"


def _python(code: str, *, core_only: bool = False) -> subprocess.CompletedProcess[str]:
    if core_only:  # -S: no site-packages (no other distribution, no installed metadata)
        code = f"import sys; sys.path.insert(0, {str(CORE_SRC)!r})\n" + code
    argv = [sys.executable, *(["-S"] if core_only else []), "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


def _home_has(home: str, attribute: str) -> bool:
    try:
        return hasattr(importlib.import_module(home), attribute)
    except ModuleNotFoundError:
        return False


def test_import_is_light_and_lists_the_names() -> None:
    out = _python(
        "import json, sys, my_utils.artifacts as a\n"
        "heavy = ('torch', 'numpy', 'pandas', 'plotly', 'my_utils.profiling', 'my_utils.core')\n"
        "print(json.dumps([sorted(n for n in a.ARTIFACT_NAMES if n in dir(a)),"
        " sorted(m for m in heavy if m in sys.modules)]))"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [sorted(ARTIFACT_NAMES), []]


@pytest.mark.parametrize("name", sorted(ARTIFACT_NAMES))
def test_every_name_resolves_to_its_home_or_names_the_upgrade(name: str) -> None:
    home, attribute, dist = ARTIFACT_NAMES[name]
    code = (f"from my_utils.artifacts import {name}\n"
            f"import {home} as home\n"
            f"print({name} is home.{attribute})")
    out = _python(code)
    if _home_has(home, attribute):
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "True"
    else:  # a myutils-profiling without my_utils.profiling.ncu (or without the function)
        assert out.returncode == 1
        assert out.stderr.strip().splitlines()[-1].endswith(f"Run: pip install --upgrade {dist}")
        assert f"my_utils.artifacts.{name}" in out.stderr


def test_hasattr_answers_false_for_a_missing_home() -> None:
    out = _python("import my_utils.artifacts as a\nprint(hasattr(a, 'read_ncu_csv'), hasattr(a, 'dump_artifacts'),"
                  " hasattr(a, 'no_such_name'))", core_only=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "False"]


@pytest.mark.parametrize("name", sorted(n for n, (_, _, dist) in ARTIFACT_NAMES.items() if dist != "myutils-core"))
def test_core_alone_names_the_profiling_distribution(name: str) -> None:
    home = ARTIFACT_NAMES[name][0]
    out = _python(f"from my_utils.artifacts import {name}", core_only=True)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        f"my_utils.core._legacy.LegacyHomeMissing: my_utils.artifacts.{name} now lives in {home}, shipped by the "
        "'myutils-profiling' distribution, which is not installed. Run: pip install myutils-profiling")


def test_core_alone_dumps_and_loads_plain_data(tmp_path: Path) -> None:
    """No torch, numpy or PIL on the path: containers, dataclasses and scalars still round-trip."""
    code = (
        "import dataclasses, math\n"
        "from my_utils.artifacts import dump_artifacts, load_artifacts\n"
        "@dataclasses.dataclass\n"
        "class Step:\n"
        "    n: int\n"
        "    loss: float\n"
        "obj = {'steps': [Step(1, 0.5), Step(2, math.inf)], 'tag': ('a', b'\\x00'), 'ids': {3, 4}}\n"
        f"folder = dump_artifacts(obj, {str(tmp_path / 'dump')!r})\n"
        "print(load_artifacts(folder) == obj, sorted(p.name for p in folder.iterdir()))\n"
    )
    out = _python(code, core_only=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True ['blobs', 'manifest.json']"


def test_read_ncu_csv_gives_the_sm_throughput_of_a_real_export(real_fixtures: Path) -> None:
    """The seed user's NCU question, answered through my_utils.artifacts on a real ncu 2020.2 export."""
    from my_utils.artifacts import read_ncu_csv

    path = real_fixtures / "ncu" / "ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
    events = read_ncu_csv(path)
    sm = [e for e in events if e.name == "ncu:sm__throughput.avg.pct_of_peak_sustained_elapsed"]
    # the file: 14 launches x 10 metrics (MANIFEST.md), one SM-throughput row per launch
    assert len(events) == 140 and len(sm) == 14
    assert {e.unit for e in sm} == {"%"} and all(0 <= e.value <= 100 for e in sm)
    assert len({e.attrs["launch_id"] for e in sm}) == 14


def test_ncu_summary_gives_each_kernels_sm_throughput(real_fixtures: Path) -> None:
    """``ncu_summary`` (profiling/ncu) agrees with the provider's reader: per kernel, the SM throughput
    averaged over its launches weighted by each launch's duration (what a launch costs)."""
    try:
        from my_utils.artifacts import ncu_compare, ncu_summary
    except ImportError as exc:  # only a myutils-profiling without my_utils.profiling.ncu (the message says which)
        pytest.skip(str(exc))
    from statistics import fmean

    from my_utils.artifacts import read_ncu_csv

    path = real_fixtures / "ncu" / "ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
    sol: dict[tuple[str, str], float] = {}
    duration: dict[tuple[str, str], float] = {}
    for e in read_ncu_csv(path):
        key = (e.attrs["kernel"], e.attrs["launch_id"])
        if e.name == "ncu:sm__throughput.avg.pct_of_peak_sustained_elapsed":
            sol[key] = e.value
        elif e.name == "ncu:gpu__time_duration.sum":
            duration[key] = e.value
    by_kernel: dict[str, list[tuple[float, float]]] = {}
    for key, value in sol.items():
        by_kernel.setdefault(key[0], []).append((value, duration[key]))
    analysis = ncu_summary([path])
    assert {k.kernel: k.launches for k in analysis.kernels} == {k: len(v) for k, v in by_kernel.items()}
    for kernel in analysis.kernels:
        pairs = by_kernel[kernel.kernel]
        assert kernel.sol_compute_pct == pytest.approx(sum(v * w for v, w in pairs) / sum(w for _, w in pairs))
    # the weighting matters on this file: some kernel's plain mean differs from its weighted one
    assert any(fmean(v for v, _ in p) != pytest.approx(sum(v * w for v, w in p) / sum(w for _, w in p))
               for p in by_kernel.values())
    same = ncu_compare([path], [path])
    assert same is not None
