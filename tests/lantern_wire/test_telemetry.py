"""The telemetry event table agrees with the SDK's models, and what validate_event accepts the SDK can read.

The SDK parses each telemetry envelope with `validate_type` when `_strict_response_validation=True` (pydantic's
`model_validate`, i.e. lax mode: "12" and True pass for an int). So "the SDK can read it" is checked with the same
call, and one test goes through a real client's telemetry stream to show that this is the call that matters.
"""
import copy
import json
import typing

import httpx
import kernel
import kernel.types  # noqa: F401  (rebuilds the SDK's forward references)
import pydantic
import pytest
from kernel._models import validate_type
from kernel.types.browsers.browser_telemetry_event import BrowserTelemetryEvent
from kernel.types.browsers.telemetry_events_response import TelemetryEventsResponse
from kernel.types.browsers.telemetry_stream_response import TelemetryStreamResponse

from lantern_wire import telemetry as tt
from lantern_wire.telemetry import (
    CATEGORIES,
    CDP_METHODS,
    EVENT_CATEGORY,
    EVENT_SPECS,
    SOURCE,
    SOURCE_KINDS,
    validate_event,
)

NOW_US = 1_750_000_000_000_000


# --- the SDK's side, read from its models ---

def _union_members(annotation):
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return typing.get_args(annotation)


def _literal(model, name):
    (value,) = typing.get_args(model.model_fields[name].annotation)
    return value


SDK_EVENTS = {_literal(model, "type"): model for model in _union_members(BrowserTelemetryEvent)}
SDK_CDP = {_literal(model, "method"): model
           for model in _union_members(SDK_EVENTS["cdp_command"].model_fields["data"].annotation)}


