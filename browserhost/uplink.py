"""This host's side of the app's internal API (lantern_wire/hosts.py, lantern_wire/reports.py): `AppClient` is its
one client of the app (registration, heart-beats, reports, recordings' uploads, extensions' downloads), and
`Reports` sends what the host's browsers report, in order, in batches, through whatever outage of the app.

Every call goes through one urllib3 pool (kept-alive connections) with one retry policy (`RETRY`): no answer, or a
5xx, is tried again with a backoff doubling up to 2 s, for as long as the caller can wait (`patience`); a 4xx is
not (the same request will not do better). Every call of the internal API may be repeated: the app applies a
report's batch once, and an upload of a recording saved already is answered as saved.

Reports (telemetry, log lines, activity, a session's end) are queued in the order they happen and sent
by one thread, as many at once as have gathered while the previous request was out: nothing waits for
the app but that thread. A report leaves the queue only once the app answered it (it answers after its
commit). Past `limit` queued events and lines, new telemetry and log reports are dropped; the session's next
telemetry report tells the app how many events it lost (the session's telemetry_dropped counts them).
"""
import collections
import json
import logging
import os
import threading
import time
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import HTTPError
from urllib3.util import Retry

from lantern_wire.hosts import MAX_REPORT_ITEMS, MAX_REPORT_LINES, REPORTS
from lantern_wire.reports import (
    ActivityReport,
    EndedReport,
    InvalidShape,
    LogsReport,
    ReportResults,
    TelemetryReport,
    parse,
)

logger = logging.getLogger(__name__)
# How long a call tries by default before it says the app is unreachable (a caller that can wait longer, an upload,
# says so; one that cannot, a heartbeat, is tried again at its next beat).
PATIENCE_SECONDS = 5.0
CONNECT_SECONDS = 5.0
# The least an attempt gets once a call's patience is spent (a second try replaces a connection the app closed).
MIN_ATTEMPT_SECONDS = 2.0
# The reports' sender's patience: a batch's commit on a loaded app can take seconds, and the sender starts again.
REPORTS_PATIENCE_SECONDS = 30.0
CHUNK = 256 * 1024
# Connections kept alive to the app: the reports' sender, the heartbeat, registration, uploads and downloads.
POOL_SIZE = 8
# Events and lines per request (lantern_wire.hosts.MAX_REPORT_ITEMS): usually a few hundred kilobytes, answered
# within tens of milliseconds. A request the app finds too large (413: network events carry bodies) is sent again
# as its first half.


