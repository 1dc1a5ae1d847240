"""Headless Chromium for the browser tests: the flags, and a minimal DevTools Protocol client
over ``--remote-debugging-pipe`` (stdlib only), enough to open a page, evaluate, click, type
and take a screenshot."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1366,900"]


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4:
    NUL-terminated JSON messages), enough to open a page, click and take a screenshot."""

    def __init__(self, profile: str):
        if CHROMIUM is None:
            raise RuntimeError("chromium is not on PATH (Debian: apt-get install chromium)")
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        # bash (dash takes one-digit fds only) moves the pipe ends to fds 3 and 4 after
        # subprocess has closed the other descriptors.
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', CHROMIUM,
             *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(to_chrome_r, from_chrome_w), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._id, self.session = b"", 0, None

    def call(self, method: str, timeout: float = 30, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" not in self._buf:
                if not select.select([self._r], [], [], max(deadline - time.monotonic(), 0))[0]:
                    raise TimeoutError(f"no answer from chromium to {method}")
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise TimeoutError(method)

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20) -> None:
        """Poll ``expression`` until it is truthy. While a click's navigation is under way the
        page's context goes away ("Inspected target navigated or closed", "Cannot find
        context"): that is the wait, not a failure, so it is polled again."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.evaluate(expression):
                    return
            except RuntimeError as err:
                if not any(m in str(err) for m in ("navigated or closed", "Cannot find context",
                                                   "Execution context was destroyed")):
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            time.sleep(0.05)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._w)
        os.close(self._r)


def click(chrome: DevTools, selector: str) -> None:
    box = chrome.evaluate(f"(() => {{ const r = document.querySelector({selector!r})"
                          ".getBoundingClientRect(); "
                          "return [r.x + r.width / 2, r.y + r.height / 2];"
                          " })()")
    for kind in ("mousePressed", "mouseReleased"):
        chrome.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left",
                    clickCount=1)


def open_page(chrome: DevTools, path: Path,
              ready: str = "document.body && document.body.dataset.ready === '1'") -> None:
    target = chrome.call("Target.createTarget", url=path.as_uri())["targetId"]
    chrome.session = chrome.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
    chrome.wait_for(ready)
