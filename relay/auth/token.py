"""``RELAY_AUTH=none`` and ``token``: no users; the shared bearer token, when one is set."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from relay.auth.base import Unauthenticated, User


def bearer(headers: Mapping[str, str]) -> str | None:
    """The credential of ``Authorization: Bearer <credential>``, else None."""
    scheme, _, given = headers.get("authorization", "").partition(" ")
    given = given.strip()
    return given if scheme.lower() == "bearer" and given else None


class SharedToken:
    """Every request carries ``Authorization: Bearer <RELAY_API_TOKEN>`` (compared in
    constant time); there is one principal and no user. No token set: ``none``."""

    def __init__(self, token: str | None) -> None:
        self.mode = "token" if token else "none"
        self._expected = token.encode() if token else None

    def check(self, headers: Mapping[str, str]) -> None:
        if self._expected is None:
            return
        given = bearer(headers)
        if given is None or not hmac.compare_digest(given.encode(), self._expected):
            raise Unauthenticated(
                "This API needs an 'Authorization: Bearer <token>' header.",
                'Bearer realm="span-relay"',
            )

    async def authenticate(self, headers: Mapping[str, str]) -> User | None:
        self.check(headers)
        return None
