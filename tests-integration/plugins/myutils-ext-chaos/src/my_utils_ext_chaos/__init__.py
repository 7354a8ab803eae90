"""Misbehaviour on demand: ``act(where)`` does what ``MYUTILS_CHAOS`` asks for at ``where``.

``MYUTILS_CHAOS`` is a JSON object ``{"where": W, "kind": K, "arg": A}``. ``where`` is one of
``import`` (this package), ``hook`` (``myutils_metrics_providers``), ``cli_hook``
(``myutils_cli``), ``factory_import`` (the provider module), ``from_input``, ``collect``,
``rule`` (the analysis rule's ``evaluate``). ``kind`` is ``exit`` (``sys.exit(A)``), ``base``
(a ``BaseException`` subclass of its own), ``genexit``, ``raise`` (a ``RuntimeError``),
``print`` (to stdout three ways, then carries on), ``hang`` (never returns), ``wrong`` (returns
``A`` where something else is expected) or ``huge`` (returns ``A`` descriptions, or one with a
summary of ``A`` characters when ``A`` is negative).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, NamedTuple

_NOTHING = object()


class Instead(NamedTuple):
    """What to return instead of the right thing: ``kind`` "wrong" or "huge", and its ``arg``."""

    kind: str
    arg: Any


class ChaosBase(BaseException):
    """A BaseException subclass of the plugin's own."""


def _plan() -> dict[str, Any]:
    raw = os.environ.get("MYUTILS_CHAOS", "")
    return json.loads(raw) if raw else {}


def act(where: str) -> Any:
    """Misbehave at ``where`` if told to; return an ``Instead`` to return, or ``_NOTHING`` (carry on)."""
    plan = _plan()
    if plan.get("where") != where:
        return _NOTHING
    kind, arg = plan.get("kind"), plan.get("arg")
    if kind == "exit":
        sys.exit(arg)
    if kind == "base":
        raise ChaosBase(f"chaos at {where}")
    if kind == "genexit":
        raise GeneratorExit
    if kind == "raise":
        raise RuntimeError(f"chaos at {where}")
    if kind == "print":
        print(f"chaos: print at {where}")
        sys.stdout.flush()
        os.write(1, f"chaos: fd 1 at {where}\n".encode())
        sys.__stdout__.write(f"chaos: __stdout__ at {where}\n")
        return _NOTHING
    if kind == "hang":
        while True:
            time.sleep(0.05)
    if kind in ("wrong", "huge"):
        return Instead(kind, arg)
    return _NOTHING


act("import")
