"""Bodies and answers of the computer API (/browsers/{id}/computer/...) and of replays (/browsers/{id}/replays),
field for field as the official SDK (`kernel==0.131.0`, resources/browsers/computer.py and replays.py, and
their types) sends and reads them.

Coordinates are checked against the session's viewport where the session is known
(app/browsers/computer.py); here, only their type and sign. Every value Kernel's API takes for a field is taken
(its documented ranges, and the fields newer SDKs send, such as type_text's `smooth` and `typo_chance`), within
bounds per field (MAX_WHEEL_CLICKS, MAX_MS, MAX_TEXT, MAX_CLICKS, MAX_DRAG_STEPS) and per request: what a request's
actions may take in all, their waits and the time their steps take on a host, is at most MAX_REQUEST_MS
(app/browsers/computer.py answers a 400 past it).
"""
import marshmallow as ma
from marshmallow import validate

from app.core.fields import Choice, JsonBoolean, JsonInteger, JsonNumber, UtcDateTime
from lantern_wire.keyboard import MAX_TYPO_CHANCE, untypable

MOUSE_BUTTONS = ["left", "right", "middle", "back", "forward"]
DRAG_BUTTONS = ["left", "middle", "right"]
CLICK_TYPES = ["down", "up", "click"]
# One wait an action asks for (a sleep, a delay, a hold, a smooth move's duration): a minute at most.
MAX_MS = 60_000
# All a request's actions may take (app/browsers/computer.py): ten minutes of a session's screen at most. A person's
# typing of 10,000 characters takes longer: such a text is sent in parts.
MAX_REQUEST_MS = 600_000
MAX_TEXT = 10_000
MAX_KEYS = 100
MAX_PATH = 1000
MAX_BATCH = 200
MAX_CLICKS = 100
# A drag's moves in all (steps per segment times segments): each takes a frame of the page (lantern_wire/pacing.py).
MAX_DRAG_STEPS = 10_000
# Wheel clicks of one scroll, either way: Kernel takes any number (its docs scroll 120); 10,000 clicks are
# 1,200,000 screen pixels, past the end of any page, and take one DevTools event or one xdotool run.
MAX_WHEEL_CLICKS = 10_000

Coordinate = JsonInteger(required=True, validate=validate.Range(min=0))
HoldKeys = ma.fields.List(ma.fields.String(validate=validate.Length(1, 64)), validate=validate.Length(max=10),
                          metadata={"description": "modifier keys held during the action (xdotool names)"})


def milliseconds(description):
    return JsonInteger(validate=validate.Range(0, MAX_MS), metadata={"description": description})


class Region(ma.Schema):
    x = JsonInteger(required=True, validate=validate.Range(min=0))
    y = JsonInteger(required=True, validate=validate.Range(min=0))
    width = JsonInteger(required=True, validate=validate.Range(min=1))
    height = JsonInteger(required=True, validate=validate.Range(min=1))


class ScreenshotSchema(ma.Schema):
    region = ma.fields.Nested(Region, metadata={"description": "default: the whole screen (the viewport)"})


class ClickMouseSchema(ma.Schema):
    x = Coordinate
    y = Coordinate
    button = Choice(MOUSE_BUTTONS, load_default="left")
    click_type = Choice(CLICK_TYPES, load_default="click")
    hold_keys = HoldKeys
    num_clicks = JsonInteger(load_default=1, validate=validate.Range(1, MAX_CLICKS))


class MoveMouseSchema(ma.Schema):
    x = Coordinate
    y = Coordinate
    smooth = JsonBoolean(load_default=False, metadata={"description": "a human-like curved path"})
    duration_ms = milliseconds("how long a smooth move lasts (default: from the distance)")
    hold_keys = HoldKeys


