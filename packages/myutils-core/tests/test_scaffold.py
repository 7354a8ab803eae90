"""`plugins new` checks its arguments and never leaves half a package behind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib
from typer.testing import CliRunner

from my_utils.core.cli import build_app
from my_utils.core.errors import UsageError
from my_utils.core.scaffold import KINDS, plan_package, write_plugin_package


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_writes_a_package_with_its_entry_point(tmp_path: Path, kind: str) -> None:
    root = write_plugin_package("foo_bar", kind, tmp_path)
    assert root == tmp_path / "myutils-ext-foo-bar"
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    assert meta["project"]["name"] == "myutils-ext-foo-bar"
    assert meta["project"]["entry-points"]["my_utils.plugins"] == {"ext_foo_bar": "my_utils_ext_foo_bar.plugin"}
    assert ("myutils-tracing>=0.1" in meta["project"]["dependencies"]) is (kind == "backend")
    for source in root.rglob("*.py"):
        ast.parse(source.read_text(), filename=str(source))  # every template renders to valid Python
    assert (root / "tests" / "test_foo_bar.py").is_file()
    assert not list(tmp_path.glob(".myutils-ext-*"))  # no scratch folder left


@pytest.mark.parametrize(("name", "kind", "fragment"), [
    ("Foo", "provider", "must be a lowercase identifier"),
    ("foo-bar", "provider", "must be a lowercase identifier"),
    ("foo", "exporter", "--kind 'exporter' is not one of provider, backend, rule, sink, cli"),
])
def test_bad_arguments(name: str, kind: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        plan_package(name, kind)


# every control character (C0, DEL, C1) and every path separator, alone and after a valid name:
# ``^...$`` accepted "foo\n" (``$`` matches before a final newline) and wrote a folder named so
_REFUSED_CHARS = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))] + ["/", "\\", ":", ".", "\u2028"]


@pytest.mark.parametrize("char", _REFUSED_CHARS, ids=[f"U+{ord(c):04X}" for c in _REFUSED_CHARS])
def test_control_characters_and_separators_are_refused(tmp_path: Path, char: str) -> None:
    for name in (f"foo{char}", f"{char}foo", f"fo{char}o", f"foo{char}bar"):
        with pytest.raises(UsageError, match="must be a lowercase identifier"):
            plan_package(name, "provider")
    result = CliRunner().invoke(build_app(), ["plugins", "new", f"foo{char}", "--kind", "sink", "--dir", str(tmp_path)])
    assert result.exit_code == 2 and result.output.startswith("error: plugins new: NAME "), result.output
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a scratch folder


def test_cli_refuses_an_existing_folder_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "myutils-ext-foo").mkdir()
    result = CliRunner().invoke(build_app(), ["plugins", "new", "foo", "--kind", "sink", "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: plugins new: {tmp_path / 'myutils-ext-foo'} already exists; " \
                                    "choose another NAME or --dir"
    assert list((tmp_path / "myutils-ext-foo").iterdir()) == []


def test_cli_writes_the_package(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_app(), ["plugins", "new", "foo", "--kind", "cli", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "myutils-ext-foo" / "src" / "my_utils_ext_foo" / "command.py").is_file()