def _unwrap_optional(annotation):
    if typing.get_origin(annotation) is typing.Union and type(None) in typing.get_args(annotation):
        (inner,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return inner, True
    return annotation, False


def _type_hints(model):
    """The resolved annotations of an SDK model's own and inherited fields.

    The SDK writes `from __future__ import annotations`, so annotations are strings; typing.get_type_hints on the
    model itself trips over pydantic's base classes, so each SDK class's annotations are resolved on their own.
    """
    hints = {}
    for cls in reversed(model.__mro__):
        if cls.__module__.startswith("kernel.types."):
            own = type("Annotations", (), {"__annotations__": dict(vars(cls).get("__annotations__", {})),
                                           "__module__": cls.__module__})
            hints.update(typing.get_type_hints(own))
    return hints


def _sdk_fields(model, stack):
    hints = _type_hints(model)
    shape = {}
    for name, info in model.model_fields.items():
        annotation, nullable = _unwrap_optional(hints[name])
        # A field that is optional but not nullable (or the reverse) would break validate_event's rule for null.
        assert nullable is not info.is_required(), (model, name)
        shape[info.alias or name] = (info.is_required(), _sdk_shape(annotation, stack))
    return shape


def _sdk_shape(annotation, stack=()):
    """A comparable description of an SDK annotation, in the vocabulary of lantern_wire.telemetry.Kind."""
    scalars = {str: "str", int: "int", float: "float", bool: "bool"}
    if annotation in scalars:
        return (scalars[annotation],)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return ("enum", frozenset(args))
    if origin is list:
        return ("list", _sdk_shape(args[0], stack))
    if origin is dict:
        return {object: ("mapping",), str: ("str_map",)}[args[1]]
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        if annotation in stack:
            return ("cycle", len(stack) - stack.index(annotation))
        return ("object", _sdk_fields(annotation, stack + (annotation,)))
    raise AssertionError(f"unexpected SDK annotation {annotation!r}")


def _our_fields(fields, stack):
    return {name: (spec.required, _our_shape(spec.kind, stack)) for name, spec in fields.items()}


def _our_shape(kind, stack=()):
    if kind.tag == "enum":
        return ("enum", frozenset(kind.choices))
    if kind.tag == "list":
        return ("list", _our_shape(kind.item, stack))
    if kind.tag == "object":
        ids = [id(fields) for fields in stack]
        if id(kind.fields) in ids:
            return ("cycle", len(stack) - ids.index(id(kind.fields)))
        return ("object", _our_fields(kind.fields, stack + (kind.fields,)))
    return (kind.tag,)


def sdk_reads(event):
    """Parse an envelope as both telemetry endpoints' SDK models do in strict mode; raises if it cannot."""
    for model in (TelemetryStreamResponse, TelemetryEventsResponse):
        envelope = validate_type(type_=model, value={"seq": 1, "event": event})
        assert envelope.event.type == event["type"]


def sdk_rejects(event):
    with pytest.raises(pydantic.ValidationError):
        validate_type(type_=TelemetryStreamResponse, value={"seq": 1, "event": event})
    return True


# --- samples generated from our own table ---

def sample(kind, maximal, depth=0):
    if kind.tag == "enum":
        return kind.choices[-1] if maximal else kind.choices[0]
    if kind.tag == "list":
        return [sample(kind.item, maximal, depth + 1) for _ in range(2 if maximal else 1)]
    if kind.tag == "object":
        return sample_fields(kind.fields, maximal, depth + 1)
    return {"str": "s", "int": 7, "float": 1.5, "bool": True, "mapping": {"accept": "*/*", "x-list": [1, None]},
            "str_map": {"target_id": "T1"}}[kind.tag]


def sample_fields(fields, maximal, depth=0):
    # The depth cap stops the stack trace's optional `parent` from recursing forever.
    return {name: sample(spec.kind, maximal, depth) for name, spec in fields.items()
            if spec.required or (maximal and depth < 4)}


def _data_fields(event_type, method):
    spec = EVENT_SPECS[event_type]
    return {**spec.fields, **spec.variants[method]} if method else spec.fields


def build(event_type, method=None, *, shape):
    """shape: "maximal" (every key), "required" (data with required keys only), "minimal" (only what must be sent)."""
    spec = EVENT_SPECS[event_type]
    if shape == "maximal":
        event = {"type": event_type, "category": spec.category, "ts": NOW_US - 5,
                 "source": sample(SOURCE, maximal=True), "truncated": False}
    else:
        event = {"type": event_type, "source": {"kind": "cdp"}}
    if shape != "minimal" or spec.data_required:
        event["data"] = sample_fields(_data_fields(event_type, method), maximal=shape == "maximal")
        if method:
            event["data"]["method"] = method
    return event


def case_ids(cases):
    return [method or name for name, method in cases]


def required_data_keys(event_type, method):
    # `method` picks a cdp_command's variant: null there is an unknown method (see REFUSED), not a null required key.
    return [name for name, spec in _data_fields(event_type, method).items() if spec.required and name != "method"]


def enum_data_keys(event_type, method):
    """{name: (its choices, whether the key holds a list of them)} of the data keys taking an enum."""
    keys = {}
    for name, spec in _data_fields(event_type, method).items():
        listed = spec.kind.tag == "list"
        kind = spec.kind.item if listed else spec.kind
        if kind.tag == "enum":
            keys[name] = (kind.choices, listed)
    return keys


CASES = [(name, method) for name in EVENT_SPECS for method in (CDP_METHODS if name == "cdp_command" else [None])]
CASE_IDS = case_ids(CASES)
# Left out where there is nothing to try, so that no case passes having checked nothing: many types and CDP methods
# have no required key at the top of their data (network_idle, Page.close, ...), or no enum in it (api_call,
# Target.closeTarget, ...). Which keys are required and which are enums is held to the SDK's models by the
# data-shape tests above.
WITH_REQUIRED_KEYS = [case for case in CASES if required_data_keys(*case)]
WITH_ENUM_KEYS = [case for case in CASES if enum_data_keys(*case)]


def errors_of(event):
    with pytest.raises(tt.InvalidEvent) as caught:
        validate_event(event, now_us=NOW_US)
    return caught.value.messages


def valid_event(**changes):
    event = {"type": "console_error", "ts": 5, "source": {"kind": "cdp"}, "data": {"text": "boom"}}
    event.update(changes)
    return event


# --- parity of the table with the SDK ---

def test_event_types_and_categories_match_the_sdk():
    assert set(EVENT_CATEGORY) == set(SDK_EVENTS)
    assert len(EVENT_CATEGORY) == 36
    assert EVENT_CATEGORY == {name: _literal(model, "category") for name, model in SDK_EVENTS.items()}
    assert set(EVENT_CATEGORY.values()) == set(CATEGORIES)
    assert len(CATEGORIES) == 11


def test_cdp_methods_and_source_kinds_match_the_sdk():
    assert set(CDP_METHODS) == set(SDK_CDP)
    assert len(CDP_METHODS) == len(set(CDP_METHODS)) == 38
    source = SDK_EVENTS["console_log"].model_fields["source"].annotation
    assert set(SOURCE_KINDS) == set(typing.get_args(source.model_fields["kind"].annotation))
    assert _our_shape(SOURCE) == _sdk_shape(source)


@pytest.mark.parametrize("event_type", sorted(SDK_EVENTS))
def test_top_level_shape_matches_the_sdk(event_type):
    spec, fields = EVENT_SPECS[event_type], SDK_EVENTS[event_type].model_fields
    assert set(fields) == set(tt.TOP_LEVEL_KEYS)
    assert {name for name, info in fields.items() if info.is_required()} == (
        {"type", "category", "ts", "source"} | ({"data"} if spec.data_required else set()))
    assert fields["ts"].annotation is int
    assert _unwrap_optional(fields["truncated"].annotation) == (bool, True)


@pytest.mark.parametrize("event_type", sorted(set(SDK_EVENTS) - {"cdp_command"}))
def test_data_shape_matches_the_sdk(event_type):
    model = SDK_EVENTS[event_type]
    data, _ = _unwrap_optional(_type_hints(model)["data"])
    assert _our_fields(EVENT_SPECS[event_type].fields, ()) == _sdk_shape(data)[1]


@pytest.mark.parametrize("method", sorted(SDK_CDP))
def test_cdp_command_data_shape_matches_the_sdk(method):
    ours = _our_fields(_data_fields("cdp_command", method), ())
    sdk = _sdk_shape(SDK_CDP[method])[1]
    # The SDK pins `method` to a literal per variant; ours checks it against CDP_METHODS before picking the variant.
    assert ours.pop("method") == (True, ("str",))
    assert sdk.pop("method") == (True, ("enum", frozenset([method])))
    assert ours == sdk


# --- what we accept, the SDK reads ---

@pytest.mark.parametrize("shape", ["maximal", "required", "minimal"])
@pytest.mark.parametrize(("event_type", "method"), CASES, ids=CASE_IDS)
def test_generated_events_are_accepted_and_readable_by_the_sdk(event_type, method, shape):
    event = build(event_type, method, shape=shape)
    normalized = validate_event(event, now_us=NOW_US)
    assert normalized["category"] == EVENT_CATEGORY[event_type]
    assert normalized.get("data") == event.get("data")
    # Through JSON, as a client receives it.
    sdk_reads(json.loads(json.dumps(normalized)))


@pytest.mark.parametrize(("event_type", "method"), CASES, ids=CASE_IDS)
def test_null_is_accepted_for_every_optional_key(event_type, method):
    event = build(event_type, method, shape="maximal")
    fields = _data_fields(event_type, method)
    event["data"].update({name: None for name, spec in fields.items() if not spec.required})
    event["source"].update(event=None, metadata=None)
    event["truncated"] = None
    sdk_reads(validate_event(event, now_us=NOW_US))


@pytest.mark.parametrize(("event_type", "method"), WITH_REQUIRED_KEYS, ids=case_ids(WITH_REQUIRED_KEYS))
def test_null_is_refused_for_every_required_key(event_type, method):
    checked = 0
    for name in required_data_keys(event_type, method):
        event = build(event_type, method, shape="required")
        event["data"][name] = None
        assert errors_of(event) == {"data": {name: [tt.NULL]}}
        assert sdk_rejects(event | {"category": EVENT_CATEGORY[event_type], "ts": 1})
        checked += 1
    assert checked > 0


@pytest.mark.parametrize(("event_type", "method"), WITH_ENUM_KEYS, ids=case_ids(WITH_ENUM_KEYS))
def test_every_enum_value_is_readable(event_type, method):
    """Each enum value of each data key, one at a time, in an otherwise maximal event."""
    checked = 0
    for name, (choices, listed) in enum_data_keys(event_type, method).items():
        for choice in choices:
            event = build(event_type, method, shape="maximal")
            event["data"][name] = [choice] if listed else choice
            sdk_reads(validate_event(event, now_us=NOW_US))
            checked += 1
    assert checked > 0


def test_stack_traces_nest_and_use_cdp_camel_case():
    frame = {"url": "https://a.test/app.js", "columnNumber": 3, "functionName": "", "lineNumber": 9, "scriptId": "42"}
    stack = {"callFrames": [frame], "description": "async", "parent": {"callFrames": [frame, frame],
                                                                     "parent": {"callFrames": []}}}
    event = valid_event(data={"text": "boom", "stack_trace": stack})
    sdk_reads(validate_event(event, now_us=NOW_US))

    # The contract's snake_case spelling is what the SDK refuses: callFrames is required and camelCase.
    snake = valid_event(category="console", data={"text": "boom", "stack_trace": {"call_frames": [frame]}})
    assert errors_of(snake) == {"data": {"stack_trace": {"callFrames": [tt.MISSING]}}}
    assert sdk_rejects(snake)
    partial = valid_event(category="console", data={"text": "boom", "stack_trace": {"callFrames": [{"url": "u"}]}})
    assert errors_of(partial) == {"data": {"stack_trace": {"callFrames": {0: {
        name: [tt.MISSING] for name in ("columnNumber", "functionName", "lineNumber", "scriptId")}}}}}
    assert sdk_rejects(partial)


def test_a_pathologically_deep_stack_is_refused_not_crashed_on():
    stack = {"callFrames": []}
    for _ in range(5000):
        stack = {"callFrames": [], "parent": stack}
    messages = errors_of(valid_event(data={"text": "boom", "stack_trace": stack}))
    node = messages["data"]["stack_trace"]
    while isinstance(node, dict):
        node = node["parent"]
    assert node == ["Nested too deeply."]


def test_the_sdk_client_stream_applies_the_same_validation():
    """A real strict client on a telemetry stream reads what we accept and raises on what the SDK model refuses."""
    good = [validate_event(build(name, method, shape="maximal"), now_us=NOW_US) for name, method in CASES]
    bad = valid_event(category="console", data={})

    def serve(events):
        body = "".join(f"id: {seq}\ndata: {json.dumps({'seq': seq, 'event': event})}\n\n"
                       for seq, event in enumerate(events, 1))
        transport = httpx.MockTransport(lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=body.encode()))
        client = kernel.Kernel(api_key="k", base_url="http://lantern.test", _strict_response_validation=True,
                               max_retries=0, http_client=httpx.Client(transport=transport))
        return list(client.browsers.telemetry.stream("browser-1"))

    assert [frame.event.type for frame in serve(good)] == [event["type"] for event in good]
    with pytest.raises(kernel.APIResponseValidationError):
        serve([bad])


