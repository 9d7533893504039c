"""The interaction category: clicks, keys and settled scrolls, which a script in an isolated world,
invisible to the page, reports through a binding.

    Runtime.bindingCalled           interaction_click, interaction_key, interaction_scroll_settled
                                    (at most 20/s per page, checked there and here; no key value is
                                    reported from a password field)
"""
import json

from browserhost.capture.target import INTERACTIONS_PER_SECOND, PAGE_TYPES
from browserhost.capture.text import MAX_SHORT, Cut

BINDING = "__lanternCapture"
WORLD = "__lantern_capture"
INTERACTION_SCRIPT = """(() => {
  const send = globalThis.%(binding)s;
  if (typeof send !== "function" || globalThis.__lanternCaptureOn) return;
  globalThis.__lanternCaptureOn = true;
  let second = 0, count = 0;
  const emit = (event) => {
    const now = Date.now();
    if (now - second >= 1000) { second = now; count = 0; }
    if (++count > %(rate)d) return;
    try { send(JSON.stringify(event)); } catch (error) {}
  };
  const selector = (element) => {
    const parts = [];
    for (let node = element; node && node.nodeType === 1 && parts.length < 5; node = node.parentElement) {
      if (node.id) { parts.unshift("#" + CSS.escape(node.id)); break; }
      let part = node.tagName.toLowerCase();
      const parent = node.parentElement;
      if (parent) {
        const same = Array.from(parent.children).filter((child) => child.tagName === node.tagName);
        if (same.length > 1) part += ":nth-of-type(" + (same.indexOf(node) + 1) + ")";
      }
      parts.unshift(part);
    }
    return parts.join(" > ");
  };
  const describe = (element) => element instanceof Element
    ? {tag: element.tagName, selector: selector(element)} : {};
  addEventListener("click", (event) => {
    const element = event.target instanceof Element ? event.target : null;
    emit({t: "click", x: Math.round(event.clientX), y: Math.round(event.clientY), ...describe(element),
          text: element ? (element.innerText || element.textContent || "").trim().slice(0, 200) : undefined});
  }, true);
  addEventListener("keydown", (event) => {
    const element = document.activeElement;
    const secret = element && element.tagName === "INPUT" && element.type === "password";
    emit({t: "key", key: secret ? undefined : event.key, ...describe(element)});
  }, true);
  const scrolls = new Map();
  const position = (target) => target instanceof Element
    ? [Math.round(target.scrollLeft), Math.round(target.scrollTop)] : [Math.round(scrollX), Math.round(scrollY)];
  const settled = new Map([[document, position(document)]]);
  addEventListener("scroll", (event) => {
    const target = event.target;
    let state = scrolls.get(target);
    if (!state) {
      state = {from: settled.get(target) || position(target)};
      scrolls.set(target, state);
    }
    clearTimeout(state.timer);
    state.timer = setTimeout(() => {
      scrolls.delete(target);
      const to = position(target);
      settled.set(target, to);
      emit({t: "scroll", from_x: state.from[0], from_y: state.from[1], to_x: to[0], to_y: to[1],
            target_selector: target instanceof Element ? selector(target) : "document"});
    }, 150);
  }, {capture: true, passive: true});
})();""" % {"binding": BINDING, "rate": INTERACTIONS_PER_SECOND}

# What the page script reports: its "t" -> (event type, string fields, integer fields).
INTERACTIONS = {
    "click": ("interaction_click", ("selector", "tag", "text"), ("x", "y")),
    "key": ("interaction_key", ("key", "selector", "tag"), ()),
    "scroll": ("interaction_scroll_settled", ("target_selector",), ("from_x", "from_y", "to_x", "to_y")),
}


class Interaction:
    """The handler of the binding's calls, for the sessions in `targets` (session id -> Target)."""

    def __init__(self, targets, categories, emit):
        self._targets, self._categories, self._emit = targets, categories, emit

    def handlers(self):
        return {"Runtime.bindingCalled": self._on_binding}

    def set_up(self, send, target):
        if target.target_type in PAGE_TYPES:
            # The binding exists only in the isolated world the script runs in: the page can neither see
            # it nor forge interaction events through it.
            send("Runtime.addBinding", {"name": BINDING, "executionContextName": WORLD}, session_id=target.session_id)
            send("Page.addScriptToEvaluateOnNewDocument",
                 {"source": INTERACTION_SCRIPT, "worldName": WORLD, "runImmediately": True},
                 session_id=target.session_id)

    def _on_binding(self, params, session_id):
        if "interaction" not in self._categories or params.get("name") != BINDING:
            return
        target = self._targets.get(session_id)
        payload = params.get("payload", "")
        if target is None or len(payload) > 4 * MAX_SHORT + 1024 or not target.take_token():
            return
        try:
            report = json.loads(payload)
        except ValueError:
            return
        if not isinstance(report, dict) or report.get("t") not in INTERACTIONS:
            return
        event_type, strings, numbers = INTERACTIONS[report["t"]]
        cut = Cut()
        data = target.context(cut, frame_id=target.frames.get(params.get("executionContextId")))
        for name in strings:
            if isinstance(report.get(name), str):
                data[name] = cut(report[name], MAX_SHORT)
        for name in numbers:
            value = report.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 2**31:
                data[name] = int(value)
        self._emit(event_type, "interaction", target.source("Runtime.bindingCalled"), data, cut.cut)
