"""What Lantern asks of credential providers: a test, their items, and logins by domain."""
import logging
from dataclasses import dataclass

from app.core import clock
from app.core.settings import settings
from app.core.text import host_of
from app.credentials.connect import ConnectClient, ConnectError
from app.credentials.models import CredentialProvider

logger = logging.getLogger(__name__)
# Categories whose items hold a login; other items (notes, cards) never answer a lookup.
LOGIN_CATEGORIES = {"LOGIN", "PASSWORD", None}

# Provider answers by provider id: (fingerprint, fetched_at, items). Per process.
_item_cache = {}


def client_for(provider):
    config = settings()
    return ConnectClient(provider.url or config.onepassword_connect_url, provider.token,
                         timeout=config.credential_provider_timeout_seconds)


def test_provider(provider):
    """{success, vaults, error?}: whether the provider answers with this token."""
    try:
        return {"success": True, "vaults": client_for(provider).vaults()}
    except ConnectError as error:
        return {"success": False, "vaults": [], "error": error.message}


def provider_items(provider):
    """Every item as {id, path, title, vault_id, vault_name, urls}, cached for cache_ttl_seconds.

    The cache entry is dropped when the provider's URL or token changes.
    """
    fingerprint = (provider.url, provider.token_ciphertext, provider.updated_at)
    cached = _item_cache.get(provider.id)
    now = clock.now()
    if cached and cached[0] == fingerprint and (now - cached[1]).total_seconds() < provider.cache_ttl_seconds:
        return cached[2]
    client = client_for(provider)
    items = []
    for vault in client.vaults():
        for item in client.items(vault["id"]):
            title = item.get("title") if isinstance(item.get("title"), str) else ""
            urls = item.get("urls") if isinstance(item.get("urls"), list) else []
            items.append({
                "id": item["id"], "title": title, "path": f"{vault['name']}/{title}",
                "vault_id": vault["id"], "vault_name": vault["name"], "category": item.get("category"),
                "urls": [u["href"] for u in urls if isinstance(u, dict) and isinstance(u.get("href"), str)],
            })
    _item_cache[provider.id] = (fingerprint, now, items)
    return items


def forget(provider_id):
    _item_cache.pop(provider_id, None)


@dataclass
class Login:
    provider: CredentialProvider
    item: dict
    username: str
    password: str
    totp_secret: str = None


class AmbiguousLogin(Exception):
    """Two or more items match a domain equally well; the caller must choose."""

    def __init__(self, domain, items):
        super().__init__(f"{len(items)} items match {domain} equally: " + ", ".join(i["path"] for i in items))
        self.items = items


def match_strength(domain, item):
    """2 for an item URL on exactly this host, 1 for a parent domain of it, 0 otherwise."""
    best = 0
    if item.get("category") not in LOGIN_CATEGORIES:
        return 0
    for url in item["urls"]:
        host = host_of(url)
        if host == domain:
            return 2
        if host and domain.endswith("." + host):
            best = 1
    return best


def find_login(org, domain):
    """The login for `domain` from the first enabled provider (by priority) that has one.

    Within a provider, exact host matches win over parent-domain matches; a tie
    raises AmbiguousLogin rather than guessing. None when no provider has a match.
    Providers that cannot answer are skipped (and logged).
    """
    domain = host_of(domain)
    providers = (CredentialProvider.select()
                 .where((CredentialProvider.org == org) & CredentialProvider.enabled)
                 .order_by(CredentialProvider.priority, CredentialProvider.created_at, CredentialProvider.id))
    for provider in providers:
        try:
            items = provider_items(provider)
        except ConnectError as error:
            logger.warning("credential provider %s skipped in lookup: %s", provider.id, error.message)
            continue
        scored = [(match_strength(domain, item), item) for item in items]
        best = max((score for score, _ in scored), default=0)
        if best == 0:
            continue
        winners = [item for score, item in scored if score == best]
        if len(winners) > 1:
            raise AmbiguousLogin(domain, winners)
        try:
            return fetch_login(provider, winners[0])
        except ConnectError as error:
            logger.warning("credential provider %s skipped in lookup: %s", provider.id, error.message)
    return None


def fetch_login(provider, item):
    """The username, password and TOTP secret of one item, fetched fresh (never cached)."""
    detail = client_for(provider).item(item["vault_id"], item["id"])
    fields = [f for f in detail.get("fields") or [] if isinstance(f, dict)]

    def first(predicate):
        return next((f["value"] for f in fields if predicate(f) and isinstance(f.get("value"), str)), None)

    return Login(
        provider=provider, item=item,
        username=first(lambda f: f.get("purpose") == "USERNAME"),
        password=first(lambda f: f.get("purpose") == "PASSWORD"),
        totp_secret=first(lambda f: f.get("type") == "OTP"),
    )
