"""Headless Chromium for tests, with nothing leaving the machine: pages served from 127.0.0.1.

``missing_reason()`` says why the browser cannot run here (or None); ``LocalServer`` serves a
folder (and in-memory files) on ``127.0.0.1:0``; ``launch()`` starts Debian's Chromium through
Playwright with flags that resolve no host name; ``open_page()`` opens a page that aborts every
request not aimed at 127.0.0.1 and records console errors, page errors and blocked requests.

Used by the Perfetto UI test (``perfetto_ui.py``) and meant for any test that renders what the
project writes (HTML reports). The browser is Debian's ``chromium`` package: Playwright's own
download needs the internet.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import shutil
import socketserver
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = os.environ.get("MYUTILS_CHROMIUM", "/usr/bin/chromium")
# no name resolves except 127.0.0.1, so even a request that escaped the route could not leave
CHROMIUM_ARGS = (
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)
LOCAL_PREFIXES = ("http://127.0.0.1", "data:", "blob:", "about:")


def missing_reason() -> str | None:
    """Why headless Chromium cannot run here, or None when it can."""
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install playwright; the browser itself comes from apt)"
    if not (os.access(CHROMIUM, os.X_OK) or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set MYUTILS_CHROMIUM)"
    return None


class _Handler(http.server.SimpleHTTPRequestHandler):
    files: Mapping[str, bytes] = {}

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        body = self.files.get(self.path.split("?", 1)[0])
        if body is None:
            super().do_GET()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LocalServer:
    """Serves ``root`` (and ``files``: URL path -> bytes) on 127.0.0.1 at a free port, in a thread."""

    def __init__(self, root: str | Path, files: Mapping[str, bytes] | None = None) -> None:
        handler = type("Handler", (_Handler,), {"files": dict(files or {})})
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0),
                                                       functools.partial(handler, directory=str(root)))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"

    def __enter__(self) -> LocalServer:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@dataclass
class PageLog:
    """What a page reported: console errors, uncaught exceptions, requests aborted as remote."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)


def launch(playwright: Any) -> Any:
    """A headless Chromium (Playwright ``Browser``) that resolves no host name but 127.0.0.1."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))


def open_page(browser: Any, width: int = 1400, height: int = 800) -> tuple[Any, PageLog]:
    """A new page whose non-local requests are aborted; its errors are collected in the ``PageLog``."""
    log = PageLog()
    page = browser.new_page(viewport={"width": width, "height": height})

    def route(r: Any) -> None:
        if r.request.url.startswith(LOCAL_PREFIXES):
            r.continue_()
        else:
            log.blocked.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: log.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: log.page_errors.append(str(e)[:300]))
    return page, log
