"""parse_profiling_args / setup_profiling: the four groups, both syntaxes, errors naming the key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from my_utils.core.errors import ConfigError
from my_utils.profiling.launch_args import NsysSettings, parse_profiling_args, setup_profiling


def test_groups_and_remaining() -> None:
    args = parse_profiling_args([
        "--torch_profiler.enable", "true", "--torch_profiler.start_step=3", "--torch_profiler.stop_step=5",
        "--lr=0.1", "--nsys_profiler.enable=0", "--profiling_env.ENABLE_NVTX=1", "--nsys_launch.trace=cuda",
        "data.bin",
    ])
    assert args.remaining == ("--lr=0.1", "data.bin")
    assert [s for s in range(8) if args.torch_profiler.in_window(s)] == [3, 4]
    assert args.torch_profiler.schedule_args() == {"wait": 2, "warmup": 1, "active": 2, "repeat": 1}
    assert not args.nsys_profiler.enabled and args.nsys_profiler.action(3) is None
    assert args.nsys_launch == {"trace": "cuda"}
    env: dict[str, str] = {}
    assert setup_profiling(["--profiling_env.A=1", "--profiling_env.B=x=y"], env).profiling_env == {"A": "1", "B": "x=y"}
    assert env == {"A": "1", "B": "x=y"}


@pytest.mark.parametrize(("argv", "place"), [
    (["--torch_profiler.strat_step=3"], "--torch_profiler.strat_step"),
    (["--nsys_profiler.start_step=abc"], "--nsys_profiler.start_step"),
    (["--nsys_profiler.enable=maybe"], "--nsys_profiler.enable"),
    (["--nsys_profiler.enable=1", "--nsys_profiler.start_step=5", "--nsys_profiler.stop_step=5"],
     "--nsys_profiler.stop_step"),
    (["--torch_profiler.start_step"], "--torch_profiler.start_step"),
])
def test_errors_name_the_argument(argv: list[str], place: str) -> None:
    with pytest.raises(ConfigError, match=f"command line:{place}"):
        parse_profiling_args(argv)


def test_nsys_on_step_uses_the_backend() -> None:
    calls: list[str] = []

    class Backend:
        def start(self) -> None:
            calls.append("start")

        def stop(self) -> None:
            calls.append("stop")

    nsys = NsysSettings(enabled=True, start_step=2, stop_step=4)
    assert [nsys.on_step(s, Backend()) for s in range(6)] == [None, None, "start", None, "stop", None]
    assert calls == ["start", "stop"]


@given(st.lists(st.text(min_size=0, max_size=12), max_size=8))
def test_parser_never_crashes(argv: list[str]) -> None:
    try:
        args = parse_profiling_args(argv)
    except ConfigError:
        return
    assert all(not a.startswith(("--torch_profiler.", "--nsys_profiler.")) for a in args.remaining)
