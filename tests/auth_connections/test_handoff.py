"""Handoff codes: only their hashes are stored; the hosted URL exists only in the login response."""
import json
from urllib.parse import urlsplit

from app.core import migrations
from app.core.db import open_database
from tests.auth_connections.conftest import awaiting_input

HANDOFF_MIGRATION = 7


def stored_text(database):
    """Every text value of every column of every table, as (table, value)."""
    with database.connection_context():
        for table in database.get_tables():
            for row in database.execute_sql(f'SELECT * FROM "{table}"').fetchall():
                yield from ((table, value) for value in row if isinstance(value, str))


def relative(url):
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_no_row_or_event_keeps_the_code_and_every_handed_out_code_opens_the_page(
        app, client, anonymous, new_connection, wait_for):
    connection = new_connection()
    first = client.post(f"/auth/connections/{connection['id']}/login", json={}).get_json()
    wait_for(connection["id"], awaiting_input)
    # A second call while the flow runs: the same flow, a new code; the first code still works.
    second = client.post(f"/auth/connections/{connection['id']}/login", json={}).get_json()
    assert urlsplit(second["hosted_url"]).path == urlsplit(first["hosted_url"]).path
    assert second["flow_expires_at"] == first["flow_expires_at"]
    assert second["handoff_code"] != first["handoff_code"]

    secrets = {first["handoff_code"], second["handoff_code"], relative(first["hosted_url"]),
               relative(second["hosted_url"])}
    leaks = [(table, secret) for table, value in stored_text(app.extensions["database"])
             for secret in secrets if secret in value]
    assert leaks == []
    record = client.get(f"/auth/connections/{connection['id']}").get_json()
    assert record["flow_status"] == "IN_PROGRESS" and "hosted_url" not in record

    for login in (first, second):
        page = anonymous.get(relative(login["hosted_url"]))
        assert page.status_code == 200 and page.mimetype == "text/html"
        state = anonymous.get(relative(login["hosted_url"]).replace("?", "/state?"))
        assert state.status_code == 200 and state.get_json()["flow_status"] == "IN_PROGRESS"
        assert "hosted_url" not in state.get_json()
    path = urlsplit(first["hosted_url"]).path
    assert anonymous.get(f"{path}?code=x{first['handoff_code']}").status_code == 404
    assert anonymous.get(path).status_code == 404


def test_the_migration_drops_stored_codes_and_ends_flows_in_progress(tmp_path, monkeypatch):
    database = open_database(f"sqlite:///{tmp_path / 'before.db'}")
    before = [m for m in migrations.available() if m[0] < HANDOFF_MIGRATION]
    monkeypatch.setattr(migrations, "available", lambda: before)
    migrations.upgrade(database)
    monkeypatch.undo()
    url = "http://lantern.test/auth/hosted/{}?code=plain-code-{}"
    with database.connection_context():
        database.execute_sql(
            "INSERT INTO auth_connection (id, project_id, profile_id, domain, allowed_domains, auto_reauth, "
            "health_checks, health_check_interval, record_session, save_credentials, browser, status, created_at, "
            "updated_at) VALUES ('c', 'p', 'pr', 'example.com', '[]', 1, 1, 3600, 0, 1, '{}', 'NEEDS_AUTH', "
            "'2026-01-01 00:00:00', '2026-01-01 00:00:00')")
        for flow, status in (("running", "IN_PROGRESS"), ("done", "SUCCESS")):
            database.execute_sql(
                "INSERT INTO login_flow (id, connection_id, flow_type, status, step, prompt, interaction_id, "
                "hosted_url, handoff_code, submission, expires_at, started_at, updated_at) VALUES "
                "(?, 'c', 'LOGIN', ?, 'AWAITING_INPUT', '{}', 'i1', ?, 'ciphertext', 'answer', "
                "'2026-01-01 00:05:00', '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
                (flow, status, url.format(flow, flow)))
            database.execute_sql(
                "INSERT INTO auth_event (connection_id, flow_id, timestamp, snapshot) VALUES "
                "('c', ?, '2026-01-01 00:00:00', ?)",
                (flow, json.dumps({"event": "managed_auth_state", "flow_status": status, "flow_step": "AWAITING_INPUT",
                                   "flow_type": "LOGIN", "hosted_url": url.format(flow, flow)})))

    assert migrations.upgrade(database)[0] == "m0007_handoff_hash"  # and any later ones
    assert [(table, value) for table, value in stored_text(database) if "plain-code" in value] == []
    with database.connection_context():
        columns = {c.name for c in database.get_columns("login_flow")}
        assert {"hosted_url", "handoff_code"}.isdisjoint(columns) and "handoff_hashes" in columns
        flows = dict(database.execute_sql("SELECT id, status || ' ' || handoff_hashes || ' ' || "
                                          "COALESCE(submission, '-') || ' ' || (completed_at IS NOT NULL) "
                                          "FROM login_flow").fetchall())
        assert flows == {"running": "CANCELED [] - 1", "done": "SUCCESS [] answer 0"}
        last = database.execute_sql("SELECT snapshot FROM auth_event WHERE flow_id = 'running' "
                                    "ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert {key: value for key, value in json.loads(last).items() if key != "timestamp"} == {
        "event": "managed_auth_state", "flow_status": "CANCELED", "flow_step": "AWAITING_INPUT", "flow_type": "LOGIN",
        "error_code": "flow_canceled", "error_message": "The login flow was ended by a server upgrade; start the "
                                                        "login again."}
    database.close_all()
