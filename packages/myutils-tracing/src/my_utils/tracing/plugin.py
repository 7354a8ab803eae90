"""The built-in plugin of myutils-tracing, registered through the ``my_utils.plugins`` entry point.

Kept import-light: it only describes components (``"module:Class"`` strings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.hookspecs import hookimpl
from my_utils.core.plugin_types import PluginDescription, PluginKind

if TYPE_CHECKING:
    import typer

_BACKENDS = "my_utils.tracing.capture.backends"


@hookimpl
def myutils_capture_backends() -> list[PluginDescription]:
    """The capture backends shipped with myutils-tracing."""
    return [
        PluginDescription(
            name="cudaProfilerApi", kind=PluginKind.CAPTURE_BACKEND,
            factory=f"{_BACKENDS}.cuda_profiler:CudaProfilerBackend",
            summary="cudaProfilerStart/Stop around each window, for nsys --capture-range=cudaProfilerApi",
            inputs=("live hook events",), extras=("torch",),
        ),
        PluginDescription(
            name="torch_profiler", kind=PluginKind.CAPTURE_BACKEND,
            factory=f"{_BACKENDS}.torch_profiler:TorchProfilerBackend",
            summary="torch.profiler per window: one Kineto .json.gz named by rank and steps",
            inputs=("live hook events",), extras=("torch",),
        ),
        PluginDescription(
            name="recording", kind=PluginKind.CAPTURE_BACKEND,
            factory=f"{_BACKENDS}.recording:RecordingBackend",
            summary="in-memory record of window starts and stops, for tests",
            inputs=("live hook events",),
        ),
    ]


@hookimpl
def myutils_cli(app: typer.Typer) -> None:
    """Add ``myutils launch nsys`` and ``myutils launch profiles`` (defined in ``launch_cli``: importing it does not import the launch package)."""
    from my_utils.tracing.launch_cli import add_commands

    add_commands(app)
