"""The backward seam search of ``TraceStream`` finds the seam the regular expression's scan finds.

``_last_seam`` looks back from the buffer's end for the last ``}`` ``,`` ``{`` (whitespace
between); the reference is the scan it replaced: every match of the pattern, the last one.
"""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from my_utils.profiling.kineto.read import stream as trace_stream
from my_utils.profiling.kineto.read.stream import _BOUNDARY, _last_seam


def _reference(buf: str, start: int) -> tuple[int, int] | None:
    found = deque(_BOUNDARY.finditer(buf, start), maxlen=1)
    return (found[0].start(), found[0].end()) if found else None


# pieces of traces: seams with any whitespace, braces that are no seams, long blank runs
_PIECES = st.sampled_from(["{", "}", ",", " ", "\n", "\t", "\r", "a", '"x": {', "},{", "}, \n {", "} ,{",
                           " " * 70, "\n" * 130, "}" + " " * 80 + ",{", "}," + "\t" * 90 + "{", ":{"])


@settings(max_examples=600, derandomize=True, database=None, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=60), cut=st.integers(min_value=0, max_value=400))
def test_last_seam_is_the_scans_last_match(pieces: list[str], cut: int) -> None:
    buf = "".join(pieces)
    start = min(cut, len(buf))
    assert _last_seam(buf, start) == _reference(buf, start)


def test_last_seam_hands_over_after_many_braces_that_are_no_seams(monkeypatch: object) -> None:
    buf = "}, {" + '"a": {' * (trace_stream._REVERSE_TRIES * 3)  # the seam sits behind 192 other braces
    assert _last_seam(buf, 0) == _reference(buf, 0) == (0, 4)
    assert _last_seam(buf, 1) is None
