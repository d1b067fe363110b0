"""The authenticator RELAY_AUTH names, from the settings (validated there); or LangGraph's
own ``Auth``, which takes RELAY_AUTH's place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from relay.auth.base import Authenticator
from relay.auth.proxy import ProxyUser
from relay.auth.token import SharedToken
from relay.settings import ConfigError, RelaySettings

if TYPE_CHECKING:
    from relay.auth.langgraph_auth import LangGraphAuth


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


def open_langgraph_auth(
    auth: Any, settings: RelaySettings, environ: Mapping[str, str], source: str | None = None
) -> LangGraphAuth:
    """``auth`` (a ``langgraph_sdk.Auth``) as the relay's authenticator: it replaces
    RELAY_AUTH, so a RELAY_AUTH that names another mode is a ConfigError (two answers to
    who is asking); RELAY_API_TOKEN stays the OTLP receivers' credential."""
    from relay.auth.langgraph_auth import LangGraphAuth

    named = (environ.get("RELAY_AUTH") or "").strip().lower()
    if named not in ("", "none") or settings.auth in ("jwt", "proxy"):
        raise ConfigError(
            f"RELAY_AUTH={named or settings.auth} and LangGraph's auth both say who is "
            "asking: unset RELAY_AUTH (langgraph.json's auth decides; RELAY_API_TOKEN stays "
            "the OTLP receivers' credential)"
        )
    if (settings.otlp_http or settings.otlp_grpc) and not settings.api_token:
        raise ConfigError(
            "LangGraph's auth with the OTLP receiver on needs RELAY_API_TOKEN: the receiver "
            "keeps its own credential (the collector's), apart from the users'"
        )
    try:
        return LangGraphAuth(auth, source or "auth")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
