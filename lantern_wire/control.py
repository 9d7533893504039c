"""The host's control API, as both sides speak it: what the app sends a browser host and what the host answers,
with the paths. The app calls it with app/browsers/host_client.py; the host routes it in browserhost/control.py.
Every call carries the key derived from the host's credential (lantern_wire.hosts.control_key).

Shapes are pydantic models (frozen, unknown fields refused): one class checks a body on the host, builds it in the
app, and writes and reads its JSON; a refusal names the field. Defaults live here, once.

    POST   /sessions                             StartRequest -> StartAnswer (201); within start_seconds, else 503
                                                 browser_host_busy (the machine is too busy)
    DELETE /sessions/{id}?save_state=1           -> StopAnswer: the profile's state when asked
    GET    /sessions/{id}/json/version|json/list Chromium's own answers, for the app's /cdp/json routes
    GET    /sessions/{id}/cdp[/devtools/page/{target}]   WebSocket: relayed to Chromium
    GET    /sessions/{id}/endpoint               -> lantern_wire.devtools.DevTools: for workers on the host's machine
    POST   /sessions/{id}/clients                ClientChange -> ClientsAnswer: such a worker's CDP client came or left
    POST   /sessions/{id}/computer               ComputerRequest -> ComputerAnswer, or the failed action's index and why
    POST   /sessions/{id}/replays                ReplayStart -> ReplayStarted (201)
    POST   /sessions/{id}/replays/{replay}/stop  -> ReplayStopped, once the app has the recording (or was offered it)
    PUT    /sessions/{id}/categories             Categories -> CategoriesAnswer
    PUT    /sessions/{id}/viewport               ViewportChange -> ViewportChanged (409 viewport_needs_restart when the
                                                 screen cannot hold it and `restart` is false)
    POST   /sessions/{id}/profile                ProfileLoad -> ProfileLoaded
    GET    /health                               -> Health
    *      /sessions/{id}/agent/{fs|process}/...  forwarded as it is (body and answer streamed) to the session's agent,
                                                 which runs inside its sandbox (browserhost/agent): the SDK's
                                                 browsers.fs and browsers.process paths without /browsers/{id}.
                                                 The agent's status, Content-Type and Cache-Control and its body as
                                                 framed, under the host's own head (Connection: close), else the
                                                 host's refusal: 404 a path other than fs/ or process/, or a session
                                                 stopping; 409 browser_restarting while it starts; 411
                                                 length_required (a chunked body); 413 session_memory_full (no room
                                                 left to start the agent); 501 files_not_served (no sandbox) or
                                                 agent_not_installed (no /usr/bin/python3); 503 agent_unavailable (it
                                                 could not start: nothing ran, send it again); 502 agent_no_answer (it
                                                 ended without an answer: the call may have run, do not resend)

A refusal is {"code", "message"} (HostRefusal) with the HTTP status saying what kind; a failed computer action adds
its "index".

Telemetry categories carry a revision (the session's count of telemetry changes, kept by the app): a host keeps the
newest revision it has seen (Categories.newest), whichever of the start, a PUT or a heartbeat's answer brings it,
so an answer read before a change was committed cannot undo it.
"""
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_serializer

SESSIONS = "/sessions"
SESSION = "/sessions/{session_id}"
SESSION_JSON_VERSION = "/sessions/{session_id}/json/version"
SESSION_JSON_LIST = "/sessions/{session_id}/json/list"
SESSION_CDP = "/sessions/{session_id}/cdp"
SESSION_ENDPOINT = "/sessions/{session_id}/endpoint"
SESSION_CLIENTS = "/sessions/{session_id}/clients"
SESSION_COMPUTER = "/sessions/{session_id}/computer"
SESSION_REPLAYS = "/sessions/{session_id}/replays"
SESSION_REPLAY_STOP = "/sessions/{session_id}/replays/{replay_id}/stop"
SESSION_CATEGORIES = "/sessions/{session_id}/categories"
SESSION_VIEWPORT = "/sessions/{session_id}/viewport"
SESSION_PROFILE = "/sessions/{session_id}/profile"
HEALTH = "/health"
SESSION_AGENT = "/sessions/{session_id}/agent/{path}"
# Added by a host to each call it forwards to a session's agent: the bytes the session may still store (its memory
# left), which a write or upload must fit in.
ROOM_HEADER = "X-Lantern-Room"
# DELETE SESSION's query: 1 to have the profile's state back.
SAVE_STATE = "save_state"

# The most of a JSON body or answer either side reads (a profile's state, which travels both ways, is the largest):
# a host answers 413 past it without reading the body, and the app refuses an answer past it.
MAX_JSON_BYTES = 64 * 1024 * 1024

# A host closes a kept-alive connection idle this long (its thread is given back); the app stops using one well before.
IDLE_CLOSE_SECONDS = 30
# A start's deadline when the caller does not give one (the app sends its BROWSER_HOST_START_SECONDS).
DEFAULT_START_SECONDS = 30.0
# The highest framerate a host records at (the app's REPLAY_MAX_FRAMERATE is held to it).
MAX_FRAMERATE = 240
HEADLESS_MEMORY = ("1GiB", "2GiB", "4GiB")
HEADFUL_MEMORY = ("8GiB", "16GiB")

