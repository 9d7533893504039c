"""The one translation of a host's errors (app/browsers/host_client.py's HostError) into the API's error shape, by
the route that failed: in the host's words where they are meant for a tenant, with x-should-retry false where the
same request again could do something twice."""
import logging

from app.core.errors import NO_RETRY, ApiError, bad_request, conflict, not_found
from app.core.settings import settings
from lantern_wire import control
from lantern_wire.pacing import READ_ONLY

logger = logging.getLogger(__name__)
# Retry-After of a change refused while the session's browser starts (again).
RESTART_RETRY_SECONDS = 2
# The codes of a host's refusals of a recording worded for the session's user (browserhost/server.py).
TENANTS_WORDS = {"browser_unreachable", "not_found", "replay_in_progress", "bad_request"}
# What a host refusing a start answers when it started nothing there (another host may take the session). Not
# browser_host_busy: that host spent the whole start deadline.
HOST_DID_NOT_TAKE = ("no_browser_capacity", "browser_host_stopping", "browser_host_unavailable")
# A session agent's 4xx refusals with a code pass on as they are (it checks what a tenant sent: paths, sizes,
# processes, permissions; and says what is wrong in words meant for them), and so do its 501 and 503: nothing ran.
# Except the statuses the SDKs send again (RETRIED_4XX): those become a 400 with the same code, since the agent's
# words do not say whether the same call again is safe.
AGENT_5XX = {501, 503}
RETRIED_4XX = {408, 409, 429}
# The fields of an agent's refusal a client gets beside code and message: the room a write did not fit in.
AGENT_FIELDS = ("room_bytes",)


class AgentRefusal(ApiError):
    """A session agent's refusal in its words (or the app's own in the agent's shape), with its `fields` beyond code
    and message (AGENT_FIELDS), which the views answer in the body (app/browsers/session_agent.refusal_response)."""

    def __init__(self, status, code, message, *, fields=None, headers=None):
        super().__init__(status, code, message, headers=headers)
        self.fields = fields or {}


def api_error(error):
    """The API's error for what a host did not do (`error`, a HostError of one of HostClient's calls), in the host's
    words where they are meant for a tenant; x-should-retry false where the same request again could do something
    twice."""
    route = error.route
    if route == control.SESSIONS:
        return _start_failed(error)
    if route == control.SESSION_COMPUTER:
        return _computer_failed(error)
    if route in (control.SESSION_REPLAYS, control.SESSION_REPLAY_STOP):
        return _recording_failed(error)
    if route in (control.SESSION_VIEWPORT, control.SESSION_PROFILE):
        return _not_changed(error, "resized" if route == control.SESSION_VIEWPORT else "given the profile")
    if route == control.SESSION_ENDPOINT:
        return browser_unreachable(error.session_id)
    if route == control.SESSION_AGENT:
        return _agent_failed(error)
    return ApiError(502, "browser_host_unreachable", f"The browser's host did not answer: {error.public_message}",
                    headers=_retry_after())


def browser_unreachable(session_id):
    """The 502 of a session's browser that does not answer (its DevTools, through its host or straight)."""
    return ApiError(502, "browser_host_unreachable", f"The browser of session {session_id!r} does not answer.",
                    headers={"Retry-After": "5"})


def _retry_after():
    return {"Retry-After": str(settings().browser_capacity_retry_after_seconds)}


def _start_failed(error):
    if error.status == 400:
        return ApiError(400, "bad_request", error.public_message)
    if error.status is None:  # it did not answer at all: it died, and is not yet known as lost
        return ApiError(503, "no_browser_host", "The browser host placed to run it did not answer; retry: a "
                        "host that stays silent stops getting sessions.", headers=_retry_after())
    return ApiError(503, "browser_start_failed", f"The browser could not be started: {error.public_message}",
                    headers=_retry_after())


def _computer_failed(error):
    """A 502 for actions the host did not do carries Retry-After only when sending them again cannot do one twice
    (they never reached the host, or only read). Else the SDKs must not resend it: a host that failed part-way, or
    did not answer, may have clicked or typed already."""
    if error.status == 400:
        return bad_request(error.public_message)
    if error.status in (404, 501):
        return ApiError(error.status, error.code or "not_found", error.public_message)
    message = f"The browser could not do it: {error.public_message.rstrip('.')}"
    if error.malformed:  # they ran
        message = "The browser host answered without the actions' results."
    actions = error.request.actions if error.request is not None else ()
    if not error.reached or all(action["type"] in READ_ONLY for action in actions):
        return ApiError(502, "computer_action_failed", message, headers=_retry_after())
    if error.malformed:
        return ApiError(502, "computer_action_failed", message, headers=NO_RETRY)
    return ApiError(502, "computer_action_failed", f"{message}. Some actions may have run: look at the screen "
                    "before sending them again.", headers=NO_RETRY)


def _recording_failed(error):
    if error.status == 409:
        return conflict(error.code or "replay_in_progress", error.public_message)
    if error.status == 404:
        return ApiError(404, "not_found", error.public_message)
    # A host's failure to run ffmpeg or reach the browser may name its folders and processes: the tenant is told
    # what failed, this server's log (and the host's) why. Only a host's words meant for tenants go on.
    logger.warning("a browser host could not start or stop a recording: %s", error)
    said = f": {error.public_message}" if error.code in TENANTS_WORDS else f" ({error.code or 'no answer'})"
    # A host's own refusal started nothing, nor did a request that never reached it; one it had and did not answer
    # may be recording, and the SDKs' retry of the 502 would find it so.
    return ApiError(502, "replay_failed", f"The browser host could not do it{said}",
                    headers=_retry_after() if error.took_nothing else NO_RETRY)


def _not_changed(error, done):
    """What a client is told of a running browser that could not be `done` (a host's refusal in its own words)."""
    if error.status == 409:  # a browser starting again takes the change once it runs
        return conflict(error.code or "conflict", error.public_message,
                        retry_after=RESTART_RETRY_SECONDS if error.code == "browser_restarting" else None)
    if error.status == 404:
        return not_found(f"Browser session {error.session_id!r} has no running browser.", code="browser_not_found")
    logger.warning("browser host could not change session %s: %s", error.session_id, error)
    # The same request again asks for the same end state: worth retrying, unless the session ended (a restart that
    # failed).
    ended = error.code == "browser_start_failed"
    return ApiError(502, error.code or "browser_host_error", f"The browser could not be {done}: "
                    f"{error.public_message}", headers=NO_RETRY if ended else None)


def _agent_failed(error):
    """A call of a session's agent (files, processes) that it refused, or that failed on its way. A failure sent
    again could do twice what ran (a move, an exec): a 502 says to retry only a read, or a call never sent."""
    if error.code and error.status == 409 and error.code == "browser_restarting":  # the host's: nothing was done
        return conflict(error.code, error.public_message, retry_after=RESTART_RETRY_SECONDS)
    if error.code and error.status in RETRIED_4XX:
        return AgentRefusal(400, error.code, error.public_message)
    if error.code and error.status is not None and (400 <= error.status < 500 or error.status in AGENT_5XX):
        fields = {name: error.extra[name] for name in AGENT_FIELDS if name in error.extra}
        return AgentRefusal(error.status, error.code, error.public_message, fields=fields,
                            headers=_retry_after() if error.status == 503 else None)
    logger.warning("session %s: a call of its agent failed: %s", error.session_id, error)
    again = not error.reached or error.method == "GET"
    return ApiError(502, "session_agent_failed", f"The session's agent could not do it: {error.public_message}",
                    headers=_retry_after() if again else NO_RETRY)
