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

Beside its owner, a thread row keeps what LangGraph's Agent Server API says of a thread
(relay/agent_server/threads.py): its id as first spelled, its ``metadata`` (a JSON
object, as text), ``created_at`` and ``updated_at`` (epoch ms: the claim; each turn
started on it, each status change of its turns and each metadata change moves it) and
``deleted_at`` (a thread deleted through that API: its metadata is cleared and it is
listed no more, but its row and owner stay, so that its id never passes to another
user; its owner may create it again, or run on it, which brings it back).
:class:`ThreadSQL` holds the statements for both stores, which differ only in names and
placeholders.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

#: the SQLite statements (PostgreSQL's are in relay/turns/postgres.py)
SQLITE_TABLE = "CREATE TABLE threads (thread_key TEXT PRIMARY KEY, owner TEXT NOT NULL DEFAULT '')"
#: the owner of each thread recorded before the table: its first turn's user, preferring
#: the turns the relay ran itself (their start time is its own clock, not a sender's)
SQLITE_BACKFILL = (
    "INSERT OR IGNORE INTO threads (thread_key, owner) "
    "SELECT thread_key, COALESCE(user_id, '') FROM turns "
    "ORDER BY COALESCE(graph, '') = '', started_at, rowid"
)
SQLITE_OWNER = "SELECT owner FROM threads WHERE thread_key = ?"
#: version 10: the thread's id as spelled, metadata and times (and the backfill of the
#: rows before it, from their turns)
SQLITE_DETAILS = """
    ALTER TABLE threads ADD COLUMN thread_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE threads ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE threads ADD COLUMN created_at REAL NOT NULL DEFAULT 0;
    ALTER TABLE threads ADD COLUMN updated_at REAL NOT NULL DEFAULT 0;
    ALTER TABLE threads ADD COLUMN deleted_at REAL;
    CREATE INDEX threads_owner ON threads (owner, created_at DESC)
"""
#: the columns of the details (PostgreSQL adds the missing ones at start-up)
DETAIL_COLUMNS = {
    "thread_id": "TEXT NOT NULL DEFAULT ''",
    "metadata": "TEXT NOT NULL DEFAULT '{}'",
    "created_at": "DOUBLE PRECISION NOT NULL DEFAULT 0",
    "updated_at": "DOUBLE PRECISION NOT NULL DEFAULT 0",
    "deleted_at": "DOUBLE PRECISION",
}


def backfill(threads: str, turns: str) -> str:
    """The details of the rows recorded before them: the id as its first turn spelled
    it, created at that turn's start, updated at the latest turn's end."""
    first = f"SELECT {{}} FROM {turns} t WHERE t.thread_key = {threads}.thread_key"
    return (
        f"UPDATE {threads} SET "
        f"thread_id = COALESCE(({first.format('t.thread_id')} "
        "ORDER BY t.started_at LIMIT 1), thread_key), "
        f"created_at = COALESCE(({first.format('MIN(t.started_at)')}), 0), "
        f"updated_at = COALESCE(({first.format('MAX(COALESCE(t.ended_at, t.started_at))')}), 0)"
    )


@dataclasses.dataclass(slots=True)
class ThreadRecord:
    """A thread row: ``last_status`` and ``last_graph`` are its latest turn's status and
    served graph (None: no turn yet)."""

    thread_id: str
    owner: str
    metadata: dict[str, Any]
    created_at: float
    updated_at: float
    deleted: bool
    last_status: str | None
    last_graph: str | None


class ThreadSQL:
    """The thread table's statements of one store: its table names, its placeholder,
    its two-argument maximum (SQLite's ``MAX``, PostgreSQL's ``GREATEST``)."""

    def __init__(self, threads: str, turns: str, p: str, greatest: str) -> None:
        self.claim = (
            f"INSERT INTO {threads} "
            "(thread_key, owner, thread_id, metadata, created_at, updated_at) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (thread_key) DO NOTHING"
        )
        #: a turn started on the thread: it is updated, and back if it was deleted
        self.touch = (
            f"UPDATE {threads} SET updated_at = {greatest}(updated_at, {p}), "
            f"deleted_at = NULL WHERE thread_key = {p}"
        )
        #: a turn's status changed: its thread is updated
        self.touch_of_turn = (
            f"UPDATE {threads} SET updated_at = {greatest}(updated_at, {p}) "
            f"WHERE thread_key = (SELECT thread_key FROM {turns} WHERE turn_key = {p})"
        )
        latest = (
            f"(SELECT t.{{}} FROM {turns} t WHERE t.thread_key = h.thread_key "
            "ORDER BY t.started_at DESC LIMIT 1)"
        )
        self.select = (
            "SELECT thread_id, owner, metadata, created_at, updated_at, deleted_at, "
            f"{latest.format('status')}, {latest.format('graph')} FROM {threads} h"
        )
        self.one = f"{self.select} WHERE h.thread_key = {p}"
        self.set_metadata = (
            f"UPDATE {threads} SET metadata = {p}, updated_at = {p} WHERE thread_key = {p}"
        )
        self.revive = (
            f"UPDATE {threads} SET metadata = {p}, created_at = {p}, updated_at = {p}, "
            f"deleted_at = NULL WHERE thread_key = {p}"
        )
        self.delete = (
            f"UPDATE {threads} SET metadata = '{{}}', updated_at = {p}, deleted_at = {p} "
            f"WHERE thread_key = {p}"
        )
        self.p = p

    def listing(self, user_id: str | None, keys: list[str] | None) -> tuple[str, list[Any]]:
        """The live threads ``user_id`` may see (None: every one), of ``keys`` if given."""
        where = ["h.deleted_at IS NULL"]
        args: list[Any] = []
        if user_id is not None:
            where.append(f"h.owner IN ({self.p}, '')")
            args.append(user_id)
        if keys is not None:
            where.append(f"h.thread_key IN ({', '.join(self.p for _ in keys) or 'NULL'})")
            args.extend(keys)
        return f"{self.select} WHERE {' AND '.join(where)}", args


SQLITE_SQL = ThreadSQL("threads", "turns", "?", "MAX")


def thread_row(row: Any) -> ThreadRecord:
    """A row of :attr:`ThreadSQL.select` as a record."""
    thread_id, owner, metadata, created_at, updated_at, deleted_at, last_status, graph = row
    try:
        found = json.loads(metadata or "{}")
    except ValueError:
        found = {}
    return ThreadRecord(
        thread_id=str(thread_id),
        owner=str(owner),
        metadata=found if isinstance(found, dict) else {},
        created_at=float(created_at or 0),
        updated_at=float(updated_at or 0),
        deleted=deleted_at is not None,
        last_status=last_status,
        last_graph=graph or None,
    )


def metadata_text(metadata: Any) -> str:
    """Metadata as the table keeps it: JSON text of an object."""
    return json.dumps(metadata or {}, ensure_ascii=False, separators=(",", ":"), default=str)


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
