"""Who is asking (DESIGN.md §5, README "Security"): the user a request acts for.

``RELAY_AUTH`` picks one :class:`Authenticator`: ``none`` (no credential, no user),
``token`` (the shared ``RELAY_API_TOKEN``: a credential, still no user), ``jwt`` (a bearer
JWT verified against ``RELAY_JWT_JWKS``; the user is its ``sub``) or ``proxy`` (a fronting
proxy's user header, trusted only with ``RELAY_PROXY_SECRET``); or LangGraph's own
``Auth`` (langgraph.json's ``auth``, or ``Relay.from_env(auth=...)``), which takes RELAY_AUTH's
place (relay/auth/langgraph_auth.py). Framework-free: the HTTP
surface hands it the request's headers and turns :class:`Unauthenticated` into a 401.
"""

from relay.auth.base import Authenticator, Unauthenticated, User
from relay.auth.open import open_authenticator, open_langgraph_auth

__all__ = ["Authenticator", "Unauthenticated", "User", "open_authenticator", "open_langgraph_auth"]
