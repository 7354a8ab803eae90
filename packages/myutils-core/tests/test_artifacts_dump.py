"""dump_artifacts / load_artifacts: every supported value round-trips identical, in safe formats only.

Real tensors (torch CPU), numpy arrays, PIL images, TensorDicts and dataclasses; the loaded
object is compared with the original by type, dtype, shape, values (NaN where NaN was),
grad flag, image mode/size/pixels/palette and dataclass class.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from tensordict import TensorDict

from my_utils.core.artifacts import dump_artifacts, load_artifacts
from my_utils.core.errors import UsageError


@dataclasses.dataclass
class Point:
    """A plain dataclass holding a tensor."""

    name: str
    coords: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    """Frozen and slotted: rebuilt without __init__ or __setattr__."""

    step: int
    inner: Point
    late: list[int] = dataclasses.field(default_factory=list, init=False)


def same(a: Any, b: Any) -> bool:
    """Deep identity of value and type, NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        if a.layout != torch.strided:
            return a.layout == b.layout and same(a.to_dense(), b.to_dense())
        return (a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
                and bool(torch.equal(a.detach().view(torch.uint8) if a.dtype.is_floating_point and a.dtype.itemsize == 1
                                     else a.detach(), b.detach().view(torch.uint8)
                                     if b.dtype.is_floating_point and b.dtype.itemsize == 1 else b.detach())
                         or torch.testing.assert_close(a.detach(), b.detach(), rtol=0, atol=0, equal_nan=True)
                         is None))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and (a == b or (a != a and b != b))
    if isinstance(a, Image.Image):
        return (a.mode, a.size, a.tobytes(), a.getpalette()) == (b.mode, b.size, b.tobytes(), b.getpalette())
    if isinstance(a, TensorDict):
        return (a.batch_size == b.batch_size and a.device == b.device and a.names == b.names
                and list(a.keys()) == list(b.keys()) and all(same(a[k], b[k]) for k in list(a.keys())))  # TensorDict iterates rows
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    return bool(a == b)


def roundtrip(obj: Any, folder: Path, **kwargs: Any) -> Any:
    dump_artifacts(obj, folder, **kwargs)
    return load_artifacts(folder, allow_pickle=kwargs.get("allow_pickle", False))


TENSOR_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
                 torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128,
                 torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2]


def _tensor(dtype: torch.dtype) -> torch.Tensor:
    base = torch.arange(-3, 9, dtype=torch.float64).reshape(3, 4)
    if dtype == torch.bool:
        return base > 2
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    if not dtype.is_floating_point and not dtype.is_signed:
        base = base.abs()
    return base.to(dtype)


@pytest.mark.parametrize("tensor_format", ["auto", "safetensors", "torch"])
@pytest.mark.parametrize("dtype", TENSOR_DTYPES, ids=str)
def test_tensor_dtypes_round_trip(tmp_path: Path, dtype: torch.dtype, tensor_format: str) -> None:
    t = _tensor(dtype)
    back = roundtrip({"t": t, "empty": t[:0]}, tmp_path / "d", tensor_format=tensor_format)
    assert same(back, {"t": t, "empty": t[:0]})


def test_tensor_layouts_and_flags_round_trip(tmp_path: Path) -> None:
    base = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    param = torch.nn.Parameter(torch.ones(3))
    obj = {
        "transposed": base.t(),                      # not contiguous
        "view_a": base[1], "view_b": base[1:3],      # share base's storage
        "base": base,
        "grad": torch.ones(2, requires_grad=True),
        "param": param,
        "frozen_param": torch.nn.Parameter(torch.zeros(2), requires_grad=False),
        "conj": torch.complex(base, base).conj(),    # lazy conjugate bit
        "nan_inf": torch.tensor([math.nan, math.inf, -math.inf, -0.0]),
        "sparse": base.to_sparse(),                  # goes to the torch (weights_only) file
        "scalar": torch.tensor(3.5),
    }
    folder = tmp_path / "d"
    back = roundtrip(obj, folder)
    expected = dict(obj, transposed=obj["transposed"].contiguous(), conj=obj["conj"].resolve_conj())
    assert same(back, expected)
    assert type(back["param"]) is torch.nn.Parameter and back["param"].requires_grad
    assert type(back["frozen_param"]) is torch.nn.Parameter and not back["frozen_param"].requires_grad
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "tensors.pt", "tensors.safetensors"]


