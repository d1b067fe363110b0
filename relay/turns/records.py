"""Turn records: what a turn is, where it stands, and what it answered.

The bus holds a turn's events while they are useful to streams; this table holds the facts
that must outlive the process: status, times, the response, the last ``seq`` handed out
(so a turn resumed after a restart never reuses one), and the paused run's root span (the
resume links to it). SQLite by default, in ``RELAY_DATA_DIR/turns.db``; every call runs in
a worker thread so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar

from relay.turns import threads

T = TypeVar("T")

RUNNING = "running"
PAUSED = "paused"
#: statuses in which a turn still lives (DESIGN.md §5: GET /turns/{id})
LIVE = (RUNNING, PAUSED)


def id_key(value: str) -> str:
    """The key a turn or thread id is found by. A UUID is one id in every spelling
    (hyphens or not, any case, braces, ``urn:uuid:``): its key is its 32 lowercase hex
    digits. Any other id is its own key. A record keeps the id as it was first spelled
    (the id a client made is the id it reads back) and is found by its key."""
    if 32 <= len(value) <= 45:  # the UUID spellings; anything else cannot be one
        try:
            return uuid.UUID(value).hex
        except ValueError:
            pass
    return value


_MIGRATIONS = [
    # version 1
    """
    CREATE TABLE turns (
        turn_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        status TEXT NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        request_hash TEXT NOT NULL DEFAULT '',
        started_at REAL NOT NULL,
        ended_at REAL,
        paused_at REAL,
        response TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        root_trace_id TEXT,
        root_span_id TEXT
    );
    CREATE INDEX turns_thread ON turns (thread_id, started_at DESC);
    CREATE INDEX turns_status ON turns (status);
    """,
    # version 2: idempotent resumes, and where the latest run's events start
    """
    ALTER TABLE turns ADD COLUMN resume_hash TEXT;
    ALTER TABLE turns ADD COLUMN run_after_seq INTEGER NOT NULL DEFAULT 0;
    """,
    # version 3: turns and threads are found by their id's key (id_key), in any spelling
    """
    ALTER TABLE turns ADD COLUMN turn_key TEXT NOT NULL DEFAULT '';
    ALTER TABLE turns ADD COLUMN thread_key TEXT NOT NULL DEFAULT '';
    """,
    # version 4: the served graph a turn ran on (GET /turns?graph=)
    """
    ALTER TABLE turns ADD COLUMN graph TEXT NOT NULL DEFAULT '';
    """,
    # version 5: the user a turn (and its thread) belongs to; '' for none (RELAY_AUTH)
    """
    ALTER TABLE turns ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
    CREATE INDEX turns_user ON turns (user_id, started_at DESC);
    """,
    # version 6: the client-tool rounds of a turn, across all its runs
    """
    ALTER TABLE turns ADD COLUMN client_tool_round INTEGER NOT NULL DEFAULT 0;
    """,
    # version 7: who each thread belongs to, fixed by its first turn (relay/turns/threads.py)
    f"""
    {threads.SQLITE_TABLE};
    {threads.SQLITE_BACKFILL};
    """,
]


def _fill_keys(db: sqlite3.Connection) -> None:
    """Version 3's data step: the keys of the turns recorded before it."""
    rows = db.execute("SELECT turn_id, thread_id FROM turns").fetchall()
    db.executemany(
        "UPDATE turns SET turn_key = ?, thread_key = ? WHERE turn_id = ?",
        [(id_key(turn), id_key(thread), turn) for turn, thread in rows],
    )
    db.execute("CREATE UNIQUE INDEX turns_key ON turns (turn_key)")
    db.execute("CREATE INDEX turns_thread_key ON turns (thread_key, started_at DESC)")


#: steps in Python that follow a version's script, in its transaction
_MIGRATION_STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {3: _fill_keys}


