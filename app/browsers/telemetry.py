"""Telemetry of browser sessions: ingest, the live ring buffer, the archive and its pruning.

Every accepted event gets the next seq of its session (handed out under the session
row's lock, in the transaction that archives the events), then enters the session's
ring buffer in this process (streams.telemetry_buffers), which feeds live streams.
A worker that did not ingest an event fills its buffer from the archive when a
stream there finds the session's last_seq ahead of it (`catch_up`). A session archives
at most TELEMETRY_ARCHIVE_SESSION_MAX_BYTES of events; past it they are dropped (counted).
"""
import sys
import threading
from datetime import timedelta

from flask import Response, after_this_request
from peewee import SqliteDatabase

from app import streams
from app.browsers import lifecycle, replays
from app.browsers.models import BrowserLogLine, BrowserSession, TelemetryEvent
from app.browsers.telemetry_settings import captured
from app.core import clock, sse
from app.core.db import db, exclusive
from app.core.jsonprovider import ascii_json
from app.core.settings import settings
from app.streams import channels, telemetry_buffers
from lantern_wire.telemetry import EVENT_CATEGORY

PRUNE_CHUNK = 5000
# The session's log (source supervisor) of what Lantern itself has to say about it.
LANTERN_LOG = "lantern"
# One lock per stripe of sessions in this process: a batch's seqs enter the buffer in
# order even when two requests for one session commit back to back.
_stripes = [threading.Lock() for _ in range(64)]


def envelope_frame(seq, body):
    """The SSE frame of one event; built once, sent to every reader as is."""
    return sse.serialized_frame(f'{{"seq":{seq},"event":{body}}}', seq)


def _stripe(session_id):
    return _stripes[hash(session_id) % len(_stripes)]


def ingest(session, events, *, activity=True, batch=None, lost=0):
    """Store and publish validated events; returns (accepted, dropped, last_seq).

    One transaction per batch: the session row (seq counter, activity) and the
    archive rows commit together, so no reader sees a seq without its event.
    `activity=False`: a browser host captured them from the browser itself (or the app wrote
    them); they are not activity, as a page that logs forever must not keep its session from
    idling out. They reach this worker's streams at once, and the others' through the wake-up.
    `batch`: the host's number of this report (app/browsers/host_reports.py); one applied before is not
    applied again (0 accepted). `lost`: events the host dropped before sending (counted as dropped).
    """
    with _stripe(session.id):
        with exclusive(session):
            current = BrowserSession.get_by_id(session.id)
            if batch is not None and batch <= current.host_batch:
                return 0, 0, current.last_seq
            timed_out = current.is_idle_too_long
            if current.is_active and not timed_out:
                settings = current.options.get("telemetry") or {}  # (options parses its JSON at each read)
                captured_events = [event for event in events if captured(event, settings)]
                first_seq = current.last_seq + 1
                now = clock.now()
                rows, size = _within_budget(current, _rows(session.id, first_seq, current.telemetry_ts_high,
                                                           captured_events, now))
                full = len(rows) < len(captured_events) and _say_archive_full(current, now)
                if rows:
                    _insert(rows)
                touched = {"last_active_at": now, "idle_deadline": current.deadline_from(now)} if activity else {}
                if batch is not None:
                    touched["host_batch"] = batch
                not_kept = len(events) - len(rows) + lost
                (BrowserSession.update(last_seq=BrowserSession.last_seq + len(rows),
                                       telemetry_dropped=BrowserSession.telemetry_dropped + not_kept,
                                       telemetry_ts_high=rows[-1][3] if rows else current.telemetry_ts_high,
                                       telemetry_bytes=BrowserSession.telemetry_bytes + size, **touched)
                 .where(BrowserSession.id == session.id).execute())
        if timed_out:
            lifecycle.end_if_idle(current)
        if not current.is_active or timed_out:
            raise lifecycle.ended_error(current)
        last_seq = first_seq + len(rows) - 1
        _publish(session, _buffer_entries(rows))
        if rows:
            streams.announce(session.telemetry_subject, last_seq)
        if full:
            streams.announce(session.logs_subject)
    return len(rows), len(events) - len(rows), last_seq


def _rows(session_id, first_seq, ts_high, events, now):
    """The archive rows of the events (ARCHIVE_COLUMNS), each with the highest ts up to it."""
    rows = []
    # As text, made once per batch: the drivers would otherwise convert the datetime on every row.
    received_at = TelemetryEvent.received_at.db_value(now).isoformat(" ")
    for seq, event in enumerate(events, start=first_seq):
        ts_high = max(ts_high, event["ts"])
        rows.append((session_id, seq, event["ts"], ts_high, event["category"], event["type"], ascii_json(event),
                     received_at))
    return rows


