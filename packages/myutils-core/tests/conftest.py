"""Fixtures shared by core's test modules."""

from __future__ import annotations

import json

import pytest

from my_utils.core import events as events_module


@pytest.fixture(params=["orjson", "stdlib"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with orjson (when installed) and with the stdlib fallback core must work with."""
    if request.param == "orjson":
        pytest.importorskip("orjson", reason="orjson is an optional speed-up; the stdlib run covers the rest")
    else:
        monkeypatch.setattr(events_module, "_orjson", None)
        monkeypatch.setattr(events_module, "_loads", json.loads)
    return str(request.param)
