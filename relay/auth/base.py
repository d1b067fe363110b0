"""The user a request acts for, and the one interface every way of finding it implements."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class User:
    """A verified user: ``id`` is the token's ``sub`` (or the proxy's user header),
    ``claims`` what the token said (the proxy mode has ``{"sub": id}`` only)."""

    id: str
    claims: Mapping[str, Any] = field(default_factory=dict)

    def as_config(self) -> dict[str, Any]:
        """What a graph and its tools read as ``config["configurable"]["user"]``."""
        return {"id": self.id, "claims": dict(self.claims)}

    def configurable(self) -> dict[str, Any]:
        """The entries a run of this user adds to ``config["configurable"]``: ``user``."""
        return {"user": self.as_config()}


class Unauthenticated(Exception):
    """No credential, or one that does not hold: a 401. ``challenge`` is the
    ``WWW-Authenticate`` value; the message is safe to show (it names no secret)."""

    def __init__(self, message: str, challenge: str) -> None:
        super().__init__(message)
        self.challenge = challenge


class Authenticator(Protocol):
    #: the mode's name, as RELAY_AUTH spells it (GET /config tells the SPA)
    mode: str

    async def authenticate(self, headers: Mapping[str, str]) -> User | None:
        """The request's user (None: this mode has no users), or raise
        :class:`Unauthenticated`."""
        ...
