"""Every public function that takes a path accepts ``str`` and any ``os.PathLike`` (issue 40).

The public API is what the distributions' facades export: each ``my_utils.<dist>`` package and
its subpackages' ``__all__``, and the seed's ``my_utils.artifacts``. A parameter is a path when
its annotation names ``Path``/``PathLike``. For each one:

- its annotation admits ``str`` (``Path`` alone told callers a ``str`` would not do, and
  ``read_ncu_csv`` then crashed on one with an AttributeError);
- called with a ``str`` and with a bare ``os.PathLike`` object (neither is a ``Path``) naming a
  file that does not exist, it reads or fails with a my_utils error or an ``OSError`` naming
  the file, never an ``AttributeError``/``TypeError`` about the path's type (a lone path given
  where a list is accepted is a list of one, not its characters).

Callables with other required parameters get a value from ``FILL``; a new public callable the
test cannot fill fails until it is added there.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path
from typing import Any

import pytest

DISTS = ("core", "tracing", "hooks", "distributed", "memory", "profiling", "legacy")


class BarePathLike:
    """An ``os.PathLike`` that is not a ``Path`` (what pytest's ``LocalPath`` and others are)."""

    def __init__(self, path: Path) -> None:
        self._path = str(path)

    def __fspath__(self) -> str:
        return self._path

    def __repr__(self) -> str:
        return f"BarePathLike({self._path!r})"


def _facades() -> list[Any]:
    out = []
    for dist in DISTS:
        pkg = importlib.import_module(f"my_utils.{dist}")
        out.append(pkg)
        for info in pkgutil.walk_packages(pkg.__path__, f"{pkg.__name__}."):
            parts = info.name.split(".")[2:]
            if not info.ispkg or any(p.startswith("_") or p in ("testing", "examples", "cli") for p in parts):
                continue
            out.append(importlib.import_module(info.name))
    out.append(importlib.import_module("my_utils.artifacts"))
    return out


def _path_parameters() -> list[tuple[str, Any, tuple[str, ...], dict[str, str]]]:
    """(public name, callable, its path parameters, their annotations), each callable once."""
    seen: set[int] = set()
    found = []
    for module in _facades():
        for name in getattr(module, "__all__", ()):
            try:
                obj = getattr(module, name)
            except Exception:  # an optional distribution's alias: its own tests cover it
                continue
            if id(obj) in seen or not callable(obj):
                continue
            seen.add(id(obj))
            try:
                sig = inspect.signature(obj)
                hints = typing.get_type_hints(obj.__init__ if inspect.isclass(obj) else obj)
            except (TypeError, ValueError, NameError):
                continue
            annotations = {p: str(hints.get(p, sig.parameters[p].annotation)) for p in sig.parameters}
            paths = tuple(p for p, a in annotations.items() if "Path" in a)
            if paths:
                found.append((f"{module.__name__}.{name}", obj, paths, {p: annotations[p] for p in paths}))
    return found


PARAMS = _path_parameters()


def _tiny_model() -> Any:
    import torch

    return torch.nn.Sequential(torch.nn.Linear(2, 2))


def _empty_report() -> Any:
    from my_utils.profiling import MetricsAnalyzer

    return MetricsAnalyzer([]).analyze()


#: values for the non-path parameters callables require (keyed by parameter name), made on demand
FILL: dict[str, Any] = {"prefix": lambda: "walk", "obj": lambda: {"x": 1}, "name": lambda: "walk_plugin",
                        "kind": lambda: "provider", "current_task_type": lambda: "walk", "fmt": lambda: "json",
                        "events": lambda: [], "report": _empty_report, "model": _tiny_model,
                        "metric": lambda: "step_time"}


#: callables whose call has effects a test must undo: the undo, given the result
UNDO = {"install_oom_recorder": lambda rec: rec.uninstall()}
#: what a constructed object must then do with the path it was given (a constructor that only stores it proves little)
THEN = {"MetricsAnalyzer": lambda obj: obj.analyze(), "MonitorSamplesMetricsProvider": lambda obj: obj.collect(),
        "ControlFileWatcher": lambda obj: obj.poll(0),
        "ForwardTraceRecorder": lambda obj: (obj.attach(), obj.model(__import__("torch").zeros(1, 2)), obj.remove())}
#: calls skipped with the reason (each still has its annotation checked)
NOT_CALLED = {
    "my_utils.profiling.trace.write_trace": "needs a merged trace object; its path parameter is the output",
}


def test_the_walk_found_the_path_taking_api() -> None:
    names = {n.rsplit(".", 1)[1] for n, *_ in PARAMS}
    assert {"read_ncu_csv", "csv_to_trace", "load_snapshot", "ProfileManager", "MetricsCollector",
            "ControlFileWatcher", "analyze_files"} <= names
    assert len(PARAMS) > 40


@pytest.mark.parametrize(("name", "params", "annotations"), [(n, p, a) for n, _o, p, a in PARAMS],
                         ids=[n for n, *_ in PARAMS])
def test_path_annotations_admit_str(name: str, params: tuple[str, ...], annotations: dict[str, str],
                                    tmp_path: Path) -> None:
    obj = next(o for n, o, *_ in PARAMS if n == name)
    for param in params:
        if "str" in annotations[param]:
            continue
        # a dataclass field typed Path (what its readers get) converts what the constructor was given
        assert dataclasses.is_dataclass(obj), f"{name}({param}: {annotations[param]}): a str path must be accepted"
        # its other required fields from FILL (a value of the wrong type is stored as given: only the path is checked)
        others = {f.name: FILL[f.name]() for f in dataclasses.fields(obj)
                  if f.name != param and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        made = obj(**{param: str(tmp_path / "x")}, **others)
        assert getattr(made, param) == tmp_path / "x" and isinstance(getattr(made, param), Path), name


@pytest.mark.parametrize("kind", ["str", "pathlike"])
@pytest.mark.parametrize(("name", "obj", "params"), [(n, o, p) for n, o, p, _a in PARAMS], ids=[n for n, *_ in PARAMS])
def test_str_and_pathlike_paths_work(name: str, obj: Any, params: tuple[str, ...], kind: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if name in NOT_CALLED:
        pytest.skip(NOT_CALLED[name])
    from my_utils.core.errors import MyUtilsError

    monkeypatch.chdir(tmp_path)
    sig = inspect.signature(obj)
    kwargs: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.name in params:
            target = tmp_path / "in" / f"missing_{p.name}.txt"
            kwargs[p.name] = str(target) if kind == "str" else BarePathLike(target)
        elif p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            assert p.name in FILL, f"{name}: add a value for its required parameter {p.name!r} to FILL"
            kwargs[p.name] = FILL[p.name]()
    try:
        result = obj(**kwargs)
        if inspect.isgenerator(result):
            list(result)
        then = THEN.get(name.rsplit(".", 1)[1])
        if then is not None:
            then(result)
    except (MyUtilsError, OSError) as exc:  # the file is missing: said, with its name
        assert "missing_" in str(exc) or isinstance(exc, MyUtilsError), f"{name}: {exc}"
        return
    except (AttributeError, TypeError) as exc:
        pytest.fail(f"{name}({', '.join(params)}={kind}): {type(exc).__name__}: {exc}")
    short = name.rsplit(".", 1)[1]
    if short in UNDO:
        UNDO[short](result)


def test_read_ncu_csv_with_a_str_path_reads_the_same_events(real_fixtures: Any) -> None:
    """The defect of docs/artifacts.md: ``read_ncu_csv(path)`` with a str raised AttributeError."""
    import csv
    import io

    from my_utils.artifacts import read_ncu_csv

    path = real_fixtures / "ncu/ai4mat__gcn_torch_ncu_metrics_show.csv.txt"
    as_path, as_str, as_like = read_ncu_csv(Path(path)), read_ncu_csv(str(path)), read_ncu_csv(BarePathLike(path))
    assert as_path and as_str == as_path == as_like
    # the launches are those of the raw CSV (its rows counted with the csv module, not the reader)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    launches = {row["ID"] for row in csv.DictReader(io.StringIO("\n".join(lines[start:])))}
    assert {e.attrs["launch_id"] for e in as_str} == launches
