"""The seven providers are plugins found like a third party's, listed without heavy imports."""

from __future__ import annotations

import json
import subprocess
import sys

from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import get_registry

NAMES = {"mytimer", "torch_profiler", "module_profiler", "table_csv", "ncu_csv", "nsys_sqlite", "cprofile"}


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
