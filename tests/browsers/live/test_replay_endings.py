"""When a recording of the screen ends by itself (its max duration), on real browsers through the official SDK: the
replay is `saved` and its `finished_at` within a second of its video's end, headless and headful (#34 item 6)."""
import json
import subprocess
from datetime import timedelta

import pytest

from tests.waiting import eventually


def video_seconds(data, tmp_path):
    video = tmp_path / "replay.mp4"
    video.write_bytes(data)
    probed = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", str(video)],
                            capture_output=True, check=True, timeout=30).stdout
    return float(json.loads(probed)["format"]["duration"])


def host_lines(sdk, session_id):
    with sdk.browsers.logs.stream(session_id, source="supervisor", supervisor_process="browser-host",
                                  follow=False) as lines:
        return list(lines)


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "headful"])
def test_a_replay_at_its_max_duration_is_saved_when_its_video_ends(sdk, tmp_path, headless):
    """A headless recording's encoder read 5 s of frames before encoding any: a 2 s replay said `recording` for
    5.7 s, and its finished_at was that late too."""
    session_id = sdk.browsers.create(headless=headless).session_id
    started = sdk.browsers.replays.start(session_id, max_duration_in_seconds=2)

    def saved():
        return [r for r in sdk.browsers.replays.list(session_id) if r.model_extra["status"] == "saved"]

    [replay] = eventually(saved, 30, interval=0.05)
    assert replay.replay_id == started.replay_id
    seconds = video_seconds(sdk.browsers.replays.download(replay.replay_id, id_or_name=session_id).read(), tmp_path)
    assert abs(seconds - 2) <= 0.5
    video_end = replay.started_at + timedelta(seconds=seconds)
    assert abs((replay.finished_at - video_end).total_seconds()) <= 1, (replay.started_at, replay.finished_at, seconds)
    # The host's line saying so is written once the app has it saved (the app stamps it when it arrives).
    [said] = eventually(lambda: [line for line in host_lines(sdk, session_id)
                                 if line.message.startswith(f"recording {replay.replay_id} saved")], 10)
    assert (said.timestamp - video_end).total_seconds() <= 1, (video_end, said.timestamp)
