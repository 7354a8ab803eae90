"""The seed's ``pip install -e ".[all]"`` from the root keeps an installed torch 2.13.0.

What proves it: a fresh virtual environment that sees torch 2.13.0 and its own requirements
(linked from this environment, nothing else), and pip's resolver asked for the umbrella with
``[all]`` in ``--dry-run --report`` mode. The report lists every distribution pip would
install; torch must not be among them (``tensordict`` and ``megatron-core`` require torch, so a
resolver that wanted another torch would list it). Slow (pip resolves ~50 distributions from
the index); skipped, saying why, only when no package index answers (never on a conflict).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _requirement_names(dist: importlib.metadata.Distribution) -> list[str]:
    names = []
    for req in dist.requires or []:
        if "extra ==" in req:
            continue
        names.append(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0])
    return names


def _link_torch_closure(target: Path) -> str:
    """Symlink torch and what it requires (package folders and dist-info) into ``target``; torch's version."""
    seen: set[str] = set()
    todo = ["torch"]
    version = ""
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        dist = importlib.metadata.distribution(name)
        if key == "torch":
            version = dist.version
        base = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            if (base / top).exists() and not (target / top).exists():
                (target / top).symlink_to(base / top)
        todo += _requirement_names(dist)
    return version


@pytest.mark.slow
def test_all_extra_keeps_the_installed_torch(tmp_path: Path, index_unreachable: Any) -> None:
    torch_only = tmp_path / "torch_only"
    torch_only.mkdir()
    version = _link_torch_closure(torch_only)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "torch_only.pth").write_text(f"{torch_only}\n")
    seen = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert seen == version
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet",
                           "--report", str(report), "-e", ".[all]"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0 and (reason := index_unreachable(proc.stderr)):
        pytest.skip(f'-e ".[all]": {reason}')
    assert proc.returncode == 0, proc.stderr[-3000:]
    installs = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert "torch" not in installs, f"pip would replace torch {version} with {installs.get('torch')}"
    # the extras really were resolved (torch-dependent ones included) and every member comes along
    assert {"tensordict", "megatron-core", "etcd3gw", "nvidia-ml-py", "nvtx", "psutil", "pandas",
            "matplotlib"} <= set(installs)
    assert {f"myutils-{m}" for m in ("core", "tracing", "hooks", "distributed", "memory", "profiling",
                                     "legacy")} <= set(installs)