def _within_budget(session, rows):
    """(the first of `rows` that fit the session's archive budget, their size in bytes): a session's events
    are kept up to TELEMETRY_ARCHIVE_SESSION_MAX_BYTES of JSON, the rest dropped, so seqs stay gapless."""
    budget = settings().telemetry_archive_session_max_bytes
    size = sum(len(row[6]) for row in rows)  # ASCII (ascii_json): characters are bytes
    if budget is None or session.telemetry_bytes + size <= budget:
        return rows, size
    room, size = budget - session.telemetry_bytes, 0
    for count, row in enumerate(rows):
        if size + len(row[6]) > room:
            return rows[:count], size
        size += len(row[6])
    return rows, size


ARCHIVE_FULL = "This session's telemetry archive is full"


def _say_archive_full(session, now):
    """Write once, in the session's `lantern` log, that its events are no longer kept; whether it was written now."""
    log = ((BrowserLogLine.session == session.id) & (BrowserLogLine.source == "supervisor")
           & (BrowserLogLine.log_name == LANTERN_LOG))
    if BrowserLogLine.select().where(log & BrowserLogLine.message.startswith(ARCHIVE_FULL)).exists():
        return False
    budget = settings().telemetry_archive_session_max_bytes
    BrowserLogLine.create(session=session.id, source="supervisor", log_name=LANTERN_LOG, timestamp=now,
                          received_at=now, message=f"{ARCHIVE_FULL}: its events take the {budget} bytes a session "
                          "may have archived (TELEMETRY_ARCHIVE_SESSION_MAX_BYTES). Its later events are dropped "
                          "and counted, neither archived nor streamed; those archived are kept.")
    return True


def _buffer_entries(rows):
    """The stream buffer's entries of archived rows. The type is interned: the buffer then holds
    one copy of each type name, not one per event."""
    return [(seq, (sys.intern(type_), envelope_frame(seq, body))) for _, seq, _, _, _, type_, body, _ in rows]


ARCHIVE_COLUMNS = ("session_id", "seq", "ts", "ts_high", "category", "type", "body", "received_at")


def _insert(rows):
    """The batch's rows into the archive, in the caller's transaction. Postgres takes them as
    one COPY (the host's ingest path: 31,000 -> 42,000 events/s against a pipelined executemany);
    SQLite, which has no COPY, as one prepared INSERT run per row (peewee's insert_many would
    build SQL for every value)."""
    table, columns = TelemetryEvent._meta.table_name, ", ".join(ARCHIVE_COLUMNS)
    cursor = db.cursor()
    if isinstance(db.obj, SqliteDatabase):
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * len(ARCHIVE_COLUMNS))})", rows)
        return
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _publish(session, entries):
    """Into this process's buffer; a gap (events another worker ingested) is filled from the archive first."""
    if not entries:
        return
    buffers = telemetry_buffers()
    have = buffers.latest_seq(session.telemetry_subject)
    if have < entries[0][0] - 1:  # also a buffer new in this worker: it starts with what is retained
        _fill(session.id, session.telemetry_subject, have, entries[0][0] - 1)
    buffers.extend(session.telemetry_subject, entries)


def catch_up(session_id, subject, newest_seq):
    """Bring this process's buffer up to `newest_seq` from the archive (events other workers took in)."""
    if telemetry_buffers().latest_seq(subject) >= newest_seq:
        return
    with _stripe(session_id):
        _fill(session_id, subject, telemetry_buffers().latest_seq(subject), newest_seq)


def _fill(session_id, subject, have, newest_seq):
    buffers = telemetry_buffers()
    floor = max(have, newest_seq - buffers.capacity)
    buffers.extend(subject, [(seq, (sys.intern(type_), envelope_frame(seq, body)))
                             for seq, type_, body in archived(session_id, floor, newest_seq)])


def archived(session_id, after_seq, up_to_seq=None):
    """(seq, type, body) of archived events above `after_seq`, in seq order."""
    query = (TelemetryEvent.select(TelemetryEvent.seq, TelemetryEvent.type, TelemetryEvent.body)
             .where((TelemetryEvent.session == session_id) & (TelemetryEvent.seq > after_seq)))
    if up_to_seq is not None:
        query = query.where(TelemetryEvent.seq <= up_to_seq)
    return list(query.order_by(TelemetryEvent.seq).tuples())


