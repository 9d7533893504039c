"""Browser sessions: admission under the concurrency caps, updates, and the record clients see and
its listing. Activity, the inactivity timeout and the end are app/browsers/lifecycle.py's.
"""
import json

from peewee import JOIN, fn

from app.browsers import running
from app.browsers.drivers import driver_named
from app.browsers.lifecycle import after_end, end, end_overdue, expire_idle
from app.browsers.models import (
    DEFAULT_VIEWPORT,
    ENDED_BY_LAUNCH_FAILURE,
    BrowserSession,
    BrowserTag,
)
from app.browsers.schemas import CONFIGURABLE_CATEGORIES
from app.core import clock
from app.core.compiled import CompiledQuery
from app.core.db import by_status, exclusive, save_or_conflict
from app.core.errors import conflict, not_found
from app.core.ids import new_id
from app.core.settings import settings as app_settings
from app.extensions.models import Extension
from app.invocations.models import Invocation
from app.orgs.models import Organization, Project
from app.orgs.usage import concurrency_limit_error, first_cap_reached, usage_counter
from app.profiles.models import Profile
from app.profiles.schemas import profile_record
from lantern_wire import control

# Telemetry categories on when telemetry is enabled and the config does not say (contract 6.8.2).
DEFAULT_ON = {"control", "connection", "system", "captcha"}
DEFAULT_LOCATION = {"locale": "en-US", "timezone": "UTC"}
# What a PATCH changes in the running browser before the record says so (running.py).
RUNNING_CHANGES = {"viewport", "profile"}
# Create-request options kept as given in BrowserSession.settings.
SETTINGS_KEYS = ("chrome_policy", "gpu", "kiosk_mode", "location", "network", "proxy", "proxy_id", "start_url",
                 "tags", "telemetry", "vaults", "video_memory", "viewport", "driver")


def name_taken(name):
    return conflict("browser_name_taken", f"An active browser session named {name!r} already exists in this project.")


# -- admission -------------------------------------------------------------------------------

def blocking_limit(project, org):
    """The first cap a new session in `project` would exceed, or None.

    The project's own cap, else the organization's default per-project cap; then the
    organization's concurrency limit.
    """
    active = BrowserSession.active()
    project_cap = project.max_concurrent_sessions or org.default_project_max_concurrent_sessions
    return first_cap_reached([
        ("project", project_cap, active.where(BrowserSession.project == project.id)),
        ("organization", org.max_concurrent_sessions, active.join(Project).where(Project.org == org.id)),
    ])


def create(project, args):
    """A new active session, or 429 when a cap is reached; references are resolved first (404s)."""
    driver = driver_named(app_settings().browser_driver)
    driver.refuse_unsupported(args, update=False)
    settings = {key: args[key] for key in SETTINGS_KEYS if key in args}
    settings["telemetry"] = resolved_telemetry(args.get("telemetry"))
    settings["extensions"] = [resolve(Extension, project, ref, "extension").id for ref in args.get("extensions", [])]
    if "network" in settings:
        settings["network"] = dict(settings["network"], allowlist_state={"revision": new_id()})
    check_no_proxies(args.get("proxy"), args.get("proxy_id"), args.get("network"))
    profile = resolve(Profile, project, args["profile"], "profile") if args.get("profile") else None
    if args.get("invocation_id"):
        Invocation.lookup(project, args["invocation_id"])
    now = clock.now()
    session = BrowserSession(
        id=new_id(), project=project.id, name=args.get("name"), invocation_id=args.get("invocation_id"),
        profile=profile, profile_save_changes=bool(args.get("profile", {}).get("save_changes")),
        headless=args["headless"], stealth=args["stealth"], region=args["region"],
        memory=args.get("memory") or control.default_memory(args["headless"]),
        timeout_seconds=args["timeout_seconds"], settings=json.dumps(settings),
        telemetry_enabled=settings["telemetry"].get("enabled", False),
        driver=app_settings().browser_driver, cdp_ws_url="", webdriver_ws_url="",
        created_at=now, last_active_at=now,
    )
    session.idle_deadline = session.deadline_from(now)
    org = Organization.get_by_id(project.org_id)
    with exclusive(org):
        ended = end_overdue(org.id)
        reached = blocking_limit(project, org)
        if reached:
            raise concurrency_limit_error("max_concurrent_sessions", reached,
                                          retry_after=app_settings().browser_retry_after_seconds,
                                          advice="End a session or retry later.")
        if profile is not None:
            refuse_second_writer(profile, session.profile_save_changes, session)
        driver.place(session, settings)
        save_or_conflict(session, name_taken(session.name), force_insert=True)
        replace_tags(session, args.get("tags") or {})
    after_end(ended)
    # The browser starts once its slot is held, outside the organization lock.
    try:
        endpoints = driver.start(session, settings)
    except Exception:
        end(session, ENDED_BY_LAUNCH_FAILURE)
        raise
    session.cdp_ws_url, session.webdriver_ws_url = endpoints.cdp_ws_url, endpoints.webdriver_ws_url
    session.live_view_url = endpoints.live_view_url
    session.save()
    return session


