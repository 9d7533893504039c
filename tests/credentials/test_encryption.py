"""Secrets at rest: encrypted in the database, rotatable keys, a generated instance key."""
import os

from cryptography.fernet import Fernet

from app.core import crypto
from app.core.db import db
from app.credentials.models import Credential, CredentialProvider
from lantern_wire.settings_errors import SettingsError
from tests.conftest import TEST_ENCRYPTION_KEY

SECRETS = ["hunter2-password", "JBSWY3DPEHPK3PXPJBSWY3DP", "ops_connect_token_123"]


def store_secrets(client):
    client.post("/credentials", json={"domain": "a.com", "name": "c", "values": {"password": SECRETS[0]},
                                      "totp_secret": SECRETS[1]})
    client.post("/org/credential_providers", json={"name": "p", "provider_type": "onepassword", "token": SECRETS[2]})


def database_dump(app):
    database = app.extensions["database"]
    with app.app_context(), database.connection_context():
        text = []
        for table in database.get_tables():
            cursor = database.execute_sql(f'SELECT * FROM "{table}"')
            text.extend(str(row) for row in cursor.fetchall())
        return "\n".join(text)


def test_database_dump_holds_no_plaintext_secret(app, client):
    store_secrets(client)
    dump = database_dump(app)
    assert "password" in dump  # value names are stored in clear, values are not
    for secret in SECRETS:
        assert secret not in dump


def test_rotation_re_encrypts_with_the_new_key(app, client, make_app):
    store_secrets(client)
    new_key = Fernet.generate_key().decode()
    rotated_app = make_app(ENCRYPTION_KEYS=[new_key, TEST_ENCRYPTION_KEY])
    result = rotated_app.test_cli_runner().invoke(args=["secrets", "rotate"])
    assert result.exit_code == 0 and "re-encrypted 3 value(s)" in result.output
    only_new = make_app(ENCRYPTION_KEYS=new_key)
    with only_new.app_context(), db.connection_context():
        credential = Credential.get(Credential.name == "c")
        assert credential.values == {"password": SECRETS[0]}
        assert crypto.decrypt(credential.totp_secret_ciphertext) == SECRETS[1]
        assert CredentialProvider.get(CredentialProvider.name == "p").token == SECRETS[2]


def test_a_missing_key_is_generated_once_into_the_instance_folder(tmp_path):
    path = tmp_path / "encryption.keys"
    first = crypto.load_or_create_key_file(str(path))
    assert crypto.load_or_create_key_file(str(path)) == first and len(first) == 1
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    Fernet(first[0])


def test_keys_may_be_a_comma_separated_string(make_app):
    app = make_app(ENCRYPTION_KEYS=f"{Fernet.generate_key().decode()}, {TEST_ENCRYPTION_KEY}")
    with app.app_context():
        assert crypto.decrypt(crypto.encrypt("x")) == "x"


def test_generate_key_command(app):
    key = app.test_cli_runner().invoke(args=["secrets", "generate-key"]).output.strip()
    Fernet(key)


def test_an_empty_key_setting_is_an_error_not_a_new_key(make_app):
    import pytest

    with pytest.raises(SettingsError, match="ENCRYPTION_KEYS=.hidden. .*: should hold at least one Fernet key"):
        make_app(ENCRYPTION_KEYS=" , ")
