"""The telemetry event catalogue (contract 6.8.4) and the check every ingested event passes: what a browser
host's capture produces and the app accepts, in the standard library alone (lantern_wire).

A browser's driver POSTs events; Lantern serves them back in envelopes `{"seq", "event"}` that clients parse with
the Kernel SDK in strict mode. An event the SDK cannot parse would break every reader of that session's telemetry,
so it is refused at the door: `validate_event` accepts what the SDK's models accept, minus the SDK's lax coercions
(a bool or "12" for an integer, 1 or "true" for a bool), NaN, a negative ts and unknown top-level keys, none of
which an honest producer sends and all of which would reach clients of other SDKs verbatim.

Where the contract and the SDK disagree the SDK wins: a stack trace uses CDP's camelCase keys (`callFrames`,
`columnNumber`, ...) and every call frame key is required.
"""
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


class InvalidEvent(ValueError):
    """An event the catalogue refuses; `messages` holds every problem keyed by field path, shaped as marshmallow
    nests a schema's errors (the app's 400s pass them on as they are)."""

    def __init__(self, messages):
        super().__init__(messages)
        self.messages = messages


CATEGORIES = ("console", "network", "page", "interaction", "control", "platform", "connection", "system",
              "screenshot", "captcha", "monitor")
SOURCE_KINDS = ("cdp", "kernel_api", "extension", "local_process")

MISSING = "Missing data for required field."
NULL = "Field may not be null."
UNKNOWN = "Unknown field."
BAD_OBJECT = "Invalid input type."
_TYPE_MESSAGES = {
    "str": "Not a valid string.",
    "int": "Not a valid integer.",
    "float": "Not a valid number.",
    "bool": "Not a valid boolean.",
    "list": "Not a valid list.",
    "mapping": "Not a valid mapping type.",
    "str_map": "Not a valid mapping type.",
}
# A stack trace's `parent` chain is the only unbounded nesting; cap it so a hostile body cannot exhaust the stack.
MAX_DEPTH = 64


@dataclass(frozen=True)
class Kind:
    """The JSON shape of one value: a scalar, an enum, a list of `item`, or an object with `fields`."""

    tag: str
    choices: tuple = ()
    item: Optional["Kind"] = None
    # A dict, not a tuple, so a recursive shape (a stack's parent) can refer to itself once built.
    fields: Mapping[str, "Field"] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def req(self) -> "Field":
        return Field(self, required=True)


@dataclass(frozen=True)
class Field:
    kind: Kind
    required: bool = False


@dataclass(frozen=True)
class EventSpec:
    """One event type: its category, whether `data` must be sent, and the shape of `data`.

    With a `discriminator`, `data` is a union: `fields` apply to every variant and `variants[value]` adds the rest.
    """

    category: str
    data_required: bool
    fields: Mapping[str, Field]
    discriminator: Optional[str] = None
    variants: Mapping[str, Mapping[str, Field]] = field(default_factory=dict)


STR, INT, FLOAT, BOOL = Kind("str"), Kind("int"), Kind("float"), Kind("bool")
MAPPING = Kind("mapping")  # any JSON object (HTTP headers)
STR_MAP = Kind("str_map")  # object of string values (source metadata)
STR_LIST = Kind("list", item=STR)


def enum(*choices: str) -> Kind:
    return Kind("enum", choices=choices)


def list_of(item: Kind) -> Kind:
    return Kind("list", item=item)


def obj(fields: Mapping[str, Any]) -> Kind:
    """An object kind; `fields` maps names to a Kind (optional) or a Field (`KIND.req`). Extra keys are allowed."""
    return Kind("object", fields=_fields(fields))


def _fields(spec: Mapping[str, Any]) -> dict:
    return {name: value if isinstance(value, Field) else Field(value) for name, value in spec.items()}


def each(kind: Any, names: str) -> dict:
    """The same kind (or required Field) for several space-separated names."""
    return {name: kind for name in names.split()}


