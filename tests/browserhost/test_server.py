"""The browser host's bookkeeping, without Chromium: a stop that arrives while a browser starts."""
import threading

from tests.browserhost.helpers import FakeApp, host_server


class FakeBrowser:
    pid, browser_path, alive = 1, "/devtools/browser/x", True

    def __init__(self):
        self.stopped = False

    def stop(self):
        self.stopped = True


def test_a_stop_while_the_browser_starts_ends_it_once_started(tmp_path, monkeypatch):
    server = host_server(tmp_path)
    server.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    launching, proceed, browser = threading.Event(), threading.Event(), FakeBrowser()

    def slow_launch(hosted, body):
        launching.set()
        assert proceed.wait(10)
        hosted.browser = browser

    monkeypatch.setattr(server, "_launch", slow_launch)
    answers = []
    starter = threading.Thread(target=lambda: answers.append(server.start_browser({"session_id": "s1",
                                                                                    "headless": True})))
    starter.start()
    assert launching.wait(10)
    assert server.stop_browser("s1", save=False, reason=None) is None  # the worker gave up waiting
    proceed.set()
    starter.join(10)
    assert answers[0][0] == 503 and browser.stopped and "s1" not in server.hosted


def test_an_answer_to_a_caller_that_left_is_dropped_without_a_traceback():
    """#26.7: a worker that gave up waiting (its socket closed) must not make the host print a traceback."""
    from browserhost.server import ControlHandler

    class Gone:
        def write(self, data):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    handler = ControlHandler.__new__(ControlHandler)
    handler.wfile, handler.request_version, handler.requestline = Gone(), "HTTP/1.1", "POST /sessions HTTP/1.1"
    handler.client_address, handler.command, handler.close_connection = ("127.0.0.1", 1), "POST", False
    handler.answer(201, {"pid": 1})  # raises nothing
    assert handler.close_connection


def test_a_session_is_reported_on_while_it_is_on_the_host_and_forgotten_when_it_leaves(tmp_path, monkeypatch):
    """A note after the session left (a recording saved, a client gone) stays in the host's log: the app keeps no
    line of an ended session, and reporting it would number the forgotten session's batches again."""
    server = host_server(tmp_path)
    server.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    monkeypatch.setattr(server, "_launch", lambda hosted, body: setattr(hosted, "browser", FakeBrowser()))
    monkeypatch.setattr(server, "watch", lambda hosted: None)  # (it waits for the browser's process to exit)
    reported, forgotten = [], []
    monkeypatch.setattr(server.reports, "logs", lambda session_id, *args: reported.append(session_id))
    monkeypatch.setattr(server.reports, "forget", forgotten.append)
    assert server.start_browser({"session_id": "s1", "headless": True})[0] == 201
    hosted = server.hosted["s1"]
    server.note(hosted, "while it runs")
    server.stop_browser("s1", save=False, reason=None)
    server.note(hosted, "after its end")
    assert reported == ["s1"] and forgotten == ["s1"]


def test_a_heartbeat_answer_read_before_a_categories_put_does_not_undo_it(tmp_path, monkeypatch):
    """The app PUTs new categories once committed; a beat it answered before that can arrive after the PUT."""
    app = FakeApp()
    server = host_server(tmp_path, app)
    server.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    monkeypatch.setattr(server, "_launch", lambda hosted, body: setattr(hosted, "browser", FakeBrowser()))
    monkeypatch.setattr(server, "watch", lambda hosted: None)
    assert server.start_browser({"session_id": "s1", "headless": True, "categories": ["console"]})[0] == 201
    hosted = server.hosted["s1"]
    stale = {"stop": [], "categories": {"s1": ["console"]}}

    def answered_before_the_put(path, body):
        server.set_categories(hosted, [])  # the PUT arrives while the beat is out
        return stale

    monkeypatch.setattr(app, "post", answered_before_the_put)
    server.heartbeat()
    assert hosted.categories == frozenset()
    monkeypatch.setattr(app, "post", lambda path, body: stale)  # a later beat carries what the app has
    server.heartbeat()
    assert hosted.categories == frozenset({"console"})
