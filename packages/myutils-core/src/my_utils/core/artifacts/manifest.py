"""The manifest of a dump folder: its format, where each value is, and the checks a reader makes.

``manifest.json`` holds ``format``, ``schema_version``, ``files`` (every payload file with its
size and sha256) and ``root``, one node per value. A node is a JSON object whose ``type``
names what it was (``"dict"``, ``"tensor"``, ``"dataclass"``, ...); containers hold their
children, leaves name the payload file (and the key inside it) that holds their data.

Everything here treats the manifest as untrusted: a wrong type, a missing key, a file name
that leaves the folder, a file that differs from its recorded hash are each one
``InputError`` naming the file and the place (``root['batch'][0]``), never a traceback.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from my_utils.core.errors import InputError
from my_utils.core.safe_io import open_regular

FORMAT: Final = "my_utils.artifacts"
SCHEMA_VERSION: Final = 1
MANIFEST: Final = "manifest.json"

#: payload file names are made by the writer: a folder, a slash, a name; nothing else is read
_SAFE_NAME = re.compile(r"^[a-z]+/[A-Za-z0-9_-]+\.[a-z]+$|^[a-z]+\.[a-z]+$")

PICKLE_WARNING: Final = ("loading a pickle runs code from the file: pass allow_pickle=True "
                         "only for a folder you made or trust")


def child_place(place: str, key: Any) -> str:
    """``root['a']`` + ``0`` -> ``root['a'][0]`` (keys shown as Python literals)."""
    return f"{place}[{key!r}]"


def field_place(place: str, name: str) -> str:
    """``root`` + ``x`` -> ``root.x`` (a dataclass field)."""
    return f"{place}.{name}"


class ManifestReader:
    """Typed access to manifest nodes; every failure names the manifest file and the node's place."""

    def __init__(self, folder: Path, files: Mapping[str, Any]) -> None:
        self.folder = folder
        self.path = folder / MANIFEST
        self.files = files

    def fail(self, place: str, expected: str) -> InputError:
        """An error about the manifest at ``place``."""
        return InputError(self.path, place, expected)

    def get(self, node: Mapping[str, Any], key: str, kind: type | tuple[type, ...], place: str) -> Any:
        """``node[key]``, which must be of ``kind`` (bool is never an int here)."""
        value = node.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            names = " or ".join(t.__name__ for t in _as_tuple(kind))
            raise self.fail(place, f"key {key!r} of this {node.get('type')!r} node as {names}; found {value!r}")
        return value

    def shape(self, node: Mapping[str, Any], place: str) -> list[int]:
        """``node["shape"]``: a list of non-negative ints."""
        shape = self.get(node, "shape", list, place)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise self.fail(place, f"a shape of non-negative integers; found {shape!r}")
        return shape

    def payload(self, node: Mapping[str, Any], place: str) -> tuple[str, bytes]:
        """The bytes of the file ``node["file"]`` names, checked against its size and sha256."""
        name = self.get(node, "file", str, place)
        return name, self.read_file(name, place)

    def read_file(self, name: str, place: str) -> bytes:
        """Read payload file ``name`` once, refusing names outside the folder and changed contents."""
        if not _SAFE_NAME.match(name) or name == MANIFEST:
            raise self.fail(place, f"a payload file name inside the folder; found {name!r}")
        entry = self.files.get(name)
        if not isinstance(entry, Mapping):
            raise self.fail(place, f"file {name!r} listed under 'files' with its size and sha256")
        path = self.folder / name
        try:
            with open_regular(path) as fh:
                data = fh.read()
        except FileNotFoundError:
            raise InputError(path, place, "this file, which the manifest lists: it is missing") from None
        except InputError as exc:  # open_regular: a FIFO, a device or a folder under that name
            raise InputError(path, place, exc.expected) from None
        except OSError as exc:
            raise InputError(path, place, f"a readable file ({exc.strerror or exc})") from None
        if len(data) != entry.get("bytes") or hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise InputError(path, place, f"the {entry.get('bytes')} bytes with sha256 {entry.get('sha256')} the "
                                          f"manifest records; found {len(data)} bytes with sha256 "
                                          f"{hashlib.sha256(data).hexdigest()}: the file changed after the dump")
        return data


def file_entry(path: Path) -> dict[str, Any]:
    """``{"bytes": N, "sha256": hex}`` of a written payload file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return {"bytes": size, "sha256": digest.hexdigest()}


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)
