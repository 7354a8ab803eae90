"""The shell templates, run by bash: presets, env overrides, output suffix, nsys wrapping."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from my_utils.profiling.launch_args import parse_profiling_args
from my_utils.profiling.templates import TEMPLATE_FILES, get_profiling_templates_dir

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")

TPL = get_profiling_templates_dir()

LAUNCHER = """
set -euo pipefail
TPL_DIR="$(python - <<'PY'
from my_utils import get_profiling_templates_dir
print(get_profiling_templates_dir())
PY
)"
source "${TPL_DIR}/profile_cli_common.sh"
PROFILE_PRESET="${TPL_DIR}/${PRESET_NAME}"
NSYS_START_STEP="${NSYS_START_STEP:-10}"
NSYS_STOP_STEP="${NSYS_STOP_STEP:-20}"
NSYS_OUTPUT_DIR="${NSYS_OUTPUT_DIR:-./logs/nsys}"
NSYS_OUTPUT_PREFIX="${NSYS_OUTPUT_PREFIX:-}"
if [[ -z "${NSYS_OUTPUT_PREFIX}" ]]; then
NSYS_OUTPUT_PREFIX='train_rank_%q{RANK}'
fi
NSYS_GPU_METRICS_DEVICES="${NSYS_GPU_METRICS_DEVICES:-0}"
profile_prepare "$PROFILE_PRESET"
EXEC_CMD=(python app.py)
profile_wrap_exec_with_nsys EXEC_CMD
CMD=("${EXEC_CMD[@]}" "${PROFILE_SETTINGS[@]}" --your_framework_args 1)
"${CMD[@]}"
"""

APP = """
import json, os, sys
from my_utils.profiling.launch_args import setup_profiling
prof = setup_profiling()
json.dump({"argv": sys.argv[1:], "remaining": list(prof.remaining), "env": os.environ.get("ENABLE_NVTX"),
           "nsys": [prof.nsys_profiler.action(s) for s in range(45)]}, open("app_out.json", "w"))
