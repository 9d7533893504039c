"""A headful session's X display, as the computer API (browserhost/computer.py) acts on it: xdotool, xmodmap
and an ffmpeg grab, run as the host's helpers in the session's sandbox (its user, network and cgroup, not its
machine: Sandbox.helper), at the page's place on the screen; so clicks and keys are the display's own and a
screenshot shows what a person would see there.
"""
import collections
import re
import subprocess
import time

from browserhost import bounded, keys
from browserhost.unsandboxed import HostBox

# What one command on the display may take.
COMMAND_TIMEOUT = 70
# What the host reads of one command's output (a 4K screen's PNG is a few MB); past it the command fails.
OUTPUT_BYTES = 64 * 1024 * 1024
# How long Chromium may take to read a new keyboard mapping before the keycodes it names are bound anew.
REBIND_SECONDS = 0.3


class Display:
    """A headful session's X display, where its commands run: in its `box` (its sandbox, or by default this host)."""

    X_BUTTONS = {"left": 1, "middle": 2, "right": 3, "back": 8, "forward": 9}

    def __init__(self, name, box=None, viewport=(1920, 1080)):
        self.name, self.box, self.viewport = name, box or HostBox(), viewport
        self.spare = None  # the keycodes with no keysym, once read
        self.bound = collections.OrderedDict()  # character -> the spare keycode it has, least recently typed first

    def at(self, page):
        """This display with `page` (browserhost/page_input.py's `Page`) where it shows on it."""
        return _DisplayAt(self, page)

    def typable(self, text):
        """`text` in parts that xdotool can type as they are (yielded in turn, each to be typed before the next), each
        once the characters of the part that no key of the keyboard types have a key of their own (a spare keycode
        bound to their keysym).

        xdotool binds such a character to a scratch keycode for the length of its key press and unbinds it at once:
        Chromium, which reads the keyboard's mapping when told it changed, often reads it unbound again and types
        nothing. Bound beforehand, and left bound until the keycode is needed for another character, the mapping is
        read before the key presses that follow it. A part after the first waits for the last one's keys to be read
        before their keycodes are bound anew."""
        if self.spare is None:
            listed = self.run(["xmodmap", "-pke"]).decode()
            self.spare = [int(code) for code in re.findall(r"^keycode\s+(\d+) =\s*$", listed, re.MULTILINE)]
        others = {char for char in text if keys.typing(char) is None and char not in "\n\t"}
        if others and not self.spare:
            raise subprocess.SubprocessError("the display's keyboard has no spare keycode")
        parts, start, chars = [], 0, set()
        for position, char in enumerate(text):
            if char in others and char not in chars:
                if len(chars) == len(self.spare):
                    parts.append((text[start:position], chars))
                    start, chars = position, set()
                chars.add(char)
        parts.append((text[start:], chars))
        for number, (part, chars) in enumerate(parts):
            if number:
                time.sleep(REBIND_SECONDS)
            self._bind(chars)
            yield part

    def _bind(self, chars):
        unbound = [char for char in chars if char not in self.bound]
        for char in unbound:
            if len(self.bound) == len(self.spare):
                self.bound.popitem(last=False)  # the character bound longest ago gives up its keycode
            used = set(self.bound.values())
            self.bound[char] = next(code for code in self.spare if code not in used)
        if unbound:
            self.run(["xmodmap", *(arg for char in unbound
                                   for arg in ("-e", f"keycode {self.bound[char]} = {_keysym(char):#x}"))])
        for char in chars:
            self.bound.move_to_end(char)

    def run(self, argv, timeout=COMMAND_TIMEOUT, stdin=None):
        """stdout of `argv` on this display, given `stdin` (bytes) if any; SubprocessError when it fails."""
        variables = {"DISPLAY": self.name, "LC_ALL": "C.UTF-8"}  # xdotool reads its text in the locale's encoding
        pipes = {"stdin": subprocess.PIPE if stdin is not None else subprocess.DEVNULL, "stdout": subprocess.PIPE,
                 "stderr": subprocess.PIPE}
        process = self.box.helper(argv, variables, **pipes)
        out, err = bounded.communicate(process, stdin, timeout, limit=OUTPUT_BYTES)
        if process.returncode:
            raise subprocess.SubprocessError(f"{argv[0]} failed: {err.decode(errors='replace').strip()[-300:]}")
        return out


