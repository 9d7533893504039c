"""Reading server-sent events from the agent's answers, frame by frame as they come."""
import json
from dataclasses import dataclass


@dataclass
class Frame:
    id: int | None
    data: dict | None  # None for a comment (a keep-alive)


def frames(answer):
    """Each frame of an SSE answer (an http.client response) as it arrives, until the stream ends."""
    event_id, data, comment = None, None, False
    while True:
        line = answer.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if not line:
            if data is not None or comment:
                yield Frame(event_id, data)
            event_id, data, comment = None, None, False
        elif line.startswith(b":"):
            comment = True
        elif line.startswith(b"id: "):
            event_id = int(line[4:])
        elif line.startswith(b"data: "):
            data = json.loads(line[6:])


def read_all(answer) -> list[Frame]:
    with answer:
        return [frame for frame in frames(answer) if frame.data is not None]
