"""A pipe given to a file-reading provider is refused as what it is, before anything reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.core.errors import InputError
from my_utils.core.plugin_types import PluginKind
from my_utils.core.plugins import get_registry, load_component
from my_utils.profiling.formats._files import FileProviderBase

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="os.mkfifo: no FIFOs on this OS")


def _file_providers() -> list[str]:
    names = []
    for name in get_registry().descriptions(PluginKind.METRICS_PROVIDER):
        factory = load_component(PluginKind.METRICS_PROVIDER, name)
        if isinstance(factory, type) and issubclass(factory, FileProviderBase):
            names.append(name)
    return sorted(names)


def test_every_file_provider_names_a_pipe(tmp_path: Path) -> None:
    """Before: 'no such file or folder' for a FIFO that is there (every file provider, and `plugins run`)."""
    names = _file_providers()
    assert {"torch_profiler", "nsys_sqlite", "ncu_csv", "mytimer", "nccl_log", "perf_stat"} <= set(names)
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    for name in names:
        factory = load_component(PluginKind.METRICS_PROVIDER, name)
        with pytest.raises(InputError, match="not a regular file or folder"):
            factory.from_input(fifo)


def test_plugins_run_on_a_pipe_exits_2_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "my_utils.core", "plugins", "run", "torch_profiler",
                           "--input", str(fifo), "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"error: {fifo}: not a regular file or folder: a FIFO (a pipe, socket or device " \
                                  "is not read); give a file or a folder"
    assert not out.exists()
