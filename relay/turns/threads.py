"""Who a thread belongs to: fixed by its first turn, never moved.

A thread's owner is the user of the first turn recorded on it ('' for none: the thread is
everyone's), claimed once in the stores' thread table (SQLite ``threads``, PostgreSQL
``relay_threads``, shared by every replica) by an insert that does nothing when the
thread has an owner already: whoever comes later, and whatever times its turn claims,
finds the owner there. Nothing else decides it: not the most recent turn, and never a
span's own timestamps (a received turn's start time is the sender's to choose).

A turn joins a thread only as its owner (or on a thread of no user). A turn received
over OTLP (or in a trace file) whose ``enduser.id`` is not the owner's, or that names no
user on a thread that has one, is kept apart: recorded on a thread of its own
(:func:`apart_thread`), which no other turn is on; it stays its named user's, or, naming
none, the owner's, so that it is never every user's.
"""

from __future__ import annotations

#: the SQLite statements (PostgreSQL's are in relay/turns/postgres.py)
SQLITE_TABLE = "CREATE TABLE threads (thread_key TEXT PRIMARY KEY, owner TEXT NOT NULL DEFAULT '')"
#: the owner of each thread recorded before the table: its first turn's user, preferring
#: the turns the relay ran itself (their start time is its own clock, not a sender's)
SQLITE_BACKFILL = (
    "INSERT OR IGNORE INTO threads (thread_key, owner) "
    "SELECT thread_key, COALESCE(user_id, '') FROM turns "
    "ORDER BY COALESCE(graph, '') = '', started_at, rowid"
)
SQLITE_CLAIM = "INSERT OR IGNORE INTO threads (thread_key, owner) VALUES (?, ?)"
SQLITE_OWNER = "SELECT owner FROM threads WHERE thread_key = ?"

#: where kept-apart turns' threads begin (a thread id of no other turn)
APART_PREFIX = "apart-"


def joins(owner: str | None, user: str) -> bool:
    """Whether a turn of ``user`` ('' for none) joins a thread of ``owner`` (None: a new
    thread, '': a thread of no user, everyone's)."""
    return not owner or owner == user


def apart_thread(turn_id: str) -> str:
    """The thread a kept-apart turn is recorded on: its own, named after the turn."""
    return f"{APART_PREFIX}{turn_id}"


def apart_user(owner: str, user: str) -> str:
    """The user of a kept-apart turn: the one it names, or, naming none, the owner of the
    thread it claimed (never '': a turn of no user is every user's)."""
    return user or owner
