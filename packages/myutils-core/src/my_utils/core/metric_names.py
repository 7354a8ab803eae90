"""One canonical name per GPU metric, and the names each tool gives it.

NVML, DCGM, Nsight Systems' GPU metrics, CUPTI counters (Nsight Compute, Kineto's range
profiler) and this project's own providers all measure how busy a GPU is, under different
names, units and scales: DCGM's ``SMACT`` is a ratio 0-1, nsys's ``SMs Active`` a percentage,
NVML's utilization a percentage of *time a kernel ran* (not of SMs at work). A rule that
reads utilisation asks :func:`event_metric` which canonical metric an event measures and
converts with the alias's ``scale``; it never matches tool names itself.

Data only, plus the lookups. An alias is listed only where the tools measure the same thing;
close cousins get their own canonical name (``gpu.utilization`` is not ``gpu.sm_active``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TAXONOMY", "MetricAlias", "MetricDefinition", "aliases", "event_metric", "lookup"]


@dataclass(frozen=True)
class MetricAlias:
    """How one tool names a metric: ``value_in_canonical_unit = tool_value * scale``."""

    tool: str
    name: str
    scale: float = 1.0


@dataclass(frozen=True)
class MetricDefinition:
    """A canonical metric: its name, unit, what it measures, each tool's name for it, and where that is written."""

    name: str
    unit: str
    meaning: str
    aliases: tuple[MetricAlias, ...]
    source: str


def _a(tool: str, *names: str, scale: float = 1.0) -> tuple[MetricAlias, ...]:
    return tuple(MetricAlias(tool, n, scale) for n in names)


_DCGM = "DCGM field definitions (dcgm_fields.h: DCGM_FI_*, short names as dcgmi dmon prints them)"
_NVML = "NVML API (nvmlDeviceGetUtilizationRates, nvmlDeviceGetPowerUsage, nvmlDeviceGetTotalEnergyConsumption)"
_NSYS = "Nsight Systems User Guide, GPU Metrics (TARGET_INFO_GPU_METRICS.metricName; units in brackets)"
_CUPTI = "Nsight Compute metrics reference (the CUPTI metric names Kineto's range profiler records too)"

