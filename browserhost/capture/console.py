"""The console category: what a page logs and throws.

    Runtime.consoleAPICalled        console_log (console_error when type is "error")
    Runtime.exceptionThrown         console_error (text "Uncaught Error: boom", line, column,
                                    source_url, stack_trace)

Runtime.enable (sent here, for every session) replays the console messages a page stored: for pages
open before start() the ones older than start() are left out.
"""
import json
import math

from browserhost.capture.text import MAX_SHORT, MAX_URL, Cut

MAX_TEXT = 4096           # console text, error text
MAX_ARGS = 20
MAX_ARG = 1024
MAX_FRAMES = 50
MAX_STACK_PARENTS = 4


class Console:
    """Handlers of the Runtime events above, for the sessions in `targets` (session id -> Target)."""

    def __init__(self, targets, categories, emit):
        self._targets, self._categories, self._emit = targets, categories, emit

    def handlers(self):
        return {"Runtime.consoleAPICalled": self._on_console, "Runtime.exceptionThrown": self._on_exception}

    def set_up(self, send, target):
        # Also what reports the execution contexts, whose frames console and interaction events name.
        send("Runtime.enable", session_id=target.session_id)

    def _news(self, params, session_id):
        """The session's Target while console is on, for a message newer than the target's news_from_ms."""
        if "console" not in self._categories:
            return None
        target = self._targets.get(session_id)
        if target is None or params.get("timestamp", math.inf) < target.news_from_ms:
            return None
        return target

    def _on_console(self, params, session_id):
        target = self._news(params, session_id)
        if target is None:
            return
        cut = Cut()
        args = [cut(_remote_text(arg), MAX_ARG) for arg in params.get("args", ())[:MAX_ARGS]]
        if len(params.get("args", ())) > MAX_ARGS:
            cut.cut = True
        level = params.get("type", "log")
        data = target.context(cut, frame_id=target.frames.get(params.get("executionContextId")))
        data.update(level=level, args=args, text=cut(args[0] if args else "", MAX_TEXT))
        if params.get("stackTrace"):
            data["stack_trace"] = _stack_trace(params["stackTrace"], cut)
        event_type = "console_error" if level == "error" else "console_log"
        self._emit(event_type, "console", target.source("Runtime.consoleAPICalled"), data, cut.cut)

    def _on_exception(self, params, session_id):
        target = self._news(params, session_id)
        if target is None:
            return
        details = params.get("exceptionDetails", {})
        cut = Cut()
        data = target.context(cut, frame_id=target.frames.get(details.get("executionContextId")))
        data["text"] = cut(_exception_text(details), MAX_TEXT)
        for key, name in (("lineNumber", "line"), ("columnNumber", "column")):
            if isinstance(details.get(key), int):
                data[name] = details[key]
        if details.get("url"):
            data["source_url"] = cut(details["url"], MAX_URL)
        if details.get("stackTrace"):
            data["stack_trace"] = _stack_trace(details["stackTrace"], cut)
        self._emit("console_error", "console", target.source("Runtime.exceptionThrown"), data, cut.cut)


def _remote_text(value):
    """A console argument (a CDP RemoteObject) as the console would print it."""
    if "value" in value:
        item = value["value"]
        if isinstance(item, str):
            return item
        if isinstance(item, bool):
            return "true" if item else "false"
        if item is None:
            return "null"
        if isinstance(item, float) and item.is_integer():
            return str(int(item))
        if isinstance(item, (int, float)):
            return str(item)
        return json.dumps(item)
    if "unserializableValue" in value:  # NaN, Infinity, -0, 12n
        return value["unserializableValue"]
    if value.get("type") == "undefined":
        return "undefined"
    return value.get("description") or value.get("className") or value.get("type", "")


def _exception_text(details):
    """"Uncaught Error: boom", as the console shows an uncaught exception."""
    prefix = details.get("text", "Uncaught")
    exception = details.get("exception")
    if not exception:
        return prefix
    if "description" in exception and exception.get("type") == "object":
        message = exception["description"].split("\n    at ", 1)[0]
    else:
        message = _remote_text(exception)
    return f"{prefix} {message}" if message else prefix


def _stack_trace(trace, cut, depth=0):
    """CDP's Runtime.StackTrace with the keys the SDK knows, bounded."""
    frames = trace.get("callFrames") or []
    if len(frames) > MAX_FRAMES:
        cut.cut = True
    stack = {"callFrames": [{
        "functionName": cut(frame.get("functionName", ""), MAX_SHORT), "scriptId": str(frame.get("scriptId", "")),
        "url": cut(frame.get("url", ""), MAX_URL), "lineNumber": _int(frame.get("lineNumber")),
        "columnNumber": _int(frame.get("columnNumber"))} for frame in frames[:MAX_FRAMES]]}
    if isinstance(trace.get("description"), str):
        stack["description"] = cut(trace["description"], MAX_SHORT)
    if isinstance(trace.get("parent"), dict):
        if depth < MAX_STACK_PARENTS:
            stack["parent"] = _stack_trace(trace["parent"], cut, depth + 1)
        else:
            cut.cut = True
    return stack


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
