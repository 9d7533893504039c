"""The computer API of a browser session (/browsers/{id}/computer/...): its screen, mouse and keyboard, as the
official SDK's `browsers.computer` calls them. The rules are in app/browsers/computer.py."""
from flask import Response

from app.browsers import computer
from app.browsers import computer_schemas as schemas
from app.browsers.views import find
from app.core.api import Blueprint
from app.core.errors import ApiError

blp = Blueprint("computer", __name__, url_prefix="/browsers",
                description="A browser session's screen, mouse and keyboard (computer use).")
PNG = {"type": "string", "format": "binary"}


def _act(session_ref, action_type, args):
    computer.run(find(session_ref), [{"type": action_type, **args}])


@blp.route("/<session_ref>/computer/screenshot", methods=["POST"])
@blp.arguments(schemas.ScreenshotSchema, required=False)
@blp.response(200, PNG, content_type="image/png")
def capture_screenshot(args, session_ref):
    """A PNG of the session's screen (its viewport), or of a region of it"""
    return Response(computer.screenshot(find(session_ref), args.get("region")), mimetype="image/png")


@blp.route("/<session_ref>/computer/click_mouse", methods=["POST"])
@blp.arguments(schemas.ClickMouseSchema)
@blp.response(204)
def click_mouse(args, session_ref):
    """Click (or press, or release) a mouse button at a point, modifier keys held if asked"""
    _act(session_ref, "click_mouse", args)


@blp.route("/<session_ref>/computer/move_mouse", methods=["POST"])
@blp.arguments(schemas.MoveMouseSchema)
@blp.response(204)
def move_mouse(args, session_ref):
    """Move the mouse to a point, at once or along a human-like curve (smooth)"""
    _act(session_ref, "move_mouse", args)


@blp.route("/<session_ref>/computer/drag_mouse", methods=["POST"])
@blp.arguments(schemas.DragMouseSchema)
@blp.response(204)
def drag_mouse(args, session_ref):
    """Drag with a button held through a path of points"""
    _act(session_ref, "drag_mouse", args)


@blp.route("/<session_ref>/computer/scroll", methods=["POST"])
@blp.arguments(schemas.ScrollSchema)
@blp.response(204)
def scroll(args, session_ref):
    """Turn the mouse wheel at a point"""
    _act(session_ref, "scroll", args)


@blp.route("/<session_ref>/computer/press_key", methods=["POST"])
@blp.arguments(schemas.PressKeySchema)
@blp.response(204)
def press_key(args, session_ref):
    """Press keys or key combinations (xdotool names: Return, ctrl+a, Ctrl+Shift+Tab)"""
    _act(session_ref, "press_key", args)


@blp.route("/<session_ref>/computer/type", methods=["POST"])
@blp.arguments(schemas.TypeTextSchema)
@blp.response(204)
def type_text(args, session_ref):
    """Type text, one key at a time"""
    _act(session_ref, "type_text", args)


@blp.route("/<session_ref>/computer/get_mouse_position", methods=["POST"])
@blp.response(200, schemas.MousePositionSchema)
def get_mouse_position(session_ref):
    """Where the mouse is"""
    [position] = computer.run(find(session_ref), [{"type": "get_mouse_position"}])
    return position


@blp.route("/<session_ref>/computer/cursor", methods=["POST"])
@blp.arguments(schemas.CursorSchema)
@blp.response(200, schemas.OkSchema)
def set_cursor_visibility(args, session_ref):
    """Show or hide the mouse cursor"""
    _act(session_ref, "set_cursor", args)
    return {"ok": True}


@blp.route("/<session_ref>/computer/batch", methods=["POST"])
@blp.arguments(schemas.BatchSchema)
@blp.response(204)
def batch(args, session_ref):
    """Run actions in order, stopping at the first that fails (its index is in the error)"""
    computer.run(find(session_ref), args["actions"])


@blp.route("/<session_ref>/computer/clipboard/read", methods=["POST"])
@blp.response(200, schemas.ClipboardSchema)
@blp.alt_response(501, description="not served yet")
def read_clipboard(session_ref):
    """The clipboard's text (not served yet: 501)"""
    find(session_ref)
    raise _no_clipboard()


@blp.route("/<session_ref>/computer/clipboard/write", methods=["POST"])
@blp.arguments(schemas.ClipboardSchema)
@blp.response(204)
@blp.alt_response(501, description="not served yet")
def write_clipboard(args, session_ref):
    """Put text on the clipboard (not served yet: 501)"""
    find(session_ref)
    raise _no_clipboard()


def _no_clipboard():
    return ApiError(501, "computer_not_served", "Lantern does not serve a session's clipboard yet: type the text "
                    "(computer/type) instead.")
