"""The computer API of a browser session (/browsers/{id}/computer/...): its screen, mouse and keyboard,
recordings of its screen (/browsers/{id}/replays), as the official SDK's `browsers.computer` and
`browsers.replays` call them, and its live view (/browsers/{id}/live). The rules are in
app/browsers/computer.py, replays.py and live_view.py."""
import time

from flask import Response, g, request

from app.browsers import computer, control_events, lifecycle, relay, replays
from app.browsers import computer_schemas as schemas
from app.browsers import live_view as live_view_page
from app.browsers.models import BrowserSession
from app.browsers.views import cdp_session, find
from app.core import blobs
from app.core.api import Blueprint
from app.core.errors import ApiError
from app.orgs.auth import takes_tokens

blp = Blueprint("computer", __name__, url_prefix="/browsers",
                description="A browser session's screen, mouse and keyboard (computer use), and recordings of it.")
PNG = {"type": "string", "format": "binary"}
# The calls that drive the browser, and their operation_id in the `api_call` telemetry event, named as Kernel's
# in-VM API names its handlers.
OPERATIONS = {"capture_screenshot": "TakeScreenshot", "click_mouse": "ClickMouse", "move_mouse": "MoveMouse",
              "drag_mouse": "DragMouse", "scroll": "Scroll", "press_key": "PressKey", "type_text": "TypeText",
              "get_mouse_position": "GetMousePosition", "set_cursor_visibility": "SetCursor", "batch": "Batch",
              "read_clipboard": "ReadClipboard", "write_clipboard": "WriteClipboard",
              "start_replay": "StartRecording", "stop_replay": "StopRecording"}


def run(session_ref, actions):
    """computer.run on the session `session_ref` names: the actions are its activity for as long as they run."""
    return computer.run(find(session_ref), actions, resend=resent(), activity=lifecycle.touch)


def resent():
    """Whether the SDK sends this call again: it counts its tries in x-stainless-retry-count, and resends a call
    whose answer it gave up waiting for (after 60 s by default), which the host may still be running."""
    count = request.headers.get("x-stainless-retry-count", "")
    return count.isdigit() and int(count) > 0


@blp.route("/<session_ref>/computer/screenshot", methods=["POST"])
@blp.arguments(schemas.ScreenshotSchema, required=False)
@blp.response(200, PNG, content_type="image/png")
def capture_screenshot(args, session_ref):
    """A PNG of the session's screen (its viewport), or of a region of it"""
    png = computer.screenshot(find(session_ref), args.get("region"), activity=lifecycle.touch)
    return Response(png, mimetype="image/png")


@blp.after_request
def record_api_call(response):
    """Each call that drives a session's browser becomes its `api_call` event, and a screenshot its
    `monitor_screenshot` (app/browsers/control_events.py), when the session's telemetry keeps them."""
    operation = OPERATIONS.get(request.endpoint.rpartition(".")[2]) if request.endpoint else None
    if operation is None or "project" not in g or response.status_code == 404:  # no session of the caller's
        return response
    try:  # a call refused before its session was looked up (400, 415) may name none
        session = BrowserSession.lookup(g.project, request.view_args["session_ref"], include_deleted=True)
    except ApiError:
        return response
    started = g.get("request_started", time.perf_counter())  # set by app/core/requestlog.py
    events = [control_events.api_call(operation, response.status_code, (time.perf_counter() - started) * 1000,
                                      g.get("request_id", ""))]
    if operation == "TakeScreenshot" and response.status_code == 200:
        events.append(control_events.monitor_screenshot(response.get_data()))
    control_events.record(session, events)
    return response


def _action_route(path, action_type, schema, summary):
    """POST /browsers/{id}/computer/<path>: run one action of `action_type` with the body's fields; 204."""
    def view(args, session_ref):
        run(session_ref, [{"type": action_type, **args}])

    view.__name__, view.__doc__ = action_type, summary
    blp.route(f"/<session_ref>/computer/{path}", methods=["POST"])(blp.arguments(schema)(blp.response(204)(view)))


for _path, _type, _schema, _summary in (
        ("click_mouse", "click_mouse", schemas.ClickMouseSchema,
         "Click (or press, or release) a mouse button at a point, modifier keys held if asked"),
        ("move_mouse", "move_mouse", schemas.MoveMouseSchema,
         "Move the mouse to a point, at once or along a human-like curve (smooth)"),
        ("drag_mouse", "drag_mouse", schemas.DragMouseSchema, "Drag with a button held through a path of points"),
        ("scroll", "scroll", schemas.ScrollSchema,
         "Turn the mouse wheel at a point, by wheel clicks (120 screen pixels each)"),
        ("press_key", "press_key", schemas.PressKeySchema,
         "Press keys or key combinations (xdotool names: Return, ctrl+a, Ctrl+Shift+Tab)"),
        ("type", "type_text", schemas.TypeTextSchema,
         "Type text, one key at a time; smooth: at a person's pace, with typos (typo_chance) backspaced")):
    _action_route(_path, _type, _schema, _summary)


