"""The computer API's rules: what a session's screen is, which coordinates are on it, and running actions on
its host (browserhost/computer.py), which runs one list of actions at a time per session.

The screen is the session's viewport (its record's `viewport`, 1920x1080 when none was given): every
coordinate is checked against it before anything reaches the browser, and a 400 names the bound.
"""
import base64
import logging
import threading
from contextlib import contextmanager

from flask import current_app

from app.browsers.computer_schemas import MAX_REQUEST_MS
from app.browsers.drivers import HostDriver
from app.browsers.host_client import HostClient, HostError
from app.browsers.host_errors import api_error
from app.browsers.models import DEFAULT_VIEWPORT
from app.core.db import db
from app.core.errors import ApiError, bad_request
from lantern_wire.control import ComputerRequest
from lantern_wire.keyboard import human_typing_bound_ms
from lantern_wire.pacing import CLICK_MS, COMMAND_MS, MOVE_MS, PRESS_MS, WHEEL_CLICK_MS

logger = logging.getLogger(__name__)
# What a list of actions may take beyond what it plans (a screenshot, finding the page, a busy machine).
ACTION_SECONDS = 30
# A request running actions is the session's activity every this share of its timeout_seconds.
ACTIVITY_SHARE = 0.5
# The field a 400 names when one action would take longer than a request may.
LONGEST_BY = {"type_text": "text", "press_key": "duration", "drag_mouse": "step_delay_ms"}


def screen_size(session):
    viewport = session.options.get("viewport") or DEFAULT_VIEWPORT
    return viewport["width"], viewport["height"]


def run(session, actions, *, resend=False, activity=None):
    """Each action's result, in order, once all ran; 400 naming an action off the screen, or actions that would take
    longer than a request may (none runs then).

    A host may take many minutes (a person's typing): meanwhile the request holds no database connection (it takes
    one again for what follows), and `activity(session)` (lifecycle.touch) records the session's activity every
    ACTIVITY_SHARE of its timeout and once the actions end, so that a session never idles out under its own actions.
    `resend`: the SDK sends the call again, having given up waiting for an earlier send; the host then answers what
    that send did if it is the list it ran last, instead of doing it twice (browserhost/computer.py)."""
    require_host_driver(session, "computer API")
    seconds = planned_seconds(session, actions)
    host = session.host
    db.close()  # given back to the pool; the request's teardown copes with a closed one
    try:
        with active_while(session, activity):
            answer = HostClient(host).computer(session.id, ComputerRequest(actions=actions, resend=resend),
                                               timeout=seconds + ACTION_SECONDS)
    except HostError as error:
        raise api_error(error) from None
    finally:
        db.connect(reuse_if_open=True)
        if activity is not None:
            activity(session)
    return answer.results


def planned_seconds(session, actions):
    """The longest `actions` may take on the session's host (planned_ms); 400 naming an action off the screen, or
    actions that would take longer than MAX_REQUEST_MS."""
    width, height = screen_size(session)
    for index, action in enumerate(actions):
        _check_on_screen(action, width, height, f"actions[{index}]." if len(actions) > 1 else "")
    planned = sum(planned_ms(action, headful=not session.headless) for action in actions)
    if planned > MAX_REQUEST_MS:
        field = LONGEST_BY.get(actions[0]["type"], "actions") if len(actions) == 1 else "actions"
        raise bad_request(f"{'This action' if len(actions) == 1 else 'These actions'} may take up to "
                          f"{planned / 60_000:.1f} minutes on the browser, its waits and its steps at their slowest; "
                          f"a request may take at most {MAX_REQUEST_MS // 60_000}: send them in parts.", field=field)
    return planned / 1000


@contextmanager
def active_while(session, activity):
    """A block during which `activity(session)` runs every ACTIVITY_SHARE of the session's timeout (record_activity)."""
    if activity is None:
        yield
        return
    app, stop = current_app._get_current_object(), threading.Event()

    def keep_active():
        while not stop.wait(session.timeout_seconds * ACTIVITY_SHARE):
            record_activity(app, session, activity)

    ticker = threading.Thread(target=keep_active, name="computer-activity", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()


def record_activity(app, session, activity):
    """`activity(session)` in an app context and a database connection of its own (it may run outside a request, or
    beside one holding no connection); a failure is logged, never raised: what it kept active goes on."""
    try:
        with app.app_context(), db.connection_context():
            activity(session)
    except Exception:
        logger.exception("session %s: recording its activity failed", session.id)


def screenshot(session, region, **options):
    """The screen (or `region` of it) as PNG bytes; `options` as run's."""
    [result] = run(session, [{"type": "capture_screenshot", "region": region}], **options)
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


def planned_ms(action, headful):
    """The longest an action may take on a host: the waits it asks for (sleeps, holds, delays, smooth moves, a
    person's typing) and what its steps take there (lantern_wire/pacing.py), on a display when `headful`."""
    kind, command_ms = action["type"], COMMAND_MS if headful else 0
    if kind == "type_text":
        if action.get("smooth"):
            return human_typing_bound_ms(action["text"], action["typo_chance"], command_ms)
        return len(action["text"]) * (action.get("delay", 0) + PRESS_MS)
    if kind == "press_key":  # a command on a display per key
        return len(action["keys"]) * (action.get("duration", 0) + PRESS_MS + command_ms)
    if kind == "click_mouse":
        return action["num_clicks"] * CLICK_MS
    if kind == "scroll":
        return (abs(action["delta_x"]) + abs(action["delta_y"])) * WHEEL_CLICK_MS
    if kind == "move_mouse":  # a smooth move keeps to its duration, a frame a step, up to a frame late each
        return 2 * action.get("duration_ms", 0) if action.get("smooth") else 0
    if kind == "drag_mouse":
        segments = len(action["path"]) - 1
        if action.get("smooth"):
            moves = 2 * action.get("duration_ms", 0) + segments * MOVE_MS
        else:
            moves = segments * action.get("steps_per_segment", 10) * (action.get("step_delay_ms", 10) + MOVE_MS)
        return action.get("delay", 0) + moves
    return action.get("duration_ms", 0)  # a sleep
