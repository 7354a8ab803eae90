"""Providers whose own code raises something other than InputError."""

import json
from pathlib import Path


class KeyErrorProvider:
    name = "faulty_keyerror"

    @classmethod
    def from_input(cls, path: Path) -> "KeyErrorProvider":
        return cls()

    def collect(self, step=None):  # type: ignore[no-untyped-def]
        return {}["step_time"]


class JsonProvider(KeyErrorProvider):
    name = "faulty_json"

    def collect(self, step=None):  # type: ignore[no-untyped-def]
        return json.loads("{not json")


class TypeErrorProvider(KeyErrorProvider):
    name = "faulty_typeerror"

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    @classmethod
    def from_input(cls, path: Path, scale: float = 1.0) -> "TypeErrorProvider":
        # a bug inside from_input (a TypeError), not an option the user got wrong
        return cls(scale * None)  # type: ignore[operator]
