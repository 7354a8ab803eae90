"""What the three integration test modules share: the one config file and the checks of its outputs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from my_utils.core.profile_csv import read_profile_csv

#: one config for the plain loop, Lightning and Hugging Face: a torch.profiler window on the
#: LAST microbatch of optimizer step 1 (so the microbatch mapping decides what is captured)
CONFIG_YAML = """\
output_dir: out
run_id: {run_id}
rank: 0
timer: {{enabled: true, use_cuda: false}}
module_profiler: {{enabled: true}}
monitor: {{enabled: {monitor}, prefix: mon, interval: 0.05, track_hardware_metrics: false}}
profile:
  features:
    capture: {{enabled: true, backend: torch_profiler}}
  capture:
    windows:
      - {{name: last_mb, start_iter: 1, start_mb_selector: last}}
"""

STEPS = 3
ACCUMULATE = 2


def write_config(folder: Path, run_id: str, monitor: bool = False) -> Path:
    """The shared config file in ``folder``; its ``output_dir`` resolves to ``folder/out``."""
    path = folder / "profiling.yaml"
    path.write_text(CONFIG_YAML.format(run_id=run_id, monitor="true" if monitor else "false"), encoding="utf-8")
    return path


def check_outputs(session: Any, out: Path, leaf_modules: int | None) -> None:
    """Every component wrote what the config asked for, counted in optimizer steps and microbatches."""
    # capture: exactly one window, opened by microbatch 1 (the last of 2) of step 1 and closed by its exit
    assert len(session.controller.completed) == 1
    info, closing = session.controller.completed[0]
    assert (info.started_by.iteration, info.started_by.microbatch) == (1, ACCUMULATE - 1)
    assert closing.stopped_by is not None
    assert (closing.stopped_by.iteration, closing.stopped_by.microbatch) == (1, ACCUMULATE - 1)
    traces = sorted((out / "captures").glob("*.pt.trace.json.gz"))
    assert len(traces) == 1, traces
    with gzip.open(traces[0], "rt", encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["otherData"]["myutils_capture"]["first_step"] == 1
    assert any(e.get("ph") == "X" for e in doc["traceEvents"]), "the torch profiler recorded no op"
    # timer: one train_step per optimizer step, ACCUMULATE microbatches inside each
    rows = [r for r in read_profile_csv(out / "profile_rank_0.csv") if r.event_type == "END"]
    steps = sorted(r.step for r in rows if r.event_name == "train_step")
    assert steps == list(range(STEPS))
    for step in range(STEPS):
        assert sum(1 for r in rows if r.event_name == "microbatch" and r.step == step) == ACCUMULATE
    # module profiler: every leaf timed in every microbatch's forward
    assert session.summary_path is not None
    lines = session.summary_path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("module_name,mean_ms")
    assert len(lines) - 1 == leaf_modules if leaf_modules is not None else len(lines) > 1
    counts = {int(line.split(",")[5]) for line in lines[1:]}
    assert min(counts) >= STEPS * ACCUMULATE
