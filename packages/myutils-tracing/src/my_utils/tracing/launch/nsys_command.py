"""An ``nsys profile`` command line for one nsys version: what a profile asks for, less what that version lacks.

Each option of :class:`NsysOptions` maps to one switch. An option the version does not
document (``nsys_docs``), or a value it does not list, is left out and said in
``NsysCommand.dropped`` with the reason and the source: a launcher that passed it anyway
would stop the job before its first step (nsys refuses unknown switches). ``check_nsys_args``
is the same test applied to any argument list (the tests apply it to every generated line).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from my_utils.core.errors import ConfigError
from my_utils.tracing.launch.nsys_docs import NSYS_DOCS, NsysVersion, documented_flags

_BOOL = frozenset({"force_overwrite", "trace_fork_before_exec", "python_sampling", "cuda_memory_usage", "stats"})
_INT = frozenset({"python_sampling_frequency", "delay", "duration"})


@dataclass(frozen=True)
class NsysOptions:
    """What a launch asks of nsys; ``None``/``False`` leaves the switch out (nsys's default applies)."""

    trace: tuple[str, ...] = ("cuda", "nvtx", "osrt")
    output: str = "nsys_rank%q{RANK}"
    force_overwrite: bool = True
    capture_range: str | None = "cudaProfilerApi"
    capture_range_end: str | None = "stop"
    cuda_graph_trace: str | None = None
    trace_fork_before_exec: bool = False
    python_sampling: bool = False
    python_sampling_frequency: int | None = None
    python_backtrace: str | None = None
    pytorch: str | None = None
    gpu_metrics_devices: str | None = None
    sample: str | None = None
    cpuctxsw: str | None = None
    cuda_memory_usage: bool = False
    cuda_event_trace: str | None = None
    stats: bool = False
    export: str | None = None
    delay: int | None = None
    duration: int | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, object], where: str) -> NsysOptions:
        """From a profile's ``nsys:`` mapping; ConfigError naming the key and what it takes."""
        known = {f.name for f in fields(cls)}
        values: dict[str, object] = {}
        for key, value in data.items():
            name = str(key).replace("-", "_")
            place = f"key nsys.{key}"
            if name not in known:
                raise ConfigError(where, place, f"one of {', '.join(sorted(known))}")
            if name == "trace":
                items = value.split(",") if isinstance(value, str) else value
                if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in items):
                    raise ConfigError(where, place, f"a list of trace names (cuda, nvtx, ...); found {value!r}")
                values[name] = tuple(v.strip() for v in items)
            elif name in _BOOL:
                if not isinstance(value, bool):
                    raise ConfigError(where, place, f"true or false; found {value!r}")
                values[name] = value
            elif name in _INT:
                if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                    raise ConfigError(where, place, f"a whole number >= 0; found {value!r}")
                values[name] = value
            else:
                if value is not None and (not isinstance(value, (str, int)) or isinstance(value, bool)):
                    raise ConfigError(where, place, f"a value such as 'node' or 'cudaProfilerApi'; found {value!r}")
                values[name] = None if value is None else str(value)
        return cls(**values)  # type: ignore[arg-type]

    def switches(self) -> list[tuple[str, str]]:
        """(switch, value) of every option set, in a fixed order."""
        out: list[tuple[str, str]] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value is False or value == ():
                continue
            flag = "--" + f.name.replace("_", "-")
            if f.name == "trace":
                out.append((flag, ",".join(value)))
            elif value is True:
                out.append((flag, "true"))
            else:
                out.append((flag, str(value)))
        return out


@dataclass(frozen=True)
class NsysCommand:
    """The command: environment, ``nsys profile`` switches, the application; what was left out and why."""

    version: NsysVersion
    documented: NsysVersion
    env: tuple[tuple[str, str], ...]
    nsys: str
    args: tuple[str, ...]
    command: tuple[str, ...]
    dropped: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def argv(self) -> list[str]:
        """``[nsys, "profile", switches..., "--", command...]`` (no environment)."""
        return [self.nsys, "profile", *self.args, *(["--", *self.command] if self.command else [])]

    def shell(self) -> str:
        """The line to paste into a shell: ``VAR=value ... nsys profile ... -- command``."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return (env + " " if env else "") + shlex.join(self.argv)


def check_nsys_args(args: Sequence[str], version: NsysVersion) -> list[str]:
    """What in ``args`` (``--switch=value`` items) the nsys ``version`` does not document; [] when all is."""
    used, options, _note = documented_flags(version)
    problems = []
    for arg in args:
        if not arg.startswith("--"):
            problems.append(f"{arg!r}: expected --switch=value")
            continue
        flag, _, value = arg.partition("=")
        doc = options.get(flag)
        if doc is None:
            problems.append(f"{flag}: not a profile switch nsys {used} documents")
        elif doc.values and value not in doc.values:
            problems.append(f"{flag}={value}: nsys {used} documents {', '.join(doc.values)}")
    return problems


def build_nsys_command(options: NsysOptions, version: NsysVersion, command: Sequence[str] = (), *,
                       env: Mapping[str, str] | None = None, nsys: str = "nsys") -> NsysCommand:
    """The command line for nsys ``version`` (see the module docstring)."""
    used, documented, note = documented_flags(version)
    args: list[str] = []
    dropped: list[tuple[str, str]] = []
    for flag, value in options.switches():
        doc = documented.get(flag)
        later = sorted(v for v, opts in NSYS_DOCS.items() if flag in opts and v > used)
        if doc is None:
            since = f"; documented from nsys {later[0]} ({NSYS_DOCS[later[0]][flag].source})" if later else ""
            dropped.append((f"{flag}={value}", f"nsys {version} does not document it (its table: nsys {used}){since}"))
            continue
        if doc.values and value not in doc.values:
            dropped.append((f"{flag}={value}", f"nsys {used} documents the values {', '.join(doc.values)} "
                                               f"({doc.source})"))
            continue
        args.append(f"{flag}={value}")
    return NsysCommand(version, used, tuple(sorted((env or {}).items())), nsys, tuple(args), tuple(command),
                       tuple(dropped), (note,) if note else ())