TARGET_TYPE = enum("page", "iframe", "worker", "background_page", "service_worker", "shared_worker", "other")
CONTEXT = {**each(STR, "frame_id loader_id session_id target_id url"), "nav_seq": INT, "target_type": TARGET_TYPE}

CALL_FRAME = obj({"url": STR.req, "columnNumber": INT.req, "functionName": STR.req, "lineNumber": INT.req,
                  "scriptId": STR.req})
_CALL_STACK_FIELDS: dict = {}
CALL_STACK = Kind("object", fields=_CALL_STACK_FIELDS)
_CALL_STACK_FIELDS.update(_fields({"callFrames": list_of(CALL_FRAME).req, "description": STR, "parent": CALL_STACK}))

PROXY_CODE = enum("destination_blocked", "destination_route_unavailable", "network_policy_denied",
                  "provider_blacklisted", "provider_unreachable", "provider_rejected", "origin_tls_timeout",
                  "origin_response_incomplete", "proxy_unavailable", "restricted_route_unavailable",
                  "upstream_timeout", "upstream_dns_failure", "upstream_connect_failed", "unknown")
CAPTCHA_TYPE = enum("hcaptcha", "recaptcha_v2", "recaptcha_v3", "turnstile", "geetest", "press_and_hold", "other")
CAPTCHA_COMMON = {
    "captcha_type": CAPTCHA_TYPE.req,
    "captcha_provider": enum("hcaptcha", "recaptcha_v2", "recaptcha_v3", "turnstile", "geetest", "arkose", "human",
                             "binance", "other"),
    **each(STR, "challenge_id task_id website_host website_path"),
}
MEDIA = enum("image", "video")
TASK_KIND = enum("token", "image_challenge", "press_and_hold")
API_CALL = {"duration_ms": FLOAT.req, "operation_id": STR.req, "request_id": STR.req, "status": INT.req}

MOUSE_EVENT_TYPE = enum("mousePressed", "mouseReleased", "mouseMoved", "mouseWheel", "other")
MOUSE_BUTTON = enum("none", "left", "middle", "right", "back", "forward", "other")
GESTURE_SOURCE = enum("default", "touch", "mouse", "other")
WINDOW_STATE = enum("normal", "minimized", "maximized", "fullscreen", "other")
NODE = {**each(INT, "backend_node_id node_id"), "object_id": STR}

