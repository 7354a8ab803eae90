"""Hardware facts: GPU peak throughput per data type and link bandwidths, one sourced table (``hardware.csv``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from my_utils.core.lazy import lazy_exports

if TYPE_CHECKING:
    from my_utils.profiling.hardware.table import HardwareFigure as HardwareFigure
    from my_utils.profiling.hardware.table import figures as figures
    from my_utils.profiling.hardware.table import gpu_figure as gpu_figure
    from my_utils.profiling.hardware.table import gpu_model as gpu_model
    from my_utils.profiling.hardware.table import link_bandwidth as link_bandwidth
    from my_utils.profiling.hardware.table import memory_bandwidth as memory_bandwidth
    from my_utils.profiling.hardware.table import mfu as mfu
    from my_utils.profiling.hardware.table import peak_flops as peak_flops

__all__ = ["HardwareFigure", "figures", "gpu_figure", "gpu_model", "link_bandwidth", "memory_bandwidth", "mfu",
           "peak_flops"]
__getattr__, __dir__ = lazy_exports(__name__, {name: "my_utils.profiling.hardware.table" for name in __all__})