NUMPY_VALUES = [
    np.arange(12, dtype=np.int64).reshape(3, 4),
    np.array([1.5, np.nan, -np.inf], dtype=np.float32),
    np.array([1 + 2j, np.nan], dtype=np.complex128),
    np.array([True, False]),
    np.array(["ab", "cde"]),
    np.array([b"x", b"yz"]),
    np.zeros((0, 3), dtype=np.uint16),
    np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")]),
    np.array(["2024-01-01"], dtype="datetime64[D]"),
    np.asfortranarray(np.arange(6).reshape(2, 3)),
    np.float32(2.5), np.int8(-3), np.bool_(True), np.float64(np.nan), np.str_("hi"), np.complex64(1j),
]


@pytest.mark.parametrize("value", NUMPY_VALUES, ids=lambda v: f"{type(v).__name__}-{v.dtype}")
def test_numpy_values_round_trip(tmp_path: Path, value: Any) -> None:
    assert same(roundtrip([value], tmp_path / "d"), [value])


def _image(mode: str) -> Image.Image:
    rgb = Image.frombytes("RGB", (5, 4), bytes(range(60)))
    if mode == "P":
        img = rgb.quantize(colors=7)
        img.putpalette([(i * 37) % 256 for i in range(3 * 7)])
        return img
    if mode == "PA":
        img = Image.frombytes("PA", (5, 4), bytes((i * 7) % 256 for i in range(40)))
        img.putpalette([(i * 11) % 256 for i in range(768)])
        return img
    if mode in ("I", "F", "I;16"):
        return rgb.convert("L").convert(mode).point(lambda v: v * 251)
    return rgb.convert(mode)


@pytest.mark.parametrize("mode", ["1", "L", "LA", "P", "PA", "RGB", "RGBA", "I;16", "I", "F", "CMYK", "YCbCr"])
def test_pil_images_round_trip(tmp_path: Path, mode: str) -> None:
    img = _image(mode)
    back = roundtrip({"img": img}, tmp_path / "d")["img"]
    assert type(back) is Image.Image
    assert same(back, img)


def test_tensordict_round_trips(tmp_path: Path) -> None:
    td = TensorDict({"obs": torch.arange(6.0).reshape(2, 3), "meta": "episode 7",
                     "nested": TensorDict({"r": torch.tensor([1, 2])}, batch_size=[2])},
                    batch_size=[2], names=["env"])
    plain = TensorDict({"x": torch.zeros(3)}, batch_size=[], device="cpu")
    back = roundtrip({"td": td, "plain": plain}, tmp_path / "d")
    assert same(back, {"td": td, "plain": plain})
    assert back["td"]["meta"] == "episode 7"


def test_dataclasses_and_containers_round_trip(tmp_path: Path) -> None:
    frozen = Frozen(3, Point("p", torch.ones(2)))
    object.__setattr__(frozen, "late", [4])
    obj = {
        "frozen": frozen,
        "points": [Point("a", np.arange(2)), Point("b", None)],
        (1, "k"): {frozenset({1, 2}), "x"},
        2: (b"bytes", bytearray(b"arr"), 1 + 2j, -0.0, math.inf, 10 ** 40, True, None),
        "text": "naïve \udce9 \u2028 ünïcode",
        "torch": [torch.bfloat16, torch.device("cpu"), torch.Size([2, 3])],
        "empty": [{}, [], (), set()],
    }
    back = roundtrip(obj, tmp_path / "d")
    assert same(back, obj)
    assert back["frozen"].late == [4]


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                         st.binary(max_size=8), st.complex_numbers())
nested = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.tuples(children, children),
                               st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), children, max_size=4)),
    max_leaves=12,
)


@settings(derandomize=True, database=None, max_examples=40, deadline=None)
@given(nested)
def test_nested_plain_values_round_trip(tmp_path_factory: pytest.TempPathFactory, value: Any) -> None:
    folder = tmp_path_factory.mktemp("h") / "d"
    assert same(roundtrip(value, folder), value)


