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
