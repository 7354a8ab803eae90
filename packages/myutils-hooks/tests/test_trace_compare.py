"""Two runs of a real torch model compared layer by layer: the origin of a difference and its size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.errors import InputError
from my_utils.hooks.forward_trace import ForwardTraceRecorder, record_forward
from my_utils.hooks.trace_compare import compare_traces, read_trace


def encoder(approximate: str = "none") -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(approximate=approximate),
                               torch.nn.Linear(32, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))


def batches() -> list[torch.Tensor]:
    torch.manual_seed(1)
    return [torch.randn(5, 8) for _ in range(2)]


def outputs(m: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each submodule's output for ``x``, captured with plain hooks (not the recorder)."""
    got: dict[str, torch.Tensor] = {}
    hooks = [mod.register_forward_hook(lambda mod, i, o, n=n: got.__setitem__(n, o.detach().clone()))
             for n, mod in m.named_modules() if n]
    with torch.no_grad():
        m(x)
    for h in hooks:
        h.remove()
    return got


def test_identical_runs_agree_everywhere(tmp_path: Path) -> None:
    for run in ("a", "b"):
        record_forward(encoder(), tmp_path / run, batches())
    result = compare_traces(tmp_path / "a", tmp_path / "b")
    assert result.counts() == {"same": 10} and result.first_divergence is None
    assert "agree on every recorded call" in result.render()


def test_a_changed_activation_is_where_the_runs_diverge(tmp_path: Path) -> None:
    """B uses GELU's tanh approximation: the GELU is the origin, every later layer inherits."""
    record_forward(encoder(), tmp_path / "a", batches())
    record_forward(encoder("tanh"), tmp_path / "b", batches())
    result = compare_traces(tmp_path / "a", tmp_path / "b")
    first = result.first_divergence
    assert first is not None and (first.module, first.call, first.status) == ("1", 0, "diverges_here")
    statuses = {(r.module, r.call): r.status for r in result.rows}
    assert statuses[("0", 0)] == "same" and statuses[("2", 0)] == statuses[("4", 1)] == "inherits"
    # the size of the difference at the origin, measured here on the two models' own outputs
    x = batches()[0]
    expected = (outputs(encoder(), x)["1"] - outputs(encoder("tanh"), x)["1"]).abs().max().item()
    assert first.max_abs_diff == pytest.approx(expected, rel=1e-6) and expected > 0
    assert first.compared == 5 * 32
    assert "first divergence: 1 (GELU) call 0: same inputs and parameters, different outputs (out)" in \
        result.render()


def test_a_cast_layer_is_reported_with_its_dtype_change(tmp_path: Path) -> None:
    record_forward(encoder(), tmp_path / "a", batches())
    b = encoder()
    b[2].to(torch.float64)
    b[2].register_forward_pre_hook(lambda mod, args: (args[0].double(),))
    b[2].register_forward_hook(lambda mod, args, out: out.float())
    record_forward(b, tmp_path / "b", batches())
    first = compare_traces(tmp_path / "a", tmp_path / "b").first_divergence
    assert first is not None and first.module == "2" and first.status == "params"
    assert first.dtype_changes == ("bias: float32 -> float64", "weight: float32 -> float64")


def test_unmatched_calls_and_early_stops_are_said(tmp_path: Path) -> None:
    record_forward(encoder(), tmp_path / "a", batches())
    record_forward(encoder(), tmp_path / "b", batches()[:1])
    with ForwardTraceRecorder(encoder(), tmp_path / "c", max_bytes=100) as rec, torch.no_grad():
        rec.model(batches()[0])
    result = compare_traces(tmp_path / "a", tmp_path / "b")
    assert result.counts() == {"same": 5, "only_a": 5}
    stopped = compare_traces(tmp_path / "a", tmp_path / "c")
    assert any(n.startswith("run B stopped early: call 0 of '0'") for n in stopped.notes)


def test_a_bad_index_names_the_file_and_line(tmp_path: Path) -> None:
    record_forward(encoder(), tmp_path / "a", batches()[:1])
    index = tmp_path / "a" / "index.jsonl"
    lines = index.read_text().splitlines()
    index.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(InputError, match=r"index.jsonl:line 2: one JSON object per line"):
        read_trace(tmp_path / "a")
    index.write_text('{"format": "other"}\n')
    with pytest.raises(InputError, match=r"line 1: a header with format 'my_utils.forward_trace'"):
        read_trace(index)
    # a torn last line (a killed run) is not an error
    index.write_text("\n".join(lines) + '\n{"index": 9, "mod')
    assert len(read_trace(tmp_path / "a").calls) == len(lines) - 1


def test_cli_compare_prints_the_origin_and_writes_json(tmp_path: Path) -> None:
    record_forward(encoder(), tmp_path / "a", batches())
    record_forward(encoder("tanh"), tmp_path / "b", batches())
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(build_app(), ["forward-trace", "compare", str(tmp_path / "a"), str(tmp_path / "b"),
                                           "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "first divergence: 1 (GELU) call 0" in res.output
    doc: dict[str, Any] = json.loads(out.read_text())
    assert doc["first_divergence"]["module"] == "1" and doc["counts"] == {"same": 2, "diverges_here": 2,
                                                                          "inherits": 6}
    bad = subprocess.run([Path(sys.executable).with_name("myutils"), "forward-trace", "compare",
                          str(tmp_path / "nope"), str(tmp_path / "b")], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "nope" in bad.stderr
