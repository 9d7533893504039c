"""Headless Chromium driven over the DevTools protocol (CDP), with no dependency but the browser itself.

Chromium runs with --remote-debugging-pipe: it reads commands on its fd 3 and writes
answers and events on its fd 4, each message JSON ended by a NUL byte. The client is
synchronous: `send` writes a command and reads until its answer comes, keeping the
events that arrive meanwhile; every read has a deadline, so nothing waits forever.

    browser = Browser(find_chromium())
    page = browser.new_page()
    page.navigate(url)
    page.wait_for("document.querySelector('input')", what="an input")
    page.type("input", "alice"); page.click("button")
    browser.close()  # also done by a finalizer if forgotten
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
COMMAND_SECONDS = 15.0
STARTUP_SECONDS = 30.0
ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--metrics-recording-only", "--mute-audio",
        "--password-store=basic", "--use-mock-keychain", "--window-size=1024,768", "--remote-debugging-pipe")

ON_FDS_3_AND_4 = ("import os, sys; r, w = int(sys.argv[1]), int(sys.argv[2]); os.dup2(r, 3); os.dup2(w, 4); "
                  "os.close(r); os.close(w); os.execv(sys.argv[3], sys.argv[3:])")


def find_chromium():
    """The Chromium (or Chrome) executable: $CHROMIUM, else the first of CANDIDATES on PATH; None if none."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return shutil.which(explicit)
    return next(filter(None, map(shutil.which, CANDIDATES)), None)


class CdpError(RuntimeError):
    """A command answered with an error, the browser went away, or a deadline passed."""


def _high_fd(fd):
    """A close-on-exec copy of `fd` numbered 10 or more (never 3 or 4), the original closed."""
    copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return copy


