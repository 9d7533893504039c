"""The page category: tabs opened, navigations, a document's DOMContentLoaded and load, crashes.

    Target.attachedToTarget (page)  page_tab_opened (tabs opened after start)
    Page.frameNavigated             page_navigation (a top-level one starts a new nav_seq)
    Page.domContentEventFired       page_dom_content_loaded
    Page.loadEventFired             page_load
    Inspector.targetCrashed         page_crashed

Page.frameNavigated also keeps each target's current document (url, loader_id, nav_seq), which every
category's events carry, whether this one is enabled or not.
"""
from browserhost.capture.target import PAGE_TYPES
from browserhost.capture.text import MAX_SHORT, MAX_URL, Cut


class Page:
    """Handlers of the Page and Inspector events above, for the sessions in `targets` (session id ->
    Target); `tab_opened` is the connection's `on_tab_opened`."""

    def __init__(self, targets, categories, emit):
        self._targets, self._categories, self._emit = targets, categories, emit

    def handlers(self):
        return {"Page.frameNavigated": self._on_frame_navigated, "Page.domContentEventFired": self._on_dom_content,
                "Page.loadEventFired": self._on_load, "Inspector.targetCrashed": self._on_crashed}

    def set_up(self, send, target):
        if target.target_type in PAGE_TYPES:
            # Inspector first: once a page event arrives, a crash of that page is reported too.
            send("Inspector.enable", session_id=target.session_id)
            send("Page.enable", session_id=target.session_id)

    def tab_opened(self, target, info):
        if "page" not in self._categories:
            return
        cut = Cut()
        data = {"target_id": target.target_id, "target_type": "page", "url": cut(info.get("url", ""), MAX_URL),
                "title": cut(info.get("title", ""), MAX_SHORT)}
        if info.get("openerId"):
            data["opener_id"] = info["openerId"]
        self._emit("page_tab_opened", "page", target.source("Target.attachedToTarget"), data, cut.cut)

    def _on_frame_navigated(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None:
            return
        frame = params.get("frame", {})
        if frame.get("id") == target.target_id:  # the target's own document (a tab's, or an OOPIF's root)
            with target.document_lock:
                target.url, target.loader_id = frame.get("url", ""), frame.get("loaderId")
                target.nav_seq += 1
        if "page" not in self._categories:
            return
        cut = Cut()
        data = {"session_id": session_id, "target_id": target.target_id, "target_type": target.target_type,
                "frame_id": frame.get("id", ""), "url": cut(frame.get("url", ""), MAX_URL)}
        if frame.get("loaderId"):
            data["loader_id"] = frame["loaderId"]
        if frame.get("parentId"):
            data["parent_frame_id"] = frame["parentId"]
        self._emit("page_navigation", "page", target.source("Page.frameNavigated"), data, cut.cut)

    def _on_dom_content(self, params, session_id):
        self._page_timing("page_dom_content_loaded", "Page.domContentEventFired", params, session_id)

    def _on_load(self, params, session_id):
        self._page_timing("page_load", "Page.loadEventFired", params, session_id)

    def _page_timing(self, event_type, method, params, session_id):
        target = self._targets.get(session_id)
        if target is None or "page" not in self._categories:
            return
        cut = Cut()
        data = target.context(cut)
        if isinstance(params.get("timestamp"), (int, float)):
            data["cdp_timestamp"] = float(params["timestamp"])
        self._emit(event_type, "page", target.source(method), data, cut.cut)

    def _on_crashed(self, _params, session_id):
        target = self._targets.get(session_id)
        if target is None or "page" not in self._categories:
            return
        cut = Cut()
        data = {"target_id": target.target_id, "target_type": target.target_type, "url": cut(target.url, MAX_URL)}
        self._emit("page_crashed", "page", target.source("Inspector.targetCrashed"), data, cut.cut)