# --- normalization ---

def test_category_and_ts_are_filled_in_and_keys_ordered():
    event = {"truncated": True, "data": {"text": "x"}, "source": {"kind": "extension"}, "type": "console_error"}
    normalized = validate_event(event, now_us=NOW_US)
    assert list(normalized) == ["type", "category", "ts", "source", "data", "truncated"]
    assert normalized["category"] == "console"
    assert normalized["ts"] == NOW_US
    minimal = validate_event({"type": "network_idle", "source": {"kind": "cdp"}}, now_us=NOW_US)
    assert list(minimal) == ["type", "category", "ts", "source"]


def test_given_values_are_kept_including_unknown_data_and_source_keys():
    event = valid_event(ts=0, source={"kind": "cdp", "event": "Runtime.exceptionThrown", "metadata": {"a": "b"},
                                      "producer_extra": 1},
                        data={"text": "boom", "future_field": {"nested": [1]}}, truncated=False)
    normalized = validate_event(event, now_us=NOW_US)
    assert normalized == {"type": "console_error", "category": "console", **event}
    sdk_reads(normalized)


def test_the_input_is_not_mutated_and_its_parts_are_not_copied():
    event = {"type": "console_log", "source": {"kind": "cdp", "metadata": {"a": "b"}},
             "data": {"args": ["a"], "text": "a"}}
    before = copy.deepcopy(event)
    normalized = validate_event(event, now_us=NOW_US)
    assert event == before
    # A request's parsed body has no other owner: copying its parts cost 13% of an ingest.
    assert normalized["data"] is event["data"] and normalized["source"] is event["source"]


