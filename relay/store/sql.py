"""The SQL both span-store backends share (SQLite and PostgreSQL speak it alike).

Tables (the same in both; migrations in each backend's module):

- ``spans``: one row per finished span, keyed by (trace_id, span_id); attributes,
  events, links and resource as type-preserving JSON (:mod:`relay.store.codec`);
  ``stored_ns`` is when the store received it (what age retention measures);
- ``turn_traces``: turn id -> trace ids, one row per run root span (a chat and each
  resume); filled when a root span (the one carrying ``relay.turn.id``) is stored.
  A turn's spans are all spans of these traces;
- ``span_turns``: one row per turn: thread, first message, first start, last write,
  source (``live`` or ``import``) and, once retention dropped its spans, ``expired_ns``
  (a tombstone, so that the API can answer 410 instead of 404).

Each backend supplies connections; this class supplies the statements, written with
``?`` placeholders (PostgreSQL's module swaps them for ``%s``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from relay import conventions as c
from relay.spans import SpanRecord
from relay.store import RunIndex
from relay.store.codec import COLUMNS, from_row, to_row
from relay.store.reading import SpanStream

#: how often retention runs when no run root arrives (a root always triggers it)
EXPIRE_EVERY_S = 60.0
#: how long a tombstone (an expired turn's row) is kept, as a multiple of the retention
TOMBSTONE_FACTOR = 10


class SQLSpanStore:
    placeholder = "?"
    least = "min"
    #: a start that is not a whole millisecond (PostgreSQL's driver takes % for itself)
    fine_start = "start_ns % 1000000 <> 0"

    def __init__(
        self, *, retention_s: float, max_turns: int, clock: Callable[[], int] = time.time_ns
    ) -> None:
        self.retention_s = retention_s
        self.max_turns = max_turns
        self.clock = clock
        self._last_expire = 0.0
        self._expire_lock = threading.Lock()

    # -- supplied by a backend ----------------------------------------------------------

    def _write_cursor(self) -> contextlib.AbstractContextManager[Any]:
        """A cursor inside one write transaction (commit on exit, rollback on error)."""
        raise NotImplementedError

    def _read_cursor(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _stream_cursors(self, resources: contextlib.ExitStack) -> tuple[Any, Callable[[], Any]]:
        """A cursor inside a read transaction that ``resources`` ends, on a connection
        held until then, and a maker of further cursors that stream rows in it."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------------------

    def _q(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _retention_ns(self) -> int:
        return int(self.retention_s * 1e9)

    # -- writing (the exporter's thread, or an import) ----------------------------------

    def write(
        self, records: Sequence[SpanRecord], *, source: str = "live", index: bool = True
    ) -> int:
        """Store finished spans in one transaction; returns how many were written."""
        if not records:
            return 0
        now = self.clock()
        roots = [r for r in records if c.TURN_ID in r.attributes] if index else []
        columns = ", ".join((*COLUMNS, "stored_ns"))
        marks = ", ".join("?" for _ in range(len(COLUMNS) + 1))
        updates = ", ".join(f"{col} = excluded.{col}" for col in (*COLUMNS[2:], "stored_ns"))
        span_sql = self._q(
            f"INSERT INTO spans ({columns}) VALUES ({marks}) "
            f"ON CONFLICT (trace_id, span_id) DO UPDATE SET {updates}"
        )
        with self._write_cursor() as cur:
            cur.executemany(span_sql, [(*to_row(r), now) for r in records])
            for root in roots:
                self._index(cur, our_run(root), now, source)
        if roots:
            self.expire()
        else:
            self.maybe_expire()
        return len(records)

    def index_runs(self, runs: Sequence[RunIndex], *, source: str = "live") -> None:
        if not runs:
            return
        now = self.clock()
        with self._write_cursor() as cur:
            for run in runs:
                self._index(cur, run, now, source)

    def _index(self, cur: Any, run: RunIndex, now: int, source: str) -> None:
        cur.execute(
            self._q(
                "INSERT INTO turn_traces (turn_id, trace_id, root_span_id, run_kind, start_ns, "
                "end_ns, outcome) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (turn_id, trace_id) DO UPDATE SET root_span_id = CASE WHEN "
                "excluded.root_span_id <> '' THEN excluded.root_span_id "
                "ELSE turn_traces.root_span_id END, "
                "run_kind = excluded.run_kind, start_ns = excluded.start_ns, "
                "end_ns = excluded.end_ns, outcome = excluded.outcome"
            ),
            (
                run.turn_id,
                run.trace_id,
                run.root_span_id or "",
                run.run_kind,
                run.start_ns,
                run.end_ns,
                run.outcome,
            ),
        )
        cur.execute(
            self._q(
                "INSERT INTO span_turns (turn_id, thread_id, message, started_ns, stored_ns, "
                "source, expired_ns) VALUES (?, ?, ?, ?, ?, ?, NULL) "
                "ON CONFLICT (turn_id) DO UPDATE SET "
                f"started_ns = {self.least}(span_turns.started_ns, excluded.started_ns), "
                "stored_ns = excluded.stored_ns, expired_ns = NULL, "
                "thread_id = CASE WHEN excluded.thread_id <> '' THEN excluded.thread_id "
                "ELSE span_turns.thread_id END, "
                "message = CASE WHEN excluded.message <> '' THEN excluded.message "
                "ELSE span_turns.message END"
            ),
            (run.turn_id, run.thread_id, run.message, run.start_ns, now, source),
        )

    # -- retention ----------------------------------------------------------------------

    def maybe_expire(self) -> int:
        if time.monotonic() - self._last_expire < EXPIRE_EVERY_S:
            return 0
        return self.expire()

    def expire(self) -> int:
        """Drop the spans of turns past the age or count limit; returns how many turns."""
        with self._expire_lock:
            self._last_expire = time.monotonic()
            now = self.clock()
            cutoff = now - self._retention_ns()
            with self._write_cursor() as cur:
                cur.execute(
                    self._q(
                        "SELECT turn_id FROM span_turns WHERE expired_ns IS NULL AND ("
                        "stored_ns < ? OR turn_id IN (SELECT turn_id FROM span_turns "
                        "WHERE expired_ns IS NULL ORDER BY started_ns DESC, turn_id "
                        "LIMIT -1 OFFSET ?))"
                    ).replace("LIMIT -1", self._no_limit()),
                    (cutoff, self.max_turns),
                )
                expired = [row[0] for row in cur.fetchall()]
                for turn_id in expired:
                    cur.execute(
                        self._q(
                            "DELETE FROM spans WHERE trace_id IN "
                            "(SELECT trace_id FROM turn_traces WHERE turn_id = ?)"
                        ),
                        (turn_id,),
                    )
                    cur.execute(self._q("DELETE FROM turn_traces WHERE turn_id = ?"), (turn_id,))
                    cur.execute(
                        self._q("UPDATE span_turns SET expired_ns = ? WHERE turn_id = ?"),
                        (now, turn_id),
                    )
                # spans of traces that never got a run root (a process died mid-run,
                # an import of foreign spans): by age only
                cur.execute(
                    self._q(
                        "DELETE FROM spans WHERE stored_ns < ? AND trace_id NOT IN "
                        "(SELECT trace_id FROM turn_traces)"
                    ),
                    (cutoff,),
                )
                cur.execute(
                    self._q("DELETE FROM span_turns WHERE expired_ns < ?"),
                    (now - self._retention_ns() * TOMBSTONE_FACTOR,),
                )
            return len(expired)

    def _no_limit(self) -> str:
        return "LIMIT -1"

    # -- reading (the serving path calls these through asyncio.to_thread) ---------------

    def turn_spans(self, turn_id: str) -> tuple[str, list[SpanRecord]]:
        """``("stored", spans)``, ``("expired", [])`` or ``("unknown", [])``."""
        cutoff = self.clock() - self._retention_ns()
        with self._read_cursor() as cur:
            cur.execute(
                self._q("SELECT stored_ns, expired_ns FROM span_turns WHERE turn_id = ?"),
                (turn_id,),
            )
            row = cur.fetchone()
            if row is None:
                return "unknown", []
            stored_ns, expired_ns = row
            if expired_ns is not None or stored_ns < cutoff:
                return "expired", []
            cur.execute(
                self._q(
                    f"SELECT {', '.join(COLUMNS)} FROM spans WHERE trace_id IN "
                    "(SELECT trace_id FROM turn_traces WHERE turn_id = ?) "
                    "ORDER BY start_ns, span_id"
                ),
                (turn_id,),
            )
            rows = cur.fetchall()
        if not rows:
            return "expired", []
        return "stored", [from_row(r) for r in rows]

    def turn_span_stream(self, turn_id: str) -> tuple[str, SpanStream | None]:
        """``("stored", stream)`` (its spans in start order, in chunks, read as taken:
        :class:`~relay.store.reading.SpanStream`; close it if not read to the end),
        ``("expired", None)`` or ``("unknown", None)``. The state and the first chunk are
        read here; the rest as the stream is taken, from the same snapshot."""
        cutoff = self.clock() - self._retention_ns()
        resources = contextlib.ExitStack()
        try:
            cur, row_cursor = self._stream_cursors(resources)
            cur.execute(
                self._q("SELECT stored_ns, expired_ns FROM span_turns WHERE turn_id = ?"),
                (turn_id,),
            )
            row = cur.fetchone()
            if row is None or row[1] is not None or row[0] < cutoff:
                resources.close()
                return ("unknown" if row is None else "expired"), None
            cur.execute(
                self._q("SELECT trace_id FROM turn_traces WHERE turn_id = ? ORDER BY start_ns"),
                (turn_id,),
            )
            traces = [r[0] for r in cur.fetchall()]
            stream = SpanStream(resources, cur, row_cursor, self._q, traces, self.fine_start)
        except BaseException:
            resources.close()
            raise
        if stream.empty:
            stream.close()
            return "expired", None
        return "stored", stream

    def trace_spans(self, trace_id: str) -> list[SpanRecord]:
        with self._read_cursor() as cur:
            cur.execute(
                self._q(
                    f"SELECT {', '.join(COLUMNS)} FROM spans WHERE trace_id = ? "
                    "ORDER BY start_ns, span_id"
                ),
                (trace_id,),
            )
            return [from_row(r) for r in cur.fetchall()]

    def turn_of_trace(self, trace_id: str) -> str | None:
        with self._read_cursor() as cur:
            cur.execute(self._q("SELECT turn_id FROM turn_traces WHERE trace_id = ?"), (trace_id,))
            row = cur.fetchone()
        return row[0] if row else None

    def turns(self, limit: int = 50, before_ns: int | None = None) -> list[dict[str, Any]]:
        """Stored turns, newest first: thread, first message, outcome, start, end, runs."""
        where = "WHERE t.expired_ns IS NULL" + (" AND t.started_ns < ?" if before_ns else "")
        args: list[Any] = [before_ns] if before_ns else []
        with self._read_cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT t.turn_id, t.thread_id, t.message, t.started_ns, t.source, "
                    "MAX(r.end_ns), COUNT(r.trace_id) "
                    "FROM span_turns t JOIN turn_traces r ON r.turn_id = t.turn_id "
                    f"{where} GROUP BY t.turn_id, t.thread_id, t.message, t.started_ns, t.source "
                    "ORDER BY t.started_ns DESC LIMIT ?"
                ),
                (*args, limit),
            )
            rows = cur.fetchall()
            result = []
            for turn_id, thread_id, message, started_ns, source, ended_ns, runs in rows:
                cur.execute(
                    self._q(
                        "SELECT outcome FROM turn_traces WHERE turn_id = ? "
                        "ORDER BY start_ns DESC LIMIT 1"
                    ),
                    (turn_id,),
                )
                last = cur.fetchone()
                result.append(
                    {
                        "turn_id": turn_id,
                        "thread_id": thread_id,
                        "message": message,
                        "outcome": last[0] if last else None,
                        "started_ns": started_ns,
                        "ended_ns": ended_ns,
                        "runs": runs,
                        "source": source,
                    }
                )
        return result


def our_run(root: SpanRecord) -> RunIndex:
    """The index entry of one of our run roots, from its attributes."""
    attrs = root.attributes
    outcome = attrs.get(c.TURN_OUTCOME)
    message = attrs.get(c.TURN_MESSAGE)
    return RunIndex(
        turn_id=str(attrs[c.TURN_ID]),
        trace_id=root.trace_id,
        root_span_id=root.span_id,
        run_kind=str(attrs.get(c.RUN_KIND, "chat")),
        thread_id=str(attrs.get(c.CONVERSATION_ID, "")),
        message="" if message is None else str(message),
        start_ns=root.start_ns,
        end_ns=root.end_ns,
        outcome=None if outcome is None else str(outcome),
    )
