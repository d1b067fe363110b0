"""The mapping reads nothing of a span's end (end time, status, status message, span
events) at its start or at a span event: finished records fed as they are
(``feed(read=None)``: the replay, the receiver, an import) give the events that the
same records cut to what is known at start (``as_live``, what the live processor
reads) give. On the recorded turns, on a foreign turn that pauses and resumes, and on
generated turns of our spans and other instrumentations' beside them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from relay.ingest.tracefile import parse_trace_file
from relay.mapping.feed import END, START, as_live, feed, ordered_phases
from relay.mapping.state import MappingState
from relay.spans import SpanRecord
from tests.mapping.test_foreign_turns import paused_then_resumed
from tests.mapping.test_own_nodes import turns

FIXTURES = Path(__file__).parent.parent / "store" / "fixtures"


def _both(phases: list[tuple[SpanRecord, str, Any]]) -> tuple[list[Any], list[Any]]:
    as_is: list[Any] = []
    cut: list[Any] = []
    feed(MappingState(), phases, as_is.append, read=None)
    feed(MappingState(), phases, cut.append, read=as_live)
    return [e.to_dict() for e in as_is], [e.to_dict() for e in cut]


@pytest.mark.parametrize("name", ["refund", "failed"])
def test_recorded_turns(name: str) -> None:
    _, records = parse_trace_file((FIXTURES / f"{name}.otlp.jsonl").read_text())
    as_is, cut = _both(list(ordered_phases(records)))
    assert any(e["type"] == "node_completed" for e in as_is)
    assert as_is == cut


def test_a_foreign_turn_that_pauses_and_resumes() -> None:
    as_is, cut = _both(list(ordered_phases(paused_then_resumed())))
    assert [e["type"] for e in as_is].count("graph_topology") == 2
    assert as_is == cut


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=turns())
def test_generated_turns(phases: list[tuple[SpanRecord, str, Any]]) -> None:
    # as stored: every phase carries the span's finished record (its end attributes,
    # time, status and span events too)
    ended = {(r.trace_id, r.span_id): r for r, kind, _ in phases if kind == END}
    stored = [(ended.get((r.trace_id, r.span_id), r), kind, event) for r, kind, event in phases]
    assert any(r.end_ns is not None for r, kind, _ in stored if kind == START)
    as_is, cut = _both(stored)
    assert as_is == cut