@dataclass(slots=True)
class TurnRecord:
    turn_id: str
    thread_id: str
    status: str
    message: str = ""
    request_hash: str = ""
    started_at: float = 0.0  # epoch ms
    ended_at: float | None = None
    paused_at: float | None = None
    response: str | None = None  # ChatResponse JSON
    last_seq: int = 0
    root_trace_id: str | None = None
    root_span_id: str | None = None
    resume_hash: str | None = None  # the payload of the latest resume (idempotency)
    run_after_seq: int = 0  # the latest run's events have seq > this
    turn_key: str = ""  # id_key(turn_id): what the turn is found by; filled when empty
    thread_key: str = ""  # id_key(thread_id)
    graph: str = ""  # the GraphAgent's name; '' for a turn received over OTLP
    #: the user who started the turn (RELAY_AUTH=jwt or proxy: the token's ``sub``); ''
    #: for none (no users, or a turn received over OTLP): such a turn is every user's
    user_id: str = ""
    #: the client-tool rounds (pauses on a client tool) the turn has had so far, over all
    #: its runs: RELAY_CLIENT_TOOL_MAX_ROUNDS counts them across approvals in between
    client_tool_round: int = 0

    def __post_init__(self) -> None:
        if not self.turn_key:
            self.turn_key = id_key(self.turn_id)
        if not self.thread_key:
            self.thread_key = id_key(self.thread_id)

    def public(self) -> dict[str, Any]:
        """The GET /turns/{id} view."""
        return {
            "turn_id": self.turn_id,
            "thread_id": self.thread_id,
            "status": self.status,
            "graph": self.graph or None,
            "message": self.message,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_ms": round(self.ended_at - self.started_at, 3)
            if self.ended_at is not None
            else None,
            "response": json.loads(self.response) if self.response else None,
        }


_COLUMNS = [f.name for f in fields(TurnRecord)]


class TurnExists(Exception):
    pass


class HeldThread(Protocol):
    """A thread held for one run (:meth:`TurnStore.lock_thread`), until released."""

    async def release(self) -> None: ...


class _HoldsNothing:
    """The hold of a store that only one instance uses: the run manager already keeps
    one run per thread in process, so there is nothing more to hold."""

    async def release(self) -> None:
        return None


HOLDS_NOTHING: HeldThread = _HoldsNothing()


def list_filter(
    thread_id: str | None,
    before: float | None,
    placeholder: str,
    graph: str | None = None,
    status: str | None = None,
    user_id: str | None = None,
) -> tuple[str, list[Any]]:
    """The WHERE clause and its arguments of a turn listing, for both SQL stores (their
    drivers differ only in the placeholder): a thread in any spelling, older than
    ``before``, of one graph, in one status, that ``user_id`` may see (its own and the
    turns of no user)."""
    where: list[str] = []
    args: list[Any] = []
    if user_id is not None:
        where.append(f"COALESCE(user_id, '') IN ({placeholder}, '')")
        args.append(user_id)
    if graph is not None:
        where.append(f"graph = {placeholder}")
        args.append(graph)
    if status is not None:
        where.append(f"status = {placeholder}")
        args.append(status)
    if thread_id is not None:
        where.append(f"thread_key = {placeholder}")
        args.append(id_key(thread_id))
    if before is not None:
        where.append(f"started_at < {placeholder}")
        args.append(before)
    return (f"WHERE {' AND '.join(where)}" if where else ""), args


class TurnStore(Protocol):
    """Where turn records live: SQLite (:class:`SQLiteTurnStore`) or PostgreSQL
    (:class:`relay.turns.postgres.PostgresTurnStore`). Every method finds a turn by any
    spelling of its id (:func:`id_key`) and a thread the same way."""

    async def create(self, record: TurnRecord) -> None: ...

    async def get(self, turn_id: str) -> TurnRecord | None: ...

    async def update(self, turn_id: str, **changes: Any) -> None: ...

    async def list(
        self,
        thread_id: str | None = None,
        limit: int = 50,
        before: float | None = None,
        *,
        graph: str | None = None,
        status: str | None = None,
        user_id: str | None = None,
    ) -> list[TurnRecord]: ...

    async def mark_interrupted(self) -> int: ...

    async def claim_thread(self, thread_id: str, user_id: str) -> str:
        """The owner of the thread (any spelling): the one it has, or, when it has none
        yet, ``user_id`` ('' for none), which it has from now on (relay/turns/threads.py)."""
        ...

    async def thread_owner(self, thread_id: str) -> str | None:
        """The owner of the thread ('' for none, everyone's), or None for a thread with
        no turn yet."""
        ...

    async def lock_thread(self, thread_id: str) -> HeldThread | None:
        """Hold the thread for one run across every instance that shares these records;
        None when another instance holds it. A store of one instance holds nothing
        (:data:`HOLDS_NOTHING`) and never refuses."""
        ...

    async def ping(self) -> None:
        """Readiness: returns when the store answers, raises when it does not."""
        ...

    def close(self) -> None: ...


