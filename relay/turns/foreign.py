"""Turn records for runs this relay did not start: turns received over OTLP (event by
event, :meth:`relay.ingest.receiver.OTLPReceiver.remember`) and turns of imported trace
files (a whole turn at once, :mod:`relay.http.imports`). The runs this relay starts write
their own (:mod:`relay.turns.run_end`).

Both create a record only for a turn the store does not know yet
(:func:`record_received_turn`); a create that loses a race to another writer is no error.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.mapping.feed import TurnSpans, replay_events
from relay.turns.records import PAUSED, RUNNING, TurnExists, TurnRecord, TurnStore
from relay.turns.response import STATUSES

log = logging.getLogger("relay.receiver")


async def record_received_turn(turns: TurnStore, turn_id: str,
                               build: Callable[[], TurnRecord]) -> TurnRecord | None:
    """Create the record ``build()`` makes, unless the store knows the turn: then nothing
    is written and its record is returned (None otherwise)."""
    known = await turns.get(turn_id)
    if known is not None:
        return known
    with contextlib.suppress(TurnExists):
        await turns.create(build())
    return None


async def record_received_events(turns: TurnStore, events: Sequence[Event],
                                 messages: Mapping[str, str] | None = None) -> None:
    """Keep GET /turns/{id} in step with turns received over OTLP: a run's start (its
    topology) creates or reopens the record, its terminal event ends it. ``messages``:
    the user's message of a turn whose spans carry no ``relay.turn.message`` (another
    instrumentation's, read from its input by the mapping)."""
    messages = messages or {}
    for event in events:
        try:
            if event.type == ev.GRAPH_TOPOLOGY:
                known = await record_received_turn(
                    turns, event.turn_id, functools.partial(
                        TurnRecord, turn_id=event.turn_id, thread_id=event.thread_id,
                        status=RUNNING, started_at=event.ts, last_seq=event.seq,
                        root_trace_id=event.trace_id,
                        message=messages.get(event.turn_id, "")))
                if known is not None:
                    await turns.update(event.turn_id, status=RUNNING, ended_at=None,
                                       root_trace_id=event.trace_id)
            elif event.is_run_terminal:
                changes: dict[str, Any] = {"last_seq": event.seq}
                if messages.get(event.turn_id):  # known only at its root, maybe
                    changes["message"] = messages[event.turn_id]
                if event.type == ev.TURN_COMPLETED:
                    response = event.fields.get("response") or {}
                    changes["status"] = str(response.get("status", "answered"))
                    changes["response"] = ev.dumps(response)
                elif event.type == ev.PAUSED:
                    changes["status"] = PAUSED
                    changes["paused_at"] = event.ts
                else:
                    code = event.fields.get("code")
                    changes["status"] = "cancelled" if code == "cancelled" else "error"
                if changes["status"] != PAUSED:
                    changes["ended_at"] = event.ts
                await turns.update(event.turn_id, **changes)
        except Exception:
            log.exception("relay: could not record received turn %s", event.turn_id)


async def record_imported_turn(turns: TurnStore, turn: TurnSpans) -> None:
    """List an imported turn in GET /turns (past turns), unless this relay knows it."""
    await record_received_turn(turns, turn.turn_id, lambda: _imported_record(turn))


def _imported_record(turn: TurnSpans) -> TurnRecord:
    chat = next((r for r in sorted(turn.roots, key=lambda r: r.start_ns)
                 if c.TURN_MESSAGE in r.attributes), None)
    last = turn.last_root
    outcome = str(last.attributes.get(c.TURN_OUTCOME, "error"))
    status = outcome if outcome in STATUSES else "error"
    response = last.attributes.get(c.TURN_RESPONSE)
    ended = max((r.end_ns or r.start_ns) for r in turn.roots) / 1e6
    return TurnRecord(
        turn_id=turn.turn_id, thread_id=turn.thread_id, status=status,
        message=str(chat.attributes[c.TURN_MESSAGE]) if chat is not None else "",
        started_at=turn.started_ns / 1e6,
        ended_at=None if status == PAUSED else ended,
        paused_at=ended if status == PAUSED else None,
        response=response if isinstance(response, str) else None,
        root_trace_id=last.trace_id, root_span_id=last.span_id,
        last_seq=len(replay_events(turn.spans)),  # the replay's seqs, 1..last_seq
    )