@blp.route("/<session_ref>/computer/get_mouse_position", methods=["POST"])
@blp.response(200, schemas.MousePositionSchema)
def get_mouse_position(session_ref):
    """Where the mouse is"""
    [position] = run(session_ref, [{"type": "get_mouse_position"}])
    return position


@blp.route("/<session_ref>/computer/cursor", methods=["POST"])
@blp.arguments(schemas.CursorSchema)
@blp.response(200, schemas.OkSchema)
def set_cursor_visibility(args, session_ref):
    """Show or hide the mouse cursor"""
    run(session_ref, [{"type": "set_cursor", **args}])
    return {"ok": True}


@blp.route("/<session_ref>/computer/batch", methods=["POST"])
@blp.arguments(schemas.BatchSchema)
@blp.response(204)
def batch(args, session_ref):
    """Run actions in order, stopping at the first that fails (its index is in the error)"""
    run(session_ref, args["actions"])


@blp.route("/<session_ref>/computer/clipboard/read", methods=["POST"])
@blp.response(200, schemas.ClipboardSchema)
def read_clipboard(session_ref):
    """The text on the browser's clipboard (what its pages would paste)"""
    [clipboard] = run(session_ref, [{"type": "read_clipboard"}])
    return clipboard


@blp.route("/<session_ref>/computer/clipboard/write", methods=["POST"])
@blp.arguments(schemas.ClipboardSchema)
@blp.response(204)
def write_clipboard(args, session_ref):
    """Put text on the browser's clipboard (what its pages will paste)"""
    run(session_ref, [{"type": "write_clipboard", **args}])


# -- replays: recordings of the screen (app/browsers/replays.py)

MP4 = {"type": "string", "format": "binary"}


@blp.route("/<session_ref>/replays", methods=["POST"])
@blp.arguments(schemas.StartReplaySchema, required=False)
@blp.response(201, schemas.ReplaySchema)
@blp.alt_response(403, description="the project's recordings budget (REPLAY_PROJECT_MAX_BYTES) is used up: "
                                   "replay_budget_exceeded")
def start_replay(args, session_ref):
    """Start recording the session's screen (an MP4, H.264); one recording at a time"""
    framerate, max_seconds = replays.bounded(args)
    return replays.record(replays.start(find(session_ref), framerate, max_seconds))


@blp.route("/<session_ref>/replays", methods=["GET"])
@blp.response(200, schemas.ReplaySchema(many=True))
def list_replays(session_ref):
    """The session's recordings, oldest first (an ended session's too)"""
    return [replays.record(replay) for replay in replays.listing(find(session_ref, include_deleted=True))]


@blp.route("/<session_ref>/replays/<replay_id>/stop", methods=["POST"])
@blp.response(204)
def stop_replay(session_ref, replay_id):
    """Stop a recording; answered once its browser host has saved it (download it then)"""
    replays.stop(find(session_ref, include_deleted=True), replay_id)


@blp.route("/<session_ref>/replays/<replay_id>", methods=["GET"])
@blp.response(200, MP4, content_type="video/mp4")
def download_replay(session_ref, replay_id):
    """The recording's video (MP4, H.264); 409 while it is recording or being saved"""
    path = replays.video_path(find(session_ref, include_deleted=True), replay_id)
    return blobs.send_file(path, mimetype="video/mp4", download_name=f"{replay_id}.mp4", conditional=True)


# -- the live view (app/browsers/live_view.py)

@blp.route("/<session_ref>/live")
@takes_tokens
@blp.doc(security=[{"bearerAuth": []}, {}])
@blp.response(200, {"type": "string"}, content_type="text/html")
def live_view(session_ref):
    """The live view: a page showing the session's screen, which takes clicks and keys (?token= as for /cdp)"""
    cdp_session(session_ref)
    return Response(live_view_page.PAGE, mimetype="text/html", headers=live_view_page.HEADERS)


@blp.route("/<session_ref>/cdp/live_view", websocket=True)
@takes_tokens
@blp.doc(security=[{"bearerAuth": []}, {}])
@blp.response(101, description="switching to the WebSocket, relayed to the browser")
def live_view_cdp(session_ref):
    """The live view page's connection to the browser (CDP, as /cdp); its telemetry says a viewer came and went"""
    session = cdp_session(session_ref)
    on_open, on_close = live_view_page.watchers(session)
    return relay.relay(session, on_open=on_open, on_close=on_close)