class DragMouseSchema(ma.Schema):
    path = ma.fields.List(ma.fields.List(JsonInteger(validate=validate.Range(min=0)), validate=validate.Length(2, 2)),
                          required=True, validate=validate.Length(2, MAX_PATH),
                          metadata={"description": "[x, y] points to drag through, at least 2"})
    button = Choice(DRAG_BUTTONS, load_default="left")
    delay = milliseconds("between the button going down and the first move")
    duration_ms = milliseconds("how long a smooth drag lasts (default: from the path's length)")
    hold_keys = HoldKeys
    smooth = JsonBoolean(load_default=False)
    step_delay_ms = milliseconds("between steps (default 10)")
    steps_per_segment = JsonInteger(validate=validate.Range(1, MAX_DRAG_STEPS), metadata={
        "description": f"default 10; at most {MAX_DRAG_STEPS:,} moves in all (this times the path's segments)"})

    @ma.validates_schema
    def bounded_moves(self, data, **kwargs):
        moves = (len(data.get("path", ())) - 1) * data.get("steps_per_segment", 10)
        if moves > MAX_DRAG_STEPS and not data.get("smooth"):  # a smooth drag takes its moves from duration_ms
            raise ma.ValidationError(f"{moves:,} moves (steps_per_segment times the path's segments) are more "
                                     f"than {MAX_DRAG_STEPS:,}.", "steps_per_segment")


WHEEL_CLICKS = "wheel clicks (xdotool's wheel units): 120 screen pixels each, as one click of a wheel scrolls"


class ScrollSchema(ma.Schema):
    x = Coordinate
    y = Coordinate
    delta_x = JsonInteger(load_default=0, validate=validate.Range(-MAX_WHEEL_CLICKS, MAX_WHEEL_CLICKS),
                          metadata={"description": f"{WHEEL_CLICKS}; positive scrolls right"})
    delta_y = JsonInteger(load_default=0, validate=validate.Range(-MAX_WHEEL_CLICKS, MAX_WHEEL_CLICKS),
                          metadata={"description": f"{WHEEL_CLICKS}; positive scrolls down"})
    hold_keys = HoldKeys

    @ma.validates_schema
    def turns_the_wheel(self, data, **kwargs):
        """Kernel's 400: a scroll of nothing either way is a mistake, not a wheel event of no length."""
        if not data.get("delta_x") and not data.get("delta_y"):
            raise ma.ValidationError("At least one of delta_x or delta_y must be non-zero.", "delta_y")


class PressKeySchema(ma.Schema):
    keys = ma.fields.List(ma.fields.String(validate=validate.Length(1, 64)), required=True,
                          validate=validate.Length(1, MAX_KEYS),
                          metadata={"description": "xdotool key names or combinations: Return, ctrl+a, Ctrl+Shift+Tab"})
    duration = milliseconds("how long each key is held (default: tapped)")
    hold_keys = HoldKeys


def typable(text):
    """400 naming the first character no keyboard types (lantern_wire/keyboard.py), before anything is typed."""
    char = untypable(text)
    if char is not None:
        raise ma.ValidationError(f"character {char!r} (U+{ord(char):04X}) cannot be typed; nothing was typed.")


class TypeTextSchema(ma.Schema):
    text = ma.fields.String(required=True, validate=[validate.Length(1, MAX_TEXT), typable])
    delay = milliseconds("between characters (not smooth)")
    smooth = JsonBoolean(metadata={"description": "at a person's pace: word by word, each at its own pace between "
                                                  "50 and 120 ms a key, pauses between words (delay is ignored). "
                                                  "Default: true when typo_chance is given above 0, else false"})
    typo_chance = JsonNumber(validate=validate.Range(0, MAX_TYPO_CHANCE), metadata={
        "description": "the share of ASCII letters and digits first typed wrong, then backspaced and typed right, "
                       "when smooth; 0 to 0.1, default 0. For plain text fields, where the text left is the text "
                       "given: not for inline-autocomplete comboboxes, masked inputs or one box per digit"})

    @ma.post_load
    def smooth_when_typos_are_asked(self, data, **kwargs):
        """What the host types by: `smooth` and `typo_chance` only when smooth (Kernel ignores typo_chance
        otherwise), which is the default when typos are asked for."""
        typo_chance = data.pop("typo_chance", 0)
        if data.pop("smooth", typo_chance > 0):
            data.update(smooth=True, typo_chance=typo_chance)
        return data


