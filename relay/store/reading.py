"""A turn's spans read in start order, in chunks, decoded as they are taken: what a
streaming replay reads (:meth:`relay.store.sql.SQLSpanStore.turn_span_stream`).

One read transaction (one snapshot) per stream, on a connection of its own (SQLite) or
from the pool (PostgreSQL), held until the stream is exhausted or closed: the replay
derives as fast as it reads, never at the pace it sends. Each of the turn's traces is
read through the ``spans (trace_id, start_ns)`` index and the traces merged by start,
so the first rows come without sorting the turn. The stream also answers what the
ordering asks about spans it has not read yet (:class:`relay.mapping.lookups.
SpanLookups`), from the same snapshot.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from relay.spans import SpanRecord
from relay.store.codec import REPLAY_COLUMNS, REPLAY_START, replay_record, replay_records

#: rows in the first chunk (the first events come early) and in the later ones
FIRST_CHUNK = 32
CHUNK = 512


class SpanStream:
    """Chunks of a turn's spans in ``start_ns`` order; ``coarse`` and ``has_span`` for
    the ordering. Not thread-safe: one thread at a time (any thread) takes from it."""

    def __init__(
        self,
        resources: contextlib.ExitStack,
        cursor: Any,
        row_cursor: Callable[[], Any],
        q: Callable[[str], str],
        trace_ids: list[str],
        fine_start: str,
    ) -> None:
        self._resources = resources
        self._cur = cursor
        self._q = q
        self._fine_start = fine_start
        self.trace_ids = trace_ids
        sql = q(
            f"SELECT {', '.join(REPLAY_COLUMNS)} FROM spans WHERE trace_id = ? ORDER BY start_ns"
        )
        cursors: list[Any] = []
        for trace_id in trace_ids:
            rows = row_cursor()
            rows.execute(sql, (trace_id,))
            cursors.append(rows)
        #: one trace (the usual turn): its cursor, read only ``fetchmany`` at a time (a
        #: PostgreSQL server-side cursor that is iterated takes rows ahead of fetchmany);
        #: more: the traces' rows merged by start (ties: any order), each with its trace id
        self._cursor: Any = cursors[0] if len(cursors) == 1 else None
        self._pairs: Iterator[tuple[str, Any]] = (
            iter(())
            if len(cursors) < 2
            else heapq.merge(
                *(zip(itertools.repeat(t), c) for t, c in zip(trace_ids, cursors, strict=True)),
                key=lambda pair: pair[1][REPLAY_START],
            )
        )
        if self._cursor is not None:
            self._first: list[SpanRecord] = replay_records(
                trace_ids[0], self._cursor.fetchmany(FIRST_CHUNK)
            )
        else:
            self._first = [
                replay_record(t, row) for t, row in itertools.islice(self._pairs, FIRST_CHUNK)
            ]
        self.closed = False

    @property
    def empty(self) -> bool:
        return not self._first

    def __iter__(self) -> Iterator[list[SpanRecord]]:
        """Chunks of records as the mapping reads them (:func:`~relay.store.codec.
        replay_record`: no kind, links or resource)."""
        try:
            if not self._first:
                return
            first = self._first
            self._first = []
            yield first
            cursor = self._cursor
            pairs = self._pairs
            trace_id = self.trace_ids[0]
            while True:
                if cursor is not None:  # one trace: the rows without a pair each
                    rows = cursor.fetchmany(CHUNK)
                    if not rows:
                        return
                    yield replay_records(trace_id, rows)
                else:
                    batch = list(itertools.islice(pairs, CHUNK))
                    if not batch:
                        return
                    yield [replay_record(t, row) for t, row in batch]
        except BaseException:  # left early (GeneratorExit), or failed
            self.close()
            raise
        # read to the end: still open, as the mapping's lookups (``coarse``) may still read
        # it (a turn of one span is ordered only at the end); its owner closes it

    def coarse(self, trace_id: str) -> bool:
        self._cur.execute(
            self._q(f"SELECT 1 FROM spans WHERE trace_id = ? AND {self._fine_start} LIMIT 1"),
            (trace_id,),
        )
        return self._cur.fetchone() is None

    def has_span(self, trace_id: str, span_id: str) -> bool:
        self._cur.execute(
            self._q("SELECT 1 FROM spans WHERE trace_id = ? AND span_id = ?"), (trace_id, span_id)
        )
        return self._cur.fetchone() is not None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._resources.close()
