"""HostClient.stream (app/browsers/host_client.py): a body of any size goes to a host as it is read, and the host's
answer comes back a chunk at a time up to a bound; neither is held whole by the app (a session's files, #37)."""
import hashlib
import io
import json
import tracemalloc

import pytest

from app.browsers import host_client, hosts
from app.browsers.models import BrowserHost
from app.core.db import db
from lantern_wire import control
from tests.fakes import LocalServer

MiB = 1024 * 1024
BLOCK = bytes(range(256)) * 256  # 64 KiB


class FileHost(LocalServer):
    """A host's stand-in: a PUT is answered with the size and SHA-256 of its body (read 64 KiB at a time, sent with
    a Content-Length or chunked); a GET with `size` bytes of BLOCKs, written as they go; a DELETE with a refusal."""

    size = 0

    def put(self, handler):
        sha, size = hashlib.sha256(), 0
        chunked = "chunked" in handler.headers.get("Transfer-Encoding", "")
        for data in self._chunks(handler.rfile) if chunked else self._sized(handler.rfile,
                                                                            int(handler.headers["Content-Length"])):
            sha.update(data)
            size += len(data)
        handler.answer(200, {"size": size, "sha256": sha.hexdigest(), "chunked": chunked})

    @staticmethod
    def _sized(stream, length):
        while length:
            data = stream.read(min(length, len(BLOCK)))
            length -= len(data)
            yield data

    @staticmethod
    def _chunks(stream):
        while size := int(stream.readline().split(b";")[0], 16):
            yield from FileHost._sized(stream, size)
            stream.readline()
        stream.readline()

    def get(self, handler):
        handler.send_response(200)
        handler.send_header("Content-Length", str(self.size))
        handler.end_headers()
        try:
            for start in range(0, self.size, len(BLOCK)):
                handler.wfile.write(BLOCK[:self.size - start])
        except ConnectionError:  # the app stopped reading at its limit
            pass

    def delete(self, handler):
        handler.answer(404, {"code": "not_found", "message": "No such file in the session."})


@pytest.fixture
def file_host(app):
    stand_in = FileHost().start()
    try:
        with app.app_context(), db.connection_context():
            hosts.add("files", stand_in.url)
            host = BrowserHost.get(BrowserHost.name == "files")
            yield stand_in, host_client.HostClient(host)
    finally:
        stand_in.stop()


def peak_allocated(call):
    """(what `call()` returned, the most Python memory it held at once beyond what it started with)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_body_goes_to_the_host_as_it_is_read_and_is_never_whole_in_the_app(file_host):
    _, client = file_host
    blocks = 64 * MiB // len(BLOCK)
    expected = hashlib.sha256(BLOCK * blocks).hexdigest()

    def put_chunks():
        with client.stream("PUT", control.SESSION_REPLAYS, (BLOCK for _ in range(blocks)), limit=MiB, timeout=30,
                           session_id="s1") as answer:
            return json.loads(b"".join(answer))

    answer, peak = peak_allocated(put_chunks)
    assert answer == {"size": 64 * MiB, "sha256": expected, "chunked": True}
    assert peak < 8 * MiB, f"{peak / MiB:.1f} MiB held"

    video = io.BytesIO(BLOCK * 16)
    with client.stream("PUT", control.SESSION_REPLAYS, video, length=MiB, limit=MiB, timeout=30,
                       session_id="s1") as answer:
        assert json.loads(b"".join(answer)) == {"size": MiB, "sha256": hashlib.sha256(BLOCK * 16).hexdigest(),
                                                "chunked": False}


def test_an_answer_comes_a_bounded_chunk_at_a_time_up_to_its_limit(file_host):
    stand_in, client = file_host
    stand_in.size = 64 * MiB + 5

    def get_all():
        sizes, sha = [], hashlib.sha256()
        with client.stream("GET", control.SESSION_REPLAYS, limit=64 * MiB + 5, timeout=30, session_id="s1") as answer:
            assert answer.status == 200
            for chunk in answer:
                sizes.append(len(chunk))
                sha.update(chunk)
        return sizes, sha.hexdigest()

    (sizes, digest), peak = peak_allocated(get_all)
    assert sum(sizes) == 64 * MiB + 5 and max(sizes) <= host_client.STREAM_CHUNK
    assert digest == hashlib.sha256(BLOCK * 1024 + BLOCK[:5]).hexdigest()
    assert peak < 8 * MiB, f"{peak / MiB:.1f} MiB held"

    received = []
    with pytest.raises(host_client.HostError, match="past 1048576 bytes"):
        for chunk in client.stream("GET", control.SESSION_REPLAYS, limit=MiB, timeout=30, session_id="s1"):
            received.append(len(chunk))
    assert sum(received) <= MiB


def test_a_hosts_refusal_of_a_streamed_call_is_its_host_error(file_host):
    _, client = file_host
    with pytest.raises(host_client.HostError) as raised:
        client.stream("DELETE", control.SESSION_REPLAYS, limit=MiB, timeout=30, session_id="s1")
    error = raised.value
    assert (error.status, error.code, error.public_message) == (404, "not_found", "No such file in the session.")
    assert (error.route, error.session_id) == (control.SESSION_REPLAYS, "s1")
