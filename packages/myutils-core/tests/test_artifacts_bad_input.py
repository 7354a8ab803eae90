"""load_artifacts on folders that lie: each is refused in one line naming the file and the place.

A manifest whose dtype, shape, key or fields disagree with the files, a missing or changed
payload file, a file name that leaves the folder, a forged torch file carrying code: every
case is an ``InputError`` (never another exception, never code run), and a seeded fuzz of
manifest mutations proves that nothing else escapes.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.artifacts import dump_artifacts, load_artifacts
from my_utils.core.errors import InputError


@dataclasses.dataclass
class Sample:
    """A dataclass in the dump."""

    step: int
    loss: float


def _dump(tmp_path: Path) -> Path:
    return dump_artifacts({"t": torch.arange(4.0), "n": np.arange(3), "s": Sample(1, 0.5), "b": b"raw"},
                          tmp_path / "dump")


def _edit_manifest(folder: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def _node(manifest: dict[str, Any], key: str) -> dict[str, Any]:
    root = manifest["root"]
    index = [k["value"] for k in root["keys"]].index(key)
    node: dict[str, Any] = root["values"][index]
    return node


def _rehash(folder: Path, name: str) -> Callable[[dict[str, Any]], None]:
    data = (folder / name).read_bytes()
    return lambda m: m["files"].__setitem__(name, {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})


def _refused(folder: Path) -> str:
    with pytest.raises(InputError) as info:
        load_artifacts(folder)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_manifest(tmp_path: Path) -> None:
    assert _refused(tmp_path) == (f"{tmp_path / 'manifest.json'}: the manifest of a dump folder (made by "
                                  "dump_artifacts): it is missing")


@pytest.mark.parametrize(("text", "expected"), [
    ("{", "line 1, column 2: valid JSON (Expecting property name enclosed in double quotes)"),
    ('{"format": "x"}', "key 'format': 'my_utils.artifacts' (a dump_artifacts manifest)"),
    ('{"format": "my_utils.artifacts", "schema_version": 2}',
     "key 'schema_version': 1 (this myutils-core reads schema 1; found 2: upgrade myutils-core)"),
    ('{"format": "my_utils.artifacts", "schema_version": 1, "files": [], "root": {}}',
     "key 'files': a mapping of payload files to their size and sha256"),
    ('{"format": "my_utils.artifacts", "schema_version": 1, "files": {}, "root": {"type": "float", "value": NaN}}',
     " valid JSON (bare NaN is not JSON)"),
])
def test_malformed_manifest(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "manifest.json").write_text(text)
    assert _refused(tmp_path) == f"{tmp_path / 'manifest.json'}:{expected}"


def test_manifest_dtype_shape_and_key_that_lie(tmp_path: Path) -> None:
    folder = _dump(tmp_path)
    tensors = folder / "tensors.safetensors"
    _edit_manifest(folder, lambda m: _node(m, "t").update(dtype="float64"))
    assert _refused(folder) == (f"{tensors}:root['t']: the float64[4] the manifest records under key '0'; "
                                "found float32[4]")
    _edit_manifest(folder, lambda m: _node(m, "t").update(dtype="float32", key="9"))
    assert _refused(folder) == f"{tensors}:root['t']: tensor key '9', which the manifest names; the file has none"
    _edit_manifest(folder, lambda m: (_node(m, "t").update(key="0"), _node(m, "n").update(shape=[4])))
    assert _refused(folder) == (f"{folder / 'arrays/0.npy'}:root['n']: the int64[4] array the manifest records; "
                                "found int64[3]")


def test_manifest_fields_and_types_that_lie(tmp_path: Path) -> None:
    folder = _dump(tmp_path)
    manifest_path = folder / "manifest.json"
    original = json.loads(manifest_path.read_text())
    _edit_manifest(folder, lambda m: _node(m, "s")["fields"].update(extra={"type": "none"}))
    assert _refused(folder) == (f"{manifest_path}:root['s']: the fields of {Sample.__module__}:Sample (step, loss); "
                                "found step, loss, extra")
    manifest_path.write_text(json.dumps(original))
    _edit_manifest(folder, lambda m: _node(m, "s")["fields"].update(step={"type": "mystery"}))
    assert _refused(folder) == f"{manifest_path}:root['s'].step: a known node type; found 'mystery'"
    manifest_path.write_text(json.dumps(original))
    _edit_manifest(folder, lambda m: _node(m, "s")["fields"].update(step={"type": "int", "value": True}))
    assert _refused(folder) == (f"{manifest_path}:root['s'].step: key 'value' of this 'int' node as int; "
                                "found True")


@pytest.mark.parametrize("name", ["../outside.bin", "/etc/passwd", "blobs/../../x.bin", "manifest.json"])
def test_payload_names_outside_the_folder_are_refused(tmp_path: Path, name: str) -> None:
    folder = _dump(tmp_path)
    _edit_manifest(folder, lambda m: _node(m, "b").update(file=name))
    assert _refused(folder) == (f"{folder / 'manifest.json'}:root['b']: a payload file name inside the folder; "
                                f"found {name!r}")


def test_payload_not_listed(tmp_path: Path) -> None:
    folder = _dump(tmp_path)
    _edit_manifest(folder, lambda m: m["files"].pop("blobs/0.bin"))
    assert _refused(folder) == (f"{folder / 'manifest.json'}:root['b']: file 'blobs/0.bin' listed under 'files' "
                                "with its size and sha256")


def test_missing_payload_file(tmp_path: Path) -> None:
    folder = _dump(tmp_path)
    (folder / "arrays" / "0.npy").unlink()
    assert _refused(folder) == f"{folder / 'arrays/0.npy'}:root['n']: this file, which the manifest lists: it is missing"


def test_payload_that_is_a_fifo(tmp_path: Path) -> None:
    folder = _dump(tmp_path)
    (folder / "blobs" / "0.bin").unlink()
    os.mkfifo(folder / "blobs" / "0.bin")
    assert _refused(folder) == f"{folder / 'blobs/0.bin'}:root['b']: a regular file (this is a FIFO)"


def test_tampered_payload(tmp_path: Path) -> None:
    folder = _dump(tmp_path)
    path = folder / "tensors.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    message = _refused(folder)
    assert message.startswith(f"{path}:root['t']: the {len(data)} bytes with sha256 ")
    assert message.endswith(f"found {len(data)} bytes with sha256 {hashlib.sha256(data).hexdigest()}: "
                            "the file changed after the dump")


class _Payload:
    """Pickles to a call that would create a file: proof that nothing from the file runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_forged_torch_file_runs_nothing(tmp_path: Path) -> None:
    folder = dump_artifacts({"t": torch.ones(2)}, tmp_path / "dump", tensor_format="torch")
    marker = tmp_path / "ran"
    (folder / "tensors.pt").write_bytes(_torch_file({"0": _Payload(marker)}))
    _edit_manifest(folder, _rehash(folder, "tensors.pt"))
    message = _refused(folder)
    assert message.startswith(f"{folder / 'tensors.pt'}:root['t']: a readable tensor file (UnpicklingError: ")
    assert not marker.exists()


