"""Payload files of a dump folder: tensors, arrays, images, bytes and (opted-in) pickles.

Safe formats only, unless the caller opts in to pickle:
- tensors: one ``tensors.safetensors`` file (when the ``safetensors`` package is installed and
  knows the dtype), else ``tensors.pt`` written by ``torch.save`` and read with
  ``weights_only=True`` (sparse and quantized tensors always go there);
- numpy arrays and scalars: ``arrays/<n>.npy`` written and read with ``allow_pickle=False``;
- PIL images: ``images/<n>.png`` for the modes PNG stores exactly, else ``images/<n>.raw``
  (``Image.tobytes()``; mode, size and palette in the manifest);
- ``bytes``: ``blobs/<n>.bin``; anything else, with ``allow_pickle=True``: ``pickles/<n>.pkl``.

torch, numpy, PIL and safetensors are imported only when a value of theirs is written or read.
"""

from __future__ import annotations

import importlib.util
import io
import pickle
import sys
from pathlib import Path
from typing import Any

from my_utils.core.artifacts.manifest import PICKLE_WARNING, ManifestReader, file_entry
from my_utils.core.errors import InputError, UsageError

#: image modes PNG writes and reads back unchanged (checked by the round-trip tests)
PNG_MODES = frozenset({"1", "L", "LA", "P", "RGB", "RGBA", "I;16"})
SAFETENSORS_FILE = "tensors.safetensors"
TORCH_FILE = "tensors.pt"


def safetensors_installed() -> bool:
    """Whether ``safetensors`` can be imported (found without importing it; a blocked import counts as absent)."""
    try:
        return importlib.util.find_spec("safetensors") is not None
    except (ImportError, ValueError):  # ValueError: sys.modules["safetensors"] is None (import blocked)
        return False


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).removeprefix("torch.")