def test_data_null_is_kept_where_data_is_optional():
    normalized = validate_event(valid_event(data=None), now_us=NOW_US)
    assert normalized["data"] is None
    sdk_reads(normalized)


# --- refusals: exact paths, and the SDK agrees ---

REFUSED = [
    ("not an object", ["x"], {"_schema": ["An event is a JSON object."]}),
    ("unknown type", valid_event(type="foo"), {"type": ["Unknown event type 'foo'."]}),
    ("missing type", {"source": {"kind": "cdp"}}, {"type": [tt.MISSING]}),
    ("type not a string", valid_event(type=["console_log"]), {"type": ["Not a valid string."]}),
    ("category mismatch", valid_event(category="network"),
     {"category": ["Must be 'console' for event type 'console_error'."]}),
    ("category unknown", valid_event(category="nope"), {"category": [f"Must be one of: {', '.join(CATEGORIES)}."]}),
    ("missing source", {"type": "network_idle"}, {"source": [tt.MISSING]}),
    ("source null", valid_event(source=None), {"source": [tt.NULL]}),
    ("source not an object", valid_event(source="cdp"), {"source": {"_schema": [tt.BAD_OBJECT]}}),
    ("source kind missing", valid_event(source={"event": "x"}), {"source": {"kind": [tt.MISSING]}}),
    ("bad source kind", valid_event(source={"kind": "browser"}),
     {"source": {"kind": ["Must be one of: cdp, kernel_api, extension, local_process."]}}),
    ("metadata value not a string", valid_event(source={"kind": "cdp", "metadata": {"a": "b", "n": 1}}),
     {"source": {"metadata": {"n": {"value": ["Not a valid string."]}}}}),
    ("missing console_error.text", valid_event(data={"level": "error"}), {"data": {"text": [tt.MISSING]}}),
    ("missing page_crashed.url", {"type": "page_crashed", "source": {"kind": "cdp"},
                                  "data": {"target_id": "T", "target_type": "page"}}, {"data": {"url": [tt.MISSING]}}),
    ("int where str", valid_event(data={"text": 5}), {"data": {"text": ["Not a valid string."]}}),
    ("args item not a string", valid_event(data={"text": "x", "args": ["a", 2]}),
     {"data": {"args": {1: ["Not a valid string."]}}}),
    ("data not an object", valid_event(data=["text"]), {"data": {"_schema": [tt.BAD_OBJECT]}}),
    ("bad proxy_error.code", {"type": "proxy_error", "source": {"kind": "cdp"},
                              "data": {"code": "teapot", "request_id": "r", "status": 502}},
     {"data": {"code": [f"Must be one of: {', '.join(tt.PROXY_CODE.choices)}."]}}),
    ("bad mouse event_type", {"type": "cdp_command", "source": {"kind": "cdp"},
                              "data": {"method": "Input.dispatchMouseEvent", "event_type": "click"}},
     {"data": {"event_type": ["Must be one of: mousePressed, mouseReleased, mouseMoved, mouseWheel, other."]}}),
    ("cdp_command without data", {"type": "cdp_command", "source": {"kind": "cdp"}}, {"data": [tt.MISSING]}),
    ("cdp_command data null", {"type": "cdp_command", "source": {"kind": "cdp"}, "data": None}, {"data": [tt.NULL]}),
    ("captcha_solve_started without data", {"type": "captcha_solve_started", "source": {"kind": "kernel_api"}},
     {"data": [tt.MISSING]}),
    ("unknown cdp method", {"type": "cdp_command", "source": {"kind": "cdp"}, "data": {"method": "Runtime.evaluate"}},
     {"data": {"method": ["Unknown CDP method 'Runtime.evaluate'."]}}),
    ("cdp method missing", {"type": "cdp_command", "source": {"kind": "cdp"}, "data": {"command_id": 1}},
     {"data": {"method": [tt.MISSING]}}),
    ("oom top task incomplete", {"type": "system_oom_kill", "source": {"kind": "local_process"},
                                 "data": {"pid": 1, "process_name": "chrome", "rss_kb": 10,
                                          "top_tasks": [{"name": "chrome", "pid": 1}]}},
     {"data": {"top_tasks": {0: {"rss_kb": [tt.MISSING]}}}}),
    ("lcp_details not an object", {"type": "page_lcp", "source": {"kind": "cdp"}, "data": {"lcp_details": 3}},
     {"data": {"lcp_details": {"_schema": [tt.BAD_OBJECT]}}}),
    ("headers not an object", {"type": "network_request", "source": {"kind": "cdp"}, "data": {"headers": ["a"]}},
     {"data": {"headers": ["Not a valid mapping type."]}}),
    ("float where str", {"type": "cdp_connect", "source": {"kind": "cdp"}, "data": {"connection_id": 1.5}},
     {"data": {"connection_id": ["Not a valid string."]}}),
    ("fractional int", {"type": "monitor_reconnected", "source": {"kind": "cdp"},
                        "data": {"reconnect_duration_ms": 1.5}},
     {"data": {"reconnect_duration_ms": ["Not a valid integer."]}}),
    ("ts fractional float", valid_event(ts=1.5), {"ts": ["Not a valid integer."]}),
    ("ts null", valid_event(ts=None), {"ts": [tt.NULL]}),
]


