"""The screen, mouse and keyboard of a session (the computer API), reached one way per kind of session.

The screen is the viewport of the session's active page (the page listed first by /json/list, the one
last brought to the front); coordinates are its screen pixels (the session's record's viewport), whatever
the kind and the page's zoom: a click lands where a screenshot shows its target. A headless Chromium has no X
display: it is read with `Page.captureScreenshot` and acted on with `Input.dispatchMouseEvent` /
`dispatchKeyEvent` / `insertText` on that page (`page_input.Page`, which turns screen pixels into the page's CSS pixels
by its zoom). A headful one is acted on through its X display (browserhost/display.py): xdotool and an
ffmpeg grab, run inside the session's sandbox (its user, namespaces and cgroup), at the page's place on the
screen below the window's tab strip and address bar (the same at any zoom); so clicks are the display's own
and a screenshot shows what a person would see there (native pop-ups and menus included, which a wheel turned
there scrolls as a person's does). The mouse is where the last action left it (0,0 at first).

`Screen.run(actions)` runs a list of actions in order, one list at a time per session (a lock), stopping
at the first that fails: ActionFailed says which (its index) and why, in words for the session's user (no
host path, process or internal address: those are in its `detail`, for the host's log). A list sent again
(`resend`: the app's caller gave up waiting for its answer and sent the same call again) is answered what the
first send did, once it is done, instead of being done twice. Each action is a dict with its `type` and the SDK's
fields for it (app/browsers/computer_schemas.py checked them):

    click_mouse   x, y, button, click_type (down/up/click), num_clicks, hold_keys
    move_mouse    x, y, smooth, duration_ms, hold_keys
    drag_mouse    path [[x, y], ...], button, delay, smooth, duration_ms, steps_per_segment, step_delay_ms, hold_keys
    scroll        x, y, delta_x, delta_y (wheel clicks: page_input.WHEEL_PIXELS each), hold_keys
    press_key     keys (xdotool names and combinations), duration (ms held), hold_keys
    type_text     text, delay (ms between characters), smooth (a person's pace), typo_chance (when smooth)
    set_cursor    hidden (a headless screen draws no cursor: it is only remembered)
    sleep         duration_ms
    capture_screenshot  region {x, y, width, height}  -> {"png": base64}
    get_mouse_position                                -> {"x", "y"}
    read_clipboard                                    -> {"text"}
    write_clipboard     text

The clipboard is the browser's own (what its pages copy and paste; on a display, the X clipboard it owns),
read and written the way a person would: in a background tab of its own, a text area, and Chromium's paste
and copy commands.
"""
import base64
import hashlib
import itertools
import json
import math
import random
import subprocess
import threading
import time
from dataclasses import dataclass

from browserhost import keys
from browserhost.cdp import CdpClient, CdpError
from browserhost.page_input import CDP_TIMEOUT, Page, ScratchTab, UnknownPlace
from lantern_wire import keyboard
from lantern_wire.pacing import READ_ONLY

# A smooth move lasts this long per 100 px of distance when the caller gives no duration (within bounds),
# in steps of about one frame.
SMOOTH_MS_PER_100PX, SMOOTH_MIN_MS, SMOOTH_MAX_MS, FRAME_MS = 60, 80, 1500, 16
DRAG_STEPS_PER_SEGMENT, DRAG_STEP_DELAY_MS = 10, 10
# Between the clicks of one click_mouse: Chromium counts an X display's clicks made in the same millisecond as
# single clicks, not as a double click.
CLICK_GAP_SECONDS = 0.005
# The actions that name places on the screen.
PLACED = {"click_mouse", "move_mouse", "drag_mouse", "scroll", "capture_screenshot"}
# How long after a list ended a resend of it still gets its answer: the SDKs resend at once when they give up
# waiting (0.5 to 1 s later, 8 s at the most). Shorter than the app's Retry-After for a list that never reached a
# host (5 s): that list's resend must run, even when the list before it was the same.
RESEND_SECONDS = 4


class ActionFailed(Exception):
    """Action number `index` of a list could not be done; `status` says whose fault (400: the action's). Its message
    is for the session's user; `detail`, the error behind it, for the host's log alone."""

    def __init__(self, index, message, status=502, detail=None):
        super().__init__(message)
        self.index, self.status, self.detail = index, status, detail


@dataclass
class _Ran:
    """A list of actions a screen ran: its fingerprint, when it ended (time.monotonic), and its results or its
    failure."""

    fingerprint: str
    ended: float
    results: list | None = None
    failure: ActionFailed | None = None

    def answers(self, fingerprint, arrived):
        """Whether a resend of the list `fingerprint` names, which arrived at `arrived`, is this one sent again:
        the same list, which was running then or ended RESEND_SECONDS before at most."""
        return fingerprint == self.fingerprint and self.ended >= arrived - RESEND_SECONDS

    def outcome(self):
        if self.failure is not None:
            raise self.failure
        return self.results