class _DisplayAt:
    """The X display with the page's viewport at its place on the screen: the same calls as page_input.py's `Page`,
    through xdotool; the browser's clipboard through the page's DevTools connection (`cdp`), as for a `Page`."""

    def __init__(self, display, page):
        self.display, self.cdp = display, page.cdp
        self.dx, self.dy = page.offset()  # the browser's tab strip and toolbar: the same at any zoom

    def begin(self):
        pass

    def xdotool(self, *commands):
        self.display.run(["xdotool", *map(str, commands)])

    def holding(self, names):
        return _XHolding(self, [key for name in names for key in keys.combination(name)])

    def mouse(self, kind, x, y, modifiers, *, button=None, click_count=0):
        if kind == "mouseMoved":
            self.xdotool("mousemove", x + self.dx, y + self.dy)
        else:
            self.xdotool("mousedown" if kind == "mousePressed" else "mouseup", self.display.X_BUTTONS[button])

    def wheel(self, x, y, delta_x, delta_y, modifiers):
        # The display's own clicks, all in one run as Kernel sends them (xdotool click --repeat N --delay 0), so that
        # they reach what is under the mouse as a person's do (an open <select>'s list, a pop-up): Chromium is
        # started with --disable-smooth-scrolling (launch.py), which scrolls each one whole however quick the run
        # (of 10,000 clicks at once, all scrolled).
        clicks = []
        for delta, (back, forward) in ((delta_y, (4, 5)), (delta_x, (6, 7))):
            if delta:
                clicks += ["click", "--repeat", abs(delta), "--delay", 0, forward if delta > 0 else back]
        if clicks:
            self.xdotool(*clicks)

    def pointer(self, steps, modifiers):
        """The mouse's steps (page_input.Page.pointer) in one xdotool run, given as a script on its stdin (a
        drag's 10,000 moves would not fit in its arguments): a process per step would take longer than the steps."""
        lines, seconds = [], 0.0
        for kind, *arguments in steps:
            if kind == "wait":
                lines.append(f"sleep {arguments[0]:.3f}")
                seconds += arguments[0]
            elif kind == "move":
                lines.append(f"mousemove {arguments[0] + self.dx} {arguments[1] + self.dy}")
            else:
                lines.append(f"mouse{kind} {self.display.X_BUTTONS[arguments[2]]}")
        script = "".join(f"{line}\n" for line in lines)  # xdotool reads past a last line without its new line
        self.display.run(["xdotool", "-"], timeout=COMMAND_TIMEOUT + seconds, stdin=script.encode())

    def press(self, combination, held, seconds):
        names = [key.keysym for key in combination]
        self.xdotool("keydown", *names, "sleep", f"{seconds:.3f}", "keyup", *reversed(names))

    def type(self, text, delay):  # noqa: A003 - the action's name
        for part in self.display.typable(text):
            self.xdotool("type", "--delay", delay, "--", part)

    def screenshot(self, region, cursor_hidden):
        # The whole viewport is grabbed, then cut to the region: x11grab gives black frames for small areas (under
        # about 80x80) of a Chromium window on Xvfb.
        width, height = self.display.viewport
        crop = ["-vf", "crop={width}:{height}:{x}:{y}".format(**region)] if region else []
        return self.display.run(["ffmpeg", "-loglevel", "error", "-f", "x11grab", "-draw_mouse",
                                 "0" if cursor_hidden else "1", "-video_size", f"{width}x{height}",
                                 "-i", f"{self.display.name}+{self.dx},{self.dy}", "-frames:v", "1", *crop,
                                 "-f", "image2pipe", "-vcodec", "png", "-"])


class _XHolding:
    def __init__(self, device, held):
        self.device, self.held = device, held

    def __enter__(self):
        if self.held:
            self.device.xdotool("keydown", *(key.keysym for key in self.held))
        return keys.modifiers_of(self.held)

    def __exit__(self, *exc):
        if self.held:
            self.device.xdotool("keyup", *(key.keysym for key in reversed(self.held)))
        return False


def _keysym(char):
    """The X keysym of a character: Latin-1's are their code point, every other one's is 0x1000000 plus it."""
    return ord(char) if ord(char) < 0x100 else 0x1000000 + ord(char)
