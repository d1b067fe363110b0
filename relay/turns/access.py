"""Who may see a turn and use a thread: the rules every route and the admission service
share (a turn of no user, or a thread of none, is everyone's; relay/turns/threads.py)."""

from __future__ import annotations

from relay.auth import User
from relay.turns.records import TurnRecord


def may_see(user: User | None, record: TurnRecord) -> bool:
    """Whether ``user`` (None: requests have no users) may see ``record``'s turn."""
    return user is None or not record.user_id or record.user_id == user.id


def may_use(user: User | None, owner: str | None) -> bool:
    """Whether ``user`` may read and run turns on a thread of ``owner`` (None: a thread
    with no turn yet; '': a thread of no user, everyone's)."""
    return user is None or not owner or owner == user.id