def _kill(process, fds, profile):
    """The finalizer: the browser and its whole process group go, its pipes close, its profile is removed."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    shutil.rmtree(profile, ignore_errors=True)


class Browser:
    """One headless Chromium process; `new_page()` opens a tab attached over the same pipe."""

    def __init__(self, executable, *, extra_args=()):
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.log_path = Path(self.profile) / "chromium.log"
        to_browser_read, to_browser_write = map(_high_fd, os.pipe())
        from_browser_read, from_browser_write = map(_high_fd, os.pipe())
        # subprocess cannot renumber fds: a small Python puts the pipes on fds 3 and 4, then execs the browser.
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", ON_FDS_3_AND_4, str(to_browser_read), str(from_browser_write), executable,
                 *ARGS, f"--user-data-dir={self.profile}", *extra_args, "about:blank"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(to_browser_read, from_browser_write), start_new_session=True)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._in, self._out = to_browser_write, from_browser_read
        self._finalizer = weakref.finalize(self, _kill, self.process, (self._in, self._out), self.profile)
        self._buffer = b""
        self._next_id = 0
        self.events = []  # every event not yet taken by a page, oldest first
        self.pages = {}   # session id -> Page
        self.version = self.send("Browser.getVersion", timeout=STARTUP_SECONDS)

    # -- the protocol

    def send(self, method, params=None, *, session_id=None, timeout=COMMAND_SECONDS):
        """Run one command; its result, or CdpError (its error, the browser gone, or no answer in `timeout`)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session_id:
            message["sessionId"] = session_id
        try:
            os.write(self._in, json.dumps(message).encode() + b"\0")
        except OSError as error:
            raise CdpError(f"{method}: cannot write to Chromium ({error}){self._exit_note()}") from None
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline, method)
            if answer.get("id") == message["id"]:
                if "error" in answer:
                    raise CdpError(f"{method}: {answer['error'].get('message')} {answer['error'].get('data', '')}")
                return answer.get("result", {})
            self._dispatch(answer)

    def pump(self, seconds=0.0):
        """Take the events that arrive within `seconds` (none waited for when 0)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self._dispatch(self._receive(deadline, "events", waiting=False))
            except TimeoutError:
                return

    def _receive(self, deadline, what, waiting=True):
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if not waiting:
                    raise TimeoutError
                raise CdpError(f"{what}: no answer from Chromium in time{self._exit_note()}")
            ready, _, _ = select.select([self._out], [], [], remaining)
            if ready:
                chunk = os.read(self._out, 1 << 20)
                if not chunk:
                    raise CdpError(f"{what}: Chromium closed its DevTools pipe{self._exit_note()}")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def _dispatch(self, event):
        page = self.pages.get(event.get("sessionId"))
        (page.events if page else self.events).append(event)
        if page:
            page._note(event)

    def _exit_note(self):
        if self.process.poll() is None:
            return ""
        log = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        return f" (Chromium exited with {self.process.returncode}; its output ends:\n{log})"

    # -- tabs and the end

    def new_page(self):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        self.pages[session] = page
        for domain in ("Page", "Runtime", "Network", "Log"):
            page.send(f"{domain}.enable")
        return page

    def close(self):
        """Ask Chromium to quit, then make sure: the finalizer kills what is left and removes the profile."""
        if self._finalizer.alive and self.process.poll() is None:
            try:
                self.send("Browser.close", timeout=5)
            except CdpError:
                pass
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    """One tab. Keeps what a person would not see but a test wants to know: console messages,
    uncaught exceptions, and each request's method, URL and status (`requests`)."""

    def __init__(self, browser, target_id, session_id):
        self.browser, self.target_id, self.session_id = browser, target_id, session_id
        self.events = []
        self.console = []      # "level: text" of console calls and browser log entries
        self.exceptions = []   # uncaught JavaScript errors
        self.requests = {}     # request id -> {"method", "url", "type", "status" | "failed"}
        self.sse_messages = []  # data of every EventSource message received

    def send(self, method, params=None, timeout=COMMAND_SECONDS):
        return self.browser.send(method, params, session_id=self.session_id, timeout=timeout)

    def _note(self, event):
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append(f"{params.get('type')}: {text}")
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.console.append(f"{entry.get('level')}: {entry.get('text')} {entry.get('url', '')}".rstrip())
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description") or details.get("text"))
        elif method == "Network.requestWillBeSent":
            request = params["request"]
            self.requests[params["requestId"]] = {"method": request["method"], "url": request["url"],
                                                  "type": params.get("type")}
        elif method == "Network.responseReceived":
            self.requests.setdefault(params["requestId"], {"url": params["response"]["url"]})["status"] = \
                params["response"]["status"]
        elif method == "Network.loadingFailed":
            self.requests.setdefault(params["requestId"], {})["failed"] = params.get("errorText")
        elif method == "Network.eventSourceMessageReceived":
            self.sse_messages.append(params.get("data"))

    def navigate(self, url):
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise CdpError(f"navigating to {url}: {result['errorText']}")
        return result

    def evaluate(self, expression, *, await_promise=False):
        """The value of a JavaScript expression in the page (JSON-able values only)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": await_promise})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CdpError(f"{expression!r} threw: "
                           f"{details.get('exception', {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression, *, what, timeout=10.0, interval=0.05):
        """The first truthy value of the JavaScript `expression`, polled; CdpError telling what the page
        shows otherwise."""
        return self.wait_for_value(lambda: self.evaluate(expression), what=what, timeout=timeout, interval=interval)

    def wait_for_value(self, probe, *, what, timeout=10.0, interval=0.05):
        """The first truthy value of `probe()`, polled (events are taken in between); CdpError telling
        what the page shows otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise CdpError(f"waited {timeout}s for {what}; {self.diagnosis()}")
            self.browser.pump(interval)

    def diagnosis(self):
        """What the page shows, and what its console, errors and requests said: for failure messages."""
        try:
            text = self.evaluate("document.body ? document.body.innerText : ''")
        except CdpError as error:
            text = f"(unreadable: {error})"
        requests = [f"{r.get('method', '?')} {r.get('url')} -> {r.get('status', r.get('failed', 'pending'))}"
                    for r in self.requests.values()]
        return (f"the page shows {text!r}; console: {self.console}; exceptions: {self.exceptions}; "
                f"requests: {requests}")

    def center_of(self, selector):
        """The viewport coordinates of the middle of the element `selector` finds, scrolled into view."""
        box = self.evaluate(f"""(() => {{
            const element = document.querySelector({json.dumps(selector)});
            if (!element) return null;
            element.scrollIntoView({{block: "center"}});
            const r = element.getBoundingClientRect();
            return {{x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height}};
        }})()""")
        if not box or not box["w"] or not box["h"]:
            raise CdpError(f"nothing visible matches {selector!r}; {self.diagnosis()}")
        return box["x"], box["y"]

    def click(self, selector):
        """Click the element as a mouse does: move there, press, release."""
        x, y = self.center_of(selector)
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "clickCount": 1})

    def type(self, selector, text):
        """Click into the field, then type `text` into it (the browser's own text input)."""
        self.click(selector)
        self.send("Input.insertText", {"text": text})

    def screenshot(self, path):
        Path(path).write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))
        return path

    def close(self):
        self.browser.pages.pop(self.session_id, None)
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target_id}, timeout=5)
        except CdpError:
            pass
