"""Stored credentials (per project) and credential providers (per organization)."""
import json

from peewee import BooleanField, CharField, ForeignKeyField, IntegerField, TextField

from app.core import clock, crypto
from app.core.crypto import CiphertextField
from app.core.db import BaseModel, NamedInProject, UtcDateTimeField, exclusive, matching, save_or_conflict
from app.core.errors import bad_request, conflict, not_found
from app.core.ids import new_id
from app.core.text import fold
from app.credentials import totp
from app.orgs.models import Organization, Project
from app.orgs.resources import active_resource_counter


class Credential(NamedInProject, BaseModel):
    """A login for one domain. Values and the TOTP secret are stored encrypted only."""

    noun = "Credential"
    id = CharField(primary_key=True, default=new_id)
    project = ForeignKeyField(Project, backref="credentials", on_delete="CASCADE")
    name = CharField()
    domain = CharField()
    values_ciphertext = CiphertextField()
    # Names of the stored values (not secret), so reads never decrypt.
    value_keys_json = TextField(default="[]")
    sso_provider = CharField(null=True)
    totp_secret_ciphertext = CiphertextField(null=True)
    totp_algorithm = CharField(null=True)
    totp_digits = IntegerField(null=True)
    totp_period = IntegerField(null=True)
    created_at = UtcDateTimeField(default=clock.now)
    updated_at = UtcDateTimeField(default=clock.now)

    @classmethod
    def create_from(cls, project, fields):
        """A new credential from validated create fields; 409 when the name is taken."""
        credential = cls(project=project, name=fields["name"], domain=fields["domain"],
                         sso_provider=fields.get("sso_provider") or None)
        credential.set_values(fields["values"])
        if fields.get("totp_secret") == "":
            raise bad_request("totp_secret may not be empty; leave it out for a credential without TOTP.",
                              field="totp_secret")
        credential._apply_totp_changes(fields)
        credential.save_unique(force_insert=True)
        return credential

    def apply_update(self, changes):
        """Merge semantics: remove_value_keys first, then values; "" clears sso_provider and totp_secret.

        Runs on the row as committed, read under a lock, so two concurrent merges of
        `values` both land. Returns the credential as saved.
        """
        with exclusive(self):
            current = Credential.get_or_none(Credential.id == self.id)
            if current is None:
                raise not_found(f"Credential {self.name!r} not found.")
            current._merge(changes)
        return current

    def _merge(self, changes):
        if "name" in changes:
            self.name = changes["name"]
        if "values" in changes or "remove_value_keys" in changes:
            values = self.values
            for key in changes.get("remove_value_keys", []):
                values.pop(key, None)
            values.update(changes.get("values", {}))
            self.set_values(values)
        if "sso_provider" in changes:
            self.sso_provider = changes["sso_provider"] or None
        self._apply_totp_changes(changes)
        self.save_unique()

    def _apply_totp_changes(self, fields):
        """A secret (with optional settings), "" to remove it, or settings alone for the stored secret."""
        metadata = {"algorithm": fields.get("totp_algorithm"), "digits": fields.get("totp_digits"),
                    "period": fields.get("totp_period")}
        given = any(value is not None for value in metadata.values())
        if fields.get("totp_secret") == "" and given:
            raise bad_request("totp_secret \"\" removes the secret; it cannot be combined with TOTP settings.",
                              field="totp_secret")
        if "totp_secret" in fields:
            self.set_totp(fields["totp_secret"], **metadata)
        elif given:
            self.change_totp_metadata(**metadata)

    @property
    def value_keys(self):
        return json.loads(self.value_keys_json)

    @property
    def has_values(self):
        return bool(self.value_keys)

    @property
    def has_totp_secret(self):
        return self.totp_secret_ciphertext is not None

    @property
    def values(self):
        """The decrypted values; for the code that logs in, never for a response."""
        return json.loads(crypto.decrypt(self.values_ciphertext))

    def set_values(self, values):
        self.values_ciphertext = crypto.encrypt(json.dumps(values))
        self.value_keys_json = json.dumps(sorted(values))

    def set_totp(self, secret, algorithm=None, digits=None, period=None):
        """Store a secret ("" removes it and its metadata).

        A raw secret keeps the stored metadata unless given; an otpauth URI's
        parameters win over the given ones, and what neither names falls back
        to SHA1/6/30. Marks this instance so the response can show the code.
        """
        if secret == "":
            self.totp_secret_ciphertext = self.totp_algorithm = self.totp_digits = self.totp_period = None
            return
        parsed = totp.parse_secret(secret)
        totp.validate_metadata(algorithm, digits, period)
        keep = {} if parsed["from_uri"] else {"algorithm": self.totp_algorithm, "digits": self.totp_digits,
                                    "period": self.totp_period}
        self.totp_secret_ciphertext = crypto.encrypt(parsed["secret"])
        self.totp_algorithm = parsed.get("algorithm") or algorithm or keep.get("algorithm") or totp.DEFAULT_ALGORITHM
        self.totp_digits = parsed.get("digits") or digits or keep.get("digits") or totp.DEFAULT_DIGITS
        self.totp_period = parsed.get("period") or period or keep.get("period") or totp.DEFAULT_PERIOD
        self._show_current_code()

    def change_totp_metadata(self, algorithm=None, digits=None, period=None):
        if not self.has_totp_secret:
            raise bad_request("totp_algorithm, totp_digits and totp_period need a totp_secret.", field="totp_secret")
        totp.validate_metadata(algorithm, digits, period)
        self.totp_algorithm = algorithm or self.totp_algorithm
        self.totp_digits = digits or self.totp_digits
        self.totp_period = period or self.totp_period
        self._show_current_code()

    def current_totp(self):
        """(code, expires_at) now; 400 when no secret is stored."""
        if not self.has_totp_secret:
            raise bad_request(f"Credential {self.name!r} has no TOTP secret; set totp_secret first.")
        return totp.code_at(crypto.decrypt(self.totp_secret_ciphertext), self.totp_algorithm,
                            self.totp_digits, self.totp_period, clock.now())

    def _show_current_code(self):
        """Create and update responses that set a secret show the code it yields now."""
        self.totp_code, self.totp_code_expires_at = self.current_totp()

    def save_unique(self, *, force_insert=False):
        """Save, answering 409 when the name is taken in the project."""
        self.updated_at = clock.now()
        save_or_conflict(self, conflict("credential_name_taken",
                                        f"A credential named {self.name!r} already exists in this project."),
                         force_insert=force_insert)