CDP_COMMON = {"method": STR.req, "command_id": INT, "connection_id": STR, "session_id": STR}
CDP_COMMANDS = {
    "Input.dispatchMouseEvent": {
        "event_type": MOUSE_EVENT_TYPE.req, "button": MOUSE_BUTTON, "pointer_type": enum("mouse", "pen", "other"),
        **each(INT, "buttons click_count modifiers twist"),
        **each(FLOAT, "delta_x delta_y force tangential_pressure tilt_x tilt_y x y")},
    "Input.dispatchKeyEvent": {
        "event_type": enum("keyDown", "keyUp", "rawKeyDown", "char", "other").req,
        **each(BOOL, "auto_repeat is_keypad is_system_key"),
        **each(INT, "command_count location modifiers text_length"), "named_key": STR},
    "Input.insertText": {"text_length": INT.req},
    "Input.imeSetComposition": {
        "text_length": INT.req, **each(INT, "replacement_end replacement_start selection_end selection_start")},
    "Input.dispatchTouchEvent": {
        "event_type": enum("touchStart", "touchEnd", "touchMove", "touchCancel", "other").req,
        "touch_point_count": INT.req, **each(INT, "modifiers twist"),
        **each(FLOAT, "force radius_x radius_y rotation_angle tangential_pressure tilt_x tilt_y x y")},
    "Input.dispatchDragEvent": {
        "event_type": enum("dragEnter", "dragOver", "drop", "dragCancel", "other").req,
        **each(INT, "drag_file_count drag_item_count drag_operations_mask modifiers"),
        "drag_mime_categories": list_of(enum("text", "image", "audio", "video", "application", "font", "model",
                                             "multipart", "message", "other")),
        **each(FLOAT, "x y")},
    "Input.cancelDragging": {},
    "Input.emulateTouchFromMouseEvent": {
        "event_type": MOUSE_EVENT_TYPE.req, "button": MOUSE_BUTTON, **each(INT, "click_count modifiers"),
        **each(FLOAT, "delta_x delta_y x y")},
    "Input.synthesizePinchGesture": {
        "gesture_source_type": GESTURE_SOURCE, "relative_speed": INT, **each(FLOAT, "scale_factor x y")},
    "Input.synthesizeScrollGesture": {
        "gesture_source_type": GESTURE_SOURCE, "prevent_fling": BOOL,
        **each(INT, "repeat_count repeat_delay_ms speed"),
        **each(FLOAT, "x x_distance x_overscroll y y_distance y_overscroll")},
    "Input.synthesizeTapGesture": {
        **each(INT, "duration tap_count"), "gesture_source_type": GESTURE_SOURCE, **each(FLOAT, "x y")},
    "DOM.setFileInputFiles": {"file_count": INT.req, **NODE},
    "DOM.focus": NODE,
    "DOM.scrollIntoViewIfNeeded": {**NODE, **each(FLOAT, "rect_height rect_width rect_x rect_y")},
    "Page.bringToFront": {},
    "Page.captureScreenshot": {
        **each(BOOL, "capture_beyond_viewport from_surface optimize_for_speed"),
        **each(FLOAT, "clip_height clip_scale clip_width clip_x clip_y"),
        "format": enum("jpeg", "png", "webp", "other"), "quality": INT},
    "Page.captureSnapshot": {"format": enum("mhtml", "other")},
    "Page.handleJavaScriptDialog": {"accept": BOOL.req, "prompt_text_length": INT},
    "Page.navigate": {
        **each(STR, "frame_id url_scheme"), "referrer_present": BOOL,
        "referrer_policy": enum("noReferrer", "noReferrerWhenDowngrade", "origin", "originWhenCrossOrigin",
                                "sameOrigin", "strictOrigin", "strictOriginWhenCrossOrigin", "unsafeUrl", "other"),
        "transition_type": enum("link", "typed", "address_bar", "auto_bookmark", "auto_subframe",
                                "manual_subframe", "generated", "auto_toplevel", "form_submit", "reload", "keyword",
                                "keyword_generated", "other")},
    "Page.navigateToHistoryEntry": {"entry_id": INT.req},
    "Page.reload": {"ignore_cache": BOOL, "loader_id": STR, "script_length": INT},
    "Page.printToPDF": {
        **each(BOOL, "display_header_footer footer_template_present generate_document_outline generate_tagged_pdf "
                     "header_template_present landscape page_ranges_present prefer_css_page_size print_background"),
        **each(FLOAT, "margin_bottom margin_left margin_right margin_top paper_height paper_width scale"),
        "transfer_mode": enum("ReturnAsBase64", "ReturnAsStream", "other")},
    "Page.startScreencast": {
        **each(INT, "every_nth_frame max_height max_width quality"), "format": enum("jpeg", "png", "other")},
    "Page.stopScreencast": {},
    "Page.stopLoading": {},
    "Page.close": {},
    "Page.setWebLifecycleState": {"state": enum("frozen", "active", "other").req},
    "Target.activateTarget": {"target_id": STR.req},
    "Target.closeTarget": {"target_id": STR.req},
    "Target.createTarget": {
        **each(BOOL, "background enable_begin_frame_control focus for_tab hidden new_window"),
        **each(STR, "browser_context_id url_scheme"), **each(INT, "height left top width"),
        "window_state": WINDOW_STATE},
    "Target.createBrowserContext": {
        **each(BOOL, "dispose_on_detach proxy_bypass_list_present proxy_server_present"),
        "universal_network_access_origin_count": INT},
    "Target.disposeBrowserContext": {"browser_context_id": STR.req},
    "Target.openDevTools": {"target_id": STR.req, "panel_id": STR},
    "Browser.cancelDownload": {"download_guid": STR.req, "browser_context_id": STR},
    "Browser.close": {},
    "Browser.setWindowBounds": {
        "window_id": INT.req, **each(INT, "height left top width"), "window_state": WINDOW_STATE},
    "Browser.setContentsSize": {"window_id": INT.req, **each(INT, "height width")},
    "Autofill.trigger": {
        "field_id": INT.req, "address_field_count": INT, "frame_id": STR, "mode": enum("card", "address")},
}