def test_forged_npy_with_objects_runs_nothing(tmp_path: Path) -> None:
    folder = _dump(tmp_path)
    buf = io.BytesIO()
    np.save(buf, np.array([None, 1], dtype=object), allow_pickle=True)
    (folder / "arrays" / "0.npy").write_bytes(buf.getvalue())
    _edit_manifest(folder, _rehash(folder, "arrays/0.npy"))
    assert _refused(folder).startswith(f"{folder / 'arrays/0.npy'}:root['n']: a .npy array without pickled objects (")


def _torch_file(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, pickle_module=pickle)
    return buf.getvalue()


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-3, 2**40), st.floats(allow_nan=False),
                                     st.text(max_size=6)),
                           lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c,
                                                                                         max_size=3)),
                           max_leaves=6)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@pytest.fixture(scope="module")
def fuzz_source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = _dump(tmp_path_factory.mktemp("fuzz"))
    return folder, json.loads((folder / "manifest.json").read_text())


@settings(derandomize=True, database=None, max_examples=150, deadline=None)
@given(pick=st.integers(min_value=0), replacement=json_values)
def test_fuzzed_manifest_loads_or_is_refused_in_one_line(fuzz_source: tuple[Path, dict[str, Any]], pick: int,
                                                          replacement: Any) -> None:
    folder, original = fuzz_source
    manifest = copy.deepcopy(original)
    paths = _paths(manifest)[1:]
    *parent_path, last = paths[pick % len(paths)]
    parent: Any = manifest
    for key in parent_path:
        parent = parent[key]
    parent[last] = replacement
    (folder / "manifest.json").write_text(json.dumps(manifest))
    try:
        load_artifacts(folder)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(folder))
    finally:
        (folder / "manifest.json").write_text(json.dumps(original))
