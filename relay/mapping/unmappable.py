"""Spans the mapping cannot map, and how their run ends.

A span whose attributes cannot be read (JSON nested deeper than
``relay.json_depth.MAX_DEPTH`` levels in ``relay.turn.interrupts`` or
``relay.graph.topology``, say), or on which the mapping raises, cannot become events. A
turn must still end, so that its readers are not held open:

- received (:func:`end_unmappable`, the OTLP receiver's): the run ends there with one
  terminal ``error`` event, code ``unmappable_spans`` (after a ``graph_topology``, with no
  nodes, when the run had not begun), and its trace maps to nothing more;
- replayed (:class:`UnmappableSpans`, raised by :func:`relay.mapping.feed.
  iter_replay_events`): ``GET /turns/{id}/events?source=spans`` answers ``422
  unmappable_spans`` before its first event, or ends its stream with the same ``error``
  event after it; ``POST /imports`` refuses the file.

The message says what is wrong when the relay itself refused the span (a depth limit);
any other failure is logged with its traceback and the message says only that.
"""

from __future__ import annotations

from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.json_depth import TooDeep
from relay.mapping.state import MappingState, Run
from relay.spans import SpanRecord

#: the ``error`` code of a run whose spans cannot be mapped
UNMAPPABLE_SPANS = "unmappable_spans"


def why(span_name: str, exc: BaseException) -> str:
    """A message for users: which span, and why when the relay knows (its own limits)."""
    reason = str(exc) if isinstance(exc, TooDeep) else "the relay's log says why"
    return f"The span {span_name!r} of this turn cannot be mapped to events ({reason})."


class UnmappableSpans(ValueError):
    """A replay stopped at a span it cannot map; ``record`` is that span, when known.
    The cause is chained (``__cause__``)."""

    def __init__(self, span_name: str, exc: BaseException, record: Any = None) -> None:
        super().__init__(why(span_name, exc))
        self.record = record if isinstance(record, SpanRecord) else None
        #: the events derived before it in the batch it stopped (numbered), if any
        self.before: list[Event] = []


def error_fields(message: str) -> dict[str, Any]:
    """The type fields of the ``error`` event that ends such a run (not retryable)."""
    return {"code": UNMAPPABLE_SPANS, "message": message, "node": None, "retryable": False}


def end_unmappable(state: MappingState, record: SpanRecord, exc: BaseException) -> list[Event]:
    """The run of ``record`` (a span the mapping failed on) ends: its ``graph_topology``
    if it had none yet, then its ``error`` ``unmappable_spans``; the state forgets it and
    maps nothing more of its trace. ``[]`` when the span belongs to no run (a trace no
    rule recognised: nothing began that must end)."""
    run = state.runs.get(record.trace_id)
    if run is None and c.TURN_ID in record.attributes:  # one of our roots, never followed
        run = Run(
            turn_id=str(record.attributes[c.TURN_ID]),
            thread_id=str(record.attributes.get(c.CONVERSATION_ID, "")),
            trace_id=record.trace_id,
            kind=str(record.attributes.get(c.RUN_KIND, "chat")),
            root_span_id=record.span_id,
        )
    if run is None or not run.active:
        return []
    events = []
    if not run.begun:
        fields = {"graph_id": run.graph_id, "nodes": [], "edges": [], "run_kind": run.kind}
        events.append(run.event(ev.GRAPH_TOPOLOGY, record.start_ns, fields))
    end = record.end_ns or record.start_ns
    events.append(run.event(ev.ERROR, end, error_fields(why(record.name, exc))))
    paused = state.paused.get(run.thread_id)
    if paused is not None and paused.turn_id == run.turn_id:
        del state.paused[run.thread_id]
    state.end_foreign(run.trace_id)  # (any run: its trace maps to nothing more)
    return events
