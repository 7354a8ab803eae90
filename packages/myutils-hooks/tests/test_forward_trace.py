"""ForwardTraceRecorder on real torch models on the CPU: selection, sampling, fingerprints, .pt files, budget."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from my_utils.core.errors import UsageError
from my_utils.hooks.forward_trace import ForwardTraceRecorder, Sampling, record_forward


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.ff = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return x + scale * self.ff(self.norm(x))


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(Block(), Block())


def rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "index.jsonl").read_text().splitlines()]


def md5_of(t: torch.Tensor) -> str:
    """Computed here from the raw bytes (not through the recorder's helper)."""
    return hashlib.md5(t.detach().contiguous().numpy().tobytes()).hexdigest()


def test_modules_are_chosen_by_name_and_type(tmp_path: Path) -> None:
    m = model()
    every = [n for n, mod in m.named_modules() if type(mod).__name__ not in ("Sequential", "ModuleList")]
    assert ForwardTraceRecorder(m, tmp_path / "a").selected() == every
    linears = ForwardTraceRecorder(m, tmp_path / "b", module_types=[torch.nn.Linear]).selected()
    assert linears == [n for n, mod in m.named_modules() if isinstance(mod, torch.nn.Linear)] == \
        ["0.ff.0", "0.ff.2", "1.ff.0", "1.ff.2"]
    assert ForwardTraceRecorder(m, tmp_path / "c", include=r"^1\.", exclude="norm",
                                module_types=["Linear", "GELU"]).selected() == ["1.ff.0", "1.ff.1", "1.ff.2"]
    with pytest.raises(UsageError, match="no module of Sequential matches"):
        ForwardTraceRecorder(m, tmp_path / "d", include="nothing").attach()
    with pytest.raises(UsageError, match="not a regular expression"):
        ForwardTraceRecorder(m, tmp_path / "e", include="(")


def test_every_call_is_fingerprinted_and_saved_as_pt(tmp_path: Path) -> None:
    m = model()
    seen: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for name, mod in m.named_modules():  # what really went in and out, captured without the recorder
        if name:
            mod.register_forward_hook(lambda mod, i, o, name=name: seen.setdefault(name, []).append(
                (i[0].detach().clone(), o.detach().clone())))
    x = torch.randn(4, 8)
    with ForwardTraceRecorder(m, tmp_path / "t", module_types=[torch.nn.Linear, Block]) as rec:
        m(x)
        m[1](x, scale=0.5)  # a keyword argument is an input too
    calls = rows(tmp_path / "t")[1:]
    assert rec.calls_recorded == len(calls) == 4 + 2 + 2 + 1  # 4 Linear + 2 Block, then block 1 again (1 + 2)
    first = next(c for c in calls if c["module"] == "0.ff.0")
    x_in, y_out = seen["0.ff.0"][0]
    tensors = {t["path"]: t for t in first["tensors"]}
    assert tensors["args.0"]["md5"] == md5_of(x_in) and tensors["out"]["md5"] == md5_of(y_out)
    assert tensors["out"]["shape"] == [4, 16] and tensors["out"]["dtype"] == "float32"
    weight, bias = m[0].ff[0].weight, m[0].ff[0].bias
    assert first["param_dtypes"] == {"weight": "float32", "bias": "float32"} and first["params_md5"]
    # the saved values are a .pt file the safe loader and torch.load(weights_only=True) both read back
    pt = tmp_path / "t" / first["folder"] / "tensors.pt"
    assert pt.is_file()
    from my_utils.core.artifacts import load_artifacts

    saved = load_artifacts(tmp_path / "t" / first["folder"])
    assert torch.equal(saved["out"], y_out) and torch.equal(saved["args.0"], x_in)
    assert any(torch.equal(v, y_out) for v in torch.load(pt, weights_only=True).values())
    again = next(c for c in calls if c["module"] == "1" and c["call"] == 1)
    assert {t["path"] for t in again["tensors"]} == {"args.0", "out"}  # scale=0.5 is no tensor
    assert weight.dtype == bias.dtype == torch.float32


def test_parameter_dtypes_are_snapshot_per_call(tmp_path: Path) -> None:
    m = model()
    x = torch.randn(2, 8)
    with ForwardTraceRecorder(m, tmp_path / "t", include=r"^0\.ff\.0$"):
        m(x)
        m[0].ff[0].to(torch.bfloat16)
        m[0].ff[0](x.to(torch.bfloat16))
    calls = rows(tmp_path / "t")[1:]
    assert [c["param_dtypes"]["weight"] for c in calls] == ["float32", "bfloat16"]
    assert calls[0]["params_md5"] != calls[1]["params_md5"]
    bf16 = {t["path"]: t for t in calls[1]["tensors"]}["out"]
    assert bf16["dtype"] == "bfloat16"


@pytest.mark.parametrize("sampling", [Sampling.head(2), Sampling.random(0.5, seed=3)], ids=["head", "random"])
def test_sampling_picks_the_same_calls_in_every_run(sampling: Sampling, tmp_path: Path) -> None:
    picked = []
    for run in ("a", "b"):
        m = model()
        record_forward(m, tmp_path / run, [torch.randn(2, 8) for _ in range(6)], module_types=[torch.nn.Linear],
                       sampling=sampling, save_values=False)
        picked.append([(c["module"], c["call"]) for c in rows(tmp_path / run)[1:]])
    assert picked[0] == picked[1]
    names = ["0.ff.0", "0.ff.2", "1.ff.0", "1.ff.2"]
    if sampling.mode == "head":
        assert sorted(picked[0]) == sorted((n, c) for n in names for c in (0, 1))
    else:  # a seeded coin per (module, call), decided here with the stdlib alone
        expected = {(n, c) for n in names for c in range(6) if random.Random(f"3:{n}:{c}").random() < 0.5}
        assert set(picked[0]) == expected and 0 < len(expected) < 24
    assert all(c.get("folder") is None for c in rows(tmp_path / "a")[1:])  # fingerprints only


def test_a_budget_stops_the_recording_once_and_training_goes_on(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    m = model()
    x = torch.randn(64, 8)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    one_call = 64 * 8 * 4 + 64 * 16 * 4  # input and output of the first Linear, float32
    with caplog.at_level(logging.WARNING, "my_utils.hooks.forward_trace"), \
            ForwardTraceRecorder(m, tmp_path / "t", module_types=[torch.nn.Linear], max_bytes=3 * one_call) as rec:
        for _ in range(5):
            m(x).sum().backward()
            opt.step()
    assert rec.stopped is not None and "would pass the budget of" in rec.stopped
    assert caplog.text.count("ForwardTraceRecorder stopped") == 1
    tensor_bytes = sum(f.stat().st_size for f in (tmp_path / "t" / "calls").rglob("tensors.pt"))
    assert rec.bytes_written <= 3 * one_call and tensor_bytes <= rec.bytes_written
    last = rows(tmp_path / "t")[-1]
    assert last["stopped"] == rec.stopped and last["calls_recorded"] == rec.calls_recorded >= 1
    assert not rec._handles  # the hooks are gone: later steps cost nothing


def test_too_little_free_disk_stops_before_writing(tmp_path: Path) -> None:
    import shutil

    free = shutil.disk_usage(tmp_path).free
    m = model()
    with ForwardTraceRecorder(m, tmp_path / "t", min_free_bytes=free + (1 << 40)) as rec:
        m(torch.randn(2, 8))
    assert rec.calls_recorded == 0 and "min_free_bytes kept free" in (rec.stopped or "")
    assert not (tmp_path / "t" / "calls").exists()


def test_a_full_disk_while_writing_is_said_and_never_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    import my_utils.core.artifacts as artifacts

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(artifacts, "dump_artifacts", full)
    m = model()
    with caplog.at_level(logging.WARNING, "my_utils.hooks.forward_trace"), \
            ForwardTraceRecorder(m, tmp_path / "t") as rec:
        out = m(torch.randn(2, 8))
        m(torch.randn(2, 8))
    assert out.shape == (2, 8) and "No space left on device" in (rec.stopped or "")
    assert caplog.text.count("ForwardTraceRecorder stopped") == 1


def test_misuse_is_refused(tmp_path: Path) -> None:
    m = model()
    with ForwardTraceRecorder(m, tmp_path / "t"):
        pass
    with pytest.raises(UsageError, match="a trace is already there"):
        ForwardTraceRecorder(m, tmp_path / "t").attach()
    with pytest.raises(UsageError, match="n must be at least 1"):
        Sampling.head(0)
    with pytest.raises(UsageError, match=r"p must be in \(0, 1\]"):
        Sampling.random(0.0)
