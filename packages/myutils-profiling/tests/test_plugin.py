"""The built-in providers are plugins found like a third party's, listed without heavy imports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import get_registry

NAMES = {"mytimer", "torch_profiler", "module_profiler", "table_csv", "ncu_csv", "nsys_sqlite", "cprofile",
         "dcgm_dmon", "nccl_log", "nccl_inspector", "nccl_ras", "perf_stat"}


def test_registered_and_loadable() -> None:
    descs = get_registry().descriptions(PluginKind.METRICS_PROVIDER)
    assert set(descs) >= NAMES
    for name in NAMES:
        cls = descs[name].load()
        assert cls.name == name and callable(cls.collect)


def test_listing_and_import_stay_light() -> None:
    code = ("import sys, json\nimport my_utils.profiling\n"
            "from my_utils.core.plugins import get_registry\nfrom my_utils.core.plugin_types import PluginKind\n"
            "get_registry().descriptions(PluginKind.METRICS_PROVIDER)\n"
            "print(json.dumps(sorted(m for m in ('torch','numpy','pandas','plotly','yaml') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout) == []


def test_declared_options_match_the_providers_constructors() -> None:
    import inspect

    descs = get_registry().descriptions(PluginKind.METRICS_PROVIDER)
    for name in NAMES:
        cls = descs[name].load()
        params = inspect.signature(cls.__init__).parameters
        declared = {spec.name: spec for spec in descs[name].options}
        assert declared, f"{name} declares no options"
        for spec in declared.values():
            assert spec.help and spec.type in (str, int, float, bool, list), spec
            if spec.name in params:  # keyword of the class itself (else passed on to FileProviderBase)
                assert params[spec.name].default == spec.default, (name, spec.name)
        keywords = {p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY}
        assert keywords <= set(declared), f"{name}: constructor keywords {sorted(keywords - set(declared))} undeclared"


def test_providers_search_subfolders_the_same_way(tmp_path: Path) -> None:
    from my_utils.profiling.examples import example_config_path

    data = example_config_path().parent / "data"
    samples = {"mytimer": "profile_rank_0.csv", "torch_profiler": "cpu_trace_rank_0.json.gz",
               "table_csv": "op_summary.csv"}
    descs = get_registry().descriptions(PluginKind.METRICS_PROVIDER)
    for name, sample in samples.items():
        root = tmp_path / name
        (root / "run1" / "rank0").mkdir(parents=True)
        (root / ".cache").mkdir()
        shutil.copy(data / sample, root / "run1" / "rank0" / sample)
        shutil.copy(data / sample, root / ".cache" / sample)  # hidden folders are not searched
        cls = descs[name].load()
        from_folder = cls.from_input(root).collect()
        direct = cls.from_input(data / sample).collect()
        assert len(from_folder) == len(direct) > 0, name
        assert [p.relative_to(root).parts for p in cls.from_input(root).files()] == [("run1", "rank0", sample)]


def test_listed_inputs_are_the_patterns_a_folder_is_searched_for() -> None:
    descs = get_registry().descriptions(PluginKind.METRICS_PROVIDER)
    for name in NAMES - {"module_profiler"}:
        cls = descs[name].load()
        assert set(cls.patterns) <= set(descs[name].inputs), name