#: Tools: ``nvml``, ``nvidia-smi``, ``dcgm`` (dcgmi short names, field names and ids), ``nsys`` (GPU
#: metrics), ``cupti`` (ncu and Kineto counters), and this project's providers by their source name
#: (``dcgm_dmon``: ``dcgm.<field>:<entity>``, ``memory_monitor``: ``monitor/<metric>``).
TAXONOMY: tuple[MetricDefinition, ...] = (
    MetricDefinition(
        "gpu.utilization", "%", "share of the sample period in which one or more kernels ran (any number of SMs)",
        _a("nvml", "utilization.gpu", "nvmlDeviceGetUtilizationRates.gpu") + _a("nvidia-smi", "utilization.gpu")
        + _a("dcgm", "GPUTL", "DCGM_FI_DEV_GPU_UTIL", "203") + _a("dcgm_dmon", "gpu_util")
        + _a("memory_monitor", "gpu_util_pct"), f"{_NVML}; {_DCGM}"),
    MetricDefinition(
        "gpu.memory_bandwidth_utilization", "%", "share of the sample period in which device memory was read or "
        "written (NVML), the memory copy utilisation (DCGM)",
        _a("nvml", "utilization.memory", "nvmlDeviceGetUtilizationRates.memory")
        + _a("nvidia-smi", "utilization.memory") + _a("dcgm", "MCUTL", "DCGM_FI_DEV_MEM_COPY_UTIL", "204")
        + _a("dcgm_dmon", "mem_copy_util") + _a("memory_monitor", "mem_bw_util_pct"), f"{_NVML}; {_DCGM}"),
    MetricDefinition(
        "gpu.gr_engine_active", "%", "share of cycles the graphics/compute engine had work",
        _a("dcgm", "GRACT", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "1001", scale=100.0) + _a("dcgm_dmon", "gr_engine_active")
        + _a("nsys", "GR Active") + _a("cupti", "gr__cycles_active.sum.pct_of_peak_sustained_elapsed"),
        f"{_DCGM}; {_NSYS}"),
    MetricDefinition(
        "gpu.sm_active", "%", "share of cycles an SM had at least one warp resident, averaged over the SMs",
        _a("dcgm", "SMACT", "DCGM_FI_PROF_SM_ACTIVE", "1002", scale=100.0) + _a("dcgm_dmon", "sm_active")
        + _a("nsys", "SMs Active", "SM Active") + _a("nvml", "NVML_GPM_METRIC_SM_UTIL")
        + _a("cupti", "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
        f"{_DCGM}; {_NSYS}; NVML GPM enums; {_CUPTI}"),
    MetricDefinition(
        "gpu.sm_occupancy", "%", "resident warps over the maximum an SM can hold, averaged over the SMs",
        _a("dcgm", "SMOCC", "DCGM_FI_PROF_SM_OCCUPANCY", "1003", scale=100.0) + _a("dcgm_dmon", "sm_occupancy")
        + _a("nsys", "Compute Warps In Flight") + _a("nvml", "NVML_GPM_METRIC_SM_OCCUPANCY")
        + _a("cupti", "sm__warps_active.avg.pct_of_peak_sustained_active"),
        f"{_DCGM}; {_NSYS}; NVML GPM enums; {_CUPTI}"),
    MetricDefinition(
        "gpu.tensor_active", "%", "share of cycles the tensor (matrix) pipes were busy",
        _a("dcgm", "TENSO", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "1004", scale=100.0) + _a("dcgm_dmon", "tensor_active")
        + _a("nsys", "Tensor Active") + _a("nvml", "NVML_GPM_METRIC_ANY_TENSOR_UTIL")
        + _a("cupti", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
        f"{_DCGM}; {_NSYS}; NVML GPM enums; {_CUPTI}"),
    MetricDefinition(
        "gpu.dram_active", "%", "device memory interface busy, as a share of its peak",
        _a("dcgm", "DRAMA", "DCGM_FI_PROF_DRAM_ACTIVE", "1005", scale=100.0) + _a("dcgm_dmon", "dram_active")
        + _a("nvml", "NVML_GPM_METRIC_DRAM_BW_UTIL") + _a("cupti", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        f"{_DCGM}; NVML GPM enums; {_CUPTI}"),
    MetricDefinition(
        "gpu.dram_read_throughput", "%", "device memory read bandwidth as a share of its peak",
        _a("nsys", "DRAM Read Bandwidth"), _NSYS),
    MetricDefinition(
        "gpu.dram_write_throughput", "%", "device memory write bandwidth as a share of its peak",
        _a("nsys", "DRAM Write Bandwidth"), _NSYS),
    MetricDefinition(
        "gpu.power", "W", "board power draw",
        _a("nvml", "nvmlDeviceGetPowerUsage", scale=1e-3) + _a("nvidia-smi", "power.draw")
        + _a("dcgm", "POWER", "DCGM_FI_DEV_POWER_USAGE", "155") + _a("dcgm_dmon", "power")
        + _a("memory_monitor", "power_w"), f"{_NVML} (milliwatts); {_DCGM}"),
    MetricDefinition(
        "gpu.energy", "J", "energy used since a fixed point (a counter: differences between samples are the "
        "energy of the interval)",
        _a("nvml", "nvmlDeviceGetTotalEnergyConsumption", scale=1e-3)
        + _a("dcgm", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "156", scale=1e-3) + _a("memory_monitor", "energy_j"),
        f"{_NVML} (millijoules); {_DCGM} (millijoules)"),
    MetricDefinition(
        "gpu.memory_used", "bytes", "device memory in use by every process (not only PyTorch's allocator)",
        _a("nvml", "nvmlDeviceGetMemoryInfo.used") + _a("dcgm", "FBUSD", "DCGM_FI_DEV_FB_USED", "252",
                                                      scale=float(1 << 20))
        + _a("dcgm_dmon", "fb_used", scale=float(1 << 20)) + _a("memory_monitor", "gpu_mem_used_bytes"),
        f"{_NVML}; {_DCGM} (MiB)"),
    MetricDefinition(
        "gpu.sm_clock", "MHz", "SM clock frequency",
        _a("nvml", "nvmlDeviceGetClockInfo.SM") + _a("dcgm", "SMCLK", "DCGM_FI_DEV_SM_CLOCK", "100")
        + _a("dcgm_dmon", "sm_clock"), f"{_NVML}; {_DCGM}"),
)

_BY_ALIAS: dict[tuple[str, str], tuple[MetricDefinition, MetricAlias]] = {
    (a.tool, a.name.casefold()): (m, a) for m in TAXONOMY for a in m.aliases}
_BY_NAME: dict[str, MetricDefinition] = {m.name: m for m in TAXONOMY}


def lookup(tool: str, name: str) -> tuple[MetricDefinition, MetricAlias] | None:
    """The canonical metric ``tool`` calls ``name`` (case-insensitive; nsys's ``" [unit]"`` suffix ignored)."""
    key = name.strip()
    if tool == "nsys" and key.endswith("]") and " [" in key:
        key = key[:key.rindex(" [")]  # "SMs Active [Throughput %]" -> "SMs Active"
    return _BY_ALIAS.get((tool, key.casefold()))


def aliases(metric: str, tool: str | None = None) -> tuple[MetricAlias, ...]:
    """The names of canonical ``metric`` (every tool's, or ``tool``'s); KeyError naming the known ones."""
    try:
        found = _BY_NAME[metric]
    except KeyError:
        raise KeyError(f"no canonical metric {metric!r}; known: {', '.join(sorted(_BY_NAME))}") from None
    return tuple(a for a in found.aliases if tool is None or a.tool == tool)


def event_metric(source: str | None, name: str) -> tuple[MetricDefinition, float] | None:
    """The canonical metric a metric event measures, and the scale to its unit; None when it is none of them.

    An event named by its canonical metric (``gpu.sm_active:gpu0``, any source) is that metric; an
    event of one of this project's providers is looked up by its source and the field between the
    provider's prefix (``dcgm.``, ``monitor/``) and the entity (``:gpu0``).
    """
    base = name.split(":", 1)[0]
    direct = _BY_NAME.get(base)
    if direct is not None:
        return direct, 1.0
    if source is None:
        return None
    for sep in (".", "/"):
        if sep in base:
            found = lookup(source, base.split(sep, 1)[1])
            if found is not None:
                return found[0], found[1].scale
    return None
