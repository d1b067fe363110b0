"""The authenticator RELAY_AUTH names, from the settings (validated there)."""

from __future__ import annotations

from relay.auth.base import Authenticator
from relay.auth.proxy import ProxyUser
from relay.auth.token import SharedToken
from relay.settings import RelaySettings


def open_authenticator(settings: RelaySettings) -> Authenticator:
    if settings.auth == "jwt":
        from relay.auth.jwt_user import JwtUser

        assert settings.jwt_jwks and settings.jwt_issuer and settings.jwt_audience
        return JwtUser(
            settings.jwt_jwks, settings.jwt_issuer, settings.jwt_audience, settings.jwt_leeway_s
        )
    if settings.auth == "proxy":
        assert settings.proxy_secret
        return ProxyUser(settings.proxy_user_header, settings.proxy_secret)
    return SharedToken(settings.api_token)