def _event(category: str, fields: Mapping[str, Any], *, data_required: bool = False) -> EventSpec:
    return EventSpec(category, data_required, _fields(fields))


EVENT_SPECS: dict = {
    "console_log": _event("console", {**CONTEXT, "args": STR_LIST, "level": STR, "stack_trace": CALL_STACK,
                                      "text": STR}),
    "console_error": _event("console", {**CONTEXT, "text": STR.req, "args": STR_LIST, "column": INT, "level": STR,
                                        "line": INT, "source_url": STR, "stack_trace": CALL_STACK}),
    "network_request": _event("network", {
        **CONTEXT, **each(STR, "document_url initiator_type method post_data redirect_url request_id resource_type"),
        "headers": MAPPING, "is_redirect": BOOL}),
    "network_response": _event("network", {
        **CONTEXT, **each(STR, "body method mime_type request_id resource_type status_text"), "headers": MAPPING,
        "status": INT}),
    "network_loading_failed": _event("network", {
        **CONTEXT, "canceled": BOOL, **each(STR, "error_text request_id resource_type")}),
    "network_idle": _event("network", CONTEXT),
    "proxy_error": _event("network", {
        **CONTEXT, "code": PROXY_CODE.req, "request_id": STR.req, "status": INT.req,
        **each(STR, "method raw_code resource_type")}),
    # Not the shared context: a navigation names its parent frame and carries no nav_seq.
    "page_navigation": _event("page", {
        **each(STR, "frame_id loader_id parent_frame_id session_id target_id url"), "target_type": TARGET_TYPE}),
    "page_dom_content_loaded": _event("page", {**CONTEXT, "cdp_timestamp": FLOAT}),
    "page_load": _event("page", {**CONTEXT, "cdp_timestamp": FLOAT}),
    "page_tab_opened": _event("page", {**each(STR, "opener_id target_id title url"), "target_type": TARGET_TYPE}),
    "page_crashed": _event("page", {"target_id": STR.req, "target_type": TARGET_TYPE.req, "url": STR.req}),
    "page_layout_shift": _event("page", {
        **CONTEXT, "duration": FLOAT, "layout_shift_details": obj({"had_recent_input": BOOL, "value": FLOAT}),
        "source_frame_id": STR, "time": FLOAT}),
    "page_lcp": _event("page", {
        **CONTEXT, "lcp_details": obj({"element_id": STR, "load_time": FLOAT, "node_id": INT, "render_time": FLOAT,
                                       "size": FLOAT, "url": STR}),
        "source_frame_id": STR, "time": FLOAT}),
    "page_layout_settled": _event("page", CONTEXT),
    "page_navigation_settled": _event("page", CONTEXT),
    "interaction_click": _event("interaction", {**CONTEXT, **each(STR, "selector tag text"), **each(INT, "x y")}),
    "interaction_key": _event("interaction", {**CONTEXT, **each(STR, "key selector tag")}),
    "interaction_scroll_settled": _event("interaction", {
        **CONTEXT, **each(INT, "from_x from_y to_x to_y"), "target_selector": STR}),
    "monitor_screenshot": _event("screenshot", {"png": STR}),
    "monitor_disconnected": _event("monitor", {"reason": enum("chrome_restarted")}),
    "monitor_reconnected": _event("monitor", {"reconnect_duration_ms": INT}),
    "monitor_reconnect_failed": _event("monitor", {"reason": enum("reconnect_exhausted")}),
    "monitor_init_failed": _event("monitor", {"step": STR}),
    "api_call": _event("control", {**API_CALL, "code": STR}),
    "platform_api_call": _event("platform", API_CALL),
    "cdp_command": EventSpec("control", True, _fields(CDP_COMMON), discriminator="method",
                             variants={method: _fields(spec) for method, spec in CDP_COMMANDS.items()}),
    "cdp_connect": _event("connection", {"connection_id": STR}),
    "cdp_disconnect": _event("connection", {
        "duration_ms": FLOAT.req, "message_count": INT.req,
        "reason": enum("client_close", "upstream_changed", "upstream_error", "context_cancelled").req,
        "connection_id": STR, **each(INT, "telemetry_dropped telemetry_excluded")}),
    "live_view_connect": _event("connection", {"session_id": STR.req}),
    "live_view_disconnect": _event("connection", {"duration_ms": FLOAT.req, "session_id": STR.req}),
    "captcha_solve_started": _event("captcha", {**CAPTCHA_COMMON, "media": MEDIA, "task_kind": TASK_KIND},
                                    data_required=True),
    "captcha_solve_result": _event("captcha", {
        **CAPTCHA_COMMON, "duration_ms": FLOAT.req, "status": enum("success", "failure", "timeout", "abandoned").req,
        "error_code": STR, "media": MEDIA, "task_kind": TASK_KIND}),
    "captcha_challenge_result": _event("captcha", {
        **CAPTCHA_COMMON, "duration_ms": FLOAT.req, "status": enum("solved", "failure", "timeout", "abandoned").req,
        "inferred": BOOL}, data_required=True),
    "system_oom_kill": _event("system", {
        "pid": INT.req, "process_name": STR.req, "rss_kb": INT.req,
        "constraint": enum("none", "memcg", "cpuset", "memory_policy"), **each(INT, "mem_free_kb mem_total_kb"),
        "top_tasks": list_of(obj({"name": STR.req, "pid": INT.req, "rss_kb": INT.req})),
        "trigger_pid": INT, "trigger_process_name": STR}),
    "service_crashed": _event("system", {
        "phase": enum("startup", "running", "gave_up").req, "service_name": STR.req, "pid": INT}),
}

