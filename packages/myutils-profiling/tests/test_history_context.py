"""A run's context: given first, then the CI variables, then git, then the report; never guessed."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from history_support import make_report

from my_utils.core.errors import InputError
from my_utils.profiling.history.context import config_hash_of, context_of, from_environment, hardware_key


def test_ci_variables_in_order() -> None:
    gitlab = {"CI_COMMIT_SHA": "gl", "CI_COMMIT_REF_NAME": "feature", "GITHUB_SHA": "gh"}
    assert from_environment(gitlab, cwd="/") == {"git_commit": "gl", "git_branch": "feature"}
    github = {"GITHUB_SHA": "merge", "GITHUB_HEAD_REF": "pr-branch", "GITHUB_REF_NAME": "12/merge"}
    assert from_environment(github, cwd="/") == {"git_commit": "merge", "git_branch": "pr-branch"}
    ours = {**github, "MYUTILS_GIT_COMMIT": "head", "MYUTILS_GIT_BRANCH": "b"}
    assert from_environment(ours, cwd="/") == {"git_commit": "head", "git_branch": "b"}


def test_git_in_the_current_folder(tmp_path: Path) -> None:
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, text=True)  # noqa: E731
    run("init", "-q", "-b", "topic")
    (tmp_path / "f").write_text("x")
    run("add", "f")
    run("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "m")
    head = run("rev-parse", "HEAD").stdout.strip()
    assert from_environment({}, cwd=tmp_path) == {"git_commit": head, "git_branch": "topic"}
    assert from_environment({"GITHUB_SHA": "ci"}, cwd=tmp_path) == {"git_commit": "ci", "git_branch": "topic"}


def test_report_context_and_what_is_given() -> None:
    report = make_report("pretrain", {"step_time.median": 1.0}, gpu="NVIDIA H100 80GB HBM3", gpu_count=8, world_size=64)
    ctx = context_of(report, {"git_commit": "abc", "git_branch": "main"}, file_time=123.0)
    assert (ctx.workload, ctx.gpu_model, ctx.gpu_count, ctx.world_size, ctx.run_time) == (
        "pretrain", "NVIDIA H100 80GB HBM3", 8, 64, 123.0)
    assert ctx.hardware == "8x NVIDIA H100 80GB HBM3" and ctx.series.describe() == (
        "pretrain on 8x NVIDIA H100 80GB HBM3 (world size 64)")
    unknown = context_of(make_report(gpu=None, gpu_count=None, world_size=None), {"git_commit": "a", "git_branch": "b"})
    assert unknown.hardware == "unknown hardware" and unknown.world_size is None
    assert hardware_key(None, None, cpu_only=True) == "CPU only"


def test_config_hash_is_the_file_sha256(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_bytes(b"lr: 3e-4\n")
    assert config_hash_of(tmp_path / "c.yaml") == hashlib.sha256(b"lr: 3e-4\n").hexdigest()[:16]
    with pytest.raises(InputError, match=r"missing\.yaml"):
        config_hash_of(tmp_path / "missing.yaml")
