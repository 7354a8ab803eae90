"""Error messages are one line, whatever text from outside they quote."""

from __future__ import annotations

from pathlib import Path

import pytest

from my_utils.core.errors import ConfigError, InputError, ProviderError, UsageError, one_line


@pytest.mark.parametrize("text", [
    "CREATE TABLE t (\n  id INTEGER,\r\n  name TEXT\n)", "a\u2028b", "tail\n", "x\x0by\x0cz",
])
def test_every_error_message_is_one_line(text: str) -> None:
    errors = [InputError(Path("db.sqlite"), f"table {text}", f"a readable table ({text})"),
              ConfigError("c.yaml", "key", text), UsageError(text),
              ProviderError("nsys_sqlite", "x.sqlite", RuntimeError(text))]
    for err in errors:
        message = str(err)
        assert message == one_line(message)
        assert not any(ch in message for ch in "\r\n\x0b\x0c\u2028"), repr(message)
        assert message.strip() == message


def test_one_line_keeps_plain_text_and_places() -> None:
    assert one_line("already  one line") == "already  one line"
    err = InputError("f.csv", "line 3", "a number\nin column 'step'")
    assert str(err) == "f.csv:line 3: a number in column 'step'"
    assert err.expected == "a number in column 'step'"


def test_provider_error_names_provider_input_and_cause() -> None:
    err = ProviderError("table_csv", "t.csv", KeyError("boom"))
    assert str(err) == "t.csv: metrics provider 'table_csv' failed: KeyError: 'boom'"


def test_errors_cross_a_process_boundary_as_themselves() -> None:
    """Raised in a pool or Dask worker, an error is pickled; before, InputError failed to unpickle
    ("__init__() missing 2 required positional arguments") and the parent saw BrokenProcessPool."""
    import pickle
    import threading
    from concurrent.futures import ProcessPoolExecutor

    class Unpicklable(Exception):
        def __init__(self) -> None:
            super().__init__("lock held")
            self.lock = threading.Lock()

    errors = [InputError(Path("t.json"), "byte 12", "a JSON value"), ConfigError("c.yaml", "key a", "a number"),
              UsageError("stop() without start()"), ProviderError("kineto", "t.json", Unpicklable())]
    for err in errors:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert back.__dict__.keys() == err.__dict__.keys()
    assert isinstance(pickle.loads(pickle.dumps(errors[-1])).cause, RuntimeError)
    with ProcessPoolExecutor(1) as pool, pytest.raises(InputError) as info:
        pool.submit(_raise_input_error).result()
    assert (info.value.where, info.value.place) == ("bad.csv", "line 4")


def _raise_input_error() -> None:
    raise InputError("bad.csv", "line 4", "8 columns")
