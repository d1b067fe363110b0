"""Turn records: what a turn is, where it stands, and what it answered.

The bus holds a turn's events while they are useful to streams; this table holds the facts
that must outlive the process: status, times, the response, the last ``seq`` handed out
(so a turn resumed after a restart never reuses one), and the paused run's root span (the
resume links to it). SQLite by default, in ``RELAY_DATA_DIR/turns.db``
(relay/turns/sqlite.py), or PostgreSQL (relay/turns/postgres.py); every call runs in a
worker thread so the event loop never waits on the database.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any, Protocol, TypeVar

from relay.turns.threads import ThreadRecord

T = TypeVar("T")

RUNNING = "running"
PAUSED = "paused"
#: statuses in which a turn still lives (DESIGN.md §5: GET /turns/{id})
LIVE = (RUNNING, PAUSED)


def lease_until(lease_s: float) -> float:
    """The end of a lease taken or renewed now, in epoch ms (relay/turns/leases.py)."""
    return time.time() * 1000 + lease_s * 1000


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
    #: the lease of the instance running the turn (relay/turns/leases.py): epoch ms until
    #: which it holds the turn; 0 for none (not running, or a turn the relay did not run)
    lease_until: float = 0.0
    #: which attempt at the turn runs it: a takeover counts one more
    attempt: int = 1
    #: the PostgreSQL session holding the thread's lock for the run (0: none, SQLite)
    lock_holder: int = 0
    #: how the last run stopped when its instance stopped and handed the turn over
    #: (relay/turns/draining.py: ``drained`` or ``cut``); '' when it did not
    handover: str = ""

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
            # 1, and one more each time another instance took the turn over (its lease)
            "attempt": self.attempt,
        }


_COLUMNS = [f.name for f in fields(TurnRecord)]


class TurnExists(Exception):
    pass


class HeldThread(Protocol):
    """A thread held for one run (:meth:`TurnStore.lock_thread`), until released."""

    #: what holds it in the shared store (a PostgreSQL backend pid; 0: nothing to end)
    @property
    def holder(self) -> int: ...

    async def release(self) -> None: ...


class _HoldsNothing:
    """The hold of a store that only one instance uses: the run manager already keeps
    one run per thread in process, so there is nothing more to hold."""

    holder = 0

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

    async def renew_leases(self, leases: Mapping[str, int], until: float) -> set[str]:
        """Extend to ``until`` (epoch ms) the lease of each running turn in ``leases``
        (turn id -> the attempt this instance runs); the ids of those still ours, in one
        statement (relay/turns/leases.py)."""
        ...

    async def claim_expired(
        self, now: float, until: float, exclude: Sequence[str], startup: bool
    ) -> Sequence[TurnRecord]:
        """Claim the running turns whose lease ran out before ``now`` (none of
        ``exclude``, this instance's own), each for exactly one claimer: one more
        attempt, this instance's lease until ``until``. ``startup``: also the turns only
        this instance's dead predecessor can have left running."""
        ...

    async def free_thread(self, record: TurnRecord) -> bool:
        """Free the thread of a claimed turn whose owner may only hang: end the session
        that holds its lock (``record.lock_holder``), if it still does."""
        ...

    async def claim_thread(
        self, thread_id: str, user_id: str, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """The owner of the thread (any spelling): the one it has, or, when it has none
        yet, ``user_id`` ('' for none), which it has from now on, with ``metadata``
        (relay/turns/threads.py)."""
        ...

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread's row (a deleted one too), or None for a thread never claimed."""
        ...

    async def patch_thread(
        self, thread_id: str, metadata: Mapping[str, Any], *, revive: bool = False
    ) -> ThreadRecord | None:
        """Merge ``metadata`` into the thread's (``revive``: replace it, and bring a
        deleted thread back, created now); the row after, or None for no thread."""
        ...

    async def delete_thread(self, thread_id: str) -> None:
        """Mark the thread deleted: its metadata cleared, listed no more, its owner kept."""
        ...

    async def threads(
        self, user_id: str | None = None, thread_ids: Sequence[str] | None = None
    ) -> Sequence[ThreadRecord]:
        """The live threads ``user_id`` may see (None: every one; its own and those of no
        user), only ``thread_ids`` (any spelling) if given; in no particular order."""
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
    def _renew_leases(self, leases: dict[str, int], until: float) -> set[str]:
        """``renew_leases`` by the turns' keys: the keys still ours."""

    @abstractmethod
    def _claim_expired(
        self, now: float, until: float, exclude: list[str], startup: bool
    ) -> list[TurnRecord]:
        """``claim_expired`` with ``exclude`` as keys."""

    def _free_thread(self, record: TurnRecord) -> bool:
        """A store of one instance: no other instance's lock to end."""
        return False

    @abstractmethod
    def _claim_thread(self, thread_id: str, user_id: str, metadata: dict[str, Any]) -> str:
        """Claim the thread for ``user_id`` unless it has an owner; its owner."""

    @abstractmethod
    def _get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread's row, or None."""

    @abstractmethod
    def _patch_thread(
        self, thread_id: str, metadata: dict[str, Any], revive: bool
    ) -> ThreadRecord | None:
        """``patch_thread``, in one transaction."""

    @abstractmethod
    def _delete_thread(self, thread_id: str) -> None:
        """``delete_thread``."""

    @abstractmethod
    def _threads(self, user_id: str | None, keys: list[str] | None) -> list[ThreadRecord]:
        """``threads`` by the threads' keys."""

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

    async def renew_leases(self, leases: Mapping[str, int], until: float) -> set[str]:
        if not leases:
            return set()
        by_key = {id_key(turn_id): turn_id for turn_id in leases}
        held = {key: leases[turn_id] for key, turn_id in by_key.items()}
        ours = await self._in_thread(self._renew_leases, held, until)
        return {by_key[key] for key in ours}

    async def claim_expired(
        self, now: float, until: float, exclude: Sequence[str], startup: bool
    ) -> Sequence[TurnRecord]:
        keys = [id_key(turn_id) for turn_id in exclude]
        return await self._in_thread(self._claim_expired, now, until, keys, startup)

    async def free_thread(self, record: TurnRecord) -> bool:
        return await self._in_thread(self._free_thread, record)

    async def claim_thread(
        self, thread_id: str, user_id: str, metadata: Mapping[str, Any] | None = None
    ) -> str:
        return await self._in_thread(self._claim_thread, thread_id, user_id, dict(metadata or {}))

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        return await self._in_thread(self._get_thread, thread_id)

    async def patch_thread(
        self, thread_id: str, metadata: Mapping[str, Any], *, revive: bool = False
    ) -> ThreadRecord | None:
        return await self._in_thread(self._patch_thread, thread_id, dict(metadata), revive)

    async def delete_thread(self, thread_id: str) -> None:
        await self._in_thread(self._delete_thread, thread_id)

    async def threads(
        self, user_id: str | None = None, thread_ids: Sequence[str] | None = None
    ) -> Sequence[ThreadRecord]:
        keys = None if thread_ids is None else [id_key(t) for t in thread_ids]
        return await self._in_thread(self._threads, user_id, keys)

    async def thread_owner(self, thread_id: str) -> str | None:
        return await self._in_thread(self._thread_owner, thread_id)
