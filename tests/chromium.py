"""A headless Chromium driven over the DevTools protocol on a pipe, no package: the browser tests
(test_html_view.py) and docs/screenshots.py both use it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

VIEW_READY = "document.readyState === 'complete' && document.querySelectorAll('#lines').length === 1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """The first Chromium or Chrome on PATH, or None."""
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Chromium:
    """A headless Chromium driven over `--remote-debugging-pipe` (the DevTools protocol as NUL-separated JSON on
    file descriptors 3 and 4): no websocket, no package."""

    def __init__(self, exe: str, profile: Path) -> None:
        to_browser, self._commands = os.pipe()  # the browser reads commands on its fd 3
        self._replies, from_browser = os.pipe()  # and writes replies on its fd 4

        def wire() -> None:  # in the child, before exec: the pipes become fds 3 and 4
            # lifted above 4 first: in a process with few files open (a plain script, not pytest) os.pipe() hands
            # out fd 3 itself, and dup2 onto its own number keeps close-on-exec, so the browser got no fd 3
            lifted = [fcntl.fcntl(fd, fcntl.F_DUPFD, 5) for fd in (to_browser, from_browser)]
            for target, fd in zip((3, 4), lifted, strict=True):
                os.dup2(fd, target)
                os.close(fd)

        args = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run"]
        args += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]  # stay offline
        self.proc = subprocess.Popen(
            [exe, *args, f"--user-data-dir={profile}", "--window-size=1000,1400", "about:blank"],
            preexec_fn=wire,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._next_id, self.session = b"", 0, None

    def send(self, method: str, timeout: float = 30.0, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" not in self._buffer:
                chunk = os.read(self._replies, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit code {self.proc.poll()})")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
        raise TimeoutError(f"no reply to {method} in {timeout} s")

    def open(self, url: str, ready: str = VIEW_READY, timeout: float = 10.0) -> None:
        """Open `url` in a new tab, attach to it and wait until the JS `ready` is true (default: the attention view)."""
        self.session = None  # a browser command, not one of the last tab's
        target = self.send("Target.createTarget", url=url)["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.wait_for(ready, timeout=timeout)

    def wait_for(self, condition: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.js(condition):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {condition}")
            time.sleep(0.05)

    def js(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def centre(self, selector: str) -> tuple[float, float]:
        x, y = self.js(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: "
            "'center'}); var r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        return x, y

    def move_to(self, selector: str) -> None:
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def click(self, selector: str) -> None:
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def lines(self, selector: str = "#lines line") -> list[dict]:
        """The marks drawn now (lines, or blocks with `#blocks rect`): their data-*, stroke width, computed colour
        and opacities, and box on screen (x, y, width, height)."""
        return self.js(
            f"Array.from(document.querySelectorAll({json.dumps(selector)}), function (l) {{ var c = "
            "getComputedStyle(l), r = l.getBoundingClientRect(); return {series: l.getAttribute('data-series'), "
            "query: Number(l.getAttribute('data-query')), key: Number(l.getAttribute('data-key')), weight: "
            "Number(l.getAttribute('data-weight')), width: Number(l.getAttribute('stroke-width')), stroke: c.stroke, "
            "fill: c.fill, opacity: [c.opacity, c.strokeOpacity, c.fillOpacity].map(Number), blend: c.mixBlendMode, "
            "box: [r.x, r.y, r.width, r.height]}; })"
        )

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._replies)