class Patience(Retry):
    """urllib3's Retry given up at a `deadline` (time.monotonic()) rather than after a count, and never before a
    second try (at once: a kept-alive connection the app closed meanwhile is replaced)."""

    def __init__(self, *args, deadline=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def new(self, **kwargs):
        return super().new(**{"deadline": self.deadline, **kwargs})

    def is_exhausted(self):
        return super().is_exhausted() or (len(self.history) > 1 and time.monotonic() >= self.deadline)


class AttemptTimeout(urllib3.Timeout):
    """Each attempt's timeouts (urllib3 clones it per attempt) held to what is left of the call's patience (`total`):
    a call against a hung app ends about `patience` after it began, not after two whole read timeouts."""

    def __init__(self, *, connect, read, deadline):
        super().__init__(connect=connect, read=read, total=max(deadline - time.monotonic(), MIN_ATTEMPT_SECONDS))
        self.connect_seconds, self.read_seconds, self.deadline = connect, read, deadline

    def clone(self):
        return AttemptTimeout(connect=self.connect_seconds, read=self.read_seconds, deadline=self.deadline)


# Any method (each may be repeated), every 5xx; no redirect followed; a Retry-After is not waited for (a deadline is).
RETRY = Patience(total=None, backoff_factor=0.25, backoff_max=2.0, status_forcelist=range(500, 600),
                 allowed_methods=None, redirect=False, raise_on_status=False, respect_retry_after_header=False)


class AppUnreachable(Exception):
    """No answer from the app (down, restarting, the network), or a 5xx: worth trying again."""


class Refused(Exception):
    """The app answered 4xx: the same request will not do better (401: this host's credential is refused)."""

    def __init__(self, status, message):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class AppClient:
    """Calls of the app's internal API with this host's credential, from any thread, on kept-alive connections."""

    def __init__(self, app_url, credential, timeout=30.0, *, patience=PATIENCE_SECONDS, retry=RETRY):
        parts = urlsplit(app_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"APP_URL must be an http(s) URL, not {app_url!r}")
        self._base = parts.path
        self.credential = credential
        self.patience, self.retry = patience, retry
        self.connect_seconds, self.read_seconds = min(CONNECT_SECONDS, timeout), timeout
        self._headers = {"Authorization": f"Bearer {credential}"}
        self._pool = urllib3.connection_from_url(
            app_url, maxsize=POOL_SIZE, block=False, retries=retry, blocksize=CHUNK,
            timeout=urllib3.Timeout(connect=self.connect_seconds, read=timeout))

    def post(self, path, body, *, patience=None):
        """The app's JSON answer to `body` (JSON-ready: a lantern_wire.reports shape's to_dict()); AppUnreachable
        once `patience` seconds passed without one, Refused for a 4xx."""
        return self._answer(self._request("POST", path, json.dumps(body).encode(), "application/json", patience))

    def put_file(self, path, file, content_type, *, patience=None):
        """PUT the whole of an open binary `file` (from its start, read as it is sent) as the body; the app's JSON
        answer. A proxy that refuses it before reading it (nginx's 413) is heard: its answer is Refused."""
        size = file.seek(0, os.SEEK_END)
        file.seek(0)
        return self._answer(self._request("PUT", path, file, content_type, patience, length=size))

    def download(self, path, into, *, patience=None, limit=None):
        """Stream the body of GET `path` into the open binary file `into`, a chunk at a time; the bytes written.
        More than `limit` bytes: ValueError. A download cut short, or still going after `patience`, is AppUnreachable
        (the caller starts it again)."""
        deadline = time.monotonic() + (self.patience if patience is None else patience)
        response = self._request("GET", path, None, None, patience, preload=False)
        try:
            if response.status >= 300:
                self._answer(response)  # reads its (small) body: AppUnreachable, or Refused
                raise AppUnreachable(f"HTTP {response.status}")
            written = 0
            for chunk in response.stream(CHUNK):
                written += len(chunk)
                if limit is not None and written > limit:
                    raise ValueError(f"{path} is larger than {limit} bytes")
                into.write(chunk)
                if time.monotonic() > deadline:
                    raise AppUnreachable(f"{path}: {written} bytes in {patience} s, not all of it")
            return written
        except (HTTPError, OSError) as error:
            raise AppUnreachable(f"{type(error).__name__}: {error}") from None
        finally:
            response.release_conn()

    def _request(self, method, path, body, content_type, patience, *, length=None, preload=True):
        headers = dict(self._headers)
        if content_type:
            headers["Content-Type"] = content_type
        if length is not None:
            headers["Content-Length"] = str(length)
        deadline = time.monotonic() + (self.patience if patience is None else patience)
        retries = self.retry.new(deadline=deadline)
        timeout = AttemptTimeout(connect=self.connect_seconds, read=self.read_seconds, deadline=deadline)
        try:
            return self._pool.urlopen(method, self._base + path, body=body, headers=headers, retries=retries,
                                      timeout=timeout, redirect=False, preload_content=preload)
        except HTTPError as error:  # MaxRetryError names what failed last
            reason = getattr(error, "reason", None) or error
            raise AppUnreachable(f"{type(reason).__name__}: {reason}") from None

    @staticmethod
    def _answer(response):
        if response.status >= 500:
            raise AppUnreachable(f"HTTP {response.status}")
        try:
            answer = json.loads(response.data or b"null")
        except ValueError:
            if response.status < 400:
                raise AppUnreachable(f"HTTP {response.status} with a body that is not JSON") from None
            answer = None  # a proxy's own page (nginx's 413, 401, 403): refused all the same
        if response.status >= 400:
            raise Refused(response.status, answer.get("message", "") if isinstance(answer, dict) else response.reason)
        return answer

    def close(self):
        """Close the kept-alive connections."""
        self._pool.close()


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
            self._put(TelemetryReport(session_id=session_id, batch=self._next_batch(session_id), events=events,
                                      lost=self._lost.pop(session_id, None)), len(events))

    def logs(self, session_id, source, log_name, lines):
        with self._condition:
            for start in range(0, len(lines), MAX_REPORT_LINES):
                part = lines[start:start + MAX_REPORT_LINES]
                if self._room_for(len(part)):
                    self._put(LogsReport(session_id=session_id, batch=self._next_batch(session_id), source=source,
                                         log_name=log_name, lines=part), len(part))

    def activity(self, session_id):
        with self._condition:
            self._put(ActivityReport(session_id=session_id), 0)

    def ended(self, session_id, reason):
        with self._condition:
            self._put(EndedReport(session_id=session_id, reason=reason), 0)

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

    def _next_batch(self, session_id):
        self._batches[session_id] += 1
        return self._batches[session_id]

    def _put(self, report, items):
        """Queue `report` (a lantern_wire.reports shape), which carries `items` events or lines; it counts as one
        more, as the app counts it."""
        size = items + 1
        self._tickets += 1
        self._queue.append((self._tickets, report.to_dict(), size))
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
        away_since, most = None, MAX_REPORT_ITEMS
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
            try:  # the client waits and tries again (RETRY); past its patience, this loop starts it again
                answer = self._client.post(REPORTS, {"reports": [report for _, report, _ in taken]},
                                           patience=REPORTS_PATIENCE_SECONDS)
            except AppUnreachable as error:
                if away_since is None:  # once per outage
                    away_since = time.monotonic()
                    logger.warning("the app does not take this host's reports (%s); they wait, and go as soon as it "
                                   "answers", error)
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
            most = MAX_REPORT_ITEMS
            if away_since is not None:
                logger.info("the app takes reports again, after %.1f s", time.monotonic() - away_since)
                away_since = None
            self._say_refusals(taken, answer)
            with self._condition:
                for _ in taken:
                    _, _, done = self._queue.popleft()
                    self._queued_size -= done
                self._answered = taken[-1][0]
                self._condition.notify_all()

    @staticmethod
    def _say_refusals(taken, answer):
        try:
            results = parse(ReportResults, answer).results
        except InvalidShape as invalid:  # answered all the same: the app has committed them
            logger.error("the app's answer to %s report(s) is not one: %s", len(taken), invalid)
            return
        for (_, report, _), result in zip(taken, results, strict=False):
            if result.status == "refused":
                logger.warning("the app refused a %s report of session %s: %s", report["kind"], report["session_id"],
                               result.message)
