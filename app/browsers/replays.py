"""Recordings of a session's screen (the replays API): the rules. The session's host records
(browserhost/replays.py: MP4, H.264, by ffmpeg inside the session's sandbox) and, once a recording has ended,
sends the video here over the internal API (`receive`); it is kept as a blob of the session.

A replay is `recording` until it is stopped, reaches its max duration or size, or its session ends; then
`saving` until its host has sent it, then `saved` (downloadable) or `failed` (its error says why). One
recording at a time per session. Recordings are kept for REPLAY_RETENTION_SECONDS after they started
(`prune`, with the telemetry's).
"""
import logging
from datetime import datetime, timedelta, timezone

from peewee import fn

from app.browsers.computer import require_host_driver
from app.browsers.host_client import HostClient, HostError
from app.browsers.host_errors import api_error
from app.browsers.models import ENDED_BY_HOST_LOST, BrowserSession, Replay
from app.core import blobs, clock, urls
from app.core.errors import ApiError, bad_request, conflict, not_found
from app.core.ids import new_id
from app.core.settings import settings
from lantern_wire.control import ReplayStart
from lantern_wire.hosts import ENDED_BY_HOST_RESTART

logger = logging.getLogger(__name__)

# What a host takes to start or stop a recording (a stop waits for ffmpeg's last fragment and the upload).
START_SECONDS, STOP_SECONDS = 30, 90
# A replay still `saving` this long after it could have ended never came from its host (the host died).
SAVING_GRACE_SECONDS = 900


def record(replay):
    """The replay as the API shows it (the SDK's fields, then Lantern's own)."""
    return {"replay_id": replay.id, "started_at": replay.started_at, "finished_at": replay.finished_at,
            "replay_view_url": f"{urls.public_base_url()}/browsers/{replay.session_id}/replays/{replay.id}",
            "status": replay.status, "size_bytes": replay.size_bytes, "error": replay.error}


def start(session, framerate, max_seconds):
    """Start recording the session's screen; the new replay. 409 while another recording runs."""
    require_host_driver(session, "replays")
    if Replay.select().where((Replay.session == session.id) & (Replay.status == Replay.RECORDING)).exists():
        raise conflict("replay_in_progress", f"Browser session {session.id!r} is already being recorded; stop that "
                                             "recording first.")
    refuse_past_budget(session.project_id)
    start = ReplayStart(replay_id=new_id(), framerate=framerate, max_seconds=max_seconds,
                        max_bytes=settings().replay_max_bytes)
    # The row comes before the call: the host may send a recording that failed at once before it answers.
    replay = Replay.create(id=start.replay_id, session=session.id, framerate=framerate,
                           max_duration_seconds=max_seconds)
    try:
        HostClient(session.host).start_replay(session.id, start, timeout=START_SECONDS)
    except HostError as error:
        if not error.malformed:
            replay.delete_instance()
            raise api_error(error) from None
        # It answered 2xx: it is recording, and will send the video to this replay.
        logger.warning("a browser host started a recording but answered it wrongly: %s", error)
    return Replay.get_by_id(replay.id)


def refuse_past_budget(project_id):
    """403 replay_budget_exceeded once the project's saved recordings take REPLAY_PROJECT_MAX_BYTES: not a 409 or
    429, which the SDKs send again, since only their retention (or an operator) makes room."""
    budget = settings().replay_project_max_bytes
    if budget is None:
        return
    used = int(Replay.select(fn.COALESCE(fn.SUM(Replay.size_bytes), 0)).join(BrowserSession)  # (Postgres: numeric)
               .where((BrowserSession.project == project_id) & (Replay.status == Replay.SAVED)).scalar())
    if used >= budget:
        days = settings().replay_retention_seconds / 86400
        raise ApiError(403, "replay_budget_exceeded",
                       f"The project's recordings budget is used up: its saved replays take {used} bytes, and "
                       f"REPLAY_PROJECT_MAX_BYTES is {budget}. Recordings are deleted {days:g} days after they "
                       "started; until then, no new one starts (those stored are kept).",
                       details=[{"code": "replay_project_max_bytes", "scope": "project", "limit": budget,
                                 "usage": used, "message": f"project recordings budget {budget} bytes, {used} used"}])


def stop(session, replay_id):
    """End a recording (nothing to do for one that has ended); the replay once its host has sent it (or
    still `saving` when the host is slow)."""
    replay = find(session, replay_id)
    stopping = (Replay.update(status=Replay.SAVING)
                .where((Replay.id == replay.id) & (Replay.status == Replay.RECORDING)).execute())
    if stopping and session.is_active:
        try:
            HostClient(session.host).stop_replay(session.id, replay.id, timeout=STOP_SECONDS)
        except HostError as error:
            if error.status != 404:  # 404: it had ended on its own, and its video is on its way
                raise api_error(error) from None
    return Replay.get_by_id(replay.id)


