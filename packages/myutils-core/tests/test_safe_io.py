"""The shared guards of ``my_utils.core.safe_io``: regular files only, inputs never replaced,
formula-safe CSV cells that read back exactly, UTF-8 names, strict JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from my_utils.core.errors import InputError, UsageError
from my_utils.core.safe_io import (
    check_regular,
    csv_text_cell,
    csv_text_value,
    open_regular,
    refuse_overwriting_inputs,
    strict_json,
    utf8_text,
)


def test_open_regular_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "profile_rank_1.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a regular file \\(this is a FIFO\\)") as info:
        open_regular(fifo, "r")  # a plain open() would block here until a writer appears
    assert str(info.value).startswith(str(fifo))
    with pytest.raises(InputError, match="FIFO"):
        check_regular(fifo)
    with pytest.raises(InputError, match="a folder"):
        open_regular(tmp_path)


def test_open_regular_reads_text_and_bytes(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_bytes("é\n".encode())
    with open_regular(f, "r") as fh:
        assert fh.read() == "é\n"
    with open_regular(f) as fh:
        assert fh.read() == "é\n".encode()
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")
    with pytest.raises(UsageError):
        open_regular(f, "w")


def test_outputs_never_replace_inputs(tmp_path: Path) -> None:
    src = tmp_path / "run.pickle"
    src.write_bytes(b"x")
    refuse_overwriting_inputs([tmp_path / "cut.pickle"], [src])
    with pytest.raises(UsageError, match="would replace the input"):
        refuse_overwriting_inputs([tmp_path / "sub" / ".." / "run.pickle"], [src])
    link = tmp_path / "link.pickle"
    link.symlink_to(src)
    with pytest.raises(UsageError):
        refuse_overwriting_inputs([link], [src])
    hard = tmp_path / "hard.pickle"
    os.link(src, hard)
    with pytest.raises(UsageError):
        refuse_overwriting_inputs([hard], [src])


@given(st.text())
def test_csv_cells_read_back_exactly_and_never_start_a_formula(text: str) -> None:
    cell = csv_text_cell(text)
    assert csv_text_value(cell) == text
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_csv_cell_examples() -> None:
    assert csv_text_cell('=HYPERLINK("http://x","y")') == '\'=HYPERLINK("http://x","y")'
    assert csv_text_cell("aten::mm") == "aten::mm"
    assert csv_text_cell("'=x") == "''=x"
    assert csv_text_value("'not a formula") == "'not a formula"


def test_utf8_text_keeps_the_byte_visible() -> None:
    name = os.fsdecode(b"layer_\xe9")
    assert utf8_text(name) == "layer_\\xe9"
    assert utf8_text("layer_é") == "layer_é"
    assert utf8_text("a\ud800b") == "a\\ud800b"
    utf8_text(name).encode("utf-8")


def test_strict_json_has_no_bare_nan() -> None:
    text = strict_json({"a": float("nan"), "b": [float("inf"), 1.5]})
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [None, 1.5]}
