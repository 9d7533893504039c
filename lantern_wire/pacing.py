"""What the computer API's actions cost on a host beyond the waits they ask for, which the app waits for and
bounds a request by (app/browsers/computer.py): one statement for the app and its hosts, as lantern_wire/keyboard.py
is for a person's typing. Figures measured on Chromium 156, a 2-core machine, Xvfb."""

# A command run on a headful session's display: a process (xdotool, ffmpeg) started in the session's sandbox.
COMMAND_MS = 150
# One move of the mouse: DevTools answers a move at the page's next frame (17 ms at 60 Hz, headless and headful
# alike; 3,000 moves took 51 s); a display's moves, chained in one xdotool run, far less (100,000 took 10 s).
MOVE_MS = 25
# A mouse button or a key pressed and released (about 1 ms by DevTools); a click, with the few ms a host leaves
# between the clicks of a double click.
PRESS_MS = 2
CLICK_MS = 10
# One click of a wheel: a display's clicks go in one xdotool run, all at once (10,000 took 3.7 s); a headless
# session's scroll is one DevTools event.
WHEEL_CLICK_MS = 1
# Actions that change nothing on the screen: a list of only these may be run again whatever became of it (the app
# lets the SDKs send it again; a host keeps no results of it for a resend).
READ_ONLY = frozenset({"capture_screenshot", "get_mouse_position", "read_clipboard", "sleep"})
