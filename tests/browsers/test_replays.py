"""Replays' rules before and after a host records (app/browsers/replays.py): the bounds of a start, what a
host may send, and what a replay answers in each state. Recording itself is tested on real browsers
(tests/browsers/live/test_computer.py)."""
import os
import threading
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from werkzeug.serving import make_server

from app.browsers import hosts, replays
from app.browsers.models import BrowserHost, BrowserSession, Replay
from app.core import blobs, clock, settings
from app.core.db import db
from browserhost import replays as host_replays
from browserhost.uplink import AppClient
from lantern_wire import control
from lantern_wire.hosts import REPLAYS
from lantern_wire.settings_errors import SettingsError
from tests.browsers.conftest import SlowHost, on_host


@pytest.fixture
def session_id(new_browser):
    return new_browser()["session_id"]


@pytest.mark.parametrize("body, field", [
    ({"framerate": 31}, "framerate"), ({"framerate": 0}, "framerate"), ({"max_duration_in_seconds": 3601},
                                                                          "max_duration_in_seconds"),
    ({"max_duration_in_seconds": 0}, "max_duration_in_seconds"), ({"record_audio": True}, "record_audio"),
    ({"framerate": "10"}, "framerate"),
])
def test_a_start_past_the_bounds_is_a_400_naming_its_field(client, session_id, body, field):
    response = client.post(f"/browsers/{session_id}/replays", json=body)
    assert response.status_code == 400, response.get_json()
    assert field in str(response.get_json()["details"])


def test_an_external_drivers_session_records_nothing_here(client, session_id):
    response = client.post(f"/browsers/{session_id}/replays", json={})
    assert response.status_code == 501 and response.get_json()["code"] == "replays_not_served"
    assert client.get(f"/browsers/{session_id}/replays").get_json() == []
    assert client.get(f"/browsers/{session_id}/replays/nope").status_code == 404
    assert client.post(f"/browsers/{session_id}/replays/nope/stop").status_code == 404


VIDEO = b"\x00\x00\x00\x18ftypmp42 and the rest"


def recording(app, session_id):
    with app.app_context(), db.connection_context():
        return Replay.create(session=session_id, framerate=10, max_duration_seconds=60).id


def put(client, credential, replay_id, body=b"", **query):
    query = {"started_at": "1700000000.5", "finished_at": "1700000006.25", **query}
    return client.put(f"{REPLAYS}/{replay_id}", data=body, query_string=query, content_type="video/mp4",
                      headers={"Authorization": f"Bearer {credential}"})


def test_a_host_sends_the_video_of_its_own_sessions_recordings_once(app, client, session_id, add_host):
    credential, _ = add_host("h1")
    other, _ = add_host("h2")
    on_host(app, session_id, "h1")
    replay_id = recording(app, session_id)
    download = client.get(f"/browsers/{session_id}/replays/{replay_id}")
    assert download.status_code == 409 and "still recording" in download.get_json()["message"]
    assert put(client, other, replay_id, b"not yours").status_code == 404  # another host's session
    assert put(client, credential, replay_id, VIDEO).get_json() == {"status": "saved"}
    assert put(client, credential, replay_id, b"again").get_json() == {"status": "saved"}  # not stored twice
    [listed] = client.get(f"/browsers/{session_id}/replays").get_json()
    assert listed["status"] == "saved" and listed["size_bytes"] == len(VIDEO)
    assert listed["started_at"] == "2023-11-14T22:13:20.500000Z"
    assert listed["finished_at"] == "2023-11-14T22:13:26.250000Z"
    assert listed["replay_view_url"].endswith(f"/browsers/{session_id}/replays/{replay_id}")
    download = client.get(urlsplit(listed["replay_view_url"]).path)
    assert download.status_code == 200 and download.mimetype == "video/mp4" and download.data == VIDEO
    download.close()


