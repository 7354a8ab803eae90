"""What each distribution pulls and how much it installs: the README's "Installing parts" table, measured.

Each distribution's wheel (built from this checkout) is installed with its dependencies into a
fresh virtual environment that has nothing else (no pip, no setuptools: the outer pip installs
into it with ``--python``), from the package indexes pip is configured with; the size is the
apparent size of every file under the new environment's ``site-packages`` (``.pyc`` included:
pip compiles on install), in MB of 10^6 bytes. The sibling distributions come from the same
fresh wheels, never from an index.

Run as a script to print the table the README quotes::

    .venv/bin/python tests-integration/test_seed_install_sizes.py

The test measures again and checks the README: the same third-party packages of note in each
row, each size within 15 % (dependency releases move sizes; a new heavy dependency moves them
far more). An unreachable package index skips the test, naming the index.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import venv
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MEMBERS = ("core", "tracing", "hooks", "distributed", "memory", "profiling", "legacy")
#: a third-party package is named in the table when it installs at least this much (MB); the test
#: allows a package near the line to be named or not (between LOW and HIGH)
NAMED_MB, LOW_MB, HIGH_MB = 5.0, 4.0, 6.0
TOLERANCE = 0.15
_UNREACHABLE = re.compile(r"(Could not fetch URL|NewConnectionError|Network is unreachable|Temporary failure in name "
                          r"resolution|Failed to establish a new connection|ConnectionError|Max retries exceeded)")


class IndexUnreachable(RuntimeError):
    """pip could not reach a package index; the message names it."""


@dataclass(frozen=True)
class Footprint:
    """One distribution installed alone: its size and the third-party packages it brought."""

    member: str
    mb: float
    packages: dict[str, float]  # every installed distribution but the myutils-* ones -> its MB

    def large(self, threshold: float = NAMED_MB) -> tuple[str, ...]:
        """Third-party packages of at least ``threshold`` MB, largest first."""
        return tuple(sorted((p for p, mb in self.packages.items() if mb >= threshold),
                            key=lambda p: -self.packages[p]))


def build_wheels(out: Path) -> dict[str, Path]:
    """``python -m build --wheel --no-isolation`` of each distribution into ``out``."""
    wheels = {}
    for member in MEMBERS:
        subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
                        str(REPO / "packages" / f"myutils-{member}")],
                       check=True, capture_output=True, text=True, timeout=600)
        (wheels[member],) = out.glob(f"myutils_{member}-*.whl")
    return wheels


def _siblings(member: str, wheels: dict[str, Path]) -> list[str]:
    """``member`` and every myutils-* distribution it requires, transitively (from the wheels' metadata)."""
    found, todo = [], [member]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.append(name)
        with zipfile.ZipFile(wheels[name]) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            requires = Parser().parsestr(zf.read(meta).decode()).get_all("Requires-Dist") or []
        todo += [m.group(1) for r in requires if "extra ==" not in r
                 for m in [re.match(r"myutils-(\w+)", r)] if m]
    return found


def measure(member: str, wheels: dict[str, Path], workdir: Path) -> Footprint:
    """Install ``member`` into a fresh environment under ``workdir``; return its footprint."""
    env = workdir / member
    venv.create(env, with_pip=False, symlinks=True)
    python = env / "bin" / "python"
    report = workdir / f"{member}.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check",
         "--no-input", "--report", str(report), *(str(wheels[m]) for m in _siblings(member, wheels))],
        capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        unreachable = _UNREACHABLE.search(proc.stderr)
        if unreachable:
            line = next(x for x in proc.stderr.splitlines() if unreachable.group(1) in x)
            raise IndexUnreachable(f"package index unreachable while installing myutils-{member}: {line.strip()}")
        raise RuntimeError(f"pip install of myutils-{member} failed:\n{proc.stderr[-3000:]}")
    (site,) = env.glob("lib/python*/site-packages")
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and not p.is_symlink())
    names = {item["metadata"]["name"].lower().replace("_", "-") for item in json.loads(report.read_text())["install"]}
    per_package = {name: mb for name, mb in _record_sizes(site).items() if name in names}
    return Footprint(member, size / 1e6, {n: mb for n, mb in per_package.items() if not n.startswith("myutils-")})


def _record_sizes(site: Path) -> dict[str, float]:
    """MB on disk per installed distribution, from the files its RECORD lists (``.pyc`` included)."""
    sizes = {}
    for record in site.glob("*.dist-info/RECORD"):
        meta = Parser().parsestr((record.parent / "METADATA").read_text(encoding="utf-8", errors="replace"))
        total = 0
        for line in record.read_text(encoding="utf-8").splitlines():
            path = site / line.rsplit(",", 2)[0]
            if path.is_file():
                total += path.stat().st_size
        sizes[str(meta["Name"]).lower().replace("_", "-")] = total / 1e6
    return sizes


def measure_all(workdir: Path) -> list[Footprint]:
    wheels = build_wheels(workdir / "wheels")
    return [measure(member, wheels, workdir) for member in MEMBERS]


def table(footprints: list[Footprint]) -> str:
    """The README rows: distribution, installed MB, notable third-party packages it pulls."""
    lines = [f"| distribution | installed, MB | pulls (third-party packages of {NAMED_MB:.0f} MB or more) |",
             "|---|---|---|"]
    for f in footprints:
        lines.append(f"| `myutils-{f.member}` | {f.mb:.0f} | {', '.join(f.large())} |")
    return "\n".join(lines)


def readme_rows() -> dict[str, tuple[float, tuple[str, ...]]]:
    """The measured table as the README quotes it."""
    section = README.read_text(encoding="utf-8").split("## Installing parts", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for m in re.finditer(r"^\| `myutils-(\w+)` \| (\d+) \| ([^|]*) \|$", section, flags=re.M):
        pulls = tuple(p.strip() for p in m.group(3).split(",") if p.strip())
        rows[m.group(1)] = (float(m.group(2)), pulls)
    return rows


def test_readme_quotes_a_row_per_distribution() -> None:
    assert sorted(readme_rows()) == sorted(MEMBERS)


@pytest.mark.slow
def test_installed_sizes_match_the_readme(tmp_path: Path) -> None:
    try:
        footprints = measure_all(tmp_path)
    except IndexUnreachable as exc:
        pytest.skip(str(exc))
    quoted = readme_rows()
    for f in footprints:
        mb, pulls = quoted[f.member]
        must, may = set(f.large(HIGH_MB)), set(f.large(LOW_MB))
        assert must <= set(pulls) <= may, (
            f"myutils-{f.member} pulls {f.large()} (README says {pulls}); rows:\n{table(footprints)}")
        assert abs(f.mb - mb) <= TOLERANCE * mb, (
            f"myutils-{f.member} installs {f.mb:.1f} MB (README says {mb:.0f}); rows:\n{table(footprints)}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        results = measure_all(Path(tmp))
    print(table(results))
    for f in results:
        print(f"myutils-{f.member}: {f.mb:.1f} MB; {len(f.packages)} third-party: "
              + ", ".join(f"{p} {mb:.1f}" for p, mb in sorted(f.packages.items(), key=lambda x: -x[1])))
