"""``RELAY_AUTH=proxy``: a fronting proxy (oauth2-proxy, an identity-aware proxy, nginx
with ``auth_request``) authenticates the person and names them in a header.

The header is trusted only on a request that also carries ``X-Relay-Proxy-Secret:
<RELAY_PROXY_SECRET>``: the relay cannot tell the proxy's requests from a client's that
reached it some other way, and a user header alone is anyone's to write. Run the relay
where only the proxy reaches it, and have the proxy drop both headers from what clients
send (RUNBOOK).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from relay.auth.base import Unauthenticated, User

SECRET_HEADER = "x-relay-proxy-secret"
_CHALLENGE = 'Proxy realm="span-relay"'
#: the longest user id taken from the header (a turn record keeps it)
MAX_USER_ID = 256


class ProxyUser:
    mode = "proxy"

    def __init__(self, user_header: str, secret: str) -> None:
        self.user_header = user_header.lower()
        self._secret = secret.encode()

    async def authenticate(self, headers: Mapping[str, str]) -> User:
        given = headers.get(SECRET_HEADER)
        if given is None or not hmac.compare_digest(given.encode(), self._secret):
            raise Unauthenticated(
                "This relay takes requests only through its authenticating proxy.", _CHALLENGE
            )
        user = (headers.get(self.user_header) or "").strip()
        if not user or len(user) > MAX_USER_ID or not user.isprintable():
            raise Unauthenticated(
                f"The proxy named no user (header {self.user_header}).", _CHALLENGE
            )
        return User(user, {"sub": user})
