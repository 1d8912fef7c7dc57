"""Drive a real headless Chromium over the DevTools protocol: load a page, read the DOM, collect errors.

Only for tests: one page, a few protocol calls, and the browser (with its helper processes)
ended when the ``with`` block ends.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from autotest.own_time import OwnClock

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-port=0"]
LISTENING = re.compile(r"DevTools listening on (ws://[^\s]+)")


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


class Browser:
    def __init__(self, executable: str, timeout_s: float = 60.0) -> None:
        self.profile = tempfile.mkdtemp(prefix="rl-autotest-chromium-")
        self.timeout_s = timeout_s
        self.process = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True)
        self.events: list[dict[str, Any]] = []
        self._next_id = 0

    def __enter__(self) -> "Browser":
        import websocket

        port = None
        # the limit counts chromium's own time (autotest/own_time.py): a start that a busy machine slows is waited for
        clock = OwnClock(self.process.pid)
        while port is None and clock.elapsed_s() < self.timeout_s:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                raise RuntimeError(f"chromium exited {self.process.returncode} before DevTools listened")
            match = LISTENING.search(line)
            if match:
                port = int(match.group(1).split(":")[2].split("/")[0])
        if port is None:
            raise RuntimeError("chromium's DevTools did not listen in time")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            pages = [t for t in json.load(reply) if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=self.timeout_s,
                                              suppress_origin=True)
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.ws.close()
        finally:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            self.process.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def _receive(self) -> dict[str, Any]:
        message = json.loads(self.ws.recv())
        if "method" in message:
            self.events.append(message)
        return message

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self.ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = self._receive()
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def load(self, page: Path, width: int = 1280, height: int = 900) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        start = len(self.events)
        self.call("Page.navigate", url=page.resolve().as_uri())
        while not any(e["method"] == "Page.loadEventFired" for e in self.events[start:]):
            self._receive()

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (failed loads ...) so far."""
        found = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                found.append(params["exceptionDetails"].get("text", "exception"))
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(f"{params['entry'].get('text')} ({params['entry'].get('url', '')})")
        return found

    def screenshot(self, out: Path) -> Path:
        height = self.evaluate("Math.ceil(document.documentElement.scrollHeight)")
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": 1280, "height": min(int(height), 4000), "scale": 1})
        out.write_bytes(base64.b64decode(data["data"]))
        return out
