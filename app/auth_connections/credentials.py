"""Where a connection's login comes from, and where it logs in.

A connection's `credential` names a Lantern credential (`{"name"}`), an item of a
credential provider (`{"provider", "path": "Vault/Title"}`), or asks a provider to
find the item for the domain (`{"provider", "auto": true}`). Values are read fresh
for each flow and never stored on the flow.
"""
import json
from functools import partial

from app.auth_connections.meanings import CredentialValues
from app.auth_connections.models import AuthConnection
from app.core import clock, crypto
from app.core.errors import ApiError
from app.core.text import host_of
from app.credentials import providers, totp
from app.credentials.connect import ConnectError
from app.credentials.models import Credential, CredentialProvider
from app.orgs.models import Project


class CredentialError(Exception):
    pass


def one_time_code(secret, algorithm, digits, period):
    """The TOTP code of `secret` now (computed when a form is sent: one from a prompt's time may have expired)."""
    return totp.code_at(secret, algorithm or "SHA1", digits or 6, period or 30, clock.now())[0]


def usable_login(connection):
    """The connection's stored login (CredentialValues), or None when it has none; CredentialError when it names
    one that fails."""
    ref = connection.credential_ref
    if not ref:
        return None
    project = Project.get_by_id(connection.project_id)
    if ref.get("name"):
        credential = Credential.get_or_none((Credential.project == project.id) & (Credential.name == ref["name"]))
        if credential is None:
            raise CredentialError(f"no credential named {ref['name']!r}")
        if not credential.has_totp_secret:
            return CredentialValues(credential.values)
        return CredentialValues(credential.values, partial(
            one_time_code, crypto.decrypt(credential.totp_secret_ciphertext), credential.totp_algorithm,
            credential.totp_digits, credential.totp_period))
    provider = (CredentialProvider.select()
                .where((CredentialProvider.org == project.org_id)
                       & ((CredentialProvider.id == ref["provider"]) | (CredentialProvider.name == ref["provider"])))
                .first())
    if provider is None:
        raise CredentialError(f"no credential provider {ref['provider']!r}")
    try:
        items = providers.provider_items(provider)
        if ref.get("path"):
            item = next((i for i in items if i["path"] == ref["path"]), None)
        else:
            scored = sorted(((providers.match_strength(connection.domain, i), i) for i in items),
                            key=lambda pair: -pair[0])
            item = scored[0][1] if scored and scored[0][0] > 0 else None
        if item is None:
            raise CredentialError(f"no item {ref.get('path') or 'for ' + connection.domain!r} in the provider")
        found = providers.fetch_login(provider, item)
    except ConnectError as error:
        raise CredentialError(error.message) from None
    values = {"username": found.username or "", "password": found.password or ""}
    if not found.totp_secret:
        return CredentialValues(values)
    try:
        parsed = totp.parse_secret(found.totp_secret)
    except ApiError:
        raise CredentialError("the provider item's one-time password is not a TOTP secret") from None
    return CredentialValues(values, partial(one_time_code, parsed["secret"], parsed.get("algorithm"),
                                            parsed.get("digits"), parsed.get("period")))


def remember(connection, typed):
    """After a person's successful login: keep what they typed as a Lantern credential
    (save_credentials), so re-auth can log in without them.

    The identifier is kept as `username` whatever it is (flows before the meaning rule read that key first);
    one that is an email address or a phone number fills a field asking for one (meanings.kinds_of)."""
    if not connection.save_credentials or connection.credential_ref or not typed.get("password"):
        return
    values = {"username": typed.get("identifier") or "", "password": typed["password"]}
    name = f"auth-{connection.id}"
    credential = Credential.get_or_none((Credential.project == connection.project_id) & (Credential.name == name))
    if credential is None:
        Credential.create_from(Project.get_by_id(connection.project_id),
                               {"name": name, "domain": connection.domain, "values": values})
    else:
        credential.apply_update({"values": values})
    AuthConnection.update(credential=json.dumps({"name": name})).where(AuthConnection.id == connection.id).execute()


def allowed_hosts(connection):
    """The connection's domain and allowed_domains; subdomains are allowed by the driver."""
    return {host_of(connection.domain), *(host_of(d.removeprefix("*.")) for d in connection.allowed_domain_list)}


def login_url(connection):
    return connection.login_url or f"https://{connection.domain}/"