def _fingerprint(actions):
    return hashlib.sha256(json.dumps(actions, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Screen:
    """One session's screen; `run` is safe to call from any thread (one list at a time). `display`: the X
    display of a headful session (a `Display`), else None; `size`: its viewport's (width, height)."""

    def __init__(self, devtools, display=None, size=(1920, 1080)):
        self.devtools = devtools
        self.display = display
        self.size = size
        self.mouse = (0, 0)
        self.cursor_hidden = False
        self._lock = threading.Lock()
        self._last = None  # the last list run that changed something (a _Ran)

    def run(self, actions, resend=False):
        """Each action's result (None, or a dict for screenshots and the mouse position), in order. `resend`: the
        same call sent again by a client that gave up waiting for its answer; when the last list this screen ran
        (or is running) is the same one, and ran until moments before the resend came, the resend waits for it to
        end and gets its results (or its failure) instead of doing it all again."""
        arrived, fingerprint = time.monotonic(), _fingerprint(actions)
        with self._lock:
            if all(action.get("type") in READ_ONLY for action in actions):
                return self._run(actions)  # a reading is better taken anew, and leaves the last list remembered
            last, self._last = self._last, None
            if resend and last is not None and last.answers(fingerprint, arrived):
                self._last = last
                return last.outcome()
            try:
                results = self._run(actions)
            except ActionFailed as error:
                self._last = _Ran(fingerprint, time.monotonic(), failure=error)
                raise
            self._last = _Ran(fingerprint, time.monotonic(), results=results)
            return results

    def _run(self, actions):
        try:
            page = self._active_page()
            with CdpClient(self.devtools, timeout=CDP_TIMEOUT) as cdp:
                session = cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})["sessionId"]
                try:
                    device = Page(cdp, session, page, self.size)
                    if self.display is not None:
                        device = self.display.at(device)
                    return [self._run_one(device, index, action) for index, action in enumerate(actions)]
                finally:
                    try:
                        cdp.call("Target.detachFromTarget", {"sessionId": session})
                    except CdpError:
                        pass
        except UnknownPlace as error:
            raise ActionFailed(0, str(error)) from None
        except (CdpError, OSError, ValueError) as error:  # before the first action ran
            raise ActionFailed(0, "the browser's page could not be reached", detail=_described(error)) from None

    def place(self):
        """(the active page's target id, where its viewport starts on the X display, or None when headless):
        what a recording of the screen records."""
        with self._lock:
            page = self._active_page()
            if self.display is None:
                return page, None
            with CdpClient(self.devtools, timeout=CDP_TIMEOUT) as cdp:
                session = cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})["sessionId"]
                return page, Page(cdp, session, page, self.size).offset()

    def _active_page(self):
        """The target id of the page last brought to the front (/json/list lists it first)."""
        for target in self.devtools.get_json("/json/list"):
            if target.get("type") == "page":
                return target["id"]
        raise ValueError("the browser has no page open")

    def _run_one(self, page, index, action):
        try:
            if action["type"] in PLACED:
                page.begin()
            return getattr(self, f"_{action['type']}")(page, **{k: v for k, v in action.items() if k != "type"})
        except keys.UnknownKey as error:
            raise ActionFailed(index, f"action {index} ({action['type']}): {error}", status=400) from None
        except CdpError as error:
            # The browser's refusal of a command (a protocol error, with its code) is about the action; a connection
            # lost or a timeout is the host's business.
            said = f": {error}" if error.code is not None else ""
            raise ActionFailed(index, f"action {index} ({action['type']}) failed in the browser{said}",
                               detail=_described(error)) from None
        except (OSError, subprocess.SubprocessError) as error:
            raise ActionFailed(index, f"action {index} ({action['type']}) failed on the session's screen",
                               detail=_described(error)) from None

    # -- actions

    def _click_mouse(self, page, x, y, button="left", click_type="click", num_clicks=1, hold_keys=()):
        steps = [("move", x, y, None)]
        for count in range(1, num_clicks + 1):
            steps += [("wait", CLICK_GAP_SECONDS)] if count > 1 else []
            steps += [(kind, x, y, button, count) for kind in ("down", "up") if click_type in (kind, "click")]
        with page.holding(hold_keys) as modifiers:
            page.pointer(steps, modifiers)
        self.mouse = (x, y)

    def _move_mouse(self, page, x, y, smooth=False, duration_ms=None, hold_keys=()):
        with page.holding(hold_keys) as modifiers:
            if smooth:
                self._glide(page, [self.mouse, (x, y)], duration_ms, modifiers)
            else:
                self._move(page, x, y, modifiers)

    def _drag_mouse(self, page, path, button="left", delay=0, smooth=False, duration_ms=None,
                    steps_per_segment=DRAG_STEPS_PER_SEGMENT, step_delay_ms=DRAG_STEP_DELAY_MS, hold_keys=()):
        points = [tuple(point) for point in path]
        steps = [("move", *points[0], None), ("down", *points[0], button, 1), ("wait", delay / 1000)]
        if smooth:
            steps += _glided(points, duration_ms, button)
        else:
            for start, end in itertools.pairwise(points):
                for step in range(1, steps_per_segment + 1):
                    steps += [("move", *_between(start, end, step / steps_per_segment), button),
                              ("wait", step_delay_ms / 1000)]
        steps.append(("up", *points[-1], button, 1))
        with page.holding(hold_keys) as modifiers:
            page.pointer(steps, modifiers)
        self.mouse = points[-1]

    def _scroll(self, page, x, y, delta_x=0, delta_y=0, hold_keys=()):
        with page.holding(hold_keys) as modifiers:
            self._move(page, x, y, modifiers)
            page.wheel(x, y, delta_x, delta_y, modifiers)

    def _press_key(self, page, keys, duration=0, hold_keys=()):  # noqa: A002 - the API's name
        combinations = [keys_of(name) for name in keys]
        with page.holding(hold_keys) as held:
            for combination in combinations:
                page.press(combination, held, duration / 1000)

    def _type_text(self, page, text, delay=0, smooth=False, typo_chance=0.0):
        char = keyboard.untypable(text)
        if char is not None:  # before anything is typed: never half a text
            raise keys.UnknownKey(f"character {char!r} (U+{ord(char):04X}) cannot be typed")
        if not smooth:
            page.type(text, delay)
            return
        for step, *arguments in keyboard.human_typing(text, typo_chance):
            if step == "type":
                page.type(*arguments)
            elif step == "pause":
                time.sleep(arguments[0] / 1000)
            else:
                for _ in range(arguments[0]):
                    page.press(BACKSPACE, 0, 0)

    def _set_cursor(self, page, hidden):
        self.cursor_hidden = hidden

    def _sleep(self, page, duration_ms):
        time.sleep(duration_ms / 1000)

    def _capture_screenshot(self, page, region=None):
        return {"png": base64.b64encode(page.screenshot(region, self.cursor_hidden)).decode()}

    def _get_mouse_position(self, page):
        return {"x": self.mouse[0], "y": self.mouse[1]}

    def _read_clipboard(self, page):
        with ScratchTab(page.cdp) as tab:
            tab.evaluate("document.body.innerHTML = '<textarea id=t></textarea>'; t.focus()")
            tab.command("v", "KeyV", 86, "paste")
            return {"text": tab.evaluate("t.value")}

    def _write_clipboard(self, page, text):
        with ScratchTab(page.cdp) as tab:
            tab.evaluate(f"document.body.innerHTML = '<textarea id=t></textarea>'; t.value = {json.dumps(text)}; "
                         "t.focus(); t.select()")
            tab.command("c", "KeyC", 67, "copy")

    # -- the mouse

    def _move(self, page, x, y, modifiers, button=None):
        page.mouse("mouseMoved", x, y, modifiers, button=button)
        self.mouse = (x, y)

    def _glide(self, page, points, duration_ms, modifiers):
        page.pointer(_glided(points, duration_ms), modifiers)
        self.mouse = tuple(points[-1])


