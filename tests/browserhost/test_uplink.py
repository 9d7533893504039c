"""The host's reports to the app (browserhost/uplink.py), against a stand-in for the app: in order, each batch
numbered, kept until answered through an outage, bounded, and stopped when the app refuses the host."""
import socket
import threading
import time

import pytest

from browserhost import uplink
from browserhost.uplink import AppClient, AppUnreachable, Refused, Reports
from lantern_wire.hosts import MAX_REPORT_ITEMS, REPORTS
from lantern_wire.reports import ReportsRequest
from tests.fakes import LocalServer
from tests.live_server import free_port
from tests.waiting import eventually


class FlakyApp:
    """Answers reports like the app (a batch applied once), except while `down` is set or `refuse` is given."""

    credential = "lbh_test"

    def __init__(self):
        self.down = threading.Event()
        self.refuse = None
        self.requests = 0
        self.applied = []  # (session, kind, batch or None, payload) in the order applied
        self._seen = set()

    def post(self, path, body, patience=None):
        assert path == REPORTS
        self.requests += 1
        if self.refuse:
            raise Refused(self.refuse, "no")
        if self.down.is_set():
            raise AppUnreachable("ConnectionRefusedError")
        for report in body["reports"]:
            key = (report["session_id"], report.get("batch"))
            if report.get("batch") is None or key not in self._seen:
                self._seen.add(key)
                self.applied.append((report["session_id"], report["kind"], report.get("batch"),
                                     report.get("events") or report.get("lines") or report.get("reason")))
        return {"results": [{"status": "ok"} for _ in body["reports"]]}


def test_reports_arrive_in_order_each_batch_numbered_per_session():
    app = FlakyApp()
    reports = Reports(app, limit=1000).start()
    reports.telemetry("s1", [{"n": 1}])
    reports.logs("s2", "supervisor", "chromium", [{"message": "x"}])
    reports.telemetry("s1", [{"n": 2}])
    reports.activity("s1")
    reports.ended("s1", "browser_exited")
    reports.telemetry("s1", [])  # nothing to send: no report
    assert reports.flush(5)
    assert app.applied == [("s1", "telemetry", 1, [{"n": 1}]), ("s2", "logs", 1, [{"message": "x"}]),
                           ("s1", "telemetry", 2, [{"n": 2}]), ("s1", "activity", None, None),
                           ("s1", "ended", None, "browser_exited")]
    reports.stop()


def test_through_an_outage_nothing_is_lost_or_applied_twice():
    app = FlakyApp()
    app.down.set()
    reports = Reports(app, limit=10_000).start()
    for n in range(300):
        reports.telemetry("s1", [{"n": n}])
    assert not reports.flush(0.5)  # the app is away: nothing is answered, nothing is dropped
    assert eventually(lambda: app.requests >= 2, 5)  # and it is tried again
    assert not app.applied and reports.dropped == 0
    app.down.clear()
    assert reports.flush(10)
    assert [payload[0]["n"] for _, _, _, payload in app.applied] == list(range(300))
    assert [batch for _, _, batch, _ in app.applied] == list(range(1, 301))
    reports.stop()


def test_past_its_limit_the_queue_drops_and_the_next_report_says_how_many_were_lost():
    app = FlakyApp()
    app.down.set()
    reports = Reports(app, limit=5).start()
    reports.telemetry("s1", [{"n": n} for n in range(4)])  # a report and its events: 5
    reports.telemetry("s1", [{"n": 4}, {"n": 5}])  # would make 8: dropped
    reports.logs("s1", "supervisor", "chromium", [{"message": "a"}, {"message": "b"}])  # dropped too
    assert reports.dropped == 4
    app.down.clear()
    assert reports.flush(10)
    reports.telemetry("s1", [{"n": 6}])
    assert reports.flush(10)
    assert [(batch, [event["n"] for event in events]) for _, _, batch, events in app.applied] == [
        (1, [0, 1, 2, 3]), (2, [6])]
    reports.stop()


def test_the_lost_count_rides_on_the_sessions_next_telemetry_report():
    seen = []

    class Recording(FlakyApp):
        def post(self, path, body, patience=None):
            seen.extend(body["reports"])
            return super().post(path, body)

    app = Recording()
    reports = Reports(app, limit=3)
    reports.telemetry("s1", [{"n": 1}, {"n": 2}])
    reports.telemetry("s1", [{"n": 3}])  # the queue is full (not started): lost
    reports.start()
    assert reports.flush(10)
    reports.telemetry("s1", [{"n": 4}])
    assert reports.flush(10)
    assert [report.get("lost") for report in seen] == [None, 1]
    reports.stop()


def test_a_request_too_large_for_the_app_goes_again_in_halves():
    class Small(FlakyApp):
        def post(self, path, body, patience=None):
            if sum(len(report.get("events", ())) for report in body["reports"]) > 3:
                raise Refused(413, "Request Entity Too Large")
            return super().post(path, body)

    app = Small()
    reports = Reports(app, limit=100)
    for n in range(4):
        reports.telemetry("s1", [{"n": n}, {"n": n}])
    reports.start()
    assert reports.flush(5)
    assert [batch for _, _, batch, _ in app.applied] == [1, 2, 3, 4]
    reports.stop()