def test_a_failed_recording_says_why_and_bad_times_are_refused(app, client, session_id, add_host):
    credential, _ = add_host("h1")
    on_host(app, session_id, "h1")
    replay_id = recording(app, session_id)
    assert put(client, credential, replay_id, started_at="soon").status_code == 400
    assert put(client, credential, replay_id, error="ffmpeg exited with status 1").get_json() == {"status": "failed"}
    download = client.get(f"/browsers/{session_id}/replays/{replay_id}")
    assert download.status_code == 409 and "ffmpeg exited with status 1" in download.get_json()["message"]


def test_recordings_end_with_their_session_and_are_pruned_with_their_videos(app, client, session_id):
    replay_id = recording(app, session_id)
    assert client.delete(f"/browsers/{session_id}").status_code == 204
    [listed] = client.get(f"/browsers/{session_id}/replays").get_json()
    assert listed["status"] == "saving"  # its host stops it and sends it
    with app.app_context(), db.connection_context():
        digest = blobs.store().put_bytes(b"video")
        Replay.update(status=Replay.SAVED, video=digest).where(Replay.id == replay_id).execute()
        settings.change(app, BLOB_GRACE_SECONDS=0)
        assert replays.prune(retention_seconds=3600) == 0
        assert replays.prune(retention_seconds=0) == 1
        assert not Replay.select().where(Replay.id == replay_id).exists()
        assert not os.path.exists(blobs.store().path(digest))
        assert BrowserSession.get_by_id(session_id).deleted_at is not None


def test_the_openapi_document_describes_replays_and_the_live_view(anonymous):
    paths = anonymous.get("/openapi.json").get_json()["paths"]
    replays_path = "/browsers/{session_ref}/replays"
    assert {"get", "post"} <= set(paths[replays_path])
    assert "video/mp4" in paths[replays_path + "/{replay_id}"]["get"]["responses"]["200"]["content"]
    assert "post" in paths[replays_path + "/{replay_id}/stop"]
    assert "text/html" in paths["/browsers/{session_ref}/live"]["get"]["responses"]["200"]["content"]
    started = paths[replays_path]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    assert started["$ref"].endswith("/Replay")
    assert "replay_budget_exceeded" in paths[replays_path]["post"]["responses"]["403"]["description"]


def test_a_recording_the_app_refuses_fails_with_its_reason_at_once(app, client, session_id, add_host, tmp_path):
    """The host sends the refusal as the recording's error (browserhost/replays.py `send`): it said `saving` until
    the app gave up on it, REPLAY_MAX_SECONDS + SAVING_GRACE_SECONDS later."""
    credential, _ = add_host("h1")
    on_host(app, session_id, "h1")
    replay_id = recording(app, session_id)
    settings.change(app, REPLAY_MAX_BYTES=1000)
    video = tmp_path / "video.mp4"
    video.write_bytes(VIDEO * 1000)
    ended = SimpleNamespace(replay_id=replay_id, path=video, started_at=1700000000.5, finished_at=1700000002.5,
                            error=None)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    host_client = AppClient(f"http://127.0.0.1:{server.server_port}", credential)
    try:
        status, error = host_replays.send(host_client, ended, give_up_after=600)
    finally:
        host_client.close()
        server.shutdown()
        server.server_close()
    assert status == "failed" and "413" in error
    [listed] = client.get(f"/browsers/{session_id}/replays").get_json()
    assert listed["status"] == "failed" and "413" in listed["error"] and listed["size_bytes"] is None
    assert listed["finished_at"] == "2023-11-14T22:13:22.500000Z"


class RecordingHost(SlowHost):
    """Answers a start of a recording as a host does, or `reply` (status, body), after `delay` seconds."""

    def __init__(self, reply=(201, {"started_at": 1700000000.5}), delay=0.0):
        super().__init__(reply, delay)


def recorded_by(app, session_id, host):
    with app.app_context(), db.connection_context():
        hosts.add("h1", host.url)
        BrowserHost.update(address=host.url, capacity=2, heartbeat_at=clock.now()).execute()
        BrowserSession.update(driver="host").where(BrowserSession.id == session_id).execute()
    on_host(app, session_id, "h1")


