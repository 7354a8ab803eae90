"""Replay scripts (``kineto.ops.replay``) written from a trace torch 2.13 records here, run as real programs.

Each script is run in a fresh interpreter with only torch; its printed output shapes and dtypes
must be those the recorded call produced in the test process (computed here by calling torch
on tensors of the same shapes), including calls with a non-contiguous (expanded) input, a
tensor-list argument, scalars and keyword-only arguments.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from my_utils.core.errors import InputError  # noqa: E402
from my_utils.profiling.kineto.ops.replay import pick_ops, replay_from_trace, replay_script  # noqa: E402
from my_utils.profiling.kineto.run import read_rank  # noqa: E402

#: operator → (the call recorded, what it returned: list of (shape, dtype)).
CALLS: dict[str, Any] = {
    "aten::addmm": lambda: torch.addmm(torch.randn(16), torch.randn(8, 32), torch.randn(32, 16), beta=0.5),
    "aten::convolution": lambda: torch.nn.functional.conv2d(torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3),
                                                            None, stride=2, padding=1),
    "aten::native_layer_norm": lambda: torch.nn.functional.layer_norm(torch.randn(4, 10), (10,)),
    "aten::add": lambda: torch.randn(5, 1).expand(5, 6) + torch.randn(6),  # a stride-0 operand
    "aten::cat": lambda: torch.cat([torch.randn(2, 3), torch.randn(5, 3)]),
    "aten::_softmax": lambda: torch.softmax(torch.randn(3, 7, dtype=torch.float64), dim=0),
    "aten::_to_copy": lambda: torch.randn(4, 4).to(torch.bfloat16),
}


def _outputs(value: Any) -> list[tuple[list[int], str]]:
    if isinstance(value, torch.Tensor):
        return [(list(value.shape), str(value.dtype).removeprefix("torch."))]
    if isinstance(value, (tuple, list)):
        return [o for v in value for o in _outputs(v)]
    return []


def _trace(tmp_path: Path) -> Path:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for call in CALLS.values():
            call()
    path = tmp_path / "cpu_trace.json"
    prof.export_chrome_trace(str(path))
    return path


def _run(script: str, tmp_path: Path, name: str) -> list[dict[str, Any]]:
    path = tmp_path / name
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path), "--device", "cpu", "--iters", "3"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_replays_reproduce_each_calls_output_shape_and_dtype(tmp_path: Path) -> None:
    d = read_rank(_trace(tmp_path)).data
    expected = {}
    for name, call in CALLS.items():
        out = call()
        # native_layer_norm returns the output, the mean and the rstd
        expected[name] = _outputs(out) if name != "aten::native_layer_norm" else None
    ops = [pick_ops(d, name, top=1)[0] for name in CALLS]  # one script for all: one interpreter start
    lines = _run(replay_script(ops, "cpu_trace.json"), tmp_path, "replay.py")
    assert [line["op"] for line in lines] == list(CALLS)
    for name, line in zip(CALLS, lines, strict=True):
        got = [(o["shape"], o["dtype"]) for o in line["outputs"]]
        if expected[name] is None:
            assert got[0] == ([4, 10], "float32") and len(got) == 3
        else:
            assert got == expected[name], name
        assert line["median_us"] > 0
        tensor_list = ["argument 0: a tensor list records no element type: float32 assumed"]
        assert line["notes"] == (tensor_list if name == "aten::cat" else []), name


def test_top_n_in_one_script_and_the_trace_named_in_it(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    script = replay_from_trace(path, top=3)
    assert "cpu_trace.json" in script.splitlines()[1]
    lines = _run(script, tmp_path, "top3.py")
    assert len(lines) == 3 and all(line["outputs"] for line in lines)


def test_a_trace_without_shapes_or_without_the_operator_is_one_error(tmp_path: Path, real_fixtures: Any) -> None:
    with pytest.raises(InputError, match="record_shapes=True"):
        replay_from_trace(real_fixtures / "kineto/hta/df_index_resolver.json.gz")
    with pytest.raises(InputError, match="a call of aten::baddbmm"):
        replay_from_trace(_trace(tmp_path), operator="baddbmm")


def test_a_trace_without_strides_and_concrete_inputs_says_so_per_operation(tmp_path: Path, real_fixtures: Any) -> None:
    """An older Kineto trace (shapes and types only): the script still runs, with contiguous tensors and defaults."""
    d = read_rank(real_fixtures / "kineto/hta/trace_diff__test.json.gz").data
    (op,) = pick_ops(d, "aten::mm", top=1)
    (line,) = _run(replay_script([op], "trace_diff__test.json.gz"), tmp_path, "old.py")
    dims = op.args["Input Dims"]
    assert [o["shape"] for o in line["outputs"]] == [[dims[0][0], dims[1][1]]]
    assert "no strides recorded: contiguous tensors assumed" in line["notes"]
    assert "no concrete inputs recorded: scalar arguments left at their defaults" in line["notes"]


def test_names_from_a_trace_never_become_code(tmp_path: Path) -> None:
    from my_utils.profiling.kineto.ops.replay import ReplayOp

    hostile = ReplayOp("aten::mm", {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"],
                                    "Concrete Inputs": ["\"\"\"; import os; os.system('echo pwned') #", ""]}, 1)
    script = replay_script([hostile], 'x"""; import os #.json')
    compile(script, "replay.py", "exec")  # still one valid program
    assert "os.system" not in script.replace("\\'", "'").split("OPS = json.loads(", 1)[0]
    with pytest.raises(ValueError, match="not a 'namespace::name'"):
        replay_script([ReplayOp("aten::mm; import os", {}, 1)], "t.json")
