"""The CDP client against a real Chromium: calls, events, flattened sessions, timeouts, closing
(browserhost/cdp.py)."""
import threading

import pytest

from browserhost.cdp import CdpClient, CdpError
from tests.browserhost.helpers import needs_chromium

pytestmark = needs_chromium

FOREVER = "new Promise(() => {})"
WAIT = 10  # seconds to wait for what must happen


def new_session(cdp):
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    return target, cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]


def call_in_thread(cdp, *args, **kwargs):
    """Start cdp.call(*args) on a thread; a dict that gets its "result" or "error", and the thread."""
    outcome = {}

    def run():
        try:
            outcome["result"] = cdp.call(*args, **kwargs)
        except CdpError as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return outcome, thread


def test_a_call_returns_its_result_or_raises_the_protocols_error(cdp):
    assert cdp.call("Browser.getVersion")["product"].startswith("Chrome/")

    with pytest.raises(CdpError) as raised:
        cdp.call("No.such")
    assert raised.value.code == -32601 and "No.such" in str(raised.value)


def test_events_reach_handlers_with_their_session(cdp):
    created, logged = {}, threading.Event()

    def on_created(params, session_id):
        created[params["targetInfo"]["targetId"]] = session_id
        if params["targetInfo"]["url"] == "about:blank#new":
            logged.set()

    cdp.on("Target.targetCreated", on_created)
    cdp.call("Target.setDiscoverTargets", {"discover": True})
    target = cdp.call("Target.createTarget", {"url": "about:blank#new"})["targetId"]
    assert logged.wait(WAIT)
    assert target in created and created[target] is None  # a browser-level event
    logged.clear()

    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    messages = []

    def on_console(params, session_id):
        messages.append((params["args"][0]["value"], session_id))
        try:
            cdp.call("Browser.getVersion")  # would wait for an answer only this thread can read
        except CdpError as error:
            messages.append(str(error))
        logged.set()

    cdp.on("Runtime.consoleAPICalled", on_console)
    cdp.call("Runtime.enable", session_id=session)
    cdp.call("Runtime.evaluate", {"expression": "console.log('hello')"}, session_id=session)

    assert logged.wait(WAIT)
    assert messages[0] == ("hello", session)
    assert "use send()" in messages[1]
    assert cdp.call("Browser.getVersion")  # the reader goes on


def test_a_call_without_answer_in_time_fails_and_the_client_goes_on(cdp):
    _, session = new_session(cdp)

    with pytest.raises(CdpError, match="no answer"):
        cdp.call("Runtime.evaluate", {"expression": FOREVER, "awaitPromise": True}, session_id=session, timeout=0.2)

    assert cdp.call("Runtime.evaluate", {"expression": "6 * 7"}, session_id=session)["result"]["value"] == 42


def test_closing_fails_waiting_calls_and_later_ones(browser):
    cdp = CdpClient(browser.ws_url)
    _, session = new_session(cdp)
    outcome, thread = call_in_thread(cdp, "Runtime.evaluate", {"expression": FOREVER, "awaitPromise": True},
                                     session_id=session, timeout=WAIT * 3)

    cdp.close()
    thread.join(WAIT)

    assert "closed by the client" in str(outcome.get("error"))
    assert cdp.closed
    cdp.close()
    with pytest.raises(CdpError):
        cdp.call("Browser.getVersion")


def test_the_browser_side_going_away_fails_waiting_calls(cdp, browser):
    target, _ = new_session(cdp)
    page = CdpClient(f"ws://127.0.0.1:{browser.port}/devtools/page/{target}")
    outcome, thread = call_in_thread(page, "Runtime.evaluate", {"expression": FOREVER, "awaitPromise": True},
                                     timeout=WAIT * 3)

    cdp.call("Target.closeTarget", {"targetId": target})
    thread.join(WAIT)

    assert "error" in outcome and page.closed