class CursorSchema(ma.Schema):
    hidden = JsonBoolean(required=True)


class SleepSchema(ma.Schema):
    duration_ms = JsonInteger(required=True, validate=validate.Range(0, MAX_MS))


# A batch action: its type and the body of that type under its name (the SDK's Action).
ACTIONS = {"click_mouse": ClickMouseSchema, "move_mouse": MoveMouseSchema, "type_text": TypeTextSchema,
           "press_key": PressKeySchema, "scroll": ScrollSchema, "drag_mouse": DragMouseSchema,
           "set_cursor": CursorSchema, "sleep": SleepSchema}


class ActionSchema(ma.Schema):
    type = Choice(list(ACTIONS), required=True)
    click_mouse = ma.fields.Nested(ClickMouseSchema)
    move_mouse = ma.fields.Nested(MoveMouseSchema)
    type_text = ma.fields.Nested(TypeTextSchema)
    press_key = ma.fields.Nested(PressKeySchema)
    scroll = ma.fields.Nested(ScrollSchema)
    drag_mouse = ma.fields.Nested(DragMouseSchema)
    set_cursor = ma.fields.Nested(CursorSchema)
    sleep = ma.fields.Nested(SleepSchema)

    @ma.validates_schema
    def one_body_of_its_type(self, data, **kwargs):
        given = [name for name in ACTIONS if name in data]
        if given != [data.get("type")]:
            raise ma.ValidationError(f"Give exactly one action body, the one named by type ({data.get('type')}).",
                                     "type")

    @ma.post_load
    def flat(self, data, **kwargs):
        """{"type", ...its fields}: what the host runs."""
        return {"type": data["type"], **data[data["type"]]}


class BatchSchema(ma.Schema):
    actions = ma.fields.List(ma.fields.Nested(ActionSchema), required=True, validate=validate.Length(1, MAX_BATCH))


class MousePositionSchema(ma.Schema):
    x = ma.fields.Integer(required=True)
    y = ma.fields.Integer(required=True)


class OkSchema(ma.Schema):
    ok = ma.fields.Boolean(required=True)


class ClipboardSchema(ma.Schema):
    text = ma.fields.String(required=True, validate=validate.Length(max=MAX_TEXT))


# -- replays (/browsers/{id}/replays): recordings of the screen

REPLAY_STATUSES = ["recording", "saving", "saved", "failed"]


class StartReplaySchema(ma.Schema):
    framerate = JsonInteger(validate=validate.Range(min=1), metadata={
        "description": "frames per second (default REPLAY_DEFAULT_FRAMERATE, 10; at most REPLAY_MAX_FRAMERATE, 30)"})
    max_duration_in_seconds = JsonInteger(validate=validate.Range(min=1), metadata={
        "description": "the recording stops by itself after this long (default and bound: REPLAY_MAX_SECONDS)"})
    record_audio = JsonBoolean(metadata={"description": "only false: browsers here have no sound device"})


class ReplaySchema(ma.Schema):
    replay_id = ma.fields.String(required=True)
    started_at = UtcDateTime(allow_none=True)
    finished_at = UtcDateTime(allow_none=True)
    replay_view_url = ma.fields.String(allow_none=True, metadata={
        "description": "the video's download URL (GET, with the API key as for every call)"})
    status = ma.fields.String(metadata={"enum": REPLAY_STATUSES, "description": "Lantern's: recording, then saving "
                                        "until its browser host has sent it, then saved (downloadable) or failed"})
    size_bytes = ma.fields.Integer(allow_none=True, metadata={"description": "Lantern's: the video's size once saved"})
    error = ma.fields.String(allow_none=True, metadata={"description": "Lantern's: why it failed"})
