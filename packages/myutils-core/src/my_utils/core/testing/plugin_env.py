"""An isolated environment in which a plugin package is installed for real, for tests.

``PluginEnv.create(folder)`` makes a virtual environment *without* system site packages
and writes one ``.pth`` file that adds the running interpreter's own package folders
(its site-packages, processed with their ``.pth`` files so editable installs follow, and
any other ``sys.path`` entry). The new environment therefore sees exactly the my_utils the
tests run with, whether that is a venv, a system interpreter or a nox session, while the
plugin packages installed into it stay invisible to the running interpreter.

``--system-site-packages`` is not enough: it inherits the *base* interpreter, which is not
the venv the tests run in (``No module named 'my_utils'`` in a fresh clone).

``write_distribution(site, ...)`` installs a plugin without pip or a build: it writes its
modules and the ``.dist-info`` folder an installer writes (``METADATA``, ``entry_points.txt``,
``RECORD``) into ``site``; a process with ``site`` on ``PYTHONPATH`` finds its entry points
like any installed distribution's. It takes milliseconds, so a test can install many small
misbehaving plugins.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import site
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PluginEnv", "PluginEnvError", "write_distribution"]

_PTH_NAME = "_myutils_parent_env.pth"


class PluginEnvError(RuntimeError):
    """Building the environment or installing into it failed; the message holds pip's last lines."""


def _parent_paths() -> tuple[list[str], list[str]]:
    """(site dirs, other sys.path entries) of the running interpreter, in sys.path order."""
    site_dirs = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        site_dirs.append(site.getusersitepackages())
    site_dirs = [d for d in dict.fromkeys(site_dirs) if os.path.isdir(d)]
    stdlib = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib")}
    others = [
        p for p in sys.path
        if p and os.path.exists(p) and p not in site_dirs and p not in stdlib
        and not p.endswith((".zip", "lib-dynload"))
    ]
    return site_dirs, others


def _last_lines(text: str, n: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])


@dataclass(frozen=True)
class PluginEnv:
    """A venv at ``root`` whose ``python`` sees the running interpreter's packages plus its own."""

    root: Path
    python: Path

    @classmethod
    def create(cls, root: str | os.PathLike[str]) -> PluginEnv:
        """Create the environment in ``root`` (an empty or absent folder) in about a second."""
        folder = Path(root)
        venv.EnvBuilder(system_site_packages=False, with_pip=False, symlinks=os.name != "nt").create(folder)
        python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
        site_dirs, others = _parent_paths()
        # ``site.addsitedir`` also runs the .pth files there, so editable installs of every
        # flavour (plain paths or import hooks) reach the new environment
        lines = [f"import site; site.addsitedir({d!r})" for d in site_dirs] + others
        (Path(purelib) / _PTH_NAME).write_text("\n".join(lines) + "\n", encoding="utf-8")
        return cls(folder, python)

    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for subprocesses: this venv first on PATH, no PYTHONPATH leaking in."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = os.pathsep.join([str(self.python.parent), env.get("PATH", "")])
        env["VIRTUAL_ENV"] = str(self.root)
        env.update(extra or {})
        return env

    def install(self, *projects: str | os.PathLike[str], editable: bool = False, timeout: float = 600) -> None:
        """``pip install --no-deps --no-build-isolation`` the project folders into this env only.

        No network is used: the build backend (hatchling, setuptools...) must already be
        importable by the running interpreter. ``PluginEnvError`` carries pip's last lines.
        """
        if not projects:
            return
        args = [str(self.python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                "--no-index", "--disable-pip-version-check"]
        for project in projects:
            args += ["-e", str(project)] if editable else [str(project)]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=self.environ())
        if proc.returncode != 0:
            raise PluginEnvError(f"pip install of {', '.join(map(str, projects))} into {self.root} failed "
                                 f"(exit {proc.returncode}): {_last_lines(proc.stderr or proc.stdout)}")

    def run(self, *args: str, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``python ARGS`` in this environment (``env`` adds variables); never raises on exit codes."""
        return subprocess.run([str(self.python), *args], capture_output=True, text=True, timeout=timeout,
                              env=self.environ(env), cwd=cwd)

    def myutils(self, *args: str, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the ``myutils`` command line in this environment."""
        return self.run("-m", "my_utils.core", *args, env=env, cwd=cwd, timeout=timeout)

    def pytest(self, *args: str, cwd: str | os.PathLike[str] | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run pytest in this environment (no cache folder is written)."""
        return self.run("-m", "pytest", "-p", "no:cacheprovider", *args, cwd=cwd, timeout=timeout)

    def has_modules(self, names: Sequence[str]) -> dict[str, bool]:
        """Which of ``names`` this environment can import (without importing them)."""
        code = ("import importlib.util, json, sys; "
                "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]}))")
        proc = self.run("-c", code, *names)
        if proc.returncode != 0:
            raise PluginEnvError(f"{self.python} could not run: {_last_lines(proc.stderr)}")
        import json

        found: dict[str, bool] = json.loads(proc.stdout)
        return found


def write_distribution(site: str | os.PathLike[str], name: str, version: str, modules: Mapping[str, str],
                       entry_points: Mapping[str, str], group: str = "my_utils.plugins") -> Path:
    """Install distribution ``name`` into the folder ``site`` as an installer would; return its ``.dist-info``.

    ``modules`` maps relative file paths (``my_utils_ext_x/__init__.py``) to their text;
    ``entry_points`` maps entry-point names to ``module[:attr]`` in ``group``.
    """
    root = Path(site)
    root.mkdir(parents=True, exist_ok=True)
    normal = re.sub(r"[-_.]+", "_", name)
    info = root / f"{normal}-{version}.dist-info"
    info.mkdir()
    files: dict[str, bytes] = {path: text.encode("utf-8") for path, text in modules.items()}
    files[f"{info.name}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info.name}/entry_points.txt"] = (
        f"[{group}]\n" + "".join(f"{ep} = {target}\n" for ep, target in entry_points.items())).encode()
    files[f"{info.name}/INSTALLER"] = b"my_utils.core.testing\n"
    record = []
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{relative},sha256={digest},{len(data)}")
    (info / "RECORD").write_text("\n".join([*record, f"{info.name}/RECORD,,"]) + "\n", encoding="utf-8")
    return info