EVENT_CATEGORY = {name: spec.category for name, spec in EVENT_SPECS.items()}
CDP_METHODS = tuple(CDP_COMMANDS)
SOURCE = obj({"kind": enum(*SOURCE_KINDS).req, "event": STR, "metadata": STR_MAP})
TOP_LEVEL_KEYS = ("type", "category", "ts", "source", "data", "truncated")
# ts is stored in a 64-bit column.
MAX_TS = 2**63 - 1


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    # NaN and infinities pass Python's json module but are not JSON, so they could not be served back.
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


_SCALARS = {
    "str": lambda value: isinstance(value, str),
    "int": _is_int,
    "float": _is_number,
    "bool": lambda value: isinstance(value, bool),
    "mapping": lambda value: isinstance(value, dict),
}


def _check(kind: Kind, value, depth: int = 0):
    """Errors of one non-null value, shaped like marshmallow's (a message list, or a dict for nested errors)."""
    if kind.tag in _SCALARS:
        return None if _SCALARS[kind.tag](value) else [_TYPE_MESSAGES[kind.tag]]
    if kind.tag == "enum":
        if isinstance(value, str) and value in kind.choices:
            return None
        return [f"Must be one of: {', '.join(kind.choices)}."]
    if kind.tag == "str_map":
        if not isinstance(value, dict):
            return [_TYPE_MESSAGES["str_map"]]
        errors = {key: {"value": [_TYPE_MESSAGES["str"]]} for key, item in value.items() if not isinstance(item, str)}
        return errors or None
    if kind.tag == "list":
        if not isinstance(value, list):
            return [_TYPE_MESSAGES["list"]]
        errors = {index: _check(kind.item, item, depth + 1) for index, item in enumerate(value)}
        return {index: error for index, error in errors.items() if error} or None
    if depth >= MAX_DEPTH:
        return ["Nested too deeply."]
    if not isinstance(value, dict):
        return {"_schema": [BAD_OBJECT]}
    return _check_fields(kind.fields, value, depth + 1) or None


