"""The CDP client against a real Chromium: calls, events, flattened sessions, timeouts, closing
(browserhost/cdp.py)."""
import contextlib
import socket
import struct
import threading
import tracemalloc

import pytest

from browserhost.cdp import CdpClient, CdpError
from browserhost.cdp_frames import CHUNK, FrameReader, Oversized
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


def test_a_message_past_max_message_is_skipped_by_length_and_the_client_goes_on(browser):
    """#34 item 12: the client holds at most `max_message` bytes of one message; a longer event goes to
    on_oversized, a longer answer fails its call, and later messages arrive."""
    oversized, logged = [], []
    with CdpClient(browser.ws_url, max_message=1024 * 1024,
                   on_oversized=lambda method, size: oversized.append((method, size))) as cdp:
        _, session = new_session(cdp)
        after = threading.Event()
        cdp.on("Runtime.consoleAPICalled", lambda params, _: (logged.append(params["args"][0]["value"][:10]),
                                                              params["args"][0]["value"] == "after" and after.set()))
        cdp.call("Runtime.enable", session_id=session)
        cdp.call("Runtime.evaluate", {"expression": "console.log('x'.repeat(3 * 1024 * 1024)); console.log('after')"},
                 session_id=session)
        assert after.wait(WAIT)

        assert logged == ["after"]
        assert [method for method, _ in oversized] == ["Runtime.consoleAPICalled"]
        assert oversized[0][1] > 3 * 1024 * 1024
        with pytest.raises(CdpError, match="past this connection's bound of 1048576 bytes"):
            cdp.call("Runtime.evaluate", {"expression": "'y'.repeat(2 * 1024 * 1024)", "returnByValue": True},
                     session_id=session)
        assert cdp.call("Runtime.evaluate", {"expression": "6 * 7"}, session_id=session)["result"]["value"] == 42


def frame(opcode, payload, fin=True):
    """A server's frame (unmasked), with the length in 1, 2 or 8 bytes as its size needs."""
    first = (0x80 if fin else 0) | opcode
    if len(payload) < 126:
        return bytes([first, len(payload)]) + payload
    if len(payload) < 65536:
        return bytes([first, 126]) + struct.pack("!H", len(payload)) + payload
    return bytes([first, 127]) + struct.pack("!Q", len(payload)) + payload


@contextlib.contextmanager
def frames_from(data, max_message=100_000):
    """A FrameReader of a socket on whose other end `data` is sent, then the end of the stream; and the pings it
    answered."""
    ours, theirs = socket.socketpair()
    pinged = []
    reader = FrameReader(ours, max_message=max_message, on_ping=pinged.append)

    def send():  # more than the socket buffer holds, from a thread
        try:
            theirs.sendall(data)
            theirs.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the reader stopped reading (a protocol error)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        yield reader, pinged
    finally:
        reader.close()
        ours.close()
        sender.join(WAIT)
        theirs.close()


def test_frames_fragmented_pinged_oversized_and_closed():
    big = b'{"method":"Runtime.consoleAPICalled","params":' + b"x" * 150_000 + b"}"
    medium, large = frame(0x1, b"y" * 300), frame(0x1, b"x" * 70_000)
    assert medium[1] == 126 and large[1] == 127  # lengths in 2 and in 8 bytes
    frames = (frame(0x1, b'{"id":1,', fin=False) + frame(0x9, b"hi") + frame(0x0, b'"result":{}}')
              + frame(0x1, big[:90_000], fin=False) + frame(0x0, big[90_000:])
              + medium + large + frame(0x8, b""))
    with frames_from(frames) as (reader, pinged):
        assert reader.read() == b'{"id":1,"result":{}}' and pinged == [b"hi"]
        skipped = reader.read()
        assert isinstance(skipped, Oversized) and skipped.size == len(big) and skipped.prefix == big[:256]
        assert reader.read() == b"y" * 300
        assert reader.read() == b"x" * 70_000
        assert reader.read() is None  # the close frame
    with frames_from(frame(0x1, b"cut short")[:5]) as (reader, _), pytest.raises(ConnectionError):
        reader.read()


def test_a_ping_between_the_fragments_of_a_skipped_message_is_answered():
    big = b'{"method":"Runtime.consoleAPICalled"' + b"z" * 200_000 + b"}"
    frames = (frame(0x1, big[:100], fin=False) + frame(0x0, big[100:150_000], fin=False) + frame(0x9, b"ping")
              + frame(0x0, big[150_000:]) + frame(0x1, b'{"id":2}'))
    with frames_from(frames) as (reader, pinged):
        skipped = reader.read()
        assert isinstance(skipped, Oversized) and skipped.size == len(big) and skipped.prefix == big[:256]
        assert pinged == [b"ping"]
        assert reader.read() == b'{"id":2}'


@pytest.mark.parametrize("data", [
    frame(0x9, b"p" * 126),
    bytes([0x89, 127]) + struct.pack("!Q", 2 ** 40),  # a length past any bound, and no payload
    frame(0x9, b"hi", fin=False) + frame(0x1, b"{}"),
    frame(0x3, b"{}"),
    frame(0xB, b"{}") + frame(0x1, b"{}"),
], ids=["control frame past 125 bytes", "control frame of 2**40 bytes", "fragmented control frame",
        "reserved data opcode", "reserved control opcode"])
def test_a_frame_rfc_6455_forbids_is_a_protocol_error(data):
    """RFC 6455: control frames (opcode 8 and up) hold at most 125 bytes and are never fragmented; opcodes 3-7
    and 11-15 are reserved. A control frame's payload was read at whatever length its header gave."""
    with frames_from(data) as (reader, _), pytest.raises(ValueError):
        reader.read()


def test_a_reader_makes_its_skipping_buffer_only_for_a_message_it_skips():
    """A reader per short-lived client (the computer API opens one per call) took a 1 MiB buffer each."""
    ours, theirs = socket.socketpair()
    tracemalloc.start()
    try:
        readers = [FrameReader(ours, max_message=1000) for _ in range(4)]
        allocated = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        for reader in readers:
            reader.close()
        ours.close()
        theirs.close()
    assert allocated < CHUNK


def test_a_message_past_the_bound_after_many_fragments_is_not_joined_to_take_its_prefix():
    """Its fragments up to the bound are held (they were within it); its first bytes are taken from them, not
    from a copy of them all joined."""
    bound, fragment = 4 * CHUNK, CHUNK // 2
    message = bytes(range(256)) * (9 * fragment // 256)
    frames = b"".join(frame(0x1 if at == 0 else 0x0, message[at:at + fragment], fin=at + fragment >= len(message))
                      for at in range(0, len(message), fragment))
    with frames_from(frames, max_message=bound) as (reader, _):
        tracemalloc.start()
        try:
            skipped = reader.read()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert isinstance(skipped, Oversized) and skipped.size == len(message) and skipped.prefix == message[:256]
    assert peak < bound + 2 * CHUNK  # the held fragments and the skipping buffer; joined, twice the bound
