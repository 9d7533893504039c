"""Credentials (/credentials) and credential providers (/org/credential_providers)."""
from flask import g
from flask.views import MethodView

from app.core.api import Blueprint
from app.core.errors import NO_RETRY, ApiError
from app.core.paging import PAGE_HEADERS, page
from app.core.text import fold, host_of
from app.credentials import providers, schemas
from app.credentials.connect import ConnectError
from app.credentials.models import Credential, CredentialProvider
from app.orgs.auth import require_org_wide_key

credentials_blp = Blueprint("credentials", __name__, url_prefix="/credentials",
                            description="Logins stored (encrypted) in a project, and their TOTP codes.")
providers_blp = Blueprint("credential_providers", __name__, url_prefix="/org/credential_providers",
                          description="External password managers (1Password Connect) used for automatic lookup.")


@credentials_blp.route("")
class Credentials(MethodView):
    @credentials_blp.arguments(schemas.CredentialListArgsSchema, location="query")
    @credentials_blp.response(200, schemas.CredentialListItemSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List credentials of the project"""
        credentials = Credential.select().where(Credential.project == g.project.id)
        if args.get("domain"):
            credentials = credentials.where(Credential.domain == host_of(args["domain"]))
        if args.get("query"):
            q = args["query"]
            credentials = credentials.where(Credential.name.contains(q) | Credential.domain.contains(q)
                                            | (Credential.id == q))
        return page(credentials.order_by(Credential.created_at, Credential.id), args)

    @credentials_blp.arguments(schemas.CredentialCreateSchema)
    @credentials_blp.response(201, schemas.CredentialSchema)
    def post(self, args):
        """Store a credential"""
        return Credential.create_from(g.project, args)


@credentials_blp.route("/<credential_ref>")
class CredentialByRef(MethodView):
    @credentials_blp.response(200, schemas.CredentialSchema)
    def get(self, credential_ref):
        """Get a credential by id or name (never its values)"""
        return Credential.lookup(g.project, credential_ref)

    @credentials_blp.arguments(schemas.CredentialUpdateSchema)
    @credentials_blp.response(200, schemas.CredentialSchema)
    def patch(self, args, credential_ref):
        """Update a credential: values merge, "" clears sso_provider or totp_secret"""
        return Credential.lookup(g.project, credential_ref).apply_update(args)

    @credentials_blp.response(204)
    def delete(self, credential_ref):
        """Delete a credential and its encrypted values"""
        Credential.lookup(g.project, credential_ref).delete_instance()


@credentials_blp.route("/<credential_ref>/totp-code")
class CredentialTotpCode(MethodView):
    @credentials_blp.response(200, schemas.TotpCodeSchema)
    def get(self, credential_ref):
        """Generate the current TOTP code of a credential"""
        code, expires_at = Credential.lookup(g.project, credential_ref).current_totp()
        return {"code": code, "expires_at": expires_at}


@providers_blp.route("")
class CredentialProviders(MethodView):
    @providers_blp.arguments(schemas.ProviderListArgsSchema, location="query")
    @providers_blp.response(200, schemas.CredentialProviderSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List credential providers"""
        found = CredentialProvider.select().where(CredentialProvider.org == g.org.id)
        if args.get("query"):
            q = args["query"]
            found = found.where(CredentialProvider.name_key.contains(fold(q)) | (CredentialProvider.id == q))
        return page(found.order_by(CredentialProvider.priority, CredentialProvider.created_at,
                                   CredentialProvider.id), args)

    @providers_blp.arguments(schemas.CredentialProviderCreateSchema)
    @providers_blp.response(201, schemas.CredentialProviderSchema)
    def post(self, args):
        """Add a credential provider"""
        require_org_wide_key("add credential providers")
        provider = CredentialProvider(org=g.org.id, **args)
        provider.save_unique(force_insert=True)
        return provider


@providers_blp.route("/<provider_id>")
class CredentialProviderById(MethodView):
    @providers_blp.response(200, schemas.CredentialProviderSchema)
    def get(self, provider_id):
        """Get a credential provider"""
        return CredentialProvider.lookup(g.org.id, provider_id)

    @providers_blp.arguments(schemas.CredentialProviderUpdateSchema)
    @providers_blp.response(200, schemas.CredentialProviderSchema)
    def patch(self, args, provider_id):
        """Update a credential provider (its token, URL, cache, order or name)"""
        require_org_wide_key("change credential providers")
        provider = CredentialProvider.lookup(g.org.id, provider_id)
        for field, value in args.items():
            setattr(provider, field, value)
        provider.save_unique()
        return provider

    @providers_blp.response(204)
    def delete(self, provider_id):
        """Remove a credential provider"""
        require_org_wide_key("remove credential providers")
        CredentialProvider.lookup(g.org.id, provider_id).delete_instance()
        providers.forget(provider_id)


@providers_blp.route("/<provider_id>/test")
class CredentialProviderTest(MethodView):
    @providers_blp.response(200, schemas.ProviderTestResultSchema)
    def post(self, provider_id):
        """Check that the provider answers with its token; lists the vaults it can see"""
        return providers.test_provider(CredentialProvider.lookup(g.org.id, provider_id))


@providers_blp.route("/<provider_id>/items")
class CredentialProviderItems(MethodView):
    @providers_blp.response(200, schemas.ProviderItemsSchema)
    def get(self, provider_id):
        """List the provider's items as VaultName/ItemTitle paths (cached for cache_ttl_seconds)"""
        try:
            return {"items": providers.provider_items(CredentialProvider.lookup(g.org.id, provider_id))}
        except ConnectError as error:
            # A rejected token stays rejected; an unreachable provider may come back.
            raise ApiError(502, "credential_provider_error", error.message,
                           inner_error={"code": error.kind, "message": error.message},
                           headers=NO_RETRY if error.kind == "unauthorized" else None) from None
