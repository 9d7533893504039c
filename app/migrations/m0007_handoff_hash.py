"""Login-flow handoff codes are stored only as hashes; no stored row or event keeps a hosted URL.

The old columns held the code (encrypted) and the hosted URL (plain), and every stored
state event embedded the URL. This migration adds `handoff_hashes`, removes `hosted_url`
from every stored event, and drops both columns.

Flows still in progress are ended (CANCELED, with a terminal event) rather than carried
over: their codes cannot be hashed here without the encryption keys, and their runners
died with the server that is being upgraded, so they could not have finished anyway. The
caller's next login call starts a fresh flow with a working hosted URL.
"""
import json

from peewee import AutoField, CharField, ForeignKeyField, TextField
from playhouse.migrate import migrate

from app.core import clock
from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel

ENDED = {"status": "CANCELED", "error_code": "flow_canceled",
         "error_message": "The login flow was ended by a server upgrade; start the login again."}


def upgrade(migrator):
    database = migrator.database

    class AuthConnection(FrozenModel):
        id = CharField(primary_key=True)

    class LoginFlow(FrozenModel):
        id = CharField(primary_key=True)
        connection = ForeignKeyField(AuthConnection, on_delete="CASCADE")
        flow_type = CharField()
        status = CharField(index=True)
        step = CharField()
        website_error = TextField(null=True)
        error_code = CharField(null=True)
        error_message = TextField(null=True)
        external_action_message = TextField(null=True)
        post_login_url = TextField(null=True)
        submission = TextField(null=True)
        updated_at = UtcDateTimeField()
        completed_at = UtcDateTimeField(null=True)

    class AuthEvent(FrozenModel):
        id = AutoField()
        connection = ForeignKeyField(AuthConnection, on_delete="CASCADE")
        flow = ForeignKeyField(LoginFlow, on_delete="CASCADE")
        timestamp = UtcDateTimeField()
        snapshot = TextField()

    database.bind([AuthConnection, LoginFlow, AuthEvent])
    migrate(migrator.add_column("login_flow", "handoff_hashes", TextField(default="[]")))
    carrying_url = AuthEvent.select(AuthEvent.id, AuthEvent.snapshot).where(AuthEvent.snapshot.contains("hosted_url"))
    for event in list(carrying_url):
        state = json.loads(event.snapshot)
        state.pop("hosted_url", None)
        AuthEvent.update(snapshot=json.dumps(state)).where(AuthEvent.id == event.id).execute()
    now = clock.now()

    def end(flow):
        """End an in-progress flow as loginflow.record would: the row and its terminal state event."""
        LoginFlow.update(**ENDED, submission=None, updated_at=now, completed_at=now).where(
            LoginFlow.id == flow.id).execute()
        values = {**{key: getattr(flow, key) for key in ("website_error", "external_action_message",
                                                         "post_login_url")}, **ENDED}
        state = {"event": "managed_auth_state", "timestamp": clock.isoformat(now), "flow_status": ENDED["status"],
                 "flow_step": flow.step, "flow_type": flow.flow_type}
        for key in ("website_error", "error_code", "error_message", "external_action_message", "post_login_url"):
            if values[key]:
                state[key] = values[key]
        AuthEvent.create(connection=flow.connection_id, flow=flow.id, timestamp=now, snapshot=json.dumps(state))

    for flow in list(LoginFlow.select().where(LoginFlow.status == "IN_PROGRESS")):
        end(flow)
    migrate(migrator.drop_column("login_flow", "hosted_url"), migrator.drop_column("login_flow", "handoff_code"))
