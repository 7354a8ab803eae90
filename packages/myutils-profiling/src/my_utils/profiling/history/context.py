"""What a stored run was: workload, config, commit and branch, host, hardware, world size, tool, time.

A run's context comes, item by item, from what the caller gives (``--commit``, ``--workload``...),
then the CI environment (``MYUTILS_GIT_COMMIT`` / ``MYUTILS_GIT_BRANCH``, else the variables of
GitLab CI, Jenkins and GitHub Actions: :func:`from_environment`), then ``git`` in the current
folder, then the report itself (its headline's context facts: GPU, GPUs per process, world size,
host). What none of them says stays None ("unknown"), never a guess.

Runs are compared only inside a *series*: the same workload, the same hardware (GPU model and count,
or "CPU only") and the same world size (:attr:`RunContext.series`). A run whose hardware the report
does not name is in a series of its own ("unknown hardware"), never pooled with a known one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from my_utils.core.errors import InputError

if TYPE_CHECKING:
    from my_utils.profiling.model.report import AnalysisReport

CPU_ONLY = "CPU only"
UNKNOWN_HARDWARE = "unknown hardware"
#: Longest text kept for one context item (a branch name, a host list): the store's columns are bounded.
MAX_TEXT = 250


@dataclass(frozen=True)
class SeriesKey:
    """The runs that may be compared with each other: one workload on one hardware at one world size."""

    workload: str
    hardware: str
    world_size: int | None

    def describe(self) -> str:
        """``pretrain on 8x NVIDIA H100 (world size 8)``."""
        world = "world size unknown" if self.world_size is None else f"world size {self.world_size}"
        return f"{self.workload} on {self.hardware} ({world})"


@dataclass(frozen=True)
class RunContext:
    """Where and when a run ran, and what it was (every item None when unknown, except workload and time)."""

    workload: str
    run_time: float
    config_hash: str | None = None
    git_commit: str | None = None
    git_branch: str | None = None
    host: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    world_size: int | None = None
    tool_version: str | None = None
    cpu_only: bool = False

    @property
    def hardware(self) -> str:
        """``8x NVIDIA H100 80GB HBM3`` (count per process, when known), ``CPU only`` or ``unknown hardware``."""
        return hardware_key(self.gpu_model, self.gpu_count, self.cpu_only)

    @property
    def series(self) -> SeriesKey:
        """The series this run belongs to (the runs it may be compared with)."""
        return SeriesKey(self.workload, self.hardware, self.world_size)


def hardware_key(gpu_model: str | None, gpu_count: int | None, cpu_only: bool = False) -> str:
    """The hardware a series is keyed on: GPU model and count, ``CPU only``, or ``unknown hardware``."""
    if gpu_model:
        return f"{gpu_count}x {gpu_model}" if gpu_count else gpu_model
    return CPU_ONLY if cpu_only else UNKNOWN_HARDWARE


def _text(value: Any) -> str | None:
    """A context item as one bounded line of text, None when empty."""
    if value is None or isinstance(value, bool):
        return None
    text = " ".join(str(value).split())
    return text[:MAX_TEXT] or None


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    return None


def _headline_values(report: AnalysisReport) -> dict[str, Any]:
    """The measured context facts of a report (``context.gpu`` -> ``gpu``...), from its facts then its headline."""
    out: dict[str, Any] = {}
    items = list(report.headline.get("context") or []) if isinstance(report.headline, Mapping) else []
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("id"), str) and item.get("value") is not None:
            out[item["id"].removeprefix("context.")] = item["value"]
    for fact in report.facts:
        if fact.id.startswith("context.") and ":" not in fact.id and fact.measured:
            out[fact.id.removeprefix("context.")] = fact.value
    return out


def _first(*values: str | None) -> str | None:
    return next((t for t in map(_text, values) if t), None)


def from_environment(environ: Mapping[str, str] | None = None,
                     cwd: str | Path | None = None) -> dict[str, str | None]:
    """The commit and branch the CI variables name, else what ``git`` says in ``cwd`` (None when neither does).

    First found wins: ours, then GitLab CI, Jenkins, and GitHub Actions (a pull request's branch,
    ``GITHUB_HEAD_REF``, before the ref that triggered the job).
    """
    environ = os.environ if environ is None else environ
    commit = _first(environ.get("MYUTILS_GIT_COMMIT"), environ.get("CI_COMMIT_SHA"), environ.get("GIT_COMMIT"),
                    environ.get("GITHUB_SHA"))
    branch = _first(environ.get("MYUTILS_GIT_BRANCH"), environ.get("CI_COMMIT_REF_NAME"),
                    environ.get("GIT_BRANCH"), environ.get("GITHUB_HEAD_REF"), environ.get("GITHUB_REF_NAME"))
    if commit is None or branch is None:
        git_commit, git_branch = _git(cwd)
        commit = commit or git_commit
        branch = branch or git_branch
    return {"git_commit": commit, "git_branch": branch}


def _git(cwd: str | Path | None) -> tuple[str | None, str | None]:
    """``git rev-parse`` of HEAD and its branch in ``cwd``; (None, None) outside a work tree or without git."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD", "--abbrev-ref", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None, None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2:
        return None, None
    return _text(lines[0]), (None if lines[1] == "HEAD" else _text(lines[1]))  # "HEAD": a detached checkout


def config_hash_of(path: str | Path) -> str:
    """The first 16 hex digits of the sha256 of a config file's bytes (the same file gives the same hash)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(str(path), None, f"a readable config file to hash ({exc.strerror or exc})") from None
    return hashlib.sha256(data).hexdigest()[:16]


def context_of(report: AnalysisReport, given: Mapping[str, Any] | None = None, *,
               environ: Mapping[str, str] | None = None, cwd: str | Path | None = None,
               file_time: float | None = None) -> RunContext:
    """The context of ``report``: what is ``given`` first, then the CI environment and git, then the report.

    ``given`` may hold any :class:`RunContext` field (None values are ignored). The run's time is
    the one given, else ``file_time`` (the report file's modification time), else now.
    """
    given = {k: v for k, v in (given or {}).items() if v is not None}
    from my_utils.profiling._version import __version__

    seen = _headline_values(report)
    found = {} if "git_commit" in given and "git_branch" in given else from_environment(environ, cwd)
    cpu = seen.get("cpu_only")
    ctx = RunContext(
        workload=_text(report.workload) or "unnamed",
        run_time=file_time if file_time is not None else time.time(),
        config_hash=_text(report.summary.get("config_hash")) if isinstance(report.summary, Mapping) else None,
        git_commit=found.get("git_commit"), git_branch=found.get("git_branch"),
        host=_text(seen.get("host")), gpu_model=_text(seen.get("gpu")), gpu_count=_count(seen.get("gpu_count")),
        world_size=_count(seen.get("world_size")), tool_version=__version__,
        cpu_only=isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and cpu == 1,
    )
    fields: dict[str, Any] = {k: (_text(v) if isinstance(v, str) else v) for k, v in given.items()}
    return replace(ctx, **fields)