Id = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
SHA256 = re.compile(r"[0-9a-f]{64}")  # a content hash in lower-case hex, as blobs and archives are named
Sha256 = Annotated[str, StringConstraints(strict=True, pattern=f"^{SHA256.pattern}$")]
# Lower-case words joined by "_": a refusal's code, a telemetry category's name.
Code = Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,64}$")]


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Answer(Shape):
    """A host's answer: fields an app does not know are left aside (a newer host may add some), not refused."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Viewport(Shape):
    width: int = Field(ge=1, le=16384)
    height: int = Field(ge=1, le=16384)
    refresh_rate: int | None = None  # the record's; a host's screens have none to set

    @property
    def size(self):
        return self.width, self.height


# What a session's page measures when its create named no viewport (the record shows the same).
DEFAULT_VIEWPORT = Viewport(width=1920, height=1080, refresh_rate=25)


class Location(Shape):
    timezone: str | None = None  # IANA name, such as "Asia/Tokyo"
    locale: str | None = None  # BCP 47, such as "fr-FR"


class ExtensionRef(Shape):
    """An extension by reference: the host fetches its zip archive (validated at upload) by this hash from the app's
    internal API once and keeps it (lantern_wire.reports.EXTENSIONS, browserhost/extension_cache.py)."""

    id: Id
    sha256: Sha256


class BrowserSpec(Shape):
    """What a browser needs: the create request's settings as a host launches from them."""

    headless: bool = True
    stealth: bool = False
    memory: Literal[HEADLESS_MEMORY + HEADFUL_MEMORY] | None = None  # None: default_memory(headless)
    viewport: Viewport = DEFAULT_VIEWPORT
    location: Location = Location()
    start_url: str | None = None
    kiosk_mode: bool = False
    chrome_policy: dict[str, Any] | None = None
    allowed_hosts: list[str] | None = None  # None: no restriction
    extensions: list[ExtensionRef] = []

    @property
    def memory_mb(self):
        """The sandbox's memory cap, in MiB."""
        return int((self.memory or default_memory(self.headless)).removesuffix("GiB")) * 1024


def default_memory(headless):
    """A session's memory when its create did not say."""
    return HEADLESS_MEMORY[0] if headless else HEADFUL_MEMORY[0]


class Categories(Shape):
    """The telemetry categories a session's capture produces, at the app's revision of them."""

    revision: int = Field(default=0, ge=0)
    names: frozenset[Code] = frozenset()

    @field_serializer("names")
    def _sorted(self, names):
        return sorted(names)

    def newest(self, other):
        """Whichever of the two the app decided last (this one on a tie: the same revision says the same)."""
        return other if other.revision > self.revision else self


class StartRequest(BrowserSpec):
    """A browser to start: its spec's fields (at the top level, as the body has always had them), and the session's."""

    session_id: Id
    profile_state: dict[str, Any] | None = None  # cookies and localStorage (app/profiles' shape)
    categories: Categories = Categories()
    start_seconds: float = Field(default=DEFAULT_START_SECONDS, gt=0)

    @classmethod
    def of(cls, spec, **session):
        """The request starting `spec` for a session (`session`: the fields below the spec's)."""
        return cls(**dict(spec), **session)

    @property
    def spec(self):
        return BrowserSpec(**{name: getattr(self, name) for name in BrowserSpec.model_fields})


class StartAnswer(Answer):
    pid: int
    browser_path: str


class StopAnswer(Answer):
    profile_state: dict[str, Any] | None = None


class ComputerRequest(Shape):
    actions: list[dict[str, Any]]  # checked by the app's computer schemas; run by browserhost/computer.py
    resend: bool = False  # the SDK sent the call again: a host answers what the first send did


class ComputerAnswer(Answer):
    results: list[Any]


class ReplayStart(Shape):
    replay_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]{1,64}$")]
    framerate: int = Field(ge=1, le=MAX_FRAMERATE)
    max_seconds: int = Field(ge=1)
    max_bytes: int = Field(ge=1)


class ReplayStarted(Answer):
    started_at: float  # Unix seconds


class ReplayStopped(Answer):
    handed_on: bool


class ViewportChange(Shape):
    width: int = Field(ge=1, le=16384)
    height: int = Field(ge=1, le=16384)
    restart: bool = False  # Chromium may start again when its screen cannot hold the size
    start_seconds: float = Field(default=DEFAULT_START_SECONDS, gt=0)

    @property
    def size(self):
        return self.width, self.height


class ViewportChanged(Answer):
    restarted: bool


class ProfileLoad(Shape):
    profile_state: dict[str, Any] = {}


class ProfileLoaded(Answer):
    cookies: int
    origins: int


class ClientChange(Shape):
    """A worker on the host's machine relays a CDP client straight to Chromium: it came (1) or left (-1)."""

    delta: Literal[1, -1]
    connection_id: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    worker_pid: int | None = None


class ClientsAnswer(Answer):
    clients: int


class CategoriesAnswer(Answer):
    categories: list[str]


class Health(Answer):
    name: str | None
    capacity: int
    sessions: list[str]


class HostRefusal(Shape):
    """What a host answers when it does not do what was asked (with a 4xx or 5xx)."""

    model_config = ConfigDict(extra="allow", frozen=True)  # a failed computer action adds its index
    code: Code
    message: str


def path(template, **values):
    """A route's path with its values (template: one of the constants above)."""
    return template.format(**values)