@active_resource_counter("credentials")
def project_credentials(project):
    return Credential.select().where(Credential.project == project.id).count()


class CredentialProvider(BaseModel):
    """An external password manager (1Password Connect) consulted for logins."""

    id = CharField(primary_key=True, default=new_id)
    org = ForeignKeyField(Organization, backref="credential_providers", on_delete="CASCADE")
    name = CharField()
    # fold(name): unique per organization, and what `query` searches, so both are
    # case- and accent-insensitive on SQLite and Postgres alike.
    name_key = CharField()
    provider_type = CharField()
    # None: the configured default Connect server.
    url = CharField(null=True)
    token_ciphertext = CiphertextField()
    cache_ttl_seconds = IntegerField(default=300)
    enabled = BooleanField(default=True)
    # Lower is consulted first by automatic lookup.
    priority = IntegerField(default=0)
    created_at = UtcDateTimeField(default=clock.now)
    updated_at = UtcDateTimeField(default=clock.now)

    @classmethod
    def lookup(cls, org, provider_id):
        provider = matching(cls, "org", "id").first(org, provider_id)
        if provider is None:
            raise not_found(f"Credential provider {provider_id!r} not found.")
        return provider

    @property
    def token(self):
        return crypto.decrypt(self.token_ciphertext)

    @token.setter
    def token(self, value):
        self.token_ciphertext = crypto.encrypt(value)

    def save_unique(self, *, force_insert=False):
        self.name_key = fold(self.name)
        self.updated_at = clock.now()
        save_or_conflict(self, conflict("credential_provider_name_taken",
                                        f"A credential provider named {self.name!r} already exists."),
                         force_insert=force_insert)
