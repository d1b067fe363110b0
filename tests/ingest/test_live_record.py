"""The processor's reading of live SDK spans (relay/ingest/live.py ``live_record``): the same
record the store's full conversion gives, on the fields the mapping reads, through the
SDK's own attribute dict where the pinned SDK has it, and through the public view where a
span has no such internal."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from relay.ingest.live import HexIds, live_record
from relay.spans import from_sdk_span, to_ms

_READ = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "start_ns",
    "end_ns",
    "status",
    "status_message",
)


def _spans() -> tuple[trace.Span, trace.Span]:
    tracer = TracerProvider().get_tracer("t")
    root = tracer.start_span("root", attributes={"a": 1})
    child = tracer.start_span(
        "child",
        context=trace.set_span_in_context(root),
        attributes={"relay.node.name": "n", "list": ["x", "y"]},
    )
    return root, child


def test_an_ended_span_reads_as_the_full_conversion_does() -> None:
    root, child = _spans()
    child.add_event("gen_ai.content.delta", {"delta": "hi"})
    child.set_status(Status(StatusCode.ERROR, "boom"))
    child.end()
    live = live_record(child, True)
    full = from_sdk_span(child, True)
    assert {k: getattr(live, k) for k in _READ} == {k: getattr(full, k) for k in _READ}
    assert dict(live.attributes) == dict(full.attributes)
    assert live.events == full.events and live.status == "error"
    root.end()


def test_an_ended_span_is_read_through_the_sdk_dict_without_a_copy() -> None:
    """The pinned opentelemetry-sdk keeps attributes in ``BoundedAttributes._dict``: the
    record reads that dict itself (no proxy per read, no copy). If an SDK release moves
    it, this fails and the public view (slower) is what the relay uses meanwhile."""
    _, child = _spans()
    child.end()
    record = live_record(child, True)
    assert type(record.attributes) is dict
    assert record.attributes is child._attributes._dict  # type: ignore[attr-defined]


def test_a_started_span_is_read_as_a_copy_its_thread_cannot_change() -> None:
    _, child = _spans()
    record = live_record(child, False)
    child.set_attribute("relay.node.outcome", "ok")  # the agent's thread, later
    assert "relay.node.outcome" not in record.attributes
    assert record.end_ns is None and record.status == "unset" and record.events == ()
    child.end()


def test_a_span_without_the_sdk_internals_is_read_through_its_public_view() -> None:
    ctx = SpanContext(0xAB, 0xCD, is_remote=False, trace_flags=TraceFlags(1))
    parent = SpanContext(0xAB, 0xEF, is_remote=False)
    span = ReadableSpan(
        name="plain",
        context=ctx,
        parent=parent,
        attributes={"relay.node.name": "n"},
        start_time=1_000,
        end_time=3_000_600,
        status=Status(StatusCode.OK),
    )
    for ended in (False, True):
        record = live_record(span, ended)
        assert (record.trace_id, record.span_id, record.parent_span_id) == (
            f"{0xAB:032x}",
            f"{0xCD:016x}",
            f"{0xEF:016x}",
        )
        assert dict(record.attributes) == {"relay.node.name": "n"}
    assert record.status == "ok" and record.duration_ms == 3.0


def test_milliseconds_to_the_microsecond_half_up() -> None:
    assert to_ms(1_234_567) == 1.235 and to_ms(1_234_499) == 1.234
    assert to_ms(1_234_500) == 1.235 and to_ms(0) == 0.0
    epoch_ns = 1_796_241_573_290_953_500  # exact where round(ns / 1e6, 3) is not
    assert to_ms(epoch_ns) == 1_796_241_573_290.954


def test_the_id_table_gives_the_same_ids_and_stays_bounded() -> None:
    ids = HexIds(max_entries=4)
    tracer = TracerProvider().get_tracer("t")
    for _ in range(10):  # more traces and spans than the table keeps
        root, child = _spans_of(tracer)
        for span, ended in ((root, False), (child, False), (child, True), (root, True)):
            if ended:
                span.end()
            assert _ids(live_record(span, ended, ids)) == _ids(live_record(span, ended))
        assert len(ids.traces) <= 4 and len(ids.spans) <= 4
    assert ids.spans == {}  # every span ended: its entry went with its end


def test_a_trace_leaves_the_id_table_when_nothing_of_it_is_open() -> None:
    from relay.ingest.live import _public_record

    tracer = TracerProvider().get_tracer("t")
    for read in (live_record, _public_record):  # the SDK's fields, the public readers
        ids = HexIds()
        for _ in range(3):
            root, child = _spans_of(tracer)
            phases = [(root, False), (child, False), (child, True), (root, True)]
            for span, ended in phases:
                if ended:
                    span.end()
                assert _ids(read(span, ended, ids)) == _ids(live_record(span, ended))
                assert len(ids.traces) == (0 if span is root and ended else 1)
            # a span that outlives the run's root (the answer saved after the run)
            late = tracer.start_span("late", context=trace.set_span_in_context(root))
            assert _ids(read(late, False, ids)) == _ids(live_record(late, False))
            assert len(ids.traces) == 1
            late.end()
            assert _ids(read(late, True, ids)) == _ids(live_record(late, True))
        assert ids.traces == {} and ids.spans == {}  # nothing kept of ended runs


def _spans_of(tracer: trace.Tracer) -> tuple[trace.Span, trace.Span]:
    root = tracer.start_span("root")
    return root, tracer.start_span("child", context=trace.set_span_in_context(root))


def _ids(record: object) -> tuple[object, ...]:
    return tuple(getattr(record, k) for k in ("trace_id", "span_id", "parent_span_id"))


def test_the_tracers_spans_are_read_through_their_fields() -> None:
    """The SDK's span classes whose public readers are ReadableSpan's own properties are
    read through the fields behind them (no Python call per property); a subclass that
    overrides a reader is read through its readers."""
    from relay.ingest.live import _SDK_SPANS

    root, child = _spans()
    assert type(child) in _SDK_SPANS and ReadableSpan in _SDK_SPANS
    ids = HexIds()
    for ended in (False, True):
        if ended:
            child.add_event("e", {"k": 1})
            child.set_status(Status(StatusCode.ERROR, "boom"))
            child.end()
        fast = live_record(child, ended, ids)
        public = live_record(child, ended)
        assert (
            fast == public and fast.events == public.events and fast.status == "error"
            if ended
            else fast == public
        )

    class Renamed(ReadableSpan):
        @property
        def name(self) -> str:
            return "renamed"

    assert Renamed not in _SDK_SPANS
    ctx = SpanContext(0xAB, 0xCD, is_remote=False)
    span = Renamed(name="plain", context=ctx, start_time=1, end_time=2)
    assert live_record(span, True, HexIds()).name == "renamed"
    root.end()