def resolve(model, project, ref, noun):
    """A referenced row of the project by id, else by name; 404 `<noun>_not_found`."""
    query = model.select().where(model.project == project)
    row = None
    if ref.get("id"):
        row = query.where(model.id == ref["id"]).first()
    elif ref.get("name"):
        row = query.where(model.name == ref["name"]).first()
    if row is None:
        raise not_found(f"No {noun} {ref.get('id') or ref.get('name')!r} in this project.", code=f"{noun}_not_found")
    return row


def check_no_proxies(proxy, proxy_id, network):
    """Lantern has no proxy resources: naming one is a 404, like any missing reference."""
    named = [p for p in [proxy] + [route["proxy"] for route in (network or {}).get("proxy_routes") or []]
             if p and (p.get("id") or p.get("name"))]
    if proxy_id or named:
        which = proxy_id or named[0].get("id") or named[0].get("name")
        raise not_found(f"No proxy {which!r}: Lantern has no proxies; use proxy mode direct or none.",
                        code="proxy_not_found")


def resolved_telemetry(given, current=None):
    """The telemetry config to store, every category spelled out (the SDK's documented rules).

    Create (`current` None): nothing, `{}` or `enabled: false` starts no capture;
    `enabled: true` and/or category settings capture the default set with the
    given categories layered on. Update: nothing or `{}` leaves the config;
    `enabled: false` stops; `enabled: true` starts afresh from the default set plus
    the given categories; categories alone merge onto the current selection (onto
    the default set when capture is off). A selection with every category off
    captures nothing.
    """
    base = json.loads(json.dumps(current)) if current else {"enabled": False, "browser": default_categories()}
    given = given or {}
    enabled, categories = given.get("enabled"), given.get("browser") or {}
    out = dict(base, **{key: given[key] for key in ("export", "storage") if key in given})
    if enabled is False:
        out["enabled"] = False
        return out
    if enabled is None and not categories:
        return out
    fresh = enabled is True or not base["enabled"]
    browser = default_categories() if fresh else base["browser"]
    for name, switch in categories.items():
        browser[name] = dict(browser.get(name) or {}, **switch)
    out["browser"] = browser
    out["enabled"] = any(switch.get("enabled") for switch in browser.values())
    return out


def default_categories():
    return {name: {"enabled": name in DEFAULT_ON} for name in CONFIGURABLE_CATEGORIES}


def replace_tags(session, tags):
    BrowserTag.delete().where(BrowserTag.session == session.id).execute()
    if tags:
        BrowserTag.insert_many([{"session": session.id, "key": k, "value": v} for k, v in tags.items()]).execute()


# -- update ----------------------------------------------------------------------------------

def update(session, args):
    """PATCH: only what is given changes, read and written under the session's lock. What its running browser must
    apply (a new viewport, a profile) is applied first, outside the lock, once the request is known to be
    acceptable: the record says so only once applied (running.py)."""
    if not RUNNING_CHANGES & args.keys():
        return _update_record(session, args)
    with running.one_change_at_a_time(session.id):
        with exclusive(session):
            current = updatable(session, args)
            profile = loadable_profile(current, args["profile"]) if "profile" in args else None
            if args.get("name") and name_in_use(current, args["name"]):
                raise name_taken(args["name"])
        if "viewport" in args:
            running.resize(current, args["viewport"])
        if profile is not None:
            running.load_profile(current, profile)
        return _update_record(session, args)


def _update_record(session, args):
    """The PATCH written to the record (what the running browser had to take, it has)."""
    with exclusive(session):
        current = updatable(session, args)
        settings = current.options
        if "name" in args:
            current.name = args["name"] or None
        if "tags" in args:
            settings["tags"] = args["tags"] or {}
            replace_tags(current, settings["tags"])
        if args.get("telemetry"):
            settings["telemetry"] = resolved_telemetry(args["telemetry"], settings["telemetry"])
            current.telemetry_enabled = settings["telemetry"]["enabled"]
            # A host keeps the newest revision of a session's categories it is told (drivers.categories).
            settings["telemetry_revision"] = settings.get("telemetry_revision", 0) + 1
        if "location" in args:
            location = dict(settings.get("location") or {}, **args["location"])
            settings["location"] = {k: v for k, v in location.items() if v is not None}
        if "viewport" in args:
            settings["viewport"] = {k: v for k, v in args["viewport"].items() if k != "force"}
        if "network" in args:
            settings["network"] = updated_network(settings.get("network") or {}, args["network"])
        if "profile" in args:
            current.profile = loadable_profile(current, args["profile"])
            current.profile_save_changes = bool(args["profile"].get("save_changes"))
        if "proxy" in args:
            settings["proxy"] = args["proxy"]
        if "proxy_id" in args:
            settings.pop("proxy_id", None)
        if "start_url" in args:
            settings["start_url"] = args["start_url"]
        if "disable_default_proxy" in args:
            settings["disable_default_proxy"] = args["disable_default_proxy"]
        current.settings = json.dumps(settings)
        save_or_conflict(current, name_taken(current.name))
    if args.get("telemetry"):
        driver_named(current.driver).telemetry_changed(current)
    return current


