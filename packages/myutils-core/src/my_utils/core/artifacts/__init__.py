"""Dump any nested object to a folder of safe files with a manifest, and load it back identical.

``dump_artifacts(obj, folder)`` writes tensors (safetensors, else torch's weights-only format),
numpy arrays (``.npy``), PIL images (PNG), bytes, and the containers, dataclasses, TensorDicts
and scalars around them (``manifest.json``); ``load_artifacts(folder)`` reads it back.
Pickle is used only when the caller passes ``allow_pickle=True`` to both, since loading a
pickle runs code from the file. ``DumpTensorIO`` (``my_utils.core.debug``) dumps and compares
tensors by name and step under ``WAN_DPO_PREVAE_TENSOR_DIR``.

The seed's ``my_utils.artifacts`` gathers these names and the Nsight Compute CSV helpers of
myutils-profiling.
"""

from my_utils.core.artifacts.dump import dump_artifacts
from my_utils.core.artifacts.load import load_artifacts
from my_utils.core.artifacts.manifest import FORMAT, MANIFEST, SCHEMA_VERSION

__all__ = ["FORMAT", "MANIFEST", "SCHEMA_VERSION", "dump_artifacts", "load_artifacts"]
