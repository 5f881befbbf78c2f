"""Headless Chromium driven over its DevTools protocol on a pipe (--remote-debugging-pipe):
the standard library only, no WebSocket client. tests/test_report_browser.py uses it to load a
page, time it, run checks in it (scroll, real mouse events) and take its DOM and screenshot.

Chromium reads commands (JSON, each ended by a NUL byte) on its fd 3 and writes replies and
events on its fd 4. Every wait has a deadline: a page or browser that stops answering raises
PipeError, never hangs the test.
"""
import base64
import fcntl
import json
import os
import select
import subprocess
import tempfile
import time


class PipeError(RuntimeError):
    pass


class Browser:
    """One headless Chromium holding one page (a tab), with the page's events recorded:
    console messages, uncaught exceptions, log entries and every request it made."""

    def __init__(self, exe, profile, width=1280, height=2400, timeout=60):
        self.started = time.monotonic()
        self.timeout = timeout
        to_browser, self.tx = os.pipe()
        self.rx, from_browser = os.pipe()
        # Above 4, so that putting them at 3 and 4 in the child cannot overwrite one with the other.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser)]
        for fd in (to_browser, from_browser):
            os.close(fd)
        self.log_file = tempfile.TemporaryFile()
        cmd = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--no-first-run", "--user-data-dir=" + profile,
               "--remote-debugging-pipe", f"--window-size={width},{height}", "--hide-scrollbars", "about:blank"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log_file,
                                     pass_fds=(3, 4), preexec_fn=lambda: (os.dup2(high[0], 3), os.dup2(high[1], 4)))
        for fd in high:
            os.close(fd)
        self.buffer, self.next_id, self.session = b"", 0, None
        self.events, self.console, self.exceptions, self.log, self.requests = [], [], [], [], []
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _send(self, method, params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.tx, data):]
        return self.next_id

    def _receive(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.rx], [], [], left)[0]:
                raise PipeError(f"chromium did not answer within {self.timeout} s")
            chunk = os.read(self.rx, 1 << 20)
            if not chunk:
                raise PipeError(f"chromium closed its pipe (exit {self.proc.poll()})")
            self.buffer += chunk
        msg, self.buffer = self.buffer.split(b"\0", 1)
        msg = json.loads(msg)
        if "method" in msg:
            self._record(msg)
        return msg

    def _record(self, msg):
        method, params = msg["method"], msg.get("params", {})
        self.events.append(method)
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append((params.get("type"), text))
        elif method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            self.exceptions.append(d.get("exception", {}).get("description") or d.get("text", ""))
        elif method == "Log.entryAdded":
            self.log.append((params["entry"]["level"], params["entry"]["text"]))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    def call(self, method, **params):
        """Sends one command and returns its result; events meanwhile are recorded."""
        want = self._send(method, params)
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._receive(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise PipeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def wait_event(self, method):
        deadline = time.monotonic() + self.timeout
        while method not in self.events:
            self._receive(deadline)

    def open(self, url):
        """Navigates to url and waits for its load event and the first frame drawn after it."""
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        self.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (a promise is awaited); an
        exception in it raises PipeError."""
        r = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise PipeError(f"{expression[:80]}...: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def resize(self, width, height):
        """Sets the viewport's size, as a window resized to it, and waits for a frame drawn at it."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")

    def move_mouse(self, x, y):
        """A real pointer move to viewport point (x, y), as the input pipeline delivers it."""
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self):
        """Ends the browser; returns its stderr (its log)."""
        try:
            self.call("Browser.close")
        except (PipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.tx, self.rx):
            os.close(fd)
        self.log_file.seek(0)
        return self.log_file.read().decode(errors="replace")
