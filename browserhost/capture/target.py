"""`Target`: what the capture keeps of one attached CDP session, which the connection and every
category read and write (on the CDP reader; the document also on the calling thread)."""
import threading
import time

from browserhost.capture.text import MAX_URL

ATTACHED_TYPES = ("page", "iframe", "worker", "service_worker", "shared_worker")
PAGE_TYPES = ("page", "iframe")
INTERACTIONS_PER_SECOND = 20


class Target:
    """One attached session and what its events need: ids, the current document, pending requests."""

    def __init__(self, session_id, parent_session_id, info, news_from_ms=0.0):
        self.session_id = session_id
        self.parent_session_id = parent_session_id
        self.target_id = info.get("targetId", "")
        self.target_type = info.get("type") if info.get("type") in ATTACHED_TYPES else "other"
        self.url = info.get("url", "")
        self.loader_id = None
        self.nav_seq = 0
        self.frames = {}      # execution context id -> frame id
        self.requests = {}    # CDP requestId -> network's request, oldest first
        self.tokens = float(INTERACTIONS_PER_SECOND)
        self.refilled = time.monotonic()
        # Runtime.enable replays the console messages and exceptions the page stored (up to 1000). For a
        # target attached after start() they are news (logged before Runtime.enable was through); for one
        # open before, those older than start() (CDP stamps them in Unix milliseconds) are not.
        self.news_from_ms = news_from_ms
        self.document_lock = threading.Lock()  # url, loader_id and nav_seq: the reader and the calling thread
        self.ready = threading.Event()         # its setup commands are answered

    def context(self, cut, *, frame_id=None, url=None):
        """The SDK's BrowserEventContext fields."""
        data = {"session_id": self.session_id, "target_id": self.target_id, "target_type": self.target_type,
                "nav_seq": self.nav_seq, "url": cut(self.url if url is None else url, MAX_URL)}
        if self.target_type in PAGE_TYPES:  # a worker has no frame
            frame_id = frame_id or self.target_id  # a page's main frame has its target's id
            if frame_id == self.target_id and self.loader_id:
                data["loader_id"] = self.loader_id
        if frame_id:
            data["frame_id"] = frame_id
        return data

    def source(self, method):
        return {"kind": "cdp", "event": method,
                "metadata": {"session_id": self.session_id, "target_id": self.target_id}}

    def take_token(self):
        now = time.monotonic()
        self.tokens = min(INTERACTIONS_PER_SECOND, self.tokens + (now - self.refilled) * INTERACTIONS_PER_SECOND)
        self.refilled = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
