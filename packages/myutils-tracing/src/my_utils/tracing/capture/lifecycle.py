"""The capture lifecycle as data: a transition table, and pure start/stop matching.

Each armed window runs ``IDLE -> ARMED -> CAPTURING -> IDLE`` (or ``ARMED -> IDLE`` when it
expires or is cancelled). The controller changes a window's state only through
``transition``, so an impossible move (stopping a window that never started, starting one
twice) is caught at the one place that knows the table.
"""

from __future__ import annotations

from enum import Enum

from my_utils.tracing.capture.config import Edge, StopPolicy
from my_utils.tracing.capture.spec import CaptureSpec


class CaptureState(str, Enum):
    """Where a window (or the controller as a whole) is in its lifecycle."""

    IDLE = "idle"
    ARMED = "armed"
    CAPTURING = "capturing"


class Trigger(str, Enum):
    """What moves a window from one state to the next."""

    ARM = "arm"
    START = "start"
    STOP = "stop"
    EXPIRE = "expire"  # its start iteration passed without a matching start event
    CANCEL = "cancel"  # the controller closed before it started
    FAIL = "fail"  # the backend raised in start(): nothing runs, nothing to stop


TRANSITIONS: dict[tuple[CaptureState, Trigger], CaptureState] = {
    (CaptureState.IDLE, Trigger.ARM): CaptureState.ARMED,
    (CaptureState.ARMED, Trigger.START): CaptureState.CAPTURING,
    (CaptureState.ARMED, Trigger.EXPIRE): CaptureState.IDLE,
    (CaptureState.ARMED, Trigger.CANCEL): CaptureState.IDLE,
    (CaptureState.ARMED, Trigger.FAIL): CaptureState.IDLE,
    (CaptureState.CAPTURING, Trigger.STOP): CaptureState.IDLE,
}


class TransitionError(RuntimeError):
    """A window was asked to make a move the lifecycle table does not allow (a controller bug)."""


def transition(state: CaptureState, trigger: Trigger, window: str = "?") -> CaptureState:
    """The state after ``trigger``; ``TransitionError`` when the table has no such move."""
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        allowed = sorted(t.value for (s, t) in TRANSITIONS if s is state)
        raise TransitionError(
            f"capture window {window!r}: cannot {trigger.value} while {state.value}; "
            f"allowed from {state.value}: {', '.join(allowed) or 'nothing'}") from None


def start_mismatch(spec: CaptureSpec, edge: Edge, name: str, iteration: int | None, mb: int,
                   role: str | None, rank: int) -> str | None:
    """None when the event starts ``spec``'s window, else why not (for ``debug_watch``)."""
    if edge is not Edge.ENTER:
        return "windows start on enter"
    if iteration != spec.start_iter:
        return f"iteration {iteration} != start_iter {spec.start_iter}"
    if mb != spec.start_mb:
        return f"microbatch {mb} != start microbatch {spec.start_mb}"
    if spec.start_names and name not in spec.start_names:
        return f"profile name {name!r} not in start names {sorted(spec.start_names)}"
    return _who_mismatch(spec, role, rank)


def stop_mismatch(spec: CaptureSpec, trigger_name: str, depth: int, edge: Edge, name: str,
                  iteration: int | None, mb: int, role: str | None, rank: int) -> str | None:
    """None when the event stops the capturing window of ``spec``, else why not.

    ``trigger_name`` is the profile name that started the window and ``depth`` how many of
    its invocations are open after this event (ON_TRIGGER_FUNC_EXIT stops only at depth 0).
    """
    if spec.stop_policy is StopPolicy.ON_TRIGGER_FUNC_EXIT:
        if edge is not Edge.EXIT or name != trigger_name:
            return f"waiting for the exit of trigger {trigger_name!r}"
        if depth > 0:
            return f"{depth} nested invocation(s) of {trigger_name!r} still open"
    else:
        if edge is not spec.stop_edge:
            return f"stop edge is {spec.stop_edge.value}"
        names = spec.stop_names
        if names and name not in names:
            return f"profile name {name!r} not in stop names {sorted(names)}"
    if iteration != spec.stop_iter:
        return f"iteration {iteration} != stop_iter {spec.stop_iter}"
    if mb != spec.stop_mb:
        return f"microbatch {mb} != stop microbatch {spec.stop_mb}"
    return _who_mismatch(spec, role, rank)


def _who_mismatch(spec: CaptureSpec, role: str | None, rank: int) -> str | None:
    if spec.role is not None and role != spec.role:
        return f"role {role!r} != {spec.role!r}"
    if spec.ranks is not None and rank not in spec.ranks:
        return f"rank {rank} not in ranks_filter {sorted(spec.ranks)}"
    return None