def page(session, args):
    """One page of the archive (spec part 4 paging rules) as a ready JSON response.

    The cursor is the archive row id. asc reads up from `since` (default 5m ago) or
    after the cursor; desc reads down from the cursor, or `until`, or the newest event.
    Category and type filters apply in the query, so a page is only empty at the end.
    """
    # 0 is what X-Next-Offset says when there is nothing further: no cursor.
    limit, offset, descending = args["limit"], args.get("offset") or None, args["order"] == "desc"
    since = None
    if not descending and offset is None:
        since = clock.micros(args.get("since") or clock.now() - timedelta(minutes=5))
    until = clock.micros(args["until"]) if args.get("until") is not None else None
    rows = _window(session.id, _categories(args), args.get("type"), since, until,
                   offset if not descending else None, offset if descending else None, descending, limit + 1)
    has_more = len(rows) > limit
    rows = rows[:limit]
    if has_more:
        next_offset = rows[-1][0]
    elif descending or not rows:
        next_offset = 0 if descending else (offset or 0)
    else:
        # The last page of an ascending read still says where to continue, so a poller
        # passing it back later gets only newer events.
        next_offset = rows[-1][0]

    @after_this_request
    def add_page_headers(response):
        response.headers["X-Has-More"] = "true" if has_more else "false"
        response.headers["X-Next-Offset"] = str(next_offset)
        return response

    body = ",".join(f'{{"seq":{seq},"event":{event}}}' for _, seq, event in rows)
    return Response(f"[{body}]", mimetype="application/json")


def _categories(args):
    """The categories a page reads ([None]: all): the asked ones, narrowed to those of the asked types."""
    categories = set(args.get("category") or ())
    if args.get("type"):
        of_types = {EVENT_CATEGORY.get(name) for name in args["type"]}
        categories = categories & of_types if categories else of_types
        categories.discard(None)  # unknown types match nothing
        return sorted(categories)
    return sorted(categories) or [None]


def _window(session_id, categories, types, since, until, after_id, before_id, descending, count):
    """Up to `count` (id, seq, body) of the session's archive in a window, by id (descending: newest first).

    Each read walks an index from where the page starts and stops after `count` rows, so its cost
    does not grow with the archive. ts_high (the highest ts up to a row, never falling as id rises)
    turns the ts window into ids: rows before the first with ts_high >= since all have ts < since,
    and rows up to the last with ts_high < until all have ts < until; after that last one only rows
    that came late (ts < ts_high, a partial index of their own) can still be before `until`.
    Each category is read through its own (session, category, id) range, the ranges merged here.
    """
    if since is not None:
        first = _id_where(session_id, TelemetryEvent.ts_high >= since, last=False)
        if first is None:
            return []
        after_id = max(after_id or 0, first - 1)
    if until is None:
        ranges = [(after_id, before_id, False)]
    else:
        last = _id_where(session_id, TelemetryEvent.ts_high < until, last=True) or 0
        ranges = [(after_id, last + 1 if before_id is None else min(before_id, last + 1), False),
                  (max(after_id or 0, last), before_id, True)]
    rows = []
    for low, high, late in ranges:
        if low is not None and high is not None and high - low <= 1:
            continue
        for category in categories:
            query = (TelemetryEvent.select(TelemetryEvent.id, TelemetryEvent.seq, TelemetryEvent.body)
                     .where(TelemetryEvent.session == session_id))
            if low is not None:
                query = query.where(TelemetryEvent.id > low)
            if high is not None:
                query = query.where(TelemetryEvent.id < high)
            if late:
                query = query.where((TelemetryEvent.ts < TelemetryEvent.ts_high) & (TelemetryEvent.ts < until))
            if since is not None:
                query = query.where(TelemetryEvent.ts >= since)
            if category is not None:
                query = query.where(TelemetryEvent.category == category)
            if types:
                query = query.where(TelemetryEvent.type.in_(types))
            order = TelemetryEvent.id.desc() if descending else TelemetryEvent.id
            rows.extend(query.order_by(order).limit(count).tuples())
    rows.sort(key=lambda row: row[0], reverse=descending)
    return rows[:count]


def _id_where(session_id, condition, *, last):
    """The first (or last) archive row id of the session meeting a ts_high condition, through the
    (session, ts_high, id) index; None when there is none."""
    order = (TelemetryEvent.ts_high.desc(), TelemetryEvent.id.desc()) if last else (TelemetryEvent.ts_high,
                                                                                  TelemetryEvent.id)
    return (TelemetryEvent.select(TelemetryEvent.id).where((TelemetryEvent.session == session_id) & condition)
            .order_by(*order).limit(1).scalar())


def prune_archive():
    with db.connection_context():
        prune(settings().telemetry_retention_seconds)
        replays.prune(settings().replay_retention_seconds)
    # Buffers and channels nobody used for a while are only caches and wake-up signals: drop them.
    idle = settings().telemetry_prune_interval_seconds
    telemetry_buffers().discard_idle(idle)
    channels().discard_idle(idle)


def prune(retention_seconds):
    """Delete archived telemetry and log lines older than the retention, in chunks; returns counts."""
    cutoff = clock.now() - timedelta(seconds=retention_seconds)
    return {model.__name__: _delete_before(model, cutoff) for model in (TelemetryEvent, BrowserLogLine)}


def _delete_before(model, cutoff):
    deleted = 0
    while True:
        chunk = model.select(model.id).where(model.received_at < cutoff).limit(PRUNE_CHUNK)
        count = model.delete().where(model.id.in_(chunk)).execute()
        deleted += count
        if count < PRUNE_CHUNK:
            return deleted