@pytest.mark.parametrize("host, retried", [
    (RecordingHost(delay=1.5), False),  # it may be recording
    (RecordingHost((502, {"code": "browser_unreachable", "message": "The page could not be reached."})), True),
], ids=["the host did not answer", "the host refused"])
def test_a_recording_that_may_have_started_is_a_502_the_sdks_do_not_send_again(app, client, session_id, monkeypatch,
                                                                               host, retried):
    monkeypatch.setattr(replays, "START_SECONDS", 0.3)
    host.start()
    try:
        recorded_by(app, session_id, host)
        response = client.post(f"/browsers/{session_id}/replays", json={})
    finally:
        host.stop()
    assert response.status_code == 502 and response.get_json()["code"] == "replay_failed"
    if retried:
        assert "x-should-retry" not in response.headers and "Retry-After" in response.headers
    else:
        assert response.headers["x-should-retry"] == "false" and "Retry-After" not in response.headers


def test_past_the_projects_recordings_budget_a_new_recording_is_a_403_naming_it(app, client, session_id):
    """Not 409 or 429, which the SDKs send again: only the retention (or an operator) makes room."""
    host = RecordingHost().start()
    try:
        recorded_by(app, session_id, host)
        saved = recording(app, session_id)
        with app.app_context(), db.connection_context():
            Replay.update(status=Replay.SAVED, video=blobs.store().put_bytes(VIDEO), size_bytes=len(VIDEO)).where(
                Replay.id == saved).execute()
        settings.change(app, REPLAY_PROJECT_MAX_BYTES=len(VIDEO))
        refused = client.post(f"/browsers/{session_id}/replays", json={})
        assert refused.status_code == 403 and "Retry-After" not in refused.headers
        body = refused.get_json()
        assert body["code"] == "replay_budget_exceeded" and "REPLAY_PROJECT_MAX_BYTES" in body["message"]
        assert body["details"] == [{"code": "replay_project_max_bytes", "scope": "project", "limit": len(VIDEO),
                                    "usage": len(VIDEO), "message": f"project recordings budget {len(VIDEO)} bytes, "
                                                                   f"{len(VIDEO)} used"}]
        assert [r["replay_id"] for r in client.get(f"/browsers/{session_id}/replays").get_json()] == [saved]
        kept = client.get(f"/browsers/{session_id}/replays/{saved}")  # nothing stored is lost
        assert kept.status_code == 200 and kept.data == VIDEO
        kept.close()
        settings.change(app, REPLAY_PROJECT_MAX_BYTES=len(VIDEO) + 1)
        started = client.post(f"/browsers/{session_id}/replays", json={})
        assert started.status_code == 201 and started.get_json()["status"] == "recording"
    finally:
        host.stop()


@pytest.mark.parametrize("answer", [{"began": "now"}, b"recording"])
def test_a_host_that_answers_a_start_malformed_is_recording_so_its_replay_is_kept(app, client, session_id, answer):
    host = RecordingHost((201, answer)).start()  # a 2xx: the host is recording
    try:
        recorded_by(app, session_id, host)
        started = client.post(f"/browsers/{session_id}/replays", json={})
    finally:
        host.stop()
    assert started.status_code == 201 and started.get_json()["status"] == "recording"
    [listed] = client.get(f"/browsers/{session_id}/replays").get_json()
    assert listed["replay_id"] == started.get_json()["replay_id"]  # the host's video has a replay to come to


def test_the_highest_framerate_setting_is_bounded_by_what_a_host_takes(tmp_path):
    with pytest.raises(SettingsError, match=f"REPLAY_MAX_FRAMERATE={control.MAX_FRAMERATE + 1} .*should be "
                                                     f"less than or equal to {control.MAX_FRAMERATE}"):
        settings.load(str(tmp_path), environ={"LANTERN_REPLAY_MAX_FRAMERATE": str(control.MAX_FRAMERATE + 1)})
    assert settings.load(str(tmp_path), environ={"LANTERN_REPLAY_MAX_FRAMERATE": str(control.MAX_FRAMERATE)})[0] \
        .replay_max_framerate == control.MAX_FRAMERATE
