"""Window semantics (table-driven), the lifecycle, balance under any event order, and exits."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.core.errors import ConfigError, UsageError
from my_utils.tracing.capture import (
    CaptureController,
    CaptureSpec,
    CaptureState,
    HookEvent,
    ProfileManager,
    RecordingBackend,
    StopPolicy,
    StopReason,
)
from my_utils.tracing.capture.anomaly import step_window_spec
from my_utils.tracing.capture.backends.base import CaptureBackend
from my_utils.tracing.capture.config import Edge
from my_utils.tracing.capture.lifecycle import TRANSITIONS, TransitionError, Trigger, transition

DATA = Path(__file__).parent / "data"

Event = tuple[str, str, int, int]  # (edge, profile name, iteration, microbatch)


def loop(iterations: Iterable[int], microbatches: int, inner: bool = True) -> list[Event]:
    """The events of a training loop: fwd around attn, per microbatch."""
    events: list[Event] = []
    for it in iterations:
        for mb in range(microbatches):
            events.append(("ENTER", "fwd", it, mb))
            if inner:
                events += [("ENTER", "attn", it, mb), ("EXIT", "attn", it, mb)]
            events.append(("EXIT", "fwd", it, mb))
    return events


class Driven:
    """What ``drive`` saw: the backend, the controller, and the events during which the backend stopped."""

    def __init__(self, backend: RecordingBackend, controller: CaptureController) -> None:
        self.backend = backend
        self.controller = controller
        # each event (or "close()") whose handling called backend.stop(): where a window really ended,
        # which an overrun stop (stopped_by None) records nowhere else
        self.stopped_during: list[Event | str] = []


def drive(windows: list[dict], events: list[Event], num_mb: int, role: str = "generator", rank: int = 0,
          extra: dict | None = None) -> Driven:
    cfg = {"features": {"capture": {"enabled": True}}, "capture": {"windows": windows, **(extra or {})}}
    pm = ProfileManager(cfg)
    backend = RecordingBackend()
    controller = CaptureController(backend, rank=rank)
    driven = Driven(backend, controller)
    armed_at: set[int] = set()
    for edge, name, it, mb in events:
        if it not in armed_at:
            armed_at.add(it)
            if pm.should_capture_this_iter(it):
                for spec in pm.build_specs_to_arm_at_iter(it, num_microbatches=num_mb):
                    controller.arm(spec)
        event = HookEvent(name, {"iter": it, "mb": mb}, role, rank)
        stops = backend.calls.count("stop")
        (controller.on_enter if edge == "ENTER" else controller.on_exit)(event)
        if backend.calls.count("stop") > stops:
            driven.stopped_during.append((edge, name, it, mb))
    stops = backend.calls.count("stop")
    controller.close()
    if backend.calls.count("stop") > stops:
        driven.stopped_during.append("close()")
    return driven


def where(record: Any) -> tuple | None:
    return None if record is None else (record.edge.value, record.profile_name, record.iteration, record.microbatch)


FWD = {"start_profile_names": ["fwd"]}
CASES = [
    pytest.param({**FWD, "start_iter": 5, "start_mb_selector": "first", "stop_iter": 5, "stop_mb_selector": "last",
                  "stop_profile_names": ["fwd"], "stop_policy": "ON_STOP_PROFILE_NAME", "stop_edge": "EXIT"},
                 8, ("ENTER", "fwd", 5, 0), ("EXIT", "fwd", 5, 7), StopReason.CONDITION, id="seed-example"),
    pytest.param({**FWD, "start_iter": 5}, 4, ("ENTER", "fwd", 5, 0), ("EXIT", "fwd", 5, 0),
                 StopReason.CONDITION, id="default-policy-one-invocation"),
    pytest.param({**FWD, "start_iter": 5, "stop_mb_selector": "last", "stop_policy": "ON_TARGET_FUNC_EXIT"}, 4,
                 ("ENTER", "fwd", 5, 0), ("EXIT", "fwd", 5, 3), StopReason.CONDITION, id="target-alias-to-last-mb"),
    pytest.param({"start_profile_names": ["attn"], "start_iter": 5, "start_mb_selector": 1,
                  "stop_profile_names": ["fwd"]}, 4,
                 ("ENTER", "attn", 5, 1), ("EXIT", "attn", 5, 1), StopReason.CONDITION, id="trigger-exit-ignores-stop-names"),
    pytest.param({**FWD, "start_iter": 5, "stop_policy": "ON_STOP_PROFILE_NAME", "stop_profile_names": ["attn"],
                  "stop_edge": "ENTER", "stop_mb_selector": 2}, 4,
                 ("ENTER", "fwd", 5, 0), ("ENTER", "attn", 5, 2), StopReason.CONDITION, id="stop-edge-enter"),
    pytest.param({**FWD, "start_iter": 5, "start_mb_selector": 2, "stop_iter": 6, "stop_mb_selector": "last"}, 4,
                 ("ENTER", "fwd", 5, 2), ("EXIT", "fwd", 6, 3), StopReason.CONDITION, id="spans-two-iterations"),
    pytest.param({"start_iter": 5}, 2, ("ENTER", "fwd", 5, 0), ("EXIT", "fwd", 5, 0), StopReason.CONDITION,
                 id="any-profile-name"),
    pytest.param({**FWD, "start_iter": 5, "ranks_filter": [1]}, 2, None, None, None, id="other-rank"),
    pytest.param({**FWD, "start_iter": 5, "role": "critic"}, 2, None, None, None, id="other-role"),
    pytest.param({**FWD, "start_iter": 5, "role": "generator", "ranks_filter": [0, 1]}, 2,
                 ("ENTER", "fwd", 5, 0), ("EXIT", "fwd", 5, 0), StopReason.CONDITION, id="role-and-rank-match"),
    pytest.param({**FWD, "start_iter": 5, "stop_iter": 5, "stop_policy": "ON_STOP_PROFILE_NAME",
                  "stop_profile_names": ["never"]}, 2,
                 ("ENTER", "fwd", 5, 0), None, StopReason.OVERRUN, id="stop-missed-stops-next-iteration"),
    pytest.param({**FWD, "start_iter": 50}, 2, None, None, None, id="never-reached"),
]


@pytest.mark.parametrize(("window", "num_mb", "start", "stop", "reason"), CASES)
def test_window_semantics(window: dict, num_mb: int, start: tuple | None, stop: tuple | None,
                          reason: StopReason | None) -> None:
    driven = drive([{"name": "w", **window}], loop(range(3, 9), num_mb), num_mb)
    backend, controller = driven.backend, driven.controller
    if start is None:
        assert backend.calls == [] and backend.windows == []
        return
    assert backend.calls == ["start", "stop"]
    (rec,) = backend.windows
    assert where(rec.info.started_by) == start
    assert where(rec.closing.stopped_by) == stop
    assert rec.closing.reason is reason
    # the backend stopped during the stopping event itself; an overrun, at the first event after stop_iter
    assert driven.stopped_during == [stop if stop is not None else ("ENTER", "fwd", window["stop_iter"] + 1, 0)]
    assert controller.state is CaptureState.IDLE


@pytest.mark.parametrize("num_mb", [1, 3])
@pytest.mark.parametrize("stop_iter", [5, 6, 7])
def test_overrun_stops_at_the_first_event_after_the_stop_iteration(
        caplog: pytest.LogCaptureFixture, stop_iter: int, num_mb: int) -> None:
    """A stop event that never comes: every event of ``stop_iter`` is captured, none of ``stop_iter + 1``."""
    window = {"name": "w", **FWD, "start_iter": 5, "stop_iter": stop_iter, "stop_policy": "ON_STOP_PROFILE_NAME",
              "stop_profile_names": ["never"]}
    with caplog.at_level(logging.WARNING, logger="my_utils.tracing.capture"):
        driven = drive([window], loop(range(3, 10), num_mb), num_mb)
    (rec,) = driven.backend.windows
    assert rec.closing.reason is StopReason.OVERRUN and rec.closing.stopped_by is None
    assert driven.stopped_during == [("ENTER", "fwd", stop_iter + 1, 0)]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"(now at iteration {stop_iter + 1}, stop_iter {stop_iter}); stopping it" in warning


def test_seed_yaml_window_with_the_seed_loop() -> None:
    pm = ProfileManager(DATA / "seed_profile_config.yaml")
    assert [it for it in range(100) if pm.should_capture_this_iter(it)] == [5]
    backend = RecordingBackend()
    controller = CaptureController(backend=backend, logger=logging.getLogger("t"))
    for it in range(12):
        if pm.should_capture_this_iter(it):
            for spec in pm.build_specs_to_arm_at_iter(it, num_microbatches=8):
                controller.arm(spec)
        for mb in range(8):
            controller.on_enter(HookEvent(profile_name="model.forward", meta={"iter": it, "mb": mb},
                                          role="generator", rank=0))
            controller.on_exit(HookEvent(profile_name="model.forward", meta={"iter": it, "mb": mb},
                                         role="generator", rank=0))
    (rec,) = backend.windows
    assert where(rec.info.started_by) == ("ENTER", "model.forward", 5, 0)
    assert where(rec.closing.stopped_by) == ("EXIT", "model.forward", 5, 7)


def test_max_windows_per_step_and_roles_limit_what_is_built(caplog: pytest.LogCaptureFixture) -> None:
    cfg = yaml.safe_load((DATA / "seed_profile_config.yaml").read_text())
    cap = cfg["profile"]["capture"]
    base = cap["windows"][0]
    cap["windows"] = [{**base, "name": f"w{i}"} for i in range(3)] + [{**base, "name": "judge", "role": "judge"}]
    pm = ProfileManager(cfg)
    with caplog.at_level(logging.WARNING):
        specs = pm.build_specs_to_arm_at_iter(5, num_microbatches=4)
    assert [s.name for s in specs] == ["w0", "w1"]
    assert "max_windows_per_step is 2; skipped ['w2']" in caplog.text
    assert pm.build_specs_to_arm_at_iter(6, 4) == [] and not pm.should_capture_this_iter(10)
    assert specs[0].stop_mb == 3 and specs[0].nvtx_window


def test_microbatch_index_beyond_the_count_is_a_config_error() -> None:
    pm = ProfileManager({"capture": {"windows": [{"name": "w", "start_iter": 1, "start_mb_selector": 9}]}})
    with pytest.raises(ConfigError, match=r"capture.windows\[0\].start_mb_selector: got 9; .*< num_microbatches \(4\)"):
        pm.build_specs_to_arm_at_iter(1, num_microbatches=4)


def test_microbatch_index_key_is_accepted() -> None:
    spec = CaptureSpec("w", start_iter=1, start_mb=2, stop_iter=1, stop_mb=2)
    backend = RecordingBackend()
    controller = CaptureController(backend)
    controller.arm(spec)
    controller.on_enter(HookEvent("f", {"iter": 1, "microbatch_index": 2}))
    controller.on_exit(HookEvent("f", {"iter": 1, "microbatch_index": 2}))
    assert backend.calls == ["start", "stop"]


def test_transition_table_is_the_only_way_to_move() -> None:
    assert transition(CaptureState.IDLE, Trigger.ARM) is CaptureState.ARMED
    assert transition(CaptureState.CAPTURING, Trigger.STOP) is CaptureState.IDLE
    with pytest.raises(TransitionError, match="cannot stop while armed; allowed from armed: cancel, expire, fail, start"):
        transition(CaptureState.ARMED, Trigger.STOP, "w")
    with pytest.raises(TransitionError, match="cannot start while idle"):
        transition(CaptureState.IDLE, Trigger.START)
    assert {s for s, _ in TRANSITIONS} == set(CaptureState)


def test_state_follows_the_windows_and_step_windows_use_step_boundaries() -> None:
    backend = RecordingBackend()
    controller = CaptureController(backend)
    assert controller.state is CaptureState.IDLE
    controller.arm(step_window_spec("steps", 3, 4))
    controller.arm(step_window_spec("steps", 3, 4))  # same name again: ignored
    assert controller.state is CaptureState.ARMED and len(controller.armed) == 1
    controller.on_step(1)
    assert backend.calls == []
    controller.on_step(2)  # step 3 begins
    assert controller.state is CaptureState.CAPTURING and controller.active is not None
    controller.on_step(3)
    assert backend.calls == ["start"]
    controller.on_step(4)  # step 4 ended
    assert backend.calls == ["start", "stop"] and controller.state is CaptureState.IDLE
    (rec,) = backend.windows
    assert (rec.info.started_by.iteration, rec.closing.stopped_by.iteration) == (3, 4)


def test_arm_rejects_what_is_not_a_spec() -> None:
    controller = CaptureController(RecordingBackend())
    with pytest.raises(UsageError, match="expected a CaptureSpec, got dict; build specs with ProfileManager"):
        controller.arm({"name": "w"})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="has no start\\(\\)/stop\\(\\)"):
        CaptureController(object())  # type: ignore[arg-type]


def test_an_exception_inside_the_window_still_stops_it_once() -> None:
    backend = RecordingBackend()
    spec = CaptureSpec("w", start_iter=2, start_mb=0, stop_iter=4, stop_mb=0, start_names=frozenset({"fwd"}))
    with pytest.raises(RuntimeError, match="boom"), CaptureController(backend) as controller:
        controller.arm(spec)
        for it in range(10):
            with controller.region("fwd", {"iter": it, "mb": 0}):
                if it == 3:
                    raise RuntimeError("boom")
    assert backend.calls == ["start", "stop"]
    assert backend.windows[0].closing.reason is StopReason.EXCEPTION
    controller.close()  # again: nothing left to stop
    assert backend.calls == ["start", "stop"]


class FlakyBackend(CaptureBackend):
    def __init__(self, fail_start: bool, fail_stop: bool) -> None:
        self.fail_start, self.fail_stop = fail_start, fail_stop
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise RuntimeError("no device")

    def stop(self) -> None:
        self.calls.append("stop")
        if self.fail_stop:
            raise OSError("disk full")


@pytest.mark.parametrize(("fail_start", "fail_stop", "calls"), [
    (True, False, ["start", "start"]),  # a failed start is never stopped
    (False, True, ["start", "stop", "start", "stop"]),  # a failed stop is not retried
])
def test_backend_failures_are_reported_once_and_never_raise(
        caplog: pytest.LogCaptureFixture, fail_start: bool, fail_stop: bool, calls: list[str]) -> None:
    backend = FlakyBackend(fail_start, fail_stop)
    controller = CaptureController(backend)
    with caplog.at_level(logging.DEBUG, logger="my_utils.tracing.capture"):
        for it in (1, 2):
            controller.arm(CaptureSpec(f"w{it}", start_iter=it, start_mb=0, stop_iter=it, stop_mb=0))
            with controller.region("fwd", {"iter": it, "mb": 0}):
                pass
    assert backend.calls == calls and controller.state is CaptureState.IDLE
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "failed in" in errors[0].getMessage() and "the run continues" in errors[0].getMessage()


def test_debug_watch_logs_each_decision(caplog: pytest.LogCaptureFixture) -> None:
    cfg = yaml.safe_load((DATA / "seed_profile_config.yaml").read_text())
    cfg["profile"]["capture"]["debug_watch"] = True
    with caplog.at_level(logging.INFO, logger="my_utils.tracing.capture"):
        drive(cfg["profile"]["capture"]["windows"], loop([5], 8, inner=False), 8,
              extra={"debug_watch": True})
    text = caplog.text
    assert "[capture forward_window] armed: start at iter 5 mb 0, stop at iter 5 mb 7" in text
    assert "no start (profile name 'fwd' not in start names ['model.forward'])" in text


def test_interpreter_exit_stops_an_open_window(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        from my_utils.tracing.capture import CaptureController, CaptureSpec, HookEvent
        from my_utils.tracing.capture.backends.base import CaptureBackend

        class PrintingBackend(CaptureBackend):
            def start(self): print("start", flush=True)
            def stop(self): print("stop", flush=True)
            def window_closed(self, window, closing): print("closed", window.name, closing.reason.name, flush=True)

        controller = CaptureController(PrintingBackend())
        controller.arm(CaptureSpec("late", start_iter=1, start_mb=0, stop_iter=99, stop_mb=0))
        controller.on_enter(HookEvent("fwd", {"iter": 1, "mb": 0}))
        print("exiting", flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.split("\n")
    assert out[:4] == ["start", "exiting", "stop", "closed late INTERPRETER_EXIT"]


# -- balance under arbitrary event sequences ------------------------------------------------

names = st.sampled_from(["fwd", "bwd", "attn"])
specs = st.builds(
    lambda name, start, span, smb, emb, policy, edge, names_a, names_b: CaptureSpec(
        name=name, start_iter=start, start_mb=smb, stop_iter=start + span, stop_mb=emb if span else max(emb, smb),
        start_names=frozenset(names_a), stop_names=frozenset(names_b), stop_policy=policy, stop_edge=edge),
    st.sampled_from(["a", "b", "c"]), st.integers(0, 4), st.integers(0, 2), st.integers(0, 2), st.integers(0, 2),
    st.sampled_from(list(StopPolicy)), st.sampled_from(list(Edge)),
    st.sets(names, max_size=2), st.sets(names, max_size=2))
ops = st.one_of(
    st.tuples(st.just("arm"), specs),
    st.tuples(st.sampled_from(["enter", "exit"]), names, st.integers(0, 6), st.integers(0, 2)),
    st.tuples(st.just("step"), st.integers(0, 6)),
    st.tuples(st.just("raise"), names, st.integers(0, 6)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=40), st.booleans())
def test_start_and_stop_stay_balanced(sequence: list[tuple], close_by_exception: bool) -> None:
    backend = RecordingBackend()
    controller = CaptureController(backend)
    try:
        with controller:
            for op in sequence:
                if op[0] == "arm":
                    controller.arm(op[1])
                elif op[0] == "step":
                    controller.on_step(op[1])
                elif op[0] == "raise":
                    try:
                        with controller.region(op[1], {"iter": op[2], "mb": 0}):
                            raise KeyError(op[1])
                    except KeyError:
                        pass
                else:
                    event = HookEvent(op[1], {"iter": op[2], "mb": op[3]})
                    (controller.on_enter if op[0] == "enter" else controller.on_exit)(event)
                # never two starts without a stop between them
                assert backend.calls == ["start", "stop"] * (len(backend.calls) // 2) + (
                    ["start"] if len(backend.calls) % 2 else [])
                assert backend.capturing == (controller.state is CaptureState.CAPTURING)
            if close_by_exception:
                raise LookupError("leave")
    except LookupError:
        pass
    assert backend.starts == backend.stops == len(backend.windows) == len(controller.completed)
    assert controller.state is CaptureState.IDLE and not backend.capturing