keys_of = keys.combination
BACKSPACE = keys_of("BackSpace")


def _described(error):
    return f"{type(error).__name__}: {error}"


def _between(start, end, fraction):
    return round(start[0] + (end[0] - start[0]) * fraction), round(start[1] + (end[1] - start[1]) * fraction)


def _glided(points, duration_ms, button=None):
    """The pointer steps of a move through `points` along curves a hand would draw, in about `duration_ms` (from
    the distance if None): a move about every frame."""
    distance = sum(math.dist(a, b) for a, b in itertools.pairwise(points))
    if duration_ms is None:
        duration_ms = min(SMOOTH_MAX_MS, max(SMOOTH_MIN_MS, distance / 100 * SMOOTH_MS_PER_100PX))
    path = _curve(points, max(1, round(duration_ms / FRAME_MS)))
    seconds_per_step = duration_ms / 1000 / len(path)
    return [step for x, y in path for step in (("move", x, y, button), ("wait", seconds_per_step))]


def _curve(points, steps):
    """Points along a cubic Bezier curve per segment, its control points off the line by a random bend, with an
    ease-in-out pace: a hand's path, not a ruler's. The last point is the target exactly."""
    path = []
    per_segment = max(1, steps // max(1, len(points) - 1))
    for start, end in itertools.pairwise(points):
        dx, dy = end[0] - start[0], end[1] - start[1]
        bend = random.uniform(-0.25, 0.25)
        control_1 = (start[0] + dx / 3 - dy * bend, start[1] + dy / 3 + dx * bend)
        control_2 = (start[0] + 2 * dx / 3 - dy * bend, start[1] + 2 * dy / 3 + dx * bend)
        for step in range(1, per_segment + 1):
            t = step / per_segment
            t = t * t * (3 - 2 * t)  # ease in and out
            x = ((1 - t) ** 3 * start[0] + 3 * (1 - t) ** 2 * t * control_1[0] + 3 * (1 - t) * t ** 2 * control_2[0]
                 + t ** 3 * end[0])
            y = ((1 - t) ** 3 * start[1] + 3 * (1 - t) ** 2 * t * control_1[1] + 3 * (1 - t) * t ** 2 * control_2[1]
                 + t ** 3 * end[1])
            path.append((max(0, round(x)), max(0, round(y))))
        path[-1] = tuple(end)
    return path

