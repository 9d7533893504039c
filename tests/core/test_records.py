"""The record functions of the hot reads (API keys, projects, invocations: docs/api.md, "Records") write what
their response schema's dump writes, for the list's rows and for the single read alike: the schemas stay the
contract and the OpenAPI document."""
from app.core import clock
from app.core.db import db
from app.invocations import schemas as invocation_schemas
from app.invocations.models import Invocation
from app.orgs import project_schemas
from app.orgs import schemas as key_schemas
from app.orgs.models import ApiKey, Project


def test_api_key_records_are_the_schemas_dump(app, client, owner_key):
    project = client.post("/org/projects", json={"name": "crawlers"}).get_json()
    client.post("/org/api_keys", json={"name": "scoped", "project_id": project["id"]})
    client.post("/org/api_keys", json={"name": "expiring", "days_to_expire": 30})
    gone = client.post("/org/api_keys", json={"name": "gone"}).get_json()
    client.delete(f"/org/api_keys/{gone['id']}")
    schema = key_schemas.ApiKeySchema()
    with app.app_context(), db.connection_context():
        org_id = ApiKey.get_by_id(gone["id"]).org_id
        rows = ApiKey.listing(org_id, status="all")(100, 0)
        assert len(rows) == 4
        for row in rows:
            key = ApiKey.in_org(org_id, row[0])
            assert key_schemas.api_key_record(*row) == schema.dump(key) == key_schemas.api_key_record_of(key)
        dumped = [schema.dump(ApiKey.in_org(org_id, row[0])) for row in rows]
    # What varies is covered: a project and none, an expiry and none, deleted and not.
    assert {bool(d["project_id"]) for d in dumped} == {bool(d["expires_at"]) for d in dumped} == {True, False}
    assert {bool(d["deleted_at"]) for d in dumped} == {True, False}


def test_project_records_are_the_schemas_dump(app, client):
    for name in ("crawlers", "b\u00e9ta"):
        client.post("/org/projects", json={"name": name})
    schema = project_schemas.ProjectSchema()
    with app.app_context(), db.connection_context():
        org_id = Project.get(Project.name == "crawlers").org_id
        rows = Project.listing(org_id)(100, 0)
        assert len(rows) == 3
        for row in rows:
            project = Project.get_by_id(row[0])
            assert project_schemas.project_record(*row) == schema.dump(project)
            assert project_schemas.project_record_of(project) == schema.dump(project)


def test_invocation_records_are_the_schemas_dump(app, client):
    client.post("/invocations", json={"app_name": "shop", "version": "1", "action_name": "a", "async": True,
                                      "payload": '{"n": 1}'})
    done = client.post("/invocations", json={"app_name": "shop", "version": "1", "action_name": "b",
                                             "async": True}).get_json()
    client.patch(f"/invocations/{done['id']}", json={"status": "succeeded", "output": '"ok"'})
    schema = invocation_schemas.InvocationSchema()
    with app.app_context(), db.connection_context():
        project_id = Invocation.get_by_id(done["id"]).project_id
        rows = Invocation.listing(project_id)(100, 0)
        assert len(rows) == 2
        for row in rows:
            invocation = Invocation.get_by_id(row[0])
            assert invocation_schemas.invocation_record(*row) == schema.dump(invocation)
            assert invocation_schemas.invocation_record_of(invocation) == schema.dump(invocation)
        dumped = [schema.dump(Invocation.get_by_id(row[0])) for row in rows]
    assert {d["finished_at"] is None for d in dumped} == {d["payload"] is None for d in dumped} == {True, False}


def test_browser_records_are_the_schemas_dump(app, client):
    from app.browsers import sessions
    from app.browsers.models import BrowserSession
    from app.browsers.schemas import BrowserSchema

    client.post("/profiles", json={"name": "shopper"})
    made = [client.post("/browsers", json=body).get_json() for body in (
        {}, {"name": "named", "tags": {"team": "qa"}, "profile": {"name": "shopper"}, "timeout_seconds": 100,
             "telemetry": {"enabled": True, "browser": {"console": {"enabled": True}}},
             "viewport": {"width": 800, "height": 600}, "start_url": "https://example.com/"},
        {"headless": True, "location": {"timezone": "Asia/Tokyo"}})]
    client.delete(f"/browsers/{made[0]['session_id']}")
    schema = BrowserSchema()
    clock.freeze(clock.now())  # a record's uptime is read from the clock
    with app.test_request_context(), db.connection_context():
        records = [sessions.record_dumped(session) for session in BrowserSession.select()]
        assert len(records) == 3
        for session in BrowserSession.select():
            assert sessions.record_dumped(session) == schema.dump(sessions.record(session))
    assert any(record.get("profile") for record in records) and any(record.get("deleted_at") for record in records)
