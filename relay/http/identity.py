"""Who a request acts for (relay/auth), as FastAPI dependencies, and what a user may see.

``identify`` runs the configured authenticator on every API route: a missing or bad
credential is ``401`` with ``WWW-Authenticate``. Its user (None when RELAY_AUTH has no
users) is what the routes hand to :func:`check_owner`: a turn that belongs to another user
is answered exactly as a turn that does not exist (``404``, never ``403``: whether it
exists is not the asker's to learn). A turn of no user (recorded before RELAY_AUTH had
users, or received over OTLP without ``enduser.id`` on a thread of no user) is everyone's.
A thread is its owner's (the user of its first turn, relay/turns/threads.py): another
user's thread is answered as a thread that does not exist (:func:`may_use`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request

from relay.auth import Authenticator, Unauthenticated, User
from relay.auth.token import SharedToken
from relay.errors import ApiError
from relay.turns.access import may_see
from relay.turns.records import TurnRecord

Identify = Callable[[Request], Awaitable[User | None]]


def identity_dependency(authenticator: Authenticator) -> Identify:
    """The dependency that finds the request's user (also kept in ``request.state.user``)."""

    async def identify(request: Request) -> User | None:
        try:
            user = await authenticator.authenticate(request.headers)
        except Unauthenticated as exc:
            raise ApiError(
                401, "unauthorized", str(exc), headers={"WWW-Authenticate": exc.challenge}
            ) from None
        request.state.user = user
        return user

    return identify


def token_checker(token: str | None) -> Callable[[Request], Awaitable[None]]:
    """A dependency that requires ``Authorization: Bearer <token>`` when a token is set:
    the OTLP receiver's own credential (RELAY_API_TOKEN), whatever RELAY_AUTH is."""
    shared = SharedToken(token)

    async def require_token(request: Request) -> None:
        try:
            shared.check(request.headers)
        except Unauthenticated as exc:
            raise ApiError(
                401, "unauthorized", str(exc), headers={"WWW-Authenticate": exc.challenge}
            ) from None

    return require_token


def user_of(request: Request) -> User | None:
    """The user ``identify`` found for this request (a route lists it in its
    ``dependencies``). A route that did not is a bug: it fails closed, never open."""
    try:
        user: User | None = request.state.user
    except AttributeError:
        raise RuntimeError(f"{request.url.path}: the route does not identify its user") from None
    return user


def user_key(user: User | None) -> str | None:
    """What a listing is filtered by: the user's id, or None (no users: every turn)."""
    return user.id if user is not None else None


def check_owner(
    user: User | None,
    record: TurnRecord | None,
    message: str = "There is no such turn.",
    code: str = "unknown_turn",
) -> TurnRecord:
    """``record`` when ``user`` may see it; else the 404 of a turn that does not exist."""
    if record is None or not may_see(user, record):
        raise ApiError(404, code, message)
    return record