class PayloadWriter:
    """Writes the payload files of one dump into ``folder``; ``finish()`` lists them with their hashes."""

    def __init__(self, folder: Path, tensor_format: str) -> None:
        if tensor_format not in ("auto", "safetensors", "torch"):
            raise UsageError(f"tensor_format={tensor_format!r}: expected 'auto', 'safetensors' or 'torch'")
        if tensor_format == "safetensors" and not safetensors_installed():
            raise UsageError("tensor_format='safetensors' needs the safetensors package: "
                             "pip install safetensors (or myutils-core[safetensors]), or use tensor_format='auto'")
        self.folder = folder
        self.tensor_format = tensor_format
        self._counts: dict[str, int] = {}
        self._tensors: dict[str, dict[str, Any]] = {SAFETENSORS_FILE: {}, TORCH_FILE: {}}
        self._storages: set[int] = set()
        self._safe_dtypes: dict[Any, bool] = {}

    def _new_file(self, folder: str, suffix: str) -> tuple[str, Path]:
        n = self._counts.get(folder, 0)
        self._counts[folder] = n + 1
        name = f"{folder}/{n}{suffix}"
        path = self.folder / name
        path.parent.mkdir(exist_ok=True)
        return name, path

    # -- tensors ----------------------------------------------------------------------------

    def tensor(self, obj: Any) -> dict[str, Any]:
        """Queue a tensor for its tensor file; the node records dtype, shape, grad and device."""
        import torch

        t = obj.detach()
        node: dict[str, Any] = {"type": "tensor", "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                                "requires_grad": bool(obj.requires_grad),
                                "parameter": isinstance(obj, torch.nn.Parameter), "device": str(t.device)}
        t = t.cpu()
        if t.layout == torch.strided and not t.is_quantized:
            t = t.resolve_conj().resolve_neg().contiguous()
            storage = t.untyped_storage().data_ptr()
            if storage and storage in self._storages:
                t = t.clone()  # safetensors refuses two tensors on one storage
            self._storages.add(t.untyped_storage().data_ptr())
            file = SAFETENSORS_FILE if self._safetensors_takes(t.dtype) else TORCH_FILE
        else:
            file = TORCH_FILE
        bucket = self._tensors[file]
        key = str(len(self._tensors[SAFETENSORS_FILE]) + len(self._tensors[TORCH_FILE]))
        bucket[key] = t
        node.update(file=file, key=key)
        return node

    def _safetensors_takes(self, dtype: Any) -> bool:
        if self.tensor_format == "torch" or (self.tensor_format == "auto"
                                             and not safetensors_installed()):
            return False
        if dtype not in self._safe_dtypes:
            import safetensors.torch
            import torch

            try:  # the installed release decides which dtypes it stores
                safetensors.torch.save({"x": torch.zeros(1, dtype=dtype)})
                self._safe_dtypes[dtype] = True
            except (ValueError, TypeError, KeyError, RuntimeError):
                self._safe_dtypes[dtype] = False
        return self._safe_dtypes[dtype]

    # -- other leaves -----------------------------------------------------------------------

    def ndarray(self, array: Any, scalar: bool) -> dict[str, Any]:
        """Write a numpy array (or a 0-d array standing for a numpy scalar) as ``.npy``."""
        import numpy as np

        name, path = self._new_file("arrays", ".npy")
        with open(path, "wb") as fh:
            np.save(fh, array, allow_pickle=False)
        return {"type": "ndarray", "file": name, "dtype": str(array.dtype), "shape": list(array.shape),
                "scalar": scalar}

    def image(self, img: Any) -> dict[str, Any]:
        """Write a PIL image: PNG where it is exact, raw bytes otherwise."""
        node: dict[str, Any] = {"type": "image", "mode": img.mode, "size": list(img.size)}
        if img.mode in PNG_MODES:
            name, path = self._new_file("images", ".png")
            img.save(path, format="PNG")
            node.update(file=name, encoding="png")
        else:
            name, path = self._new_file("images", ".raw")
            path.write_bytes(img.tobytes())
            node.update(file=name, encoding="raw")
            if img.palette is not None:
                node["palette"] = {"mode": img.palette.mode, "values": img.getpalette(img.palette.mode)}
        return node

    def blob(self, data: bytes | bytearray) -> dict[str, Any]:
        """Write ``bytes``/``bytearray`` as they are."""
        name, path = self._new_file("blobs", ".bin")
        path.write_bytes(bytes(data))
        return {"type": type(data).__name__, "file": name}

    def pickled(self, obj: Any, place: str) -> dict[str, Any]:
        """Pickle ``obj`` (the caller opted in); an object pickle cannot take is refused by place."""
        try:
            data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # any pickling failure: name the place and the reason
            raise UsageError(f"{place}: cannot pickle a {type(obj).__qualname__} ({exc})") from exc
        name, path = self._new_file("pickles", ".pkl")
        path.write_bytes(data)
        return {"type": "pickle", "file": name, "class": f"{type(obj).__module__}:{type(obj).__qualname__}"}

    def finish(self) -> dict[str, dict[str, Any]]:
        """Write the tensor files; return every payload file with its size and sha256."""
        if self._tensors[SAFETENSORS_FILE]:
            import safetensors.torch

            safetensors.torch.save_file(self._tensors[SAFETENSORS_FILE], str(self.folder / SAFETENSORS_FILE))
        if self._tensors[TORCH_FILE]:
            import torch

            torch.save(self._tensors[TORCH_FILE], self.folder / TORCH_FILE)
        return {p.relative_to(self.folder).as_posix(): file_entry(p)
                for p in sorted(self.folder.rglob("*")) if p.is_file()}