def updatable(session, args):
    """The session's row, read under its lock, once the PATCH is one its driver takes; 404 once it has ended."""
    current = BrowserSession.get_by_id(session.id)
    if not current.is_active:
        raise not_found(f"Browser session {session.id!r} not found.", code="browser_not_found")
    driver_named(current.driver).refuse_unsupported(args, update=True)
    check_no_proxies(args.get("proxy"), args.get("proxy_id"), None)
    return current


def name_in_use(session, name):
    return BrowserSession.active().where((BrowserSession.project == session.project_id) & (BrowserSession.name == name)
                                         & (BrowserSession.id != session.id)).exists()


def loadable_profile(session, ref):
    """The profile a PATCH gives a running session: only to one without a profile (Kernel's rule), and under the
    rule of one writer (`refuse_second_writer`)."""
    if session.profile_id:
        raise conflict("profile_already_loaded", "The session already has a profile; it cannot change.")
    profile = resolve(Profile, session.project_id, ref, "profile")
    refuse_second_writer(profile, bool(ref.get("save_changes")), session)
    return profile


def refuse_second_writer(profile, save_changes, session):
    """409 profile_in_use when `session` would save `profile` back when it ends (save_changes) while another active
    session will too: the last to end would overwrite what the other saved. Readers are not counted. Checked under
    the profile's lock, within the caller's transaction (a create's or a PATCH's), which writes the session."""
    if not save_changes:
        return
    with exclusive(profile):
        writer = (BrowserSession.active().select(BrowserSession.id)
                  .where((BrowserSession.profile == profile.id) & BrowserSession.profile_save_changes
                         & (BrowserSession.id != session.id)).first())
    if writer is not None:
        raise conflict("profile_in_use", f"Profile {profile.name or profile.id!r} is saved back by browser session "
                       f"{writer.id!r} when it ends (save_changes), and one session at a time may save a profile: end "
                       "that session first, or load the profile without save_changes.")


def updated_network(network, change):
    state = network.get("allowlist_state") or {"revision": new_id()}
    expected = change.get("expected_allowlist_revision")
    if expected is not None and expected != state["revision"]:
        raise conflict("stale_network", f"The allowlist is at revision {state['revision']!r}, not {expected!r}; "
                       "read the session again and retry.")
    network = dict(network)
    if "allowed_hosts" in change:
        if change["allowed_hosts"]:
            network["allowed_hosts"] = change["allowed_hosts"]
        else:
            network.pop("allowed_hosts", None)
        state = {"revision": new_id(), "base_revision": state["revision"]}
        if change.get("mutation_id"):
            state["mutation_id"] = change["mutation_id"]
    network["allowlist_state"] = state
    return network


# -- listing and the record ------------------------------------------------------------------

def with_profiles(query, *columns):
    """`query` with each session's profile loaded in the same query (records show it): these of its
    columns, or all of them."""
    return query.select_extend(*(columns or (Profile,))).join(Profile, JOIN.LEFT_OUTER).switch(BrowserSession)


def listing(project, *, status="active", query=None, region=None, tags=None):
    """Pages (paging.page) of the project's sessions, newest first; `tags` ({key: value}) all match."""
    return _listing.pages(project, region or None, query or None, tags or None, status=status)


