"""This host's side of the app's internal API (lantern_wire/hosts.py): `AppClient` calls it, `Reports` sends
what the host's browsers report, in order, in batches, through whatever outage of the app.

Reports (telemetry, log lines, activity, a session's end) are queued in the order they happen and sent
by one thread, as many at once as have gathered while the previous request was out: nothing waits for
the app but that thread. A report leaves the queue only once the app answered it (it answers after its
commit); when the app cannot be reached, or answers 5xx, the same reports go again after a pause that
doubles up to MAX_BACKOFF_SECONDS, and the app applies a telemetry or log report's batch once. Past
`limit` queued events and lines, new telemetry and log reports are dropped; the session's next telemetry
report tells the app how many events it lost (the session's telemetry_dropped counts them).
"""
import collections
import http.client
import json
import logging
import threading
import time
from urllib.parse import urlsplit

from lantern_wire.hosts import MAX_REPORT_ITEMS, MAX_REPORT_LINES, REPORTS

logger = logging.getLogger(__name__)
MAX_BACKOFF_SECONDS = 2.0
# Events and lines per request (lantern_wire.hosts.MAX_REPORT_ITEMS): usually a few hundred kilobytes, answered
# within tens of milliseconds. A request the app finds too large (413: network events carry bodies) is sent again
# as its first half.


class AppUnreachable(Exception):
    """No answer from the app (down, restarting, the network), or a 5xx: worth trying again."""