#: the worker threads of a turn store's calls, apart from asyncio's default executor
#: (span batches, message saves, sync callbacks): a turn's start does not queue behind
#: them. As many as a PostgreSQL store has connections (relay/store/pool.py); SQLite's
#: calls take one lock anyway. Each store has its own (several relays in one process, as
#: in tests, do not wait on each other's database).
TURN_THREADS = 4


class ThreadedTurnAPI(ABC):
    """The async API of a turn store whose sync core (``_create``, ``_get``, ``_update``,
    ``_list``, ``_mark_interrupted``) runs in a worker thread of the store's own executor
    (:data:`TURN_THREADS`, made on first use, shut down by :meth:`_close_executor`): the
    event loop never waits on the database. SQLite and PostgreSQL share it.

    A store subclasses it and writes that sync core, the abstract methods below; the
    async methods of :class:`TurnStore` that call them come from here. The store adds
    ``lock_thread``, ``ping`` and ``close`` (which calls :meth:`_close_executor`)."""

    _executor: ThreadPoolExecutor | None = None

    # -- the sync core a store writes (each call runs in a worker thread) ---------------

    @abstractmethod
    def _create(self, record: TurnRecord) -> None:
        """Record a new turn; :class:`TurnExists` when its id's key is taken."""

    @abstractmethod
    def _get(self, turn_id: str) -> TurnRecord | None:
        """The record of ``turn_id`` (any spelling), or None."""

    @abstractmethod
    def _update(self, turn_id: str, changes: dict[str, Any]) -> None:
        """Set ``changes`` (field name -> value) on the record of ``turn_id``."""

    @abstractmethod
    def _list(
        self,
        thread_id: str | None,
        limit: int,
        before: float | None,
        graph: str | None = None,
        status: str | None = None,
        user_id: str | None = None,
    ) -> list[TurnRecord]:
        """Up to ``limit`` records, newest first, filtered as :func:`list_filter` says."""

    @abstractmethod
    def _mark_interrupted(self) -> int:
        """Make the turns left running by a dead process (with shared records, this
        instance's) ``interrupted``; how many."""

    @abstractmethod
    def _claim_thread(self, thread_id: str, user_id: str) -> str:
        """Claim the thread for ``user_id`` unless it has an owner; its owner."""

    @abstractmethod
    def _thread_owner(self, thread_id: str) -> str | None:
        """The thread's owner, or None when it has none yet."""

    # -- the async API ------------------------------------------------------------------

    def _in_thread(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(TURN_THREADS, thread_name_prefix="relay-turns")
        return asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _close_executor(self) -> None:
        """No new calls; the running ones finish on their own (never waited for here: a
        call may be waiting on a database that is away)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    async def create(self, record: TurnRecord) -> None:
        await self._in_thread(self._create, record)

    async def get(self, turn_id: str) -> TurnRecord | None:
        return await self._in_thread(self._get, turn_id)

    async def update(self, turn_id: str, **changes: Any) -> None:
        await self._in_thread(self._update, turn_id, changes)

    async def list(
        self,
        thread_id: str | None = None,
        limit: int = 50,
        before: float | None = None,
        *,
        graph: str | None = None,
        status: str | None = None,
        user_id: str | None = None,
    ) -> list[TurnRecord]:
        return await self._in_thread(self._list, thread_id, limit, before, graph, status, user_id)

    async def mark_interrupted(self) -> int:
        """At start-up: turns that were running when their process died (this instance's,
        with shared records) become ``interrupted``."""
        return await self._in_thread(self._mark_interrupted)

    async def claim_thread(self, thread_id: str, user_id: str) -> str:
        return await self._in_thread(self._claim_thread, thread_id, user_id)

    async def thread_owner(self, thread_id: str) -> str | None:
        return await self._in_thread(self._thread_owner, thread_id)


class SQLiteTurnStore(ThreadedTurnAPI):
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER)")
            row = self._db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = row[0] or 0
            for version, script in enumerate(_MIGRATIONS, start=1):
                if version > current:
                    self._db.execute("BEGIN")
                    try:
                        for statement in filter(str.strip, script.split(";")):
                            self._db.execute(statement)
                        step = _MIGRATION_STEPS.get(version)
                        if step is not None:
                            step(self._db)
                        self._db.execute("INSERT INTO schema_version VALUES (?)", (version,))
                    except BaseException:
                        self._db.execute("ROLLBACK")
                        raise
                    self._db.execute("COMMIT")

    # -- sync core (runs in a worker thread) --------------------------------------------

    def _create(self, record: TurnRecord) -> None:
        placeholders = ", ".join("?" for _ in _COLUMNS)
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    f"INSERT INTO turns ({', '.join(_COLUMNS)}) VALUES ({placeholders})",
                    [getattr(record, c) for c in _COLUMNS],
                )
                # the first turn of a thread makes it its user's (a later one: no change)
                self._db.execute(threads.SQLITE_CLAIM, (record.thread_key, record.user_id))
            except sqlite3.IntegrityError:
                self._db.execute("ROLLBACK")
                raise TurnExists(record.turn_id) from None
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _get(self, turn_id: str) -> TurnRecord | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM turns WHERE turn_key = ?", (id_key(turn_id),)
            ).fetchone()
        return TurnRecord(*row) if row else None

    def _update(self, turn_id: str, changes: dict[str, Any]) -> None:
        unknown = set(changes) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"unknown turn fields {unknown}")
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self._lock:
            self._db.execute(
                f"UPDATE turns SET {sets} WHERE turn_key = ?", [*changes.values(), id_key(turn_id)]
            )

    def _list(
        self,
        thread_id: str | None,
        limit: int,
        before: float | None,
        graph: str | None = None,
        status: str | None = None,
        user_id: str | None = None,
    ) -> list[TurnRecord]:
        clause, args = list_filter(thread_id, before, "?", graph, status, user_id)
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM turns {clause} "
                "ORDER BY started_at DESC LIMIT ?",
                [*args, limit],
            ).fetchall()
        return [TurnRecord(*row) for row in rows]

    def _mark_interrupted(self) -> int:
        now = time.time() * 1000
        with self._lock:
            cur = self._db.execute(
                "UPDATE turns SET status = 'interrupted', ended_at = ? WHERE status = ?",
                (now, RUNNING),
            )
            return cur.rowcount

    def _claim_thread(self, thread_id: str, user_id: str) -> str:
        key = id_key(thread_id)
        with self._lock:  # one connection, one lock: the insert and the read are one step
            self._db.execute(threads.SQLITE_CLAIM, (key, user_id))
            row = self._db.execute(threads.SQLITE_OWNER, (key,)).fetchone()
        return str(row[0])

    def _thread_owner(self, thread_id: str) -> str | None:
        with self._lock:
            row = self._db.execute(threads.SQLITE_OWNER, (id_key(thread_id),)).fetchone()
        return str(row[0]) if row else None

    async def lock_thread(self, thread_id: str) -> HeldThread | None:
        """One instance uses this file: no other instance to hold the thread against."""
        return HOLDS_NOTHING

    async def ping(self) -> None:
        """Readiness: one cheap read."""
        await self.list(limit=1)

    def close(self) -> None:
        self._close_executor()
        with self._lock:
            self._db.close()
