"""The streaming replay order equals the reference (``ordered_phases`` of the whole list)
phase for phase: on generated span trees (ties, zero durations, ends cut to microseconds,
coarse JS-SDK clocks, children read before their parents, parents outside the turn,
cycles, span events), fed in chunks of any size, with and without the store's lookups;
and the streamed events equal the reference (every phase sorted at once) on the
recorded turns."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay import conventions as c
from relay.events import Event
from relay.ingest.tracefile import parse_trace_file
from relay.mapping.feed import (
    END,
    EVENT,
    LEAF,
    START,
    Phase,
    chunked,
    group_turns,
    iter_replay_events,
    ordered_phases,
    replay_events,
    stream_replay_events,
)
from relay.mapping.lookups import lookups_of
from relay.mapping.stream_order import PhaseOrderer
from relay.spans import SpanRecord
from tests.contract import reference_events
from tests.store.conftest import fixture_file

MS = 1_000_000


def _key(phases: list[Phase]) -> list[tuple[Any, ...]]:
    return [
        (r.trace_id, r.span_id, kind, id(ev) if ev is not None else None) for r, kind, ev in phases
    ]


def _streamed(
    records: list[SpanRecord], cuts: list[int], with_lookups: bool, leaves: bool = False
) -> list[Phase]:
    ordered = sorted(records, key=lambda r: r.start_ns)
    orderer = PhaseOrderer(lookups_of(records) if with_lookups else None, leaves=leaves)
    out: list[Phase] = []
    at = 0
    for cut in [*sorted(cuts), len(ordered)]:
        out += orderer.push(ordered[at : max(at, cut)])
        at = max(at, cut)
    return out + orderer.finish()


@st.composite
def span_trees(draw: st.DrawFn) -> list[SpanRecord]:
    records: list[SpanRecord] = []
    for t in range(draw(st.integers(1, 3))):
        trace_id = f"{t + 1:032x}"
        coarse = draw(st.booleans())
        n = draw(st.integers(1, 14))
        base = 10_000 * MS + draw(st.integers(0, 3)) * MS
        ids = [f"{t + 1:08x}{k + 1:08x}" for k in range(n)]
        for k in range(n):
            which = draw(st.sampled_from(["root", "earlier", "any", "absent"]))
            if which == "root" or (which == "earlier" and k == 0):
                parent = None
            elif which == "earlier":
                parent = ids[draw(st.integers(0, k - 1))]
            elif which == "any":
                parent = ids[draw(st.integers(0, n - 1))]
            else:
                parent = "ffffffffffffffff"
            if coarse:
                start = base + draw(st.integers(0, 5)) * MS
            else:
                start = base + draw(st.sampled_from([0, 1, 1_000, 500_000, 2 * MS, 2 * MS + 7]))
            kind = draw(st.sampled_from(["open", "zero", "slack", "short", "long", "ms"]))
            end = {
                "open": None,
                "zero": start,
                "slack": start + 1_000 + 1_500,
                "short": start + 1_000,
                "long": start + 5 * MS,
                "ms": start - start % MS + 2 * MS + draw(st.integers(0, 3)),
            }[kind]
            attributes: dict[str, Any] = {}
            if draw(st.booleans()):
                attributes[c.NODE_STEP] = draw(st.integers(0, 3))
            events = [
                {
                    "name": f"e{e}",
                    "time_ns": start + draw(st.sampled_from([-5, 0, 1_000, 3 * MS, 9 * MS])),
                    "attributes": {},
                }
                for e in range(draw(st.integers(0, 2)))
            ]
            records.append(
                SpanRecord(
                    trace_id, ids[k], parent, f"s{t}.{k}", start, end, attributes, events=events
                )
            )
    return records


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=span_trees(), cuts=st.lists(st.integers(0, 45), max_size=6), with_lookups=st.booleans()
)
def test_streamed_order_equals_the_reference(
    records: list[SpanRecord], cuts: list[int], with_lookups: bool
) -> None:
    assert _key(_streamed(records, cuts, with_lookups)) == _key(ordered_phases(records))


def _expanded(phases: list[Phase]) -> list[Phase]:
    """``LEAF`` phases as the start and the end they stand for."""
    out: list[Phase] = []
    for record, kind, event in phases:
        out += (
            [(record, START, None), (record, END, None)]
            if kind == LEAF
            else [(record, kind, event)]
        )
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=span_trees(), cuts=st.lists(st.integers(0, 45), max_size=6), with_lookups=st.booleans()
)
def test_leaves_stand_for_a_start_and_its_end_next(
    records: list[SpanRecord], cuts: list[int], with_lookups: bool
) -> None:
    """With ``leaves``, a start whose end is the very next phase comes as one ``LEAF``: the
    same order as the reference once each is read as the two."""
    phases = _streamed(records, cuts, with_lookups, leaves=True)
    assert _key(_expanded(phases)) == _key(ordered_phases(records))


def test_a_leaf_is_a_span_with_nothing_between_its_start_and_end() -> None:
    """A parent, a child that starts and ends before the next start, two that meet (one
    ends at the instant the other starts), one with a span event, one after them all:
    the first and the last child are leaves; the others have a phase at one of their
    instants or between their two."""
    trace = "d" * 32
    spans = [
        SpanRecord(trace, "1" * 16, None, "root", 1_000, 90_000, {}),
        SpanRecord(trace, "2" * 16, "1" * 16, "leaf", 2_000, 3_000, {}),
        SpanRecord(trace, "3" * 16, "1" * 16, "tied", 4_000, 5_000, {}),
        SpanRecord(trace, "4" * 16, "1" * 16, "next", 5_000, 6_000, {}),
        SpanRecord(
            trace,
            "5" * 16,
            "1" * 16,
            "event",
            7_000,
            8_000,
            {},
            events=[{"name": "e", "time_ns": 7_500, "attributes": {}}],
        ),
        SpanRecord(trace, "6" * 16, "1" * 16, "last", 9_000, 9_500, {}),
    ]
    orderer = PhaseOrderer(lookups_of(spans), leaves=True)
    phases = orderer.push(spans) + orderer.finish()
    assert [(r.name, kind) for r, kind, _ in phases] == [
        ("root", START),
        ("leaf", LEAF),
        ("tied", START),
        ("tied", END),
        ("next", START),
        ("next", END),
        ("event", START),
        ("event", EVENT),
        ("event", END),
        ("last", LEAF),
        ("root", END),
    ]
    assert _key(_expanded(phases)) == _key(ordered_phases(spans))


def test_phases_come_out_before_the_input_ends() -> None:
    """A fine trace read in start order: each chunk releases what precedes its last start."""
    trace = "a" * 32
    spans = [
        SpanRecord(
            trace,
            f"{k + 1:016x}",
            None if k == 0 else f"{1:016x}",
            f"s{k}",
            1_000 + 10 * k,
            1_005 + 10 * k if k else 10_000,
            {},
        )
        for k in range(10)
    ]
    orderer = PhaseOrderer(lookups_of(spans))
    first = orderer.push(spans[:3])
    assert _key(first) == _key(ordered_phases(spans))[: len(first)]
    assert len(first) >= 3  # the root's start, s1's start and end
    rest = orderer.push(spans[3:]) + orderer.finish()
    assert _key(first + rest) == _key(ordered_phases(spans))


def test_a_parent_outside_the_turn_does_not_hold_its_children_back() -> None:
    trace = "b" * 32
    spans = [
        SpanRecord(
            trace, f"{k + 1:016x}", "remote0000000000", f"s{k}", 1_000 + 10 * k, 1_005 + 10 * k, {}
        )
        for k in range(4)
    ]
    with_lookups = PhaseOrderer(lookups_of(spans)).push(spans)
    without = PhaseOrderer(None).push(spans)
    assert len(with_lookups) == 6 and without == []


def test_spans_out_of_start_order_are_refused() -> None:
    spans = [
        SpanRecord("c" * 32, "1" * 16, None, "a", 2_000, 3_000, {}),
        SpanRecord("c" * 32, "2" * 16, None, "b", 1_000, 3_000, {}),
    ]
    with pytest.raises(ValueError, match="start order"):
        PhaseOrderer().push(spans)


def _dicts(events: list[Event]) -> list[dict[str, Any]]:
    return [e.to_dict() for e in events]


@pytest.mark.parametrize(
    "name",
    ["refund.otlp.jsonl", "refund.jaeger-ui.json", "failed.otlp.jsonl", "failed.jaeger-v2.json"],
)
def test_recorded_turns_stream_the_reference_events(name: str) -> None:
    _, records = parse_trace_file(fixture_file(name).read_bytes())
    (turn,) = group_turns(records)
    reference = _dicts(reference_events(turn.spans))
    assert _dicts(replay_events(turn.spans)) == reference
    assert _dicts([e for b in stream_replay_events(turn.spans) for e in b]) == reference
    one_by_one = iter_replay_events(chunked(turn.spans, 1, 1))  # no lookups: waits more
    assert _dicts([e for b in one_by_one for e in b]) == reference
    batches = list(iter_replay_events(chunked(turn.spans, 1, 1), lookups=lookups_of(turn.spans)))
    assert len(batches) > 1  # derived while read, not all at the end