def find(session, replay_id):
    replay = Replay.get_or_none((Replay.id == replay_id) & (Replay.session == session.id))
    if replay is None:
        raise not_found(f"Replay {replay_id!r} not found for browser session {session.id!r}.")
    return replay


def listing(session):
    return list(Replay.select().where(Replay.session == session.id).order_by(Replay.started_at, Replay.id))


def video_path(session, replay_id):
    """Where the saved video of the replay is (a file of the blob store); 409 saying why when there is none."""
    replay = find(session, replay_id)
    if replay.status == Replay.SAVED:
        return blobs.store().path(replay.video)
    if replay.status == Replay.RECORDING:
        raise conflict("replay_not_ready", f"Replay {replay.id!r} is still recording; stop it first.")
    if replay.status == Replay.SAVING:
        raise conflict("replay_not_ready", f"Replay {replay.id!r} is being saved by its browser host; try again in a "
                                           "few seconds.", retry_after=2)
    raise conflict("replay_failed", f"Replay {replay.id!r} failed: {replay.error}")


def receive(host, replay_id, started_at, finished_at, error, video):
    """A host sends a recording that has ended: its video (a readable stream) or its error. The replay's
    status; a replay sent again once saved is not stored twice."""
    replay = (Replay.select(Replay, BrowserSession.host).join(BrowserSession)
              .where(Replay.id == replay_id).first())
    if replay is None or replay.session.host_id != host.id:
        raise not_found(f"No replay {replay_id!r} of a session of browser host {host.name!r}.")
    if replay.status in (Replay.SAVED, Replay.FAILED):
        return replay.status
    times = {Replay.started_at: _from_unix(started_at), Replay.finished_at: _from_unix(finished_at)}
    if error:
        changes = {Replay.status: Replay.FAILED, Replay.error: error[:500]}
        digest = None
    else:
        try:
            digest, size = blobs.store().put_stream(video, limit=settings().replay_max_bytes)
        except ValueError:
            raise ApiError(413, "payload_too_large", "The recording is larger than REPLAY_MAX_BYTES.") from None
        changes = {Replay.status: Replay.SAVED, Replay.video: digest, Replay.size_bytes: size}
    updated = (Replay.update({**times, **changes})
               .where((Replay.id == replay.id) & Replay.status.in_([Replay.RECORDING, Replay.SAVING])).execute())
    if not updated and digest:  # another copy of it was saved meanwhile
        blobs.release(Replay, digest)
    return changes[Replay.status]


def sessions_ended(sessions):
    """Recordings end with their session: its host stops them and sends them (saving), unless the host is gone."""
    lost = [s.id for s in sessions if s.end_reason in (ENDED_BY_HOST_LOST, ENDED_BY_HOST_RESTART)]
    others = [s.id for s in sessions if s.id not in lost]
    recording = Replay.status == Replay.RECORDING
    if others:
        Replay.update(status=Replay.SAVING).where(Replay.session.in_(others) & recording).execute()
    if lost:
        (Replay.update(status=Replay.FAILED, finished_at=clock.now(), error="Its browser host was lost.")
         .where(Replay.session.in_(lost) & recording).execute())


def prune(retention_seconds):
    """Delete recordings that started before the retention (their videos with them); give up on those whose
    host never sent them. How many were deleted."""
    now = clock.now()
    never_came = now - timedelta(seconds=settings().replay_max_seconds + SAVING_GRACE_SECONDS)
    (Replay.update(status=Replay.FAILED, error="Its browser host never sent it.")
     .where((Replay.status == Replay.SAVING) & (Replay.started_at < never_came)).execute())
    cutoff = now - timedelta(seconds=retention_seconds)
    old = list(Replay.select(Replay.id, Replay.video).where(Replay.started_at < cutoff))
    if old:
        Replay.delete().where(Replay.id.in_([replay.id for replay in old])).execute()
        for replay in old:
            blobs.release(Replay, replay.video)
    return len(old)


def _from_unix(seconds):
    return datetime.fromtimestamp(float(seconds), timezone.utc).replace(tzinfo=None)  # naive UTC, as stored


def bounded(args):
    """(framerate, max seconds) of a start's body, with the defaults; 400 past the configured bounds."""
    config = settings()
    if args.get("record_audio"):
        raise bad_request("record_audio: browsers here have no sound device; recordings are video only.",
                          field="record_audio")
    framerate = args.get("framerate", config.replay_default_framerate)
    if framerate > config.replay_max_framerate:
        raise bad_request(f"framerate must be at most {config.replay_max_framerate}.", field="framerate")
    max_seconds = args.get("max_duration_in_seconds", config.replay_max_seconds)
    if max_seconds > config.replay_max_seconds:
        raise bad_request(f"max_duration_in_seconds must be at most {config.replay_max_seconds}.",
                          field="max_duration_in_seconds")
    return framerate, max_seconds