class PayloadReader:
    """Reads payload files for the nodes of one manifest; each file is read (and hash-checked) once."""

    def __init__(self, manifest: ManifestReader, allow_pickle: bool) -> None:
        self.manifest = manifest
        self.allow_pickle = allow_pickle
        self._tensor_files: dict[str, dict[str, Any]] = {}

    def tensor(self, node: dict[str, Any], place: str) -> Any:
        """The tensor a node names, on the CPU, with its grad flag (and as a Parameter if it was one)."""
        m = self.manifest
        name = m.get(node, "file", str, place)
        key = m.get(node, "key", str, place)
        dtype, shape = m.get(node, "dtype", str, place), m.shape(node, place)
        tensors = self._tensor_files.get(name)
        if tensors is None:
            tensors = self._tensor_files[name] = self._read_tensor_file(name, place)
        path = m.folder / name
        t = tensors.get(key)
        if t is None:
            raise InputError(path, place, f"tensor key {key!r}, which the manifest names; the file has none")
        if dtype_name(t.dtype) != dtype or list(t.shape) != shape:
            raise InputError(path, place, f"the {dtype}{shape} the manifest records under key {key!r}; "
                                          f"found {dtype_name(t.dtype)}{list(t.shape)}")
        import torch

        requires_grad = m.get(node, "requires_grad", bool, place)
        if m.get(node, "parameter", bool, place):
            return torch.nn.Parameter(t, requires_grad=requires_grad)
        return t.requires_grad_(True) if requires_grad else t

    def _read_tensor_file(self, name: str, place: str) -> dict[str, Any]:
        path = self.manifest.folder / name
        if name not in (SAFETENSORS_FILE, TORCH_FILE):
            raise self.manifest.fail(place, f"a tensor file ({SAFETENSORS_FILE} or {TORCH_FILE}); found {name!r}")
        data = self.manifest.read_file(name, place)
        try:
            if name == SAFETENSORS_FILE:
                if not safetensors_installed():
                    raise InputError(path, place, "the safetensors package to read this file: "
                                                  "pip install safetensors (or myutils-core[safetensors])")
                import safetensors.torch

                loaded = safetensors.torch.load(data)
            else:
                import torch

                loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except InputError:
            raise
        except Exception as exc:  # any parser failure on a file whose hash matched: a forged dump
            raise InputError(path, place, f"a readable tensor file ({type(exc).__name__}: {exc})") from None
        if not isinstance(loaded, dict) or not all(isinstance(k, str) for k in loaded):
            raise InputError(path, place, "a mapping of tensor keys to tensors")
        return loaded

    def ndarray(self, node: dict[str, Any], place: str) -> Any:
        """The array (or numpy scalar) a node names, checked against the manifest's dtype and shape."""
        import numpy as np

        m = self.manifest
        name, data = m.payload(node, place)
        dtype, shape = m.get(node, "dtype", str, place), m.shape(node, place)
        try:
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except Exception as exc:  # numpy's parser failures: ValueError, EOFError, ...
            raise InputError(m.folder / name, place, f"a .npy array without pickled objects ({exc})") from None
        if not isinstance(array, np.ndarray) or str(array.dtype) != dtype or list(array.shape) != shape:
            found = f"{array.dtype}{list(array.shape)}" if isinstance(array, np.ndarray) else type(array).__name__
            raise InputError(m.folder / name, place, f"the {dtype}{shape} array the manifest records; found {found}")
        if m.get(node, "scalar", bool, place):
            if array.shape != ():
                raise InputError(m.folder / name, place, f"a 0-d array for a numpy scalar; found shape {shape}")
            return array[()]
        return array

    def image(self, node: dict[str, Any], place: str) -> Any:
        """The PIL image a node names (a plain ``Image.Image``; ``info`` is not kept)."""
        from PIL import Image

        m = self.manifest
        name, data = m.payload(node, place)
        mode, size = m.get(node, "mode", str, place), m.get(node, "size", list, place)
        encoding = m.get(node, "encoding", str, place)
        path = m.folder / name
        try:
            if encoding == "png":
                with Image.open(io.BytesIO(data), formats=["PNG"]) as opened:
                    img = opened.copy()
            elif encoding == "raw":
                img = Image.frombytes(mode, tuple(size), data)
                palette = node.get("palette")
                if palette is not None:
                    img.putpalette(m.get(palette, "values", list, place), m.get(palette, "mode", str, place))
            else:
                raise m.fail(place, f"image encoding 'png' or 'raw'; found {encoding!r}")
        except InputError:
            raise
        except Exception as exc:  # PIL's parser failures
            raise InputError(path, place, f"a {mode} image of size {size} ({exc})") from None
        if img.mode != mode or list(img.size) != size:
            raise InputError(path, place, f"the {mode} image of size {size} the manifest records; "
                                          f"found {img.mode} {list(img.size)}")
        return img

    def blob(self, node: dict[str, Any], place: str) -> bytes | bytearray:
        """The ``bytes``/``bytearray`` a node names."""
        _, data = self.manifest.payload(node, place)
        return bytearray(data) if node.get("type") == "bytearray" else data

    def unpickle(self, node: dict[str, Any], place: str) -> Any:
        """The pickled object a node names; refused unless the caller allowed pickles."""
        if not self.allow_pickle:
            raise self.manifest.fail(place, f"no pickled object ({node.get('class')}); {PICKLE_WARNING}")
        name, data = self.manifest.payload(node, place)
        try:
            return pickle.loads(data)  # the caller passed allow_pickle=True
        except Exception as exc:  # whatever unpickling raises
            raise InputError(self.manifest.folder / name, place, f"a readable pickle ({exc})") from None


def module_loaded(name: str) -> Any:
    """``sys.modules[name]`` or None: a value of a library can exist only once that library is imported."""
    return sys.modules.get(name)