def _build_listing(project, region, query, tags, limit, offset, *, status):
    # What record() shows of a session and of its profile (paging.page).
    shown = BrowserSession.select(
        BrowserSession.id, BrowserSession.name, BrowserSession.driver, BrowserSession.cdp_ws_url,
        BrowserSession.cdp_token, BrowserSession.webdriver_ws_url, BrowserSession.live_view_url,
        BrowserSession.created_at, BrowserSession.deleted_at, BrowserSession.end_reason, BrowserSession.headless,
        BrowserSession.stealth, BrowserSession.timeout_seconds, BrowserSession.memory, BrowserSession.region,
        BrowserSession.settings, BrowserSession.profile, BrowserSession.profile_save_changes)
    sessions = by_status(with_profiles(shown, Profile.id, Profile.name, Profile.created_at, Profile.updated_at,
                                       Profile.last_used_at).where(BrowserSession.project == project),
                         BrowserSession.deleted_at, status)
    if region is not None:
        sessions = sessions.where(BrowserSession.region == region)
    if query is not None:
        profiles = Profile.select(Profile.id).where((Profile.project == project) & (Profile.name == query))
        sessions = sessions.where(BrowserSession.name.contains(query) | (BrowserSession.id == query)
                                  | (BrowserSession.profile == query) | BrowserSession.profile.in_(profiles))
    for key, value in (tags or {}).items():
        tagged = BrowserTag.select(BrowserTag.session).where((BrowserTag.key == key) & (BrowserTag.value == value))
        sessions = sessions.where(BrowserSession.id.in_(tagged))
    return (sessions.order_by(BrowserSession.created_at.desc(), BrowserSession.id.desc())
            .limit(limit).offset(offset))


_listing = CompiledQuery(_build_listing)


def record(session):
    """The browser record (contract 6.8.1) of a session."""
    settings = session.options
    ended_or_now = session.deleted_at or clock.now()
    location_given = settings.get("location") or {}
    driver = driver_named(session.driver)
    cdp_ws_url = driver.cdp_ws_url(session)
    out = {
        "session_id": session.id,
        "cdp_ws_url": cdp_ws_url,
        "webdriver_ws_url": session.webdriver_ws_url,
        "created_at": clock.isoformat(session.created_at),
        "headless": session.headless,
        "stealth": session.stealth,
        "timeout_seconds": session.timeout_seconds,
        "memory": session.memory,
        "region": session.region,
        "gpu": bool(settings.get("gpu")),
        "kiosk_mode": bool(settings.get("kiosk_mode")),
        "profile_save_changes": session.profile_save_changes,
        "location": {
            "locale": location_given.get("locale") or DEFAULT_LOCATION["locale"],
            "locale_source": "override" if location_given.get("locale") else "default",
            "timezone": location_given.get("timezone") or DEFAULT_LOCATION["timezone"],
            "timezone_source": "override" if location_given.get("timezone") else "default",
        },
        "viewport": settings.get("viewport") or DEFAULT_VIEWPORT,
        "tags": settings.get("tags") or {},
        "telemetry": public_telemetry(settings.get("telemetry") or {}),
        "usage": {"uptime_ms": int((ended_or_now - session.created_at).total_seconds() * 1000)},
    }
    live_view_url = None if session.headless else driver.live_view_url(session, cdp_ws_url)
    if live_view_url:  # the contract: headful sessions only
        out["browser_live_view_url"] = live_view_url
    if session.name:
        out["name"] = session.name
    if session.profile_id:
        out["profile"] = session.profile  # dumped by BrowserSchema
    for key in ("chrome_policy", "network", "proxy", "start_url", "vaults", "video_memory"):
        if settings.get(key) is not None:
            out[key] = settings[key]
    if session.deleted_at is not None:
        out["deleted_at"] = clock.isoformat(session.deleted_at)
        out["usage_status"] = "ready"
        if session.end_reason:
            out["end_reason"] = session.end_reason
    return out


def record_dumped(session):
    """record(session) as BrowserSchema dumps it: the hot reads send it as it is (docs/api.md, Records;
    tests/core/test_records.py holds them equal). The record is the schema's shape already but for its profile."""
    out = record(session)
    if "profile" in out:
        out["profile"] = profile_record(out["profile"])
    return out


def public_telemetry(config):
    """The record's telemetry: export destinations are ids there (an object in requests).
    `config` is left as it is."""
    otlp = (config.get("export") or {}).get("otlp") or {}
    destination = otlp.get("destination")
    if not isinstance(destination, dict):
        return config
    public_otlp = {**otlp, "destination": destination.get("id") or destination.get("name")}
    return {**config, "export": {**config["export"], "otlp": public_otlp}}


def of_invocation(invocation):
    return (with_profiles(BrowserSession.active()).where(BrowserSession.invocation_id == invocation.id)
            .order_by(BrowserSession.created_at, BrowserSession.id))


@usage_counter("concurrent_sessions_used")
def org_sessions_in_use(org):
    expire_idle(org.id)
    return _sessions_in_org.scalar(org.id)


_sessions_in_org = CompiledQuery(lambda org_id: BrowserSession.select(fn.COUNT(BrowserSession.id))
                                 .where(BrowserSession.deleted_at.is_null())
                                 .join(Project).where(Project.org == org_id))