class Refused(Exception):
    """The app answered 4xx: the same request will not do better (401: this host's credential is refused)."""

    def __init__(self, status, message):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class AppClient:
    """POSTs of JSON to the app with this host's credential, on one kept-alive connection per thread."""

    def __init__(self, app_url, credential, timeout=30.0):
        parts = urlsplit(app_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"APP_URL must be an http(s) URL, not {app_url!r}")
        self._connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self._netloc, self._base = parts.netloc, parts.path
        self.credential = credential
        self._headers = {"Authorization": f"Bearer {credential}"}
        self._timeout = timeout
        self._local = threading.local()

    def post(self, path, body):
        """The app's JSON answer; AppUnreachable or Refused. A kept-alive connection the app closed meanwhile (gunicorn
        closes idle ones after a few seconds) is replaced once: every call of the internal API may be repeated."""
        return self._request("POST", path, json.dumps(body).encode(), "application/json")

    def put_file(self, path, file, content_type):
        """PUT the whole of an open binary `file` (read from its start) as the body; the app's JSON answer."""
        return self._request("PUT", path, file, content_type)

    def _request(self, method, path, body, content_type):
        headers = {**self._headers, "Content-Type": content_type}
        if hasattr(body, "seek"):
            headers["Content-Length"] = str(body.seek(0, 2))
        connection = getattr(self._local, "connection", None)
        for fresh in ((False, True) if connection is not None else (True,)):
            if fresh:
                connection = self._local.connection = self._connection_class(self._netloc, timeout=self._timeout)
            if hasattr(body, "seek"):
                body.seek(0)
            unsent = None
            try:
                try:
                    connection.request(method, self._base + path, body=body, headers=headers)
                except OSError as error:
                    if connection.sock is None:  # not connected
                        raise
                    # A server that will not read the body (a proxy's 413) answers, then closes: its answer is
                    # still there to read, and is what went wrong.
                    unsent = error
                response = connection.getresponse()
                answer_data = response.read()
                if unsent is not None:
                    connection.close()
                    self._local.connection = None
                break
            except (OSError, http.client.HTTPException) as error:
                error = unsent or error
                connection.close()
                self._local.connection = None
                if fresh:
                    raise AppUnreachable(f"{type(error).__name__}: {error}") from None
        if response.status >= 500 or (unsent is not None and response.status < 400):
            sent = f" before the whole body went ({unsent})" if unsent else ""
            raise AppUnreachable(f"HTTP {response.status}{sent}")
        try:
            answer = json.loads(answer_data or b"null")
        except ValueError:
            if response.status < 400:
                raise AppUnreachable(f"HTTP {response.status} with a body that is not JSON") from None
            answer = None  # a proxy's own page (nginx's 413, 401, 403): refused all the same
        if response.status >= 400:
            raise Refused(response.status, answer.get("message", "") if isinstance(answer, dict) else response.reason)
        return answer

    def close(self):
        """Close this thread's connection (the others close with their threads)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None


class Reports:
    """The queue of reports to the app and the thread that sends them: `start()`, then `telemetry()`,
    `logs()`, `activity()`, `ended()` from any thread (none waits), `flush()` to wait until what was queued
    so far is answered, `stop()`. `on_refused(status)` is called once when the app refuses this host (401)."""

    def __init__(self, client, *, limit, on_refused=None):
        self._client = client
        self._limit = limit
        self._on_refused = on_refused or (lambda status: None)
        self._queue = collections.deque()  # (ticket, report, size)
        self._condition = threading.Condition()
        self._queued_size = 0
        self._tickets = 0  # reports queued so far; the answered ones are those below _answered
        self._answered = 0
        self._batches = collections.defaultdict(int)
        self._lost = collections.Counter()  # events dropped per session, not yet told to the app
        self.dropped = 0
        self._stopping = False
        self._refused = False
        self._thread = threading.Thread(target=self._run, name="reports", daemon=True)

    def start(self):
        self._thread.start()
        return self

    # -- queueing

    def telemetry(self, session_id, events):
        for start in range(0, len(events), MAX_REPORT_LINES):
            self._telemetry(session_id, events[start:start + MAX_REPORT_LINES])

    def _telemetry(self, session_id, events):
        with self._condition:
            if not self._room_for(len(events)):
                self._lost[session_id] += len(events)
                return
            report = {"session_id": session_id, "kind": "telemetry", "events": events}
            if self._lost[session_id]:
                report["lost"] = self._lost.pop(session_id)
            self._put(report, len(events), batched=True)

    def logs(self, session_id, source, log_name, lines):
        with self._condition:
            for start in range(0, len(lines), MAX_REPORT_LINES):
                part = lines[start:start + MAX_REPORT_LINES]
                if self._room_for(len(part)):
                    self._put({"session_id": session_id, "kind": "logs", "source": source, "log_name": log_name,
                               "lines": part}, len(part), batched=True)

    def activity(self, session_id):
        with self._condition:
            self._put({"session_id": session_id, "kind": "activity"}, 0)

    def ended(self, session_id, reason):
        with self._condition:
            self._put({"session_id": session_id, "kind": "ended", "reason": reason}, 0)

    def forget(self, session_id):
        """The session's browser and capture have stopped: its batch numbers and lost count go (a long-running host
        would otherwise keep them for every session it ever ran)."""
        with self._condition:
            self._batches.pop(session_id, None)
            self._lost.pop(session_id, None)

    def _room_for(self, items):
        """Whether a report of `items` events or lines fits in the queue; if not, they are counted as dropped."""
        if self._queued_size + items + 1 <= self._limit:
            return True
        if not self.dropped:
            logger.warning("the app has not taken this host's reports for a while: %s queued; new telemetry and "
                           "log lines are dropped (and counted) until it does", self._queued_size)
        self.dropped += items
        return False

    def _put(self, report, items, batched=False):
        """Queue `report`, which carries `items` events or lines; it counts as one more, as the app counts it."""
        size = items + 1
        if batched:
            self._batches[report["session_id"]] += 1
            report["batch"] = self._batches[report["session_id"]]
        self._tickets += 1
        self._queue.append((self._tickets, report, size))
        self._queued_size += size
        self._condition.notify_all()

    # -- waiting

    def flush(self, timeout):
        """Wait until every report queued before this call was answered (or the app refused this host);
        False when `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._condition:
            wanted = self._tickets
            while self._answered < wanted and not self._refused:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._condition.wait(left)
        return True

    def stop(self, timeout=10.0):
        """Send what is queued (waiting at most `timeout`), then end the thread."""
        self.flush(timeout)
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        self._thread.join(timeout=5)

    # -- sending

    def _run(self):
        backoff, away_since, most = 0.0, None, MAX_REPORT_ITEMS
        while True:
            with self._condition:
                while not self._queue and not self._stopping:
                    self._condition.wait()
                if self._stopping or self._refused:
                    return
                taken, size = [], 0
                for item in self._queue:
                    if taken and size + item[2] > most:
                        break
                    taken.append(item)
                    size += item[2]
            try:
                answer = self._client.post(REPORTS, {"reports": [report for _, report, _ in taken]})
            except AppUnreachable as error:
                backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF_SECONDS)
                if away_since is None:  # once per outage
                    away_since = time.monotonic()
                    logger.warning("the app does not take this host's reports (%s); they wait, sent again every %.0f "
                                   "s at most", error, MAX_BACKOFF_SECONDS)
                with self._condition:  # a stop() wakes it
                    self._condition.wait_for(lambda: self._stopping, timeout=backoff)
                continue
            except Refused as error:
                if error.status == 413 and len(taken) > 1:
                    most = max(1, size // 2)
                    continue
                if error.status == 401:
                    logger.error("the app refuses this host's credential (%s): reports stop", error)
                    with self._condition:
                        self._refused = True
                        self._condition.notify_all()
                    self._on_refused(error.status)
                    return
                logger.error("the app refused %s report(s) (%s); they are dropped", len(taken), error)
                answer = {"results": []}
            backoff, most = 0.0, MAX_REPORT_ITEMS
            if away_since is not None:
                logger.info("the app takes reports again, after %.1f s", time.monotonic() - away_since)
                away_since = None
            for (_, report, _), result in zip(taken, answer.get("results", ()), strict=False):
                if result.get("status") == "refused":
                    logger.warning("the app refused a %s report of session %s: %s", report["kind"],
                                   report["session_id"], result.get("message"))
            with self._condition:
                for _ in taken:
                    _, _, done = self._queue.popleft()
                    self._queued_size -= done
                self._answered = taken[-1][0]
                self._condition.notify_all()
