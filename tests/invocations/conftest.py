import json
import time

import pytest


@pytest.fixture
def invoke(client):
    def invoke(asynchronous=True, headers=None, **fields):
        body = {"app_name": "shop", "action_name": "checkout", "version": "1", "async": asynchronous, **fields}
        return client.post("/invocations", json=body, headers=headers or {})
    return invoke


def read_frames(response, *, until=None, count=None, timeout=10.0):
    """Parse SSE frames from a streamed test response: (id or None, data) pairs.

    Stops when the stream ends, `count` frames arrived, or `until(frame)` is true;
    then closes the response (which runs the server generator's clean-up).
    """
    frames, buffer = [], ""
    deadline = time.monotonic() + timeout
    try:
        for chunk in response.response:
            buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
                if "data" in fields:
                    frames.append((int(fields["id"]) if "id" in fields else None, json.loads(fields["data"])))
                    if (count and len(frames) >= count) or (until and until(frames[-1])):
                        return frames
            if time.monotonic() > deadline:
                raise AssertionError(f"stream did not deliver in time; got {len(frames)} frames, "
                                     f"the last: {frames[-1] if frames else None}")
        return frames
    finally:
        response.close()


@pytest.fixture
def frames_of():
    return read_frames