def _check_fields(fields: Mapping[str, Field], value: dict, depth: int) -> dict:
    # Unknown keys are kept: the SDK's models allow extra keys, and producers add fields before the SDK knows them.
    errors = {}
    for name, spec in fields.items():
        if name not in value:
            if spec.required:
                errors[name] = [MISSING]
        elif value[name] is None:
            # The SDK declares every optional key as Optional[...] = None, so null only fails a required key.
            if spec.required:
                errors[name] = [NULL]
        else:
            error = _check(spec.kind, value[name], depth)
            if error:
                errors[name] = error
    return errors


def _check_data(spec: EventSpec, data: dict) -> dict:
    errors = _check_fields(spec.fields, data, 0)
    if spec.discriminator is None or spec.discriminator in errors:
        return errors
    tag = data[spec.discriminator]
    if tag not in spec.variants:
        # cdp_command is the only union, so the message can name what the client got wrong.
        errors[spec.discriminator] = [f"Unknown CDP method {tag!r}."]
        return errors
    errors.update(_check_fields(spec.variants[tag], data, 0))
    return errors


def validate_event(event, *, now_us: int) -> dict:
    """Validate one incoming event object; return the normalized event to store.

    The result is a new dict with keys type, category, ts, source, then data and truncated when sent; a missing
    category is taken from the type and a missing ts is `now_us`. Its source and data are the event's own
    objects, not copies (a request's parsed body has no other owner). Raises InvalidEvent with every problem of
    the event, keyed by field path as marshmallow nests them.
    """
    if not isinstance(event, dict):
        raise InvalidEvent({"_schema": ["An event is a JSON object."]})
    errors: dict = {}
    for key in event:
        if key not in TOP_LEVEL_KEYS:
            errors[key] = [UNKNOWN]

    event_type = event.get("type")
    spec = None
    if "type" not in event:
        errors["type"] = [MISSING]
    elif event_type is None:
        errors["type"] = [NULL]
    elif not isinstance(event_type, str):
        errors["type"] = [_TYPE_MESSAGES["str"]]
    elif event_type not in EVENT_SPECS:
        errors["type"] = [f"Unknown event type {event_type!r}."]
    else:
        spec = EVENT_SPECS[event_type]

    category = event.get("category")
    if "category" in event:
        if category is None:
            errors["category"] = [NULL]
        elif not isinstance(category, str) or category not in CATEGORIES:
            errors["category"] = [f"Must be one of: {', '.join(CATEGORIES)}."]
        elif spec is not None and category != spec.category:
            errors["category"] = [f"Must be {spec.category!r} for event type {event_type!r}."]

    ts = event.get("ts", now_us)
    if ts is None:
        errors["ts"] = [NULL]
    elif not _is_int(ts):
        errors["ts"] = [_TYPE_MESSAGES["int"]]
    elif not 0 <= ts <= MAX_TS:
        errors["ts"] = [f"Must be between 0 and {MAX_TS}."]

    if "source" not in event:
        errors["source"] = [MISSING]
    elif event["source"] is None:
        errors["source"] = [NULL]
    else:
        error = _check(SOURCE, event["source"])
        if error:
            errors["source"] = error

    # `truncated` and a non-required `data` are Optional in the SDK, so null is accepted and stored as sent.
    if event.get("truncated") is not None and not isinstance(event["truncated"], bool):
        errors["truncated"] = [_TYPE_MESSAGES["bool"]]

    data = event.get("data")
    if spec is not None:
        if "data" not in event and spec.data_required:
            errors["data"] = [MISSING]
        elif data is None and "data" in event and spec.data_required:
            errors["data"] = [NULL]
        elif data is not None:
            if not isinstance(data, dict):
                errors["data"] = {"_schema": [BAD_OBJECT]}
            else:
                data_errors = _check_data(spec, data)
                if data_errors:
                    errors["data"] = data_errors

    if errors:
        raise InvalidEvent(errors)

    normalized = {"type": event_type, "category": spec.category, "ts": ts, "source": event["source"]}
    for key in ("data", "truncated"):
        if key in event:
            normalized[key] = event[key]
    return normalized