"""

STUB_NSYS = """#!/bin/sh
# recording stand-in for Nsight Systems: log the arguments, then run the application like nsys
printf '%s\\n' "$@" > "$NSYS_STUB_LOG"
[ "$1" = profile ] && shift
while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
exec "$@"
"""


def _run(tmp_path: Path, preset: str, env: dict[str, str] | None = None,
         with_stub: bool = True) -> subprocess.CompletedProcess[str]:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "run_train.sh").write_text(LAUNCHER)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if with_stub:
        stub = bin_dir / "nsys"
        stub.write_text(STUB_NSYS)
        stub.chmod(0o755)
    python_dir = Path(sys.executable).parent
    full = {"PATH": f"{bin_dir}:{python_dir}:/usr/bin:/bin", "PRESET_NAME": preset,
            "NSYS_STUB_LOG": str(tmp_path / "nsys_args.txt"), "HOME": os.environ.get("HOME", "/tmp"),
            **(env or {})}
    return subprocess.run(["bash", "run_train.sh"], cwd=tmp_path, env=full, capture_output=True, text=True,
                          timeout=120)


def test_template_files_exist() -> None:
    for name in TEMPLATE_FILES:
        assert (TPL / name).is_file()


def test_nsys_preset_wraps_with_suffix(tmp_path: Path) -> None:
    result = _run(tmp_path, "preset_nsys_default.env")
    assert result.returncode == 0, result.stderr
    nsys_args = (tmp_path / "nsys_args.txt").read_text().splitlines()
    out = "./logs/nsys/train_rank_%q{RANK}_step_10_20_cap_cudaProfilerApi_with_metrics_0"
    assert nsys_args[:6] == ["profile", "--trace=cuda,nvtx", "--capture-range=cudaProfilerApi",
                             "--capture-range-end=stop", f"--output={out}", "--force-overwrite=true"]
    assert nsys_args[6:9] == ["--gpu-metrics-devices=0", "python", "app.py"]
    assert nsys_args[-2:] == ["--your_framework_args", "1"]
    app = json.loads((tmp_path / "app_out.json").read_text())
    assert app["remaining"] == ["--your_framework_args", "1"]
    assert app["env"] == "1"  # --profiling_env.ENABLE_NVTX=1 exported by setup_profiling
    assert app["nsys"][10] == "start" and app["nsys"][20] == "stop" and app["nsys"].count(None) == 43
    assert (tmp_path / "logs" / "nsys").is_dir()


def test_env_overrides_win_over_preset(tmp_path: Path) -> None:
    result = _run(tmp_path, "preset_nsys_default.env", {"NSYS_START_STEP": "30", "NSYS_STOP_STEP": "40",
                                                        "NSYS_TRACE": "cuda,nvtx,osrt",
                                                        "NSYS_GPU_METRICS_DEVICES": "none",
                                                        "NSYS_OUTPUT_PREFIX": "job"})
    assert result.returncode == 0, result.stderr
    nsys_args = (tmp_path / "nsys_args.txt").read_text().splitlines()
    assert "--trace=cuda,nvtx,osrt" in nsys_args
    assert "--output=./logs/nsys/job_step_30_40_cap_cudaProfilerApi_no_metrics" in nsys_args
    assert not any(a.startswith("--gpu-metrics-devices") for a in nsys_args)
    app = json.loads((tmp_path / "app_out.json").read_text())
    assert app["nsys"].index("start") == 30 and app["nsys"].index("stop") == 40


def test_disabled_preset_runs_the_command_unchanged(tmp_path: Path) -> None:
    result = _run(tmp_path, "preset_disabled.env")
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "nsys_args.txt").exists()
    app = json.loads((tmp_path / "app_out.json").read_text())
    assert app["argv"][:2] == ["--torch_profiler.enable=false", "--nsys_profiler.enable=false"]


def test_missing_nsys_and_bad_window_fail_clearly(tmp_path: Path) -> None:
    result = _run(tmp_path, "preset_nsys_default.env", with_stub=False)
    assert result.returncode == 127 and "nsys not found on PATH" in result.stderr
    result = _run(tmp_path, "preset_nsys_default.env", {"NSYS_START_STEP": "20", "NSYS_STOP_STEP": "5"})
    assert result.returncode == 2 and "must be greater than NSYS_START_STEP" in result.stderr


def _settings(tmp_path: Path, preset: str, env: dict[str, str]) -> list[str]:
    script = (f'set -euo pipefail\nsource "{TPL}/profile_cli_common.sh"\n'
              f'profile_prepare "{TPL}/{preset}"\nprintf "%s\\n" "${{PROFILE_SETTINGS[@]}}"\n')
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", **env},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_torch_profiler_preset_for_real_on_cpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    out_dir = tmp_path / "tp"
    argv = _settings(tmp_path, "preset_torch_profiler.env",
                     {"TORCH_PROFILER_START_STEP": "2", "TORCH_PROFILER_STOP_STEP": "4",
                      "TORCH_PROFILER_OUTPUT_DIR": str(out_dir), "TORCH_PROFILER_PROFILE_MEMORY": "false"})
    args = parse_profiling_args([*argv, "--lr", "0.1"])
    assert args.remaining == ("--lr", "0.1")
    settings = args.torch_profiler
    assert (settings.enabled, settings.start_step, settings.stop_step, settings.record_shapes) == (True, 2, 4, True)
    model = torch.nn.Linear(16, 16)
    prof = settings.make_profiler(rank=5)
    for _ in range(6):
        model(torch.randn(4, 16)).sum().backward()
        prof.step()
    prof.stop()
    files = sorted(out_dir.glob("rank5.*.pt.trace.json"))
    assert len(files) == 1
    from my_utils.profiling.kineto.read.provider import TorchProfilerMetricsProvider

    events = TorchProfilerMetricsProvider.from_input(out_dir).collect()
    assert sorted(e.step for e in events if e.name == "step_time") == [2, 3]
    assert {e.rank for e in events} == {5}
