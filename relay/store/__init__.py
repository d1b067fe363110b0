"""The span store: every finished span, kept so that a turn can be replayed later.

An OpenTelemetry :class:`~relay.store.exporter.SpanStoreExporter`, attached through a
``BatchSpanProcessor`` (its own thread, never the agent's), writes each batch of finished
spans in one transaction. :mod:`relay.mapping.feed` reads a turn's spans back and derives its
events with the same mapping as the live path.

Backends: SQLite (default, ``RELAY_DATA_DIR/spans.db``) and PostgreSQL
(``RELAY_STORE=postgresql://...``, for instances that share storage). Both keep the same
tables (:mod:`relay.store.sql`), versioned by ``span_schema_version``. Retention by age
(``RELAY_STORE_RETENTION_S``, measured from when the store received a turn's spans) and
count (``RELAY_STORE_MAX_TURNS``); an expired turn leaves a tombstone so that the API
answers 410, not 404.

The interface is synchronous and thread-safe: the exporter calls it on its thread, the
serving path through ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from relay.spans import SpanRecord

if TYPE_CHECKING:
    from relay.settings import RelaySettings
    from relay.store.reading import SpanStream

STORED = "stored"
EXPIRED = "expired"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class RunIndex:
    """One run (a trace) of a turn, as the store indexes it: our run roots say it in their
    attributes (``relay.turn.id``, ...) and are indexed as they are written; the runs of
    another instrumentation (keyed by trace id, or a resume linked to its paused turn)
    are indexed by whoever mapped them (:meth:`SpanStore.index_runs`)."""

    turn_id: str
    trace_id: str
    root_span_id: str | None
    run_kind: str
    thread_id: str
    message: str
    start_ns: int
    end_ns: int | None
    outcome: str | None


class SpanStore(Protocol):
    def write(
        self, records: Sequence[SpanRecord], *, source: str = "live", index: bool = True
    ) -> int:
        """Store finished spans, all or nothing (one transaction). ``source``:
        ``live`` (the exporter) or ``import`` (a trace file). ``index``: whether our run
        roots among them (``relay.turn.id``) index their runs under their turns (the
        OTLP receiver indexes only the runs it admits: :func:`relay.store.sql.our_run`)."""
        ...

    def turn_spans(self, turn_id: str) -> tuple[str, list[SpanRecord]]:
        """All spans of the turn's traces: ``(STORED, spans)``, ``(EXPIRED, [])`` when
        retention dropped them, ``(UNKNOWN, [])`` when the store never had the turn."""
        ...

    def turn_span_stream(self, turn_id: str) -> tuple[str, SpanStream | None]:
        """:meth:`turn_spans`, streaming: ``(STORED, stream)`` whose chunks are the spans
        in start order, read as they are taken (:class:`relay.store.reading.SpanStream`),
        or ``(EXPIRED, None)`` / ``(UNKNOWN, None)``. Blocking: take it in a worker
        thread."""
        ...

    def index_runs(self, runs: Sequence[RunIndex], *, source: str = "live") -> None:
        """Index runs under their turns (a run indexed again is updated): afterwards
        :meth:`turn_spans` finds their traces' spans, stored before or after."""
        ...

    def trace_spans(self, trace_id: str) -> list[SpanRecord]: ...

    def turn_of_trace(self, trace_id: str) -> str | None: ...

    def turns(self, limit: int = 50, before_ns: int | None = None) -> list[dict[str, Any]]:
        """Stored turns, newest first (thread, first message, outcome, start, end)."""
        ...

    def expire(self) -> int:
        """Apply retention now; returns how many turns expired."""
        ...

    def schema_version(self) -> int: ...

    def ping(self) -> None:
        """Readiness: returns when the store answers, raises when it does not (blocking:
        call it in a worker thread)."""
        ...

    def close(self) -> None: ...


def open_store(settings: RelaySettings) -> SpanStore:
    """The store ``RELAY_STORE`` names: ``sqlite`` (default) or a ``postgresql://`` URL."""
    retention_s = settings.store_retention_s
    max_turns = settings.store_max_turns
    if settings.store.startswith(("postgresql://", "postgres://")):
        from relay.store.postgres import PostgresSpanStore

        return PostgresSpanStore(
            settings.store,
            retention_s=retention_s,
            max_turns=max_turns,
            schema=settings.pg_schema,
        )
    from relay.store.sqlite import SQLiteSpanStore

    return SQLiteSpanStore(
        settings.data_dir / "spans.db", retention_s=retention_s, max_turns=max_turns
    )


__all__ = ["EXPIRED", "STORED", "UNKNOWN", "RunIndex", "SpanStore", "open_store"]
