"""Fixtures for the myutils-tracing tests: the NVTX recorder library and subprocess runs.

NVTX reads ``NVTX_INJECTION64_PATH`` once, at the first NVTX call of a process, so code
whose ranges a test checks runs in a fresh subprocess with the variable already set.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RECORDER_SOURCE = HERE / "nvtx_recorder.c"


def _find_nvtx_headers() -> Path | None:
    """An include dir holding nvtx3/nvToolsExt.h, from the installed nvidia-nvtx wheel (requirements-test.txt)."""
    for entry in sys.path:
        for header in sorted(glob.glob(os.path.join(entry, "nvidia", "*", "include", "nvtx3", "nvToolsExt.h"))):
            return Path(header).parent.parent
    return None


@pytest.fixture(scope="session")
def nvtx_recorder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Absolute path of the NVTX injection library built from tests/nvtx_recorder.c."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: cannot build the NVTX injection recorder")
    scratch = tmp_path_factory.mktemp("nvtx-recorder")
    include = _find_nvtx_headers()
    if include is None:
        pytest.skip("NVTX headers not installed (no nvidia/*/include/nvtx3 on sys.path): "
                    "pip install -r requirements-test.txt (it names nvidia-nvtx)")
    lib = scratch / "libmyutils_nvtx_recorder.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", f"-I{include}", str(RECORDER_SOURCE),
                    "-o", str(lib), "-lpthread"], check=True, capture_output=True, text=True)
    return lib


@dataclass(frozen=True)
class NvtxCall:
    """One line of the recorder's log."""

    op: str
    domain: str
    message: str
    color: str
    category: str
    range_id: str


@dataclass(frozen=True)
class RecordedRun:
    """What a recorded subprocess printed and which NVTX calls it made."""

    calls: list[NvtxCall]
    stdout: str
    stderr: str

    def ops(self, *kinds: str) -> list[tuple[str, str, str]]:
        """(op, domain, message) of the calls whose op is in ``kinds`` (all when empty)."""
        return [(c.op, c.domain, c.message) for c in self.calls if not kinds or c.op in kinds]


@pytest.fixture
def run_recorded(nvtx_recorder: Path, tmp_path: Path) -> Callable[..., RecordedRun]:
    """Run Python code in a subprocess with the recorder attached; return its NVTX calls."""

    def run(code: str, env: dict[str, str] | None = None, check: bool = True) -> RecordedRun:
        log = tmp_path / f"nvtx-{len(list(tmp_path.glob('nvtx-*.log')))}.log"
        full_env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "ENABLE_NVTX")}
        full_env.update({"NVTX_INJECTION64_PATH": str(nvtx_recorder), "MYUTILS_NVTX_LOG": str(log)})
        full_env.update(env or {})
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stderr}")
        lines = log.read_text().splitlines() if log.exists() else []
        return RecordedRun([NvtxCall(*line.split("\t")) for line in lines], proc.stdout, proc.stderr)

    return run
