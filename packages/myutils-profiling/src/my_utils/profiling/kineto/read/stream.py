"""Stream the events of a Chrome/Kineto trace (``.json`` or gzip) one object at a time.

Loading a 54 MB trace with ``json.load`` holds ~400 MB of dicts; this reader decodes
the text in 1 MiB chunks and parses one event object at a time with the C scanner of
the standard ``json`` module, so memory stays flat whatever the file size. Top-level
keys other than ``traceEvents`` (``distributedInfo``, ``baseTimeNanoseconds``...) may
come before or after the events; they are collected into ``TraceStream.metadata``,
complete once ``events()`` is exhausted.

``items()`` is the same pass for consumers that also take typed batches: with the optional
msgspec (``myutils-profiling[fast]``), whole runs of events come as one list of
``trace_events.KinetoEvent`` structs (only the fields the providers read, no dicts); events
that do not fit that schema, and the few read one by one at chunk seams, still come as dicts.

With the compiled scanner (``items(scan=...)``), the events are read from the file's bytes
(:meth:`TraceStream._raw_runs`): chunks go straight into one reused buffer and each run of
ASCII events is scanned there, never decoded into text: on the 54 MB real trace the whole
``myutils plugins run torch_profiler`` took 0.93x and 0.905x the CPU of decoding every chunk
(medians of two sets of 15 paired runs on one pinned core). The first run the scanner declines
(off its schema, or not ASCII) and everything after it go back to text, decoded and checked as
before.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from my_utils.core.errors import InputError, UnsupportedInputError
from my_utils.core.safe_io import open_regular
from my_utils.profiling.kineto.read import events as trace_events
from my_utils.profiling.kineto.read.events import lazy_typed_decoder, typed_decoder


def _damaged_gzip() -> tuple[type[BaseException], ...]:
    """What reading a damaged gzip stream raises (evaluated when an error comes: ``gzip`` is only
    imported for a gzip file, and a plain one cannot raise its ``BadGzipFile``)."""
    gzip = sys.modules.get("gzip")
    return (EOFError, zlib.error) if gzip is None else (EOFError, zlib.error, gzip.BadGzipFile)


_orjson: Any
try:  # orjson parses a batch of events ~3x faster than the standard scanner
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency; stay correct without it
    _orjson = None

#: a scanner of runs of events: ``scan(buffer, start, end)``, the buffer a str or the file's bytes (a bytearray)
ScanRun = Callable[[Any, int, int], Any]

_CHUNK = 1 << 20  # read at a time when events decode typed (small structs)
# when every event becomes a dict (events(), the analyses' path), a batch of dicts takes ~6x its text:
# 1 MiB pieces made the parse's peak ~20 MB on a 54 MB trace, 256 KiB pieces ~5 MB, at the same speed
_DICT_CHUNK = 1 << 18
_MAX_VALUE = 64 << 20  # one event (or metadata value) larger than this is not a real trace
_WS = re.compile(r"[ \t\n\r]*")
# the seam between two events: '}' ',' '{' with any whitespace; searched near the buffer's end
_BOUNDARY = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
_BATCH_MIN = 64 << 10  # below this many buffered characters, parse event by event
_TAIL = 256 << 10  # where to look for the last boundary before searching the whole buffer
_WS_CHARS = " \t\n\r"
_BOUNDARY_BYTES = re.compile(rb"\}[ \t\n\r]*,[ \t\n\r]*\{")
#: what :func:`_last_seam` looks for, in a text buffer and in a bytes one
_SEAM_TOKENS: dict[type, tuple[Any, ...]] = {str: ("{", ",", "}", _WS_CHARS, _BOUNDARY),
                                             bytearray: (b"{", b",", b"}", _WS_CHARS.encode(), _BOUNDARY_BYTES)}
_SEAM_WINDOW = 64  # characters before a '{' searched for its ',' and '}'
_REVERSE_TRIES = 64  # '{' looked at backwards before the regular expression scans


class TraceStream:
    """One pass over a trace file: ``for ev in stream.events(): ...``, then ``stream.metadata``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.metadata: dict[str, Any] = {}
        self.event_count = 0
        self._fh: Any = None
        self._raw: Any = None
        self._dec = codecs.getincrementaldecoder("utf-8")("strict")
        self._buf = ""
        self._pos = 0
        self._consumed = 0  # characters dropped from the front of _buf
        self._read = 0  # bytes read from the file (decompressed), for the place of a byte that is not UTF-8
        self._gz = False
        self._eof = False
        self._chunk = _CHUNK
        self._raw_decode = json.JSONDecoder().raw_decode

    # -- low level -------------------------------------------------------------------

    def _where(self) -> str:
        return f"character {self._consumed + self._pos}"

    def _fail(self, expected: str, place: str | None = None) -> InputError:
        return InputError(self.path, place or self._where(), expected)

    def _more(self) -> bool:
        """Append the next chunk to the buffer; False at end of file."""
        if self._eof:
            return False
        assert self._fh is not None
        try:
            raw = self._fh.read(self._chunk)
        except _damaged_gzip() as exc:
            raise self._fail(f"a complete gzip stream ({type(exc).__name__}: {exc}); the file is truncated or corrupt") from None
        held = len(self._dec.getstate()[0])  # bytes of the last read the decoder still holds: they come first
        try:
            text = self._dec.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise self._not_utf8(exc, self._read - held) from None
        self._read += len(raw)
        if not raw:
            self._eof = True
        if self._pos:
            self._consumed += self._pos
            self._buf = self._buf[self._pos:] + text
            self._pos = 0
        else:
            self._buf += text
        return bool(raw)

    def _not_utf8(self, exc: UnicodeDecodeError, at: int) -> InputError:
        """The error of a byte that is not UTF-8: its offset in the file (``at``: where ``exc.object`` starts)."""
        offset = at + exc.start
        where = f"byte {offset:,}" + (" of the decompressed data" if self._gz else "")
        return self._fail(f"UTF-8 text (a JSON trace); found a byte that is not UTF-8 (0x{exc.object[exc.start]:02x})",
                          place=where)

    def _skip_ws(self) -> str:
        """Skip whitespace; return the next character ('' at end of file)."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return ""

    def _value(self, what: str) -> Any:
        """Parse one JSON value at the cursor, reading more text until it is complete."""
        self._skip_ws()
        while True:
            try:
                obj, end = self._raw_decode(self._buf, self._pos)
            except RecursionError:
                raise self._fail(f"{what}: JSON nested less deeply than the parser allows (about "
                                 f"{sys.getrecursionlimit():,} levels); found deeper nesting") from None
            except ValueError as exc:  # JSONDecodeError, or an integer of more than 4,300 digits
                if not isinstance(exc, json.JSONDecodeError):
                    raise self._fail(f"{what}: numbers of at most {sys.get_int_max_str_digits():,} digits; "
                                     "found a longer one") from None
                at = self._consumed + exc.pos  # now: reading more moves the buffer's start
                if len(self._buf) - self._pos > _MAX_VALUE:
                    raise self._fail(f"{what}: valid JSON ({exc.msg}) within {_MAX_VALUE >> 20} MiB") from None
                if self._more():
                    continue
                raise self._fail(
                    f"{what}: valid JSON ({exc.msg}; the file ends at character "
                    f"{self._consumed + len(self._buf)}, it may be truncated)",
                    place=f"character {at}",
                ) from None
            # a number or literal ending exactly at the buffer end may continue in the next chunk
            if end == len(self._buf) and not self._eof and self._more():
                continue
            self._pos = end
            return obj

    def _expect(self, chars: str, what: str) -> str:
        c = self._skip_ws()
        if c == "" or c not in chars:
            found = "end of file (truncated?)" if c == "" else repr(c)
            raise self._fail(f"{what}; found {found}")
        self._pos += 1
        return c

    # -- structure -------------------------------------------------------------------

    def events(self) -> Iterator[dict[str, Any]]:
        """Yield every trace event (a dict), in file order; validates the whole structure."""
        return self._walk(None)  # no typed decoder and no scanner: dicts only

    def items(self, lanes: bool | str = False, scan: ScanRun | None = None) -> Iterator[Any]:
        """Every trace event in file order: runs of typed events as lists, the others as dicts.

        A list holds ``trace_events.KinetoEvent`` structs (``KinetoLaneEvent`` with ``lanes``:
        ``pid``/``tid`` too; ``KinetoShapeEvent`` with ``lanes="shapes"``: the recorded shapes too); ``event_count`` counts the events
        inside lists too. Without msgspec (or with ``MYUTILS_TYPED_TRACE=0``) this is
        ``events()``. The structure is validated, and refused, exactly as by ``events()``.

        ``scan`` (``TraceAggregator.scanner()``) is offered each run first, as ``scan(buffer,
        start, end)`` (the events between the brackets, comma-separated, are ``buffer[start:end]``);
        what it returns instead of None is yielded as the run (its ``len`` is the run's event
        count), otherwise the run is decoded as above.
        """
        # with a scanner, msgspec is imported only if a run is declined (the scanner reads every real trace whole)
        return self._walk(typed_decoder(lanes) if scan is None else lazy_typed_decoder(lanes), scan)

    def _walk(self, typed: Any, scan: ScanRun | None = None) -> Iterator[Any]:
        self._chunk = _CHUNK if typed is not None or scan is not None else _DICT_CHUNK
        try:
            # a regular file only: opening a FIFO named like a trace would block forever
            raw = open_regular(self.path, "rb")
        except OSError as exc:
            raise InputError(self.path, None, f"a readable file ({exc.strerror or exc})") from None
        try:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
        except OSError as exc:
            raw.close()
            raise InputError(self.path, None, f"a readable file ({exc.strerror or exc})") from None
        self._gz = gz
        if gz:
            import gzip  # here: a plain .json never needs it (a start costs what it imports)

            self._fh = gzip.GzipFile(fileobj=raw, mode="rb")
        else:
            self._fh = raw
        self._raw = raw
        try:
            first = self._skip_ws()
            if first == "\ufeff":
                self._pos += 1
                first = self._skip_ws()
            if first == "[":
                self._pos += 1
                yield from self._array(True, typed, scan)
            elif first == "{":
                self._pos += 1
                yield from self._object(typed, scan)
            else:
                shown = "an empty file" if first == "" else f"{first!r}"
                raise UnsupportedInputError(
                    self.path, "character 0", f"a JSON trace starting with '{{' or '['; found {shown}"
                )
            if self._skip_ws() != "":
                raise self._fail("end of file after the trace object; found more data")
        finally:
            self._fh.close()
            self._raw.close()

    def _object(self, typed: Any, scan: ScanRun | None) -> Iterator[Any]:
        seen_events = False
        if self._skip_ws() == "}":
            self._pos += 1
        else:
            while True:
                if self._skip_ws() != '"':
                    raise self._fail("a quoted key in the top-level trace object")
                key = self._value("top-level key")
                self._expect(":", f"':' after key {key!r}")
                if key == "traceEvents":
                    if self._skip_ws() != "[":
                        raise UnsupportedInputError(self.path, self._where(), "traceEvents to be a JSON list")
                    self._pos += 1
                    seen_events = True
                    yield from self._array(False, typed, scan)
                else:
                    self.metadata[key] = self._value(f"value of top-level key {key!r}")
                if self._expect(",}", "',' or '}' in the top-level trace object") == "}":
                    break
        if not seen_events:
            raise UnsupportedInputError(
                self.path, None, "a Chrome/Kineto trace: a JSON object with a traceEvents list (none found)"
            )

    def _batch(self) -> list[Any] | None:
        """Parse every whole event buffered after the cursor in one orjson call, or None.

        The buffer is cut at its last ``},{`` seam. A cut inside an event leaves unbalanced
        braces, so the slice parses only if it is a run of complete values; anything orjson
        refuses (NaN literals, huge integers, a seam inside a string) falls back to the
        event-by-event path, which also produces the error messages.
        """
        buf, pos = self._buf, self._pos
        last = _last_seam(buf, max(pos, len(buf) - _TAIL)) or _last_seam(buf, pos)
        if last is None or _orjson is None:
            return None
        try:
            events: list[Any] = _orjson.loads("[" + buf[pos:last[0] + 1] + "]")
        except _orjson.JSONDecodeError:
            return None
        self._pos = last[1] - 1  # at the '{' of the next event
        return events

    def _typed_batch(self, typed: Any, scan: ScanRun | None = None) -> tuple[Any, bool] | None:
        """Like ``_batch``, scanned or typed first: (the run, True), else (dicts, False), else None."""
        buf, pos = self._buf, self._pos
        last = _last_seam(buf, max(pos, len(buf) - _TAIL)) or _last_seam(buf, pos)
        if last is None:
            return None
        if scan is not None and (run := scan(buf, pos, last[0] + 1)) is not None:
            self._pos = last[1] - 1  # at the '{' of the next event
            return run, True
        text = "".join(("[", buf[pos:last[0] + 1], "]"))  # one copy fewer than "[" + ... + "]"
        got: tuple[Any, bool] | None = None
        if typed is not None:
            try:
                got = typed(text), True
            except trace_events.REFUSED:  # off the schema (or JSON msgspec refuses): the dict decoders decide
                pass
        if got is None:  # refused, or declined by the scanner without msgspec installed
            if _orjson is None:
                return None
            try:
                got = _orjson.loads(text), False
            except _orjson.JSONDecodeError:
                return None
        self._pos = last[1] - 1  # at the '{' of the next event
        return got

    def _array(self, top_level: bool, typed: Any = None, scan: ScanRun | None = None) -> Iterator[Any]:
        if self._skip_ws() == "]":
            self._pos += 1
            return
        ws = _WS.match
        raw_decode = self._raw_decode
        batch_from = 0  # no batch attempt before this file offset (after a refused one)
        if scan is not None:
            for run in self._raw_runs(scan):
                self.event_count += len(run)
                yield run
        while True:
            ahead = len(self._buf) - self._pos > _BATCH_MIN and self._consumed + self._pos >= batch_from
            if (typed is not None or scan is not None) and ahead:
                got = self._typed_batch(typed, scan)
                if got is None:
                    batch_from = self._consumed + len(self._buf)
                elif got[1]:
                    self.event_count += len(got[0])
                    yield got[0]
                    continue
                else:
                    for ev in got[0]:
                        if not isinstance(ev, dict):
                            self._not_an_event(ev, top_level)
                        self.event_count += 1
                        yield ev
                    continue
            elif _orjson is not None and ahead:
                batch = self._batch()
                if batch is None:
                    batch_from = self._consumed + len(self._buf)  # retry once past the text buffered now
                else:
                    for ev in batch:
                        if not isinstance(ev, dict):
                            self._not_an_event(ev, top_level)
                        self.event_count += 1
                        yield ev
                    continue
            if len(self._buf) - self._pos < _BATCH_MIN and not self._eof and (
                    typed is not None or _orjson is not None):
                # the tail after a batch is one partial event: read on first (a decode failing at the
                # end of a MiB-long buffer would count its newlines for the error's line number)
                self._more()
                continue
            # fast path: the whole event and its separator are in the buffer
            buf, pos = self._buf, self._pos
            pos = ws(buf, pos).end()  # type: ignore[union-attr]
            try:
                ev, end = raw_decode(buf, pos)
                sep_at = ws(buf, end).end()  # type: ignore[union-attr]
                sep = buf[sep_at] if sep_at < len(buf) else ""
            except (ValueError, RecursionError):  # _value says what is wrong, and where
                sep = ""
            if sep not in (",", "]"):
                self._pos = pos
                ev = self._value(f"traceEvents[{self.event_count}]")
                sep = self._expect(",]", f"',' or ']' after traceEvents[{self.event_count}]")
            else:
                self._pos = sep_at + 1
            if not isinstance(ev, dict):
                self._not_an_event(ev, top_level)
            self.event_count += 1
            yield ev
            if sep == "]":
                return

    def _raw_runs(self, scan: ScanRun) -> Iterator[Any]:
        """Runs of events scanned in the file's bytes from the cursor on, until the scanner declines one.

        The text buffered after the cursor (and the decoder's unfinished bytes) goes back to
        bytes; chunks are read into one buffer behind the unread tail (``readinto``: no copy of
        a chunk, no text made of it). Only runs the scanner takes (ASCII, so bytes and characters
        count alike) move the cursor. When a run is declined, no seam is left or the file ends,
        the unread bytes are decoded back into the text buffer, and the text path goes on from there.
        """
        pending, _flags = self._dec.getstate()
        tail = self._buf[self._pos:].encode() + pending  # decoded strictly: it encodes back as it was read
        self._consumed += self._pos
        self._buf, self._pos = "", 0
        self._dec.reset()
        buf = bytearray(max(2 * self._chunk, len(tail) + self._chunk))
        buf[:len(tail)] = tail
        pos, size = 0, len(tail)
        try:
            while True:
                if size - pos < _BATCH_MIN and not self._eof:
                    if pos:  # the unread tail (part of one event) moves to the front
                        buf[:size - pos] = buf[pos:size]
                        pos, size = 0, size - pos
                    if len(buf) - size < self._chunk:
                        buf.extend(bytes(self._chunk))
                    # both views released at once: the buffer may grow (``extend``) only without exports
                    with memoryview(buf) as view, view[size:size + self._chunk] as room:
                        got = self._read_into(room)
                    size += got
                    self._read += got
                    self._eof = got == 0
                    continue
                last = _last_seam(buf, max(pos, size - _TAIL), size) or _last_seam(buf, pos, size)
                if last is None:
                    return
                run = scan(buf, pos, last[0] + 1)
                if run is None:
                    return
                self._consumed += last[1] - 1 - pos
                pos = last[1] - 1  # at the '{' of the next event
                yield run
        finally:
            try:
                self._buf = self._dec.decode(bytes(buf[pos:size]), final=self._eof)
            except UnicodeDecodeError as exc:  # buf[:size] are the last bytes read
                raise self._not_utf8(exc, self._read - (size - pos)) from None

    def _read_into(self, view: memoryview) -> int:
        """Read the next bytes of the file into ``view``; how many (0 at the end of the file)."""
        assert self._fh is not None
        try:
            return int(self._fh.readinto(view))
        except _damaged_gzip() as exc:
            raise self._fail(f"a complete gzip stream ({type(exc).__name__}: {exc}); the file is truncated or corrupt") from None

    def _not_an_event(self, value: Any, top_level: bool) -> None:
        index = self.event_count
        if top_level and index == 0:
            raise UnsupportedInputError(
                self.path, "item 0",
                f"a list of trace event objects; found {type(value).__name__} items "
                "(a memory timeline or another JSON list, not a trace)",
            )
        raise self._fail(f"traceEvents[{index}] to be an object; found {type(value).__name__}")


def _last_seam(buf: str | bytearray, start: int, end: int | None = None) -> tuple[int, int] | None:
    """(start, end) of the last ``}`` ``,`` ``{`` seam (any whitespace between) in ``buf[start:end]``, or None.

    Searched backwards from the end: the last event's ``{`` is usually the last or the second
    last ``{`` of the buffer, so this looks at a few characters where scanning the tail for every
    seam built thousands of matches per batch (~8% of a typed read). A ``{`` whose seam cannot be
    told within the window (whitespace all the way), or many that are not seams, hand over to
    the scanner, which decides every case the same way.
    """
    opening, comma, closing, spaces, boundary = _SEAM_TOKENS[type(buf)]
    end = len(buf) if end is None else end
    for _ in range(_REVERSE_TRIES):
        brace = buf.rfind(opening, start, end)
        if brace < 0:
            return None
        lo = max(start, brace - _SEAM_WINDOW)
        head = buf[lo:brace].rstrip(spaces)
        if head.endswith(comma):
            head = head[:-1].rstrip(spaces)
            if head.endswith(closing):
                return lo + len(head) - 1, brace + 1
        if not head and lo > start:
            break  # only whitespace in the window: undecided here
        end = brace
    found = deque(boundary.finditer(buf, start, end), maxlen=1)  # keeps only the last match
    return (found[0].start(), found[0].end()) if found else None

