"""The computer API's rules: what a session's screen is, which coordinates are on it, and running actions on
its host (browserhost/computer.py), which runs one list of actions at a time per session.

The screen is the session's viewport (its record's `viewport`, 1920x1080 when none was given): every
coordinate is checked against it before anything reaches the browser, and a 400 names the bound.
"""
import base64

from flask import current_app

from app.browsers import hosts
from app.browsers.drivers import HostDriver
from app.browsers.models import DEFAULT_VIEWPORT
from app.core.errors import NO_RETRY, ApiError, bad_request
from lantern_wire.keyboard import human_typing_bound_ms

# What a list of actions may take beyond the waits it asks for (smooth moves, typing, a screenshot).
ACTION_SECONDS = 30
# What a headful session's wheel clicks with modifier keys held may take (browserhost/display.py): the first 100
# about 11 ms apart, the rest at once (10,000 of them took 5.3 s).
PACED_WHEEL_CLICKS, PACED_WHEEL_MS, WHEEL_CLICK_MS = 100, 12, 1
# Actions that change nothing on the screen: a list of only these may be sent again whatever became of it.
READ_ONLY = {"capture_screenshot", "get_mouse_position", "read_clipboard", "sleep"}


def screen_size(session):
    viewport = session.options.get("viewport") or DEFAULT_VIEWPORT
    return viewport["width"], viewport["height"]


def run(session, actions):
    """Each action's result, in order, once all ran; 400 naming an action off the screen (none runs then)."""
    require_host_driver(session, "computer API")
    width, height = screen_size(session)
    for index, action in enumerate(actions):
        _check_on_screen(action, width, height, f"actions[{index}]." if len(actions) > 1 else "")
    waits = sum(_milliseconds(action) for action in actions) / 1000
    try:
        answer = hosts.call(session.host, "POST", f"/sessions/{session.id}/computer", {"actions": actions},
                            timeout=waits + ACTION_SECONDS)
    except hosts.HostError as error:
        if error.status == 400:
            raise bad_request(error.public_message) from None
        if error.status in (404, 501):
            raise ApiError(error.status, error.code or "not_found", error.public_message) from None
        raise _failed(actions, error) from None
    if not isinstance(answer.get("results"), list):  # they ran
        raise ApiError(502, "computer_action_failed", "The browser host answered without the actions' results.",
                       headers=NO_RETRY)
    return answer["results"]


def _failed(actions, error):
    """The 502 for actions the host did not do; Retry-After only when sending them again cannot do one twice (they
    never reached the host, or only read). Else the SDKs must not resend it: a host that failed part-way, or did
    not answer, may have clicked or typed already."""
    message = f"The browser could not do it: {error.public_message.rstrip('.')}"
    if not error.reached or all(action["type"] in READ_ONLY for action in actions):
        return ApiError(502, "computer_action_failed", message,
                        headers={"Retry-After": str(current_app.config["BROWSER_CAPACITY_RETRY_AFTER_SECONDS"])})
    return ApiError(502, "computer_action_failed", f"{message}. Some actions may have run: look at the screen "
                    "before sending them again.", headers=NO_RETRY)


def screenshot(session, region):
    """The screen (or `region` of it) as PNG bytes."""
    [result] = run(session, [{"type": "capture_screenshot", "region": region}])
    return base64.b64decode(result["png"])


def require_host_driver(session, what):
    """501 for a session another driver runs: its screen is not this server's to reach."""
    if session.driver != HostDriver.name:
        raise ApiError(501, f"{what.split()[0]}_not_served", f"Browser session {session.id!r} is not run by a "
                       f"browser host; its {what}, if any, is its external driver's.")


def _check_on_screen(action, width, height, prefix):
    points = [tuple(point) for point in action.get("path", ())]
    if "x" in action:
        points.append((action["x"], action["y"]))
    region = action.get("region")
    if region:
        points += [(region["x"], region["y"]), (region["x"] + region["width"] - 1, region["y"] + region["height"] - 1)]
    for x, y in points:
        if x >= width or y >= height:
            field = "x" if x >= width else "y"
            bound = width if field == "x" else height
            raise bad_request(f"{prefix}{field} must be below {bound}: the session's screen is {width}x{height} "
                              f"(its viewport).", field=f"{prefix}{field}")


def _milliseconds(action):
    """How long an action may wait on purpose (sleeps, holds, delays, slow moves, a person's typing, a display's
    paced wheel)."""
    if action["type"] == "type_text" and action.get("smooth"):
        return human_typing_bound_ms(action["text"], action["typo_chance"])
    if action["type"] == "scroll" and action.get("hold_keys"):
        return sum(min(abs(delta), PACED_WHEEL_CLICKS) * PACED_WHEEL_MS + abs(delta) * WHEEL_CLICK_MS
                   for delta in (action["delta_x"], action["delta_y"]))
    text_delay = action.get("delay", 0) * len(action.get("text", ""))
    holds = (action.get("duration") or 0) * len(action.get("keys", ()))
    path_steps = max(0, len(action.get("path", ())) - 1) * (action.get("steps_per_segment") or 10) * (
        action.get("step_delay_ms") or 10)
    return (action.get("duration_ms") or 0) + (action.get("delay") or 0) + text_delay + holds + path_steps
