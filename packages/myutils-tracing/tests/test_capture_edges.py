"""Edges of capture windows that a one-off bug would move: when a missed window expires, the last valid microbatch.

Each test here killed a planted bug that the rest of the suite let through (``.ci/mutants.toml``:
``capture-expire-late``, ``capture-selector-bound``).
"""

from __future__ import annotations

import pytest

from my_utils.core.errors import ConfigError
from my_utils.tracing.capture import CaptureController, CaptureSpec, CaptureState, HookEvent, RecordingBackend
from my_utils.tracing.capture.spec import resolve_selector


def test_a_window_whose_start_never_comes_expires_at_the_first_event_of_the_next_iteration() -> None:
    controller = CaptureController(RecordingBackend())
    controller.arm(CaptureSpec("w", start_iter=5, start_mb=0, stop_iter=5, stop_mb=0,
                               start_names=frozenset({"attn"})))
    states = []
    for it in (5, 6, 7):
        for edge in (controller.on_enter, controller.on_exit):
            edge(HookEvent("fwd", {"iter": it, "mb": 0}))  # never "attn": the window cannot start
            states.append((it, controller.state))
    # waiting through iteration 5, gone at the first event of 6 (not one iteration later)
    assert states == [(5, CaptureState.ARMED), (5, CaptureState.ARMED),
                      (6, CaptureState.IDLE), (6, CaptureState.IDLE), (7, CaptureState.IDLE), (7, CaptureState.IDLE)]
    assert controller.armed == ()


@pytest.mark.parametrize("num_mb", [1, 4, 8])
def test_the_last_microbatch_index_is_count_minus_one(num_mb: int) -> None:
    assert resolve_selector(num_mb - 1, num_mb, "cfg", "start_mb_selector") == num_mb - 1
    assert resolve_selector("last", num_mb, "cfg", "start_mb_selector") == num_mb - 1
    with pytest.raises(ConfigError, match=rf"got {num_mb}; .*< num_microbatches \({num_mb}\)"):
        resolve_selector(num_mb, num_mb, "cfg", "start_mb_selector")