@pytest.mark.parametrize(("event", "expected"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_refused_with_the_exact_path(event, expected):
    assert errors_of(event) == expected


@pytest.mark.parametrize("event", [case[1] for case in REFUSED if case[0] != "not an object"],
                         ids=[case[0] for case in REFUSED if case[0] != "not an object"])
def test_the_sdk_refuses_them_too(event):
    # Fill in what Lantern would have defaulted, so the SDK sees the event as Lantern would have stored it.
    event = dict(event)
    event.setdefault("ts", 1)
    if isinstance(event.get("type"), str) and event["type"] in EVENT_CATEGORY:
        event.setdefault("category", EVENT_CATEGORY[event["type"]])
    assert sdk_rejects(event)


# Lantern is stricter than the SDK here on purpose: the SDK parses in pydantic's lax mode and would coerce these,
# so storing them verbatim would hand clients of other (non-Python) SDKs values of the wrong JSON type, and an
# unknown top-level key is far more likely a producer's typo than a field the catalogue lacks.
STRICTER_BY_DESIGN = [
    ("unknown top-level key", valid_event(severity="high"), {"severity": [tt.UNKNOWN]}),
    ("ts bool", valid_event(ts=True), {"ts": ["Not a valid integer."]}),
    ("ts integral float", valid_event(ts=5.0), {"ts": ["Not a valid integer."]}),
    ("ts string", valid_event(ts="5"), {"ts": ["Not a valid integer."]}),
    ("ts negative", valid_event(ts=-1), {"ts": ["Must be between 0 and 9223372036854775807."]}),
    ("str where int", valid_event(data={"text": "x", "line": "3"}), {"data": {"line": ["Not a valid integer."]}}),
    ("bool where int", valid_event(data={"text": "x", "line": True}), {"data": {"line": ["Not a valid integer."]}}),
    ("bool where float", {"type": "page_load", "source": {"kind": "cdp"}, "data": {"cdp_timestamp": False}},
     {"data": {"cdp_timestamp": ["Not a valid number."]}}),
    ("string where float", {"type": "page_load", "source": {"kind": "cdp"}, "data": {"cdp_timestamp": "1.5"}},
     {"data": {"cdp_timestamp": ["Not a valid number."]}}),
    ("NaN where float", {"type": "page_load", "source": {"kind": "cdp"}, "data": {"cdp_timestamp": float("nan")}},
     {"data": {"cdp_timestamp": ["Not a valid number."]}}),
    ("int where bool", valid_event(truncated=1), {"truncated": ["Not a valid boolean."]}),
    ("string where bool", {"type": "network_loading_failed", "source": {"kind": "cdp"},
                           "data": {"canceled": "true"}}, {"data": {"canceled": ["Not a valid boolean."]}}),
]


@pytest.mark.parametrize(("event", "expected"), [case[1:] for case in STRICTER_BY_DESIGN],
                         ids=[case[0] for case in STRICTER_BY_DESIGN])
def test_stricter_than_the_sdk_by_design(event, expected):
    assert errors_of(event) == expected
    event = {"category": EVENT_CATEGORY[event["type"]], "ts": 1, **event}
    sdk_reads(event)  # the SDK would have coerced it


def test_every_error_of_an_event_is_reported():
    event = {"type": "proxy_error", "category": "page", "ts": 1.5, "source": {"kind": "vm", "metadata": {"a": 1}},
             "data": {"code": "nope", "status": "502", "method": 3}, "truncated": "no", "extra": 1}
    assert errors_of(event) == {
        "extra": [tt.UNKNOWN],
        "category": ["Must be 'network' for event type 'proxy_error'."],
        "ts": ["Not a valid integer."],
        "source": {"kind": ["Must be one of: cdp, kernel_api, extension, local_process."],
                   "metadata": {"a": {"value": ["Not a valid string."]}}},
        "truncated": ["Not a valid boolean."],
        "data": {"code": [f"Must be one of: {', '.join(tt.PROXY_CODE.choices)}."],
                 "request_id": [tt.MISSING],
                 "status": ["Not a valid integer."],
                 "method": ["Not a valid string."]},
    }


def test_an_unknown_type_still_reports_the_other_errors():
    assert errors_of({"type": "foo", "ts": "x", "source": {}, "data": {"anything": 1}}) == {
        "type": ["Unknown event type 'foo'."], "ts": ["Not a valid integer."], "source": {"kind": [tt.MISSING]}}


def test_cdp_common_fields_are_checked_for_every_method():
    event = {"type": "cdp_command", "source": {"kind": "cdp"},
             "data": {"method": "Page.close", "command_id": "1", "connection_id": 2, "session_id": None}}
    assert errors_of(event) == {"data": {"command_id": ["Not a valid integer."],
                                         "connection_id": ["Not a valid string."]}}
