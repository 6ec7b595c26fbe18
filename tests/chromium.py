"""Headless Chromium for the report tests, driven over the DevTools protocol on a pipe.

``--remote-debugging-pipe`` takes commands on the child's fd 3 and writes replies on fd 4, as
NUL-separated JSON, so nothing beyond the standard library is needed. The ``browser`` fixture
(registered in ``conftest.py``) skips only where no ``chromium`` binary exists (``.ci/run``
installs Debian's package).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def chromium_binary() -> str | None:
    return shutil.which("chromium") or next((p for p in ("/usr/bin/chromium",) if os.path.exists(p)), None)


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe."""

    FLAGS = (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--mute-audio",
        "--remote-debugging-pipe",
    )

    def __init__(self, binary: str, profile: Path, log: Path) -> None:
        commands_r, self._commands = os.pipe()
        self._replies, replies_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4; bash moves the pipe ends there.
        shell = f'exec "$0" "$@" 3<&{commands_r} 4>&{replies_w} {commands_r}<&- {replies_w}>&-'
        self._log = log.open("wb")  # Chromium's output, open for the browser's lifetime
        self.process = subprocess.Popen(
            ["bash", "-c", shell, binary, *self.FLAGS, f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(commands_r, replies_w),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        os.close(commands_r)
        os.close(replies_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited: {self.process.poll()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = 30
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def load(self, path: Path) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=session)
        started = time.monotonic()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_for("Page.loadEventFired", session)
        page = Page(self, session, target, time.monotonic() - started)
        page.evaluate("new Promise(done => setTimeout(done, 200))")  # let late errors (an image's onerror) surface
        return page

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._log.close()


class Page:
    def __init__(self, browser: Browser, session: str, target: str, load_seconds: float) -> None:
        self.browser, self.session, self.target, self.load_seconds = browser, session, target, load_seconds

    def evaluate(self, expression: str) -> Any:
        result = self.browser.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors of this page."""
        found = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                found.append(f"log {params['entry']['level']}: {params['entry'].get('text')}")
        return found

    def close(self) -> None:
        self.browser.call("Target.closeTarget", {"targetId": self.target})


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary (Debian's chromium package; .ci/run installs it)")
    root = tmp_path_factory.mktemp("chromium")
    b = Browser(binary, root / "profile", root / "chromium.log")
    try:
        b.call("Browser.getVersion")
        yield b
    finally:
        b.close()