def test_a_full_request_is_one_the_app_takes():
    """The host counts a request as the app does (reports, events and lines): a full one is never a 413."""
    sizes = []

    class Counting(FlakyApp):
        def post(self, path, body, patience=None):
            sizes.append(ReportsRequest(reports=body["reports"]).items())
            return super().post(path, body)

    reports = Reports(Counting(), limit=100_000)
    for _ in range(30):
        reports.telemetry("s1", [{"n": 0}] * 500)
    reports.start()
    assert reports.flush(10)
    assert max(sizes) <= MAX_REPORT_ITEMS and sum(sizes) == 30 * 501
    reports.stop()


def test_a_refused_credential_stops_the_reports_and_says_so_once():
    app = FlakyApp()
    app.refuse = 401
    refused = []
    reports = Reports(app, limit=100, on_refused=refused.append).start()
    reports.activity("s1")
    reports.activity("s1")
    assert reports.flush(5)  # returns: nothing will be answered any more
    assert refused == [401] and app.requests == 1
    reports.stop()


def test_a_report_the_app_refuses_as_malformed_is_dropped_not_sent_forever():
    app = FlakyApp()
    app.refuse = 400
    reports = Reports(app, limit=100).start()
    reports.activity("s1")
    assert reports.flush(5)
    app.refuse = None
    reports.activity("s2")
    assert reports.flush(5)
    assert app.applied == [("s2", "activity", None, None)]
    reports.stop()


class App(LocalServer):
    """Answers every POST with {"ok": n} (HTTP/1.1, kept alive), then closes the connection without saying so,
    as a server closing an idle keep-alive connection does; `status` sets the answer's status."""

    status = 200

    def post(self, handler):
        handler.rfile.read(int(handler.headers["Content-Length"]))
        handler.answer(self.status, {"ok": len(self.paths), "message": "refused"})
        handler.close_connection = True

    def start(self):
        super().start()
        self._server.RequestHandlerClass.protocol_version = "HTTP/1.1"
        return self


def test_the_client_replaces_a_connection_the_app_closed_and_says_what_went_wrong():
    app = App().start()
    client = AppClient(app.url, "lbh_test", patience=0)
    try:
        assert client.post(REPORTS, {"reports": []}) == {"ok": 1, "message": "refused"}
        assert client.post(REPORTS, {"reports": []})["ok"] == 2  # the first connection was closed: a new one
        app.status = 401
        with pytest.raises(Refused) as refused:
            client.post(REPORTS, {"reports": []})
        assert refused.value.status == 401
        app.status = 503
        with pytest.raises(AppUnreachable):
            client.post(REPORTS, {"reports": []})
    finally:
        client.close()
        app.stop()
    with pytest.raises(AppUnreachable):
        AppClient(f"http://127.0.0.1:{free_port()}", "lbh_test", patience=0).post(REPORTS, {"reports": []})
    with pytest.raises(ValueError):
        AppClient("ftp://example.test", "lbh_test")


class Proxy(LocalServer):
    """A reverse proxy in front of the app that refuses with a page of its own, as nginx does."""

    status = 413

    def post(self, handler):
        handler.rfile.read(int(handler.headers["Content-Length"]))
        handler.answer(self.status, b"<html><body><h1>413 Request Entity Too Large</h1></body></html>", "text/html")


@pytest.mark.parametrize("status", [401, 403, 413])
def test_a_proxys_refusal_in_html_is_a_refusal_not_an_outage(status):
    """Taken for an outage, it was sent again forever, holding back every later report."""
    proxy = Proxy()
    proxy.status = status
    proxy.start()
    client = AppClient(proxy.url, "lbh_test")
    try:
        with pytest.raises(Refused) as refused:
            client.post(REPORTS, {"reports": []})
        assert refused.value.status == status
    finally:
        client.close()
        proxy.stop()


def test_a_session_that_left_the_host_is_forgotten():
    """Its batch numbers and lost count go with it (a host running for months would keep every session's)."""
    seen = []

    class Recording(FlakyApp):
        def post(self, path, body, patience=None):
            seen.extend(body["reports"])
            return super().post(path, body)

    reports = Reports(Recording(), limit=3)
    reports.telemetry("s1", [{"n": 1}])
    reports.telemetry("s1", [{"n": 2}])  # the queue is full (not started): lost, to be told on its next report
    reports.forget("s1")
    reports.start()
    assert reports.flush(5)
    reports.telemetry("s1", [{"n": 3}])  # (a session id is never used again; this shows what was kept of it)
    assert reports.flush(5)
    assert [(report["batch"], report.get("lost")) for report in seen] == [(1, None), (1, None)]
    reports.stop()


def test_a_call_to_an_app_that_never_answers_ends_about_its_patience_after_it_began():
    """#36 review: each attempt kept the client's 30 s read timeout and two were allowed, so a heartbeat or a
    registration against a hung app took about 60 s (before #36: one 30 s attempt)."""
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # connections are made (the kernel's backlog) and never answered
    client = AppClient(f"http://127.0.0.1:{hung.getsockname()[1]}", "lbh_test", patience=1.0)
    try:
        began = time.monotonic()
        with pytest.raises(AppUnreachable):
            client.post(REPORTS, {"reports": []})
        assert time.monotonic() - began < 1.0 + uplink.MIN_ATTEMPT_SECONDS + 2.0
    finally:
        client.close()
        hung.close()