def test_manifest_is_strict_json_listing_every_file(tmp_path: Path) -> None:
    folder = dump_artifacts({"a": math.nan, "t": torch.ones(2), "n": np.ones(2)}, tmp_path / "d")
    text = (folder / "manifest.json").read_text()
    manifest = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in the manifest"))
    listed = set(manifest["files"])
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"manifest.json"}
    assert listed == on_disk == {"tensors.safetensors", "arrays/0.npy"}


class Opaque:
    """Has no safe format."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.value == self.value


def test_pickle_only_when_asked_on_both_sides(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    with pytest.raises(UsageError) as info:
        dump_artifacts({"x": [1, Opaque(1)]}, folder)
    message = str(info.value)
    assert message.startswith(f"root['x'][1]: a {Opaque.__module__}.Opaque has no safe format")
    assert "allow_pickle=True" in message and "runs code" in message
    assert not folder.exists() and list(tmp_path.iterdir()) == []   # nothing left behind

    dump_artifacts({"x": [1, Opaque(1)]}, folder, allow_pickle=True)
    with pytest.raises(ValueError) as refused:   # InputError is a ValueError
        load_artifacts(folder)
    assert str(refused.value) == (
        f"{folder / 'manifest.json'}:root['x'][1]: no pickled object ({Opaque.__module__}:Opaque); loading a "
        "pickle runs code from the file: pass allow_pickle=True only for a folder you made or trust")
    assert load_artifacts(folder, allow_pickle=True) == {"x": [1, Opaque(1)]}


def test_object_arrays_need_pickle(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^root\[0\]: a numpy.ndarray has no safe format"):
        dump_artifacts([np.array([{}, 1], dtype=object)], tmp_path / "d")


def test_cycle_refused_by_place(tmp_path: Path) -> None:
    loop: list[Any] = [1]
    loop.append({"back": loop})
    with pytest.raises(UsageError, match=r"^root\[1\]\['back'\]: a reference cycle"):
        dump_artifacts(loop, tmp_path / "d")


def test_existing_folder_replaced_only_when_asked_and_only_a_dump(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    dump_artifacts([1], folder)
    with pytest.raises(UsageError, match="exists; pass overwrite=True"):
        dump_artifacts([2], folder)
    dump_artifacts([2], folder, overwrite=True)
    assert load_artifacts(folder) == [2]
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match=r"without manifest\.json, not an earlier dump"):
        dump_artifacts([3], other, overwrite=True)
    assert (other / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "notes"]   # no staging folder left


def test_dataclass_found_among_classes_or_imported_modules(tmp_path: Path) -> None:
    folder = dump_artifacts(Point("p", 1), tmp_path / "d")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["root"]["class"] = "not_imported_module_xyz:Point"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"manifest.json:root: dataclass not_imported_module_xyz:Point: its module "
                                         r"'not_imported_module_xyz' imported before loading"):
        load_artifacts(folder)
    assert "not_imported_module_xyz" not in sys.modules
    assert same(load_artifacts(folder, classes=[Point]), Point("p", 1))


def test_import_stays_light() -> None:
    code = ("import sys, my_utils.core.artifacts\n"
            "print(sorted(m for m in ('torch', 'numpy', 'PIL', 'safetensors', 'tensordict') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_without_safetensors_tensors_use_torch_weights_only_format(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['safetensors'] = None  # as if it were not installed\n"
        "import torch\n"
        "from my_utils.core.artifacts import dump_artifacts, load_artifacts\n"
        f"folder = dump_artifacts({{'t': torch.arange(3)}}, {str(tmp_path / 'd')!r})\n"
        "print(sorted(p.name for p in folder.iterdir()), load_artifacts(folder)['t'].tolist())\n"
        "try:\n"
        f"    dump_artifacts([torch.ones(1)], {str(tmp_path / 'e')!r}, tensor_format='safetensors')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "['manifest.json', 'tensors.pt'] [0, 1, 2]",
        "UsageError tensor_format='safetensors' needs the safetensors package: pip install safetensors "
        "(or myutils-core[safetensors]), or use tensor_format='auto'",
    ]
