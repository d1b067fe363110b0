"""The lease statements of the two turn stores (relay/turns/leases.py says what leases are).

Each function runs in the store's worker thread, on its connection (SQLite, under the
store's lock) or cursor (PostgreSQL, in one transaction); the stores' methods
(``_renew_leases``, ``_claim_expired``, ``_free_thread``) only call them.

- a renewal is one statement for all the turns an instance runs: it extends the lease of
  each turn that is still ``running`` under the attempt the instance runs and was not
  handed over (relay/turns/draining.py: a renewal that races the hand-over must not take
  the turn back), and returns those; a turn missing from the answer was taken over;
- a claim is one conditional ``UPDATE ... RETURNING``: the turns still ``running`` whose
  lease ran out (or, at start-up, the ones only a dead process can have left running)
  get the claimer as owner, one more attempt and a new lease. Two claimers never both
  get a turn: PostgreSQL skips the rows another claim has locked and re-checks the rest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

#: at most this many turns claimed by one sweep (the next sweep takes the rest)
CLAIM_BATCH = 100
RUNNING = "running"  # relay.turns.records.RUNNING (this module is below the stores)
#: how long freeing a hung owner's thread waits for its session to end (PostgreSQL 14+)
TERMINATE_WAIT_MS = 5000

#: each argument ``leases`` maps a turn's key (relay.turns.records.id_key) to the attempt
#: this instance runs; ``exclude`` lists keys of turns this instance runs


# -- SQLite (one instance uses the file) ---------------------------------------------------


def sqlite_renew(db: sqlite3.Connection, leases: Mapping[str, int], until: float) -> set[str]:
    """The keys of the turns still ours, their leases extended to ``until``."""
    rows = db.execute(
        "UPDATE turns SET lease_until = ? WHERE status = ? AND handover = '' AND turn_key IN "
        f"({', '.join('?' for _ in leases)}) RETURNING turn_key, attempt",
        [until, RUNNING, *leases],
    ).fetchall()
    return {key for key, attempt in rows if leases[key] == attempt}


def sqlite_claim(
    db: sqlite3.Connection, columns: Sequence[str], until: float, exclude: Sequence[str]
) -> list[tuple[Any, ...]]:
    """At start-up, every running turn is a dead process's: one instance uses the file."""
    return list(
        db.execute(
            "UPDATE turns SET attempt = attempt + 1, lease_until = ? WHERE status = ? "
            f"AND turn_key NOT IN ({', '.join('?' for _ in exclude)}) "
            f"RETURNING {', '.join(columns)}",
            [until, RUNNING, *exclude],
        ).fetchall()
    )


# -- PostgreSQL (replicas share the table) -------------------------------------------------


def pg_renew(cur: Any, leases: Mapping[str, int], until: float) -> set[str]:
    """The keys of the turns still ours, their leases extended to ``until``."""
    keys = list(leases)
    cur.execute(
        "UPDATE relay_turns AS t SET lease_until = %s "
        "FROM unnest(%s::text[], %s::bigint[]) AS r(turn_key, attempt) "
        "WHERE t.turn_key = r.turn_key AND COALESCE(t.attempt, 1) = r.attempt "
        "AND t.status = %s AND COALESCE(t.handover, '') = '' RETURNING t.turn_key",
        (until, keys, [leases[k] for k in keys], RUNNING),
    )
    return {row[0] for row in cur.fetchall()}


def pg_claim(
    cur: Any,
    columns: Sequence[str],
    owner: str,
    now: float,
    until: float,
    exclude: Sequence[str],
    startup: bool,
) -> list[tuple[Any, ...]]:
    """The turns whose lease ran out; ``startup``: also the running turns this instance
    id owned (its previous process's, whatever their lease says). A turn with no lease
    (0: one received over OTLP, or recorded before leases) is only its owner's to end."""
    cur.execute(
        "UPDATE relay_turns SET attempt = COALESCE(attempt, 1) + 1, owner = %(owner)s, "
        "lease_until = %(until)s WHERE turn_key IN ("
        "SELECT turn_key FROM relay_turns WHERE status = %(running)s "
        "AND NOT (turn_key = ANY(%(exclude)s)) AND ("
        "(lease_until > 0 AND lease_until < %(now)s) OR (%(startup)s AND owner = %(owner)s)) "
        "LIMIT %(batch)s FOR UPDATE SKIP LOCKED) "
        f"RETURNING {', '.join(columns)}",
        {
            "owner": owner,
            "until": until,
            "running": RUNNING,
            "exclude": list(exclude),
            "now": now,
            "startup": startup,
            "batch": CLAIM_BATCH,
        },
    )
    return list(cur.fetchall())


def pg_free_thread(cur: Any, lock_key: int, holder: int) -> bool:
    """End the session ``holder`` if it still holds the thread's advisory lock ``lock_key``
    (a hung owner's: a dead one's went with its connection). Only that session: the lock
    of a run that took the thread since is another session's. True when one was ended."""
    cur.execute(
        # waits (up to TERMINATE_WAIT_MS) for the session to be gone, its lock with it:
        # the claimer takes the thread next (a recovery's run)
        f"SELECT pg_terminate_backend(l.pid, {TERMINATE_WAIT_MS}) FROM pg_locks l "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.pid = %s AND l.objsubid = 1 "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND l.classid::bigint = %s AND l.objid::bigint = %s",
        (holder, (lock_key >> 32) & 0xFFFFFFFF, lock_key & 0xFFFFFFFF),
    )
    return any(row[0] for row in cur.fetchall())
