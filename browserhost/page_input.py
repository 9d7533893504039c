"""A headless session's page as the computer API (browserhost/computer.py) acts on it: DevTools' input events,
screenshots and a scratch tab for the clipboard, in the page's CSS pixels from the screen pixels the API speaks
(browserhost/display.py is the same for a headful session's X display).
"""
import base64
import time

from browserhost import keys
from browserhost.cdp import CdpError

# One wheel unit of the API (xdotool's button 4/5 click) in screen pixels: what one click of an X display's wheel
# scrolls in Chromium at any zoom (3 clicks: 360 CSS px at 100%, 450 at 80%, 288 at 125%), so both kinds of
# session scroll alike.
WHEEL_PIXELS = 120
CDP_TIMEOUT = 10.0
# The farthest a page's viewport may start from the screen's corner (the tab strip, address bar and frame).
MAX_OFFSET = 400
BUTTONS = {"left": ("left", 1), "right": ("right", 2), "middle": ("middle", 4), "back": ("back", 8),
           "forward": ("forward", 16)}

keys_of = keys.combination


class UnknownPlace(CdpError):
    """Where the page is on the screen cannot be told from what it says (its own words, which it may show)."""


class Page:
    """One attached page: DevTools calls on its session, and its keyboard, mouse and screen."""

    def __init__(self, cdp, session, target, expected=(1920, 1080)):
        """`target`: the page's target id; `expected`: its viewport's size in screen pixels when nothing changed
        it (the session's viewport)."""
        self.cdp, self.session, self.target, self.expected = cdp, session, target, expected
        self.scale, self.scroll = 1, (0, 0)

    def begin(self):
        """Before each action: the zoom and scroll it is done at. Actions speak screen pixels, as screenshots
        show them; DevTools' input speaks the page's CSS pixels, and its clips the document's pixels, zoomed."""
        self.scale, self.scroll = self.zoom_and_scroll()

    def offset(self):
        """Where the page's viewport starts on the X screen (below the tab strip and the address bar), in screen
        pixels at any zoom: the window's bounds (the browser's, which no page script can redefine) less the
        viewport's size in screen pixels (its CSS size times the page's zoom)."""
        window = self.cdp.call("Browser.getWindowForTarget", {"targetId": self.target})["bounds"]
        zoom, _ = self.zoom_and_scroll()
        inner = self.call("Runtime.evaluate", {"expression": "[innerWidth, innerHeight]",
                                               "returnByValue": True})["result"].get("value")
        # The page's own script can redefine innerWidth and innerHeight: anything but two whole numbers that leave
        # the viewport a small offset from the window's corner is refused.
        if isinstance(inner, list) and len(inner) == 2 and all(type(v) is int and v > 0 for v in inner):
            value = [window[start] + window[extent] - self._on_screen(css, zoom, expected)
                     for start, extent, css, expected in (("left", "width", inner[0], self.expected[0]),
                                                          ("top", "height", inner[1], self.expected[1]))]
            if all(0 <= v <= MAX_OFFSET for v in value):
                return tuple(value)
        raise UnknownPlace(f"the page's place on the screen is not known (the page gave {str(inner)[:80]})")

    @staticmethod
    def _on_screen(css, zoom, expected):
        """A viewport's extent in screen pixels from its CSS extent (rounded by Chromium: off by up to half the
        zoom), exactly the session's own extent when that is what the page's rounded one stands for."""
        return expected if round(expected / zoom) == css else round(css * zoom)

    def zoom_and_scroll(self):
        """(the page's zoom: screen pixels per CSS pixel, as ctrl+plus, ctrl+minus or ctrl+wheel left it; where the
        viewport is scrolled to in the document, in CSS pixels), from the browser, which no page script can change."""
        css = self.call("Page.getLayoutMetrics", {})["cssVisualViewport"]
        zoom = css.get("zoom", 1)
        if not (isinstance(zoom, (int, float)) and 0.1 <= zoom <= 10):
            raise CdpError(f"the page's zoom is not known ({str(zoom)[:40]})")
        return zoom, (css.get("pageX", 0), css.get("pageY", 0))

    def call(self, method, params):
        return self.cdp.call(method, params, session_id=self.session, timeout=CDP_TIMEOUT)

    def send(self, method, params):
        # Input events are answered once the page handled them: waiting keeps their order and timing.
        self.call(method, params)

    def mouse(self, kind, x, y, modifiers, *, button=None, click_count=0):
        name, _ = BUTTONS.get(button or "", ("none", 0))
        pressed = BUTTONS[button][1] if button and kind != "mouseReleased" else 0
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x / self.scale, "y": y / self.scale,
                                               "modifiers": modifiers, "button": name, "buttons": pressed,
                                               "clickCount": click_count})

    def key(self, kind, key, modifiers):
        shifted = bool(modifiers & keys.SHIFT and key.shifted)
        event = {"type": kind, "key": key.shifted if shifted else key.key, "code": key.code,
                 "windowsVirtualKeyCode": key.key_code, "nativeVirtualKeyCode": key.key_code, "modifiers": modifiers}
        typing = modifiers & ~keys.SHIFT == 0  # Ctrl, Alt or Meta held: a shortcut, which types nothing
        text = (key.shifted if shifted else key.text) if typing else ""
        if kind == "keyDown" and text:
            event["text"] = event["unmodifiedText"] = text
        elif kind == "keyDown":
            event["type"] = "rawKeyDown"
        self.send("Input.dispatchKeyEvent", event)

    def press(self, combination, held, seconds):
        """Keys down in order (each modifier counting for the next), held `seconds`, up in reverse."""
        modifiers = held
        for key in combination:
            modifiers |= key.modifier
            self.key("keyDown", key, modifiers)
        time.sleep(seconds)
        for key in reversed(combination):
            modifiers &= ~key.modifier
            self.key("keyUp", key, modifiers)

    def holding(self, names):
        return Holding(self, [key for name in names for key in keys_of(name)])

    def wheel(self, x, y, delta_x, delta_y, modifiers):
        # The deltas are screen pixels already: Chromium scrolls them as an X display's wheel clicks.
        self.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x / self.scale, "y": y / self.scale,
                                               "modifiers": modifiers,
                                               "deltaX": delta_x * WHEEL_PIXELS, "deltaY": delta_y * WHEEL_PIXELS})

    def pointer(self, steps, modifiers):
        """The mouse's steps in order: ("move", x, y, button held or None), ("down" or "up", x, y, button, click
        count) and ("wait", seconds). The waits keep to a schedule from the first step: DevTools answers a move at
        the page's next frame, and that time counts toward the wait after it, so a smooth move lasts its duration."""
        due = time.monotonic()
        for kind, *arguments in steps:
            if kind == "wait":
                due += arguments[0]
                time.sleep(max(0.0, due - time.monotonic()))
            elif kind == "move":
                x, y, button = arguments
                self.mouse("mouseMoved", x, y, modifiers, button=button)
            else:
                x, y, button, count = arguments
                self.mouse("mousePressed" if kind == "down" else "mouseReleased", x, y, modifiers, button=button,
                           click_count=count)

    def type(self, text, delay):  # noqa: A003 - the action's name
        for position, char in enumerate(text):
            if position and delay:
                time.sleep(delay / 1000)
            typed = keys_of("Return") if char == "\n" else keys.typing(char)
            if typed is None:  # no key of a US keyboard types it: it is inserted as the text an IME would give
                self.send("Input.insertText", {"text": char})
            else:
                self.press(typed, 0, 0)

    def screenshot(self, region, cursor_hidden):
        """PNG bytes of the viewport or a region of it (a headless screen draws no cursor)."""
        params = {"format": "png"}
        if region:
            left, top = (region[axis] + scrolled * self.scale for axis, scrolled in zip("xy", self.scroll, strict=True))
            params["clip"] = {"x": left, "y": top, "width": region["width"], "height": region["height"], "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])


class ScratchTab:
    """A background tab of about:blank for the length of a block, focused as far as its page can tell."""

    def __init__(self, cdp):
        self.cdp = cdp

    def __enter__(self):
        self.target = self.cdp.call("Target.createTarget", {"url": "about:blank", "background": True})["targetId"]
        self.session = self.cdp.call("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
        self.cdp.call("Emulation.setFocusEmulationEnabled", {"enabled": True}, session_id=self.session)
        return self

    def __exit__(self, *exc):
        try:
            self.cdp.call("Target.closeTarget", {"targetId": self.target})
        except CdpError:
            pass
        return False

    def evaluate(self, expression):
        return self.cdp.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                             session_id=self.session)["result"].get("value")

    def command(self, key, code, key_code, command):
        """Ctrl+`key` carrying Chromium's editing `command` (copy, paste), which a synthetic key alone does not do."""
        for kind in ("rawKeyDown", "keyUp"):
            self.cdp.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code, "modifiers": keys.CTRL,
                                                     "windowsVirtualKeyCode": key_code,
                                                     "commands": [command] if kind == "rawKeyDown" else []},
                          session_id=self.session)


class Holding:
    """Modifier keys down for the length of a block; the block gets their bit mask."""

    def __init__(self, page, held):
        self.page, self.held = page, held

    def __enter__(self):
        modifiers = 0
        for key in self.held:
            modifiers |= key.modifier
            self.page.key("keyDown", key, modifiers)
        return modifiers

    def __exit__(self, *exc):
        modifiers = keys.modifiers_of(self.held)
        for key in reversed(self.held):
            modifiers &= ~key.modifier
            self.page.key("keyUp", key, modifiers)
        return False
