"""ChecksumUtils and DumpTensorIO on real (CPU) tensors in nested structures; inert without env vars."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from my_utils.core.debug import ChecksumUtils, DumpTensorIO, TensorComparison, iter_leaves

torch = pytest.importorskip("torch")


def batch() -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    return {
        "latents": torch.randn(2, 3, generator=g),
        "cond": [torch.arange(4), (torch.ones(2, dtype=torch.bfloat16), "prompt")],
        "meta": {"step": 7, "mask": torch.tensor([True, False])},
    }


class Untouchable:
    """A batch that fails if anything reads it: proves the disabled paths never look."""

    def items(self) -> Any:
        raise AssertionError("the data was read although the tool is disabled")

    def __iter__(self) -> Any:
        raise AssertionError("the data was read although the tool is disabled")


def test_leaves_have_readable_paths() -> None:
    paths = [p for p, _ in iter_leaves(batch())]
    assert paths == ["latents", "cond[0]", "cond[1][0]", "cond[1][1]", "meta.step", "meta.mask"]


def test_checksums_are_inert_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEBUG_DATA_CONSISTENCY", raising=False)
    assert not ChecksumUtils.is_enabled()
    assert ChecksumUtils.sign(Untouchable()) is None
    assert ChecksumUtils.verify(Untouchable(), {"x": "y"}) is None


def test_sign_and_verify_detect_changes(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("DEBUG_DATA_CONSISTENCY", "1")
    data = batch()
    signature = ChecksumUtils.sign(data, "prevae")
    assert signature is not None and set(signature) == {p for p, _ in iter_leaves(data)}
    assert signature["cond[1][0]"].startswith("bfloat16[2]:")
    same = ChecksumUtils.verify(batch(), signature, "prevae")  # rebuilt from the same seed: identical
    assert same is not None and same.ok

    data["latents"][0, 0] += 1e-6
    del data["meta"]["step"]
    data["extra"] = torch.zeros(1)
    result = ChecksumUtils.verify(data, signature, "prevae")
    assert result is not None and not result.ok
    assert result.changed == ("latents",) and result.missing == ("meta.step",) and result.unexpected == ("extra",)
    assert "data consistency check 'prevae' failed" in caplog.text
    with pytest.raises(ValueError, match="changed \\['latents'\\]"):
        ChecksumUtils.verify(data, signature, "prevae", raise_on_mismatch=True)


def test_checksum_sees_dtype_shape_and_non_contiguous_views(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG_DATA_CONSISTENCY", "1")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert ChecksumUtils.checksum(t.t()) == ChecksumUtils.checksum(t.t().contiguous())
    assert ChecksumUtils.checksum(t) != ChecksumUtils.checksum(t.reshape(3, 2))
    assert ChecksumUtils.checksum(t) != ChecksumUtils.checksum(t.double())
    assert ChecksumUtils.checksum(torch.tensor(3.0))["<root>"].startswith("float32[]:")


def real_tensordict() -> Any:
    """A nested TensorDict with tensors of seven dtypes and a non-tensor value (rebuilt identically each call)."""
    tensordict = pytest.importorskip("tensordict", reason="tensordict is installed by requirements-test.txt")
    g = torch.Generator().manual_seed(1)
    return tensordict.TensorDict(
        {
            "latents": torch.randn(2, 4, 3, generator=g),
            "half": torch.randn(2, 5, generator=g).half(),
            "bf16": torch.randn(2, 2, generator=g).to(torch.bfloat16),
            "enc": {"ids": torch.randint(0, 1000, (2, 6), generator=g), "mask": torch.rand(2, 6, generator=g) > 0.5,
                    "pixels": torch.randint(0, 255, (2, 3), generator=g, dtype=torch.uint8)},
            "phase": torch.randn(2, 2, generator=g, dtype=torch.complex64),
            "prompt": "a cat on a mat",
        },
        batch_size=[2],
    )


TD_LEAVES = {"latents", "half", "bf16", "enc.ids", "enc.mask", "enc.pixels", "phase", "prompt"}


def test_tensordict_sign_and_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEBUG_DATA_CONSISTENCY", "1")
    td = real_tensordict()
    signature = ChecksumUtils.sign(td, "td")
    assert signature is not None and set(signature) == TD_LEAVES
    assert signature["bf16"].startswith("bfloat16[2,2]:") and signature["enc.pixels"].startswith("uint8[2,3]:")
    assert signature["phase"].startswith("complex64[2,2]:") and signature["prompt"].startswith("str:")
    assert signature == ChecksumUtils.checksum(td.to_dict())  # the same leaves as its plain form
    same = ChecksumUtils.verify(real_tensordict(), signature, "td")
    assert same is not None and same.ok

    td["enc", "ids"][1, 3] += 1  # one integer inside a nested TensorDict
    result = ChecksumUtils.verify(td, signature, "td")
    assert result is not None and result.changed == ("enc.ids",) and not result.missing
    other = real_tensordict()
    other["prompt"] = "a dog on a log"
    other["bf16"][0, 0] = other["bf16"][0, 0] * 2 + 1
    result = ChecksumUtils.verify(other, signature, "td")
    assert result is not None and set(result.changed) == {"bf16", "prompt"}


def test_tensordict_lazy_stack_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    tensordict = pytest.importorskip("tensordict")
    monkeypatch.setenv("DEBUG_DATA_CONSISTENCY", "1")
    parts = [tensordict.TensorDict({"x": torch.full((3,), float(i)), "n": {"y": torch.arange(2) + i}}, [])
             for i in range(2)]
    lazy = tensordict.LazyStackedTensorDict.lazy_stack(parts, 0)
    signature = ChecksumUtils.sign(lazy)
    assert signature is not None and set(signature) == {"x", "n.y"}
    assert signature["x"].startswith("float32[2,3]:")
    parts[1]["x"][0] = -1.0  # the stack shares its members' storage
    result = ChecksumUtils.verify(lazy, signature)
    assert result is not None and result.changed == ("x",)


def test_tensordict_dump_then_compare(tmp_path: Path) -> None:
    io = DumpTensorIO(tensor_dir=tmp_path / "tensors", compare_file=tmp_path / "compare.jsonl", rank=0)
    td = real_tensordict()
    path = io.dump_or_compare("batch", td, step=5)
    assert path == tmp_path / "tensors" / "batch__step5__rank0.pt"
    loaded = io.load("batch", step=5)  # weights_only=True: plain dicts of tensors and str
    assert {p for p, _ in iter_leaves(loaded)} == TD_LEAVES and loaded["prompt"] == "a cat on a mat"
    for key in ("latents", "half", "bf16", "phase"):
        assert loaded[key].dtype == td[key].dtype and torch.equal(loaded[key], td[key])
    assert torch.equal(loaded["enc"]["pixels"], td["enc", "pixels"])

    unchanged = io.dump_or_compare("batch", real_tensordict(), step=5)
    assert isinstance(unchanged, TensorComparison) and unchanged.all_equal

    changed = real_tensordict()
    changed["latents"][1, 2, 0] += 0.25
    changed["enc", "mask"][0, 0] = ~changed["enc", "mask"][0, 0]
    result = io.dump_or_compare("batch", changed, step=5)
    assert isinstance(result, TensorComparison) and not result.all_equal
    status = {leaf.path: leaf for leaf in result.leaves}
    assert {p for p, leaf in status.items() if leaf.status != "equal"} == {"latents", "enc.mask"}
    assert status["latents"].max_abs_diff == pytest.approx(0.25)
    records = [json.loads(line) for line in (tmp_path / "compare.jsonl").read_text().splitlines()]
    assert [r["all_equal"] for r in records] == [True, False]


def test_tensordict_stays_unimported() -> None:
    """Walking plain data never imports tensordict (import my_utils.core stays light)."""
    code = ("import sys; from my_utils.core.debug import ChecksumUtils; "
            "ChecksumUtils.checksum({'a': [1, 2.5, 'x'], 'b': {'c': None}}); print('tensordict' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dump_io_is_inert_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAN_DPO_PREVAE_TENSOR_DIR", raising=False)
    monkeypatch.delenv("WAN_DPO_PREVAE_COMPARE_FILE", raising=False)
    io = DumpTensorIO()
    assert not io.enabled
    assert io.dump("x", Untouchable()) is None
    assert io.compare("x", Untouchable()) is None
    assert io.dump_or_compare("x", Untouchable()) is None


def test_dump_then_compare_across_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAN_DPO_PREVAE_TENSOR_DIR", str(tmp_path / "tensors"))
    monkeypatch.setenv("WAN_DPO_PREVAE_COMPARE_FILE", str(tmp_path / "compare.jsonl"))
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    first = DumpTensorIO()
    path = first.dump_or_compare("pre vae/latents", batch(), step=3)
    assert path == tmp_path / "tensors" / "pre_vae_latents__step3__rank2.pt"
    loaded = first.load("pre vae/latents", step=3)
    assert torch.equal(loaded["latents"], batch()["latents"])
    assert loaded["cond"][1][0].dtype == torch.bfloat16

    second = batch()  # "the next run": identical except one element
    second["latents"][1, 2] += 0.5
    result = DumpTensorIO().dump_or_compare("pre vae/latents", second, step=3)
    assert not isinstance(result, Path) and result is not None
    status = {leaf.path: leaf for leaf in result.leaves}
    assert status["latents"].status == "different" and status["latents"].max_abs_diff == pytest.approx(0.5)
    assert status["cond[0]"].status == "equal" and not result.all_equal
    (line,) = (tmp_path / "compare.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["name"] == "pre vae/latents" and record["rank"] == 2 and record["step"] == 3
    assert {leaf["path"]: leaf["status"] for leaf in record["leaves"]}["latents"] == "different"


def test_compare_reports_shape_dtype_missing_and_close(tmp_path: Path) -> None:
    io = DumpTensorIO(tensor_dir=tmp_path, rank=0)
    io.dump("x", {"a": torch.ones(2), "b": torch.ones(2), "c": torch.ones(2), "d": torch.ones(2)})
    result = io.compare("x", {"a": torch.ones(3), "b": torch.ones(2, dtype=torch.float64),
                              "c": torch.ones(2) + 1e-7, "e": torch.ones(1)}, atol=1e-6)
    assert result is not None
    assert {leaf.path: leaf.status for leaf in result.leaves} == {
        "a": "shape", "b": "dtype", "c": "close", "e": "extra", "d": "missing"}
    assert io.compare("never-dumped", {"a": torch.ones(1)}) is None


def test_unwritable_dump_dir_is_reported_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    io = DumpTensorIO(tensor_dir=blocker / "sub", rank=0)
    assert io.dump("a", torch.ones(1)) is None
    assert io.dump("b", torch.ones(1)) is None
    assert caplog.text.count("DumpTensorIO: cannot write") == 1
