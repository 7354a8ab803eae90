"""``as_path`` / ``as_paths``: str and any os.PathLike become Paths; a lone path is a list of one."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from my_utils.core.errors import UsageError
from my_utils.core.paths import as_path, as_paths


class Like:
    def __init__(self, text: str) -> None:
        self.text = text

    def __fspath__(self) -> str:
        return self.text


@pytest.mark.parametrize("value", ["run/a.csv", Path("run/a.csv"), Like("run/a.csv")])
def test_one_path_of_any_kind(value: object) -> None:
    assert as_path(value) == Path("run/a.csv")  # type: ignore[arg-type]
    assert as_paths(value) == [Path("run/a.csv")]  # type: ignore[arg-type]


def test_a_list_keeps_its_order_and_a_str_is_not_split_into_characters() -> None:
    assert as_paths(["b", Path("a"), Like("c")]) == [Path("b"), Path("a"), Path("c")]
    assert as_paths(("x.json",)) == [Path("x.json")] and as_paths("x.json") == [Path("x.json")]
    assert as_paths([]) == []


@pytest.mark.parametrize(("value", "fragment"), [
    (None, "expected a path or a list of paths; got NoneType"),
    (3, "got int 3"),
    (b"raw.csv", "got bytes"),
])
def test_what_is_no_path_is_said(value: object, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(")):
        as_paths(value, "traces")  # type: ignore[arg-type]


def test_bytes_from_fspath_and_a_bad_item_name_the_parameter() -> None:
    with pytest.raises(UsageError, match=r"^traces\[1\]: expected a str path; got bytes"):
        as_paths(["a", Like(b"b")], "traces")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^csv_path: expected a str or os.PathLike path; got NoneType"):
        as_path(None, "csv_path")  # type: ignore[arg-type]
    assert as_path(PurePosixPath("a")) == Path("a") and os.fspath(Like("z")) == "z"
