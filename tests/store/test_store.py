"""The SpanStore backends (SQLite and the real PostgreSQL): rows round-trip to equal
SpanRecords, turns are indexed by turn id and trace id, retention by age and count
leaves tombstones, migrations are versioned, a batch is all or nothing."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from relay import conventions as c
from relay.spans import SpanRecord
from relay.store import EXPIRED, STORED, UNKNOWN
from relay.store.codec import decode_attributes, encode_attributes
from tests.contract import reference_events

TOPOLOGY = json.dumps({"nodes": [{"id": "a", "label": "a"}], "edges": []}, separators=(",", ":"))


class Clock:
    def __init__(self, now_s: float = 1_800_000_000.0) -> None:
        self.now_ns = int(now_s * 1e9)

    def __call__(self) -> int:
        return self.now_ns

    def advance(self, seconds: float) -> None:
        self.now_ns += int(seconds * 1e9)


def _hex(n: int, width: int) -> str:
    return format(n, f"0{width}x")


def turn_spans(
    turn: int,
    run: int = 0,
    start_ns: int = 1_700_000_000_000_000_000,
    kind: str = "chat",
    outcome: str = "answered",
) -> list[SpanRecord]:
    """A run of a turn: a root carrying relay.turn.id, a node, a tool under the node."""
    trace = _hex(turn * 100 + run + 1, 32)
    root_id, node_id, tool_id = (_hex(turn * 1000 + run * 10 + k, 16) for k in (1, 2, 3))
    root_attrs: dict[str, Any] = {
        c.OPERATION: c.OP_INVOKE_AGENT,
        c.TURN_ID: f"turn-{turn}",
        c.CONVERSATION_ID: f"thread-{turn}",
        c.RUN_KIND: kind,
        c.GRAPH_ID: "g",
        c.GRAPH_TOPOLOGY: TOPOLOGY,
        c.TURN_OUTCOME: outcome,
        c.TURN_RESPONSE: '{"status": "answered",  "answer": "spaces  kept"}',
    }
    if kind == "chat":
        root_attrs[c.TURN_MESSAGE] = f"message {turn}"
    links = (
        []
        if run == 0
        else [
            {
                "trace_id": _hex(turn * 100 + 1, 32),
                "span_id": _hex(turn * 1000 + 1, 16),
                "attributes": {"why": "resume"},
            }
        ]
    )
    s = start_ns + run * 10_000_000
    return [
        SpanRecord(
            trace,
            root_id,
            None,
            "invoke_agent a",
            s,
            s + 9_000_000,
            root_attrs,
            status="ok",
            kind="internal",
            links=links,
            resource={"service.name": "svc", "telemetry.sdk.version": "1.45.2"},
        ),
        SpanRecord(
            trace,
            node_id,
            root_id,
            "node n",
            s + 1_000,
            s + 5_000_000,
            {c.NODE_NAME: "n", c.NODE_STEP: 1, c.NODE_OUTCOME: "ok"},
            resource={"service.name": "svc"},
        ),
        SpanRecord(
            trace,
            tool_id,
            node_id,
            "execute_tool t",
            s + 2_000,
            s + 4_000_000,
            {
                c.OPERATION: c.OP_TOOL,
                c.TOOL_NAME: "t",
                "ratio": 1.0,
                "count": 1,
                "flag": True,
                "tags": ("x", "y"),
                "ints": (1, 2, 3),
                "floats": (0.5, 1.0),
                "flags": (True, False),
                "empty": (),
                "big": 2**62,
                "neg": -7,
                "uni": "é ✓",
            },
            status="error",
            status_message="ValueError",
            kind="client",
            events=[
                {
                    "name": "exception",
                    "time_ns": s + 3_000_000,
                    "attributes": {"exception.type": "ValueError", "n": 2, "t": (1, 2)},
                }
            ],
            resource={"service.name": "svc"},
        ),
    ]


# -- the codec ----------------------------------------------------------------------------


def test_codec_keeps_types_exactly() -> None:
    attrs = {
        "s": "1",
        "i": 1,
        "f": 1.0,
        "b": True,
        "bf": False,
        "a": ("1", "2"),
        "ai": (1, 2),
        "af": (1.0, 2.5),
        "ab": (True,),
        "e": (),
        "j": '{"a": 1}',
        "big": -(2**63),
        "m": {"k": (1, "x")},
        "x": b"\x00\xff",
        "n": None,
    }
    decoded = decode_attributes(json.loads(json.dumps(encode_attributes(attrs))))
    assert decoded == attrs
    for key, value in attrs.items():
        assert type(decoded[key]) is type(value), key
    assert type(decoded["af"][0]) is float and type(decoded["ai"][0]) is int
    specials = decode_attributes(
        json.loads(
            json.dumps(encode_attributes({"nan": math.nan, "inf": math.inf, "ninf": -math.inf}))
        )
    )
    assert math.isnan(specials["nan"]) and specials["inf"] == math.inf
    assert specials["ninf"] == -math.inf


def test_codec_text_keeps_what_json_readers_would_bend() -> None:
    """The stored text, not only the tags: an int past 64 bits stays an int (JSON readers
    such as orjson make floats of big numbers), a lone surrogate from user code is stored
    escaped and read back, and non-ASCII text round-trips."""
    from relay.store.codec import dump_attributes, load_attributes

    attrs = {
        "big": 2**70,
        "neg": -(2**70),
        "edge": 2**64 - 1,
        "bad": "x \ud800 y",
        "text": "Réponse 東京 🙂",
        "tags": (2**65, "a"),
    }
    text = dump_attributes(attrs)
    assert '"1180591620717411303424"' in text
    back = load_attributes(text)
    assert back == attrs and type(back["big"]) is int and type(back["tags"][0]) is int
    assert dump_attributes({}) == "{}" and load_attributes("{}") == {}


def test_codec_stores_plain_values_plain_and_reads_rows_of_every_version() -> None:
    """Values that plain JSON keeps exactly are stored as themselves (schema 3); rows
    written before (every value tagged, schema 1-2) read back the same values."""
    from relay.store.codec import dump_attributes, load_attributes, load_events

    attrs = {"s": "x", "i": 7, "f": 1.0, "b": False, "n": None, "t": ("a", 2)}
    text = dump_attributes(attrs)
    assert text == '{"s":"x","i":7,"f":1.0,"b":false,"n":null,"t":{"a":[{"s":"a"},{"i":2}]}}'
    assert load_attributes(text) == attrs and type(load_attributes(text)["f"]) is float
    old = (
        '{"s":{"s":"x"},"i":{"i":7},"f":{"d":1.0},"b":{"b":false},"n":{"n":null},'
        '"t":{"a":[{"s":"a"},{"i":2}]}}'
    )
    back = load_attributes(old)
    assert back == attrs and [type(v) for v in back.values()] == [type(v) for v in attrs.values()]
    assert load_attributes('{"k":{"s":"v"}}') == {"k": "v"}  # an all-tagged row
    nested = {"j": '{"a":{"b":1}}', "k": '":{', "t": ()}  # JSON text that looks tagged
    assert load_attributes(dump_attributes(nested)) == nested
    assert load_attributes(dump_attributes(nested)[:-1].rsplit(',"t"', 1)[0] + "}") == {
        "j": '{"a":{"b":1}}',
        "k": '":{',
    }
    assert load_events('[{"name":"e","time_ns":5,"attributes":{"k":{"i":1}}}]') == [
        {"name": "e", "time_ns": 5, "attributes": {"k": 1}}
    ]


def test_replay_records_of_a_chunk_equal_the_records_row_by_row() -> None:
    """The replay's chunk decoder (one loop, orjson called directly) reads every row as
    :func:`replay_record` does: plain and tagged values, rows written before schema 3, a
    lone surrogate (the chunk falls back to the standard library), a packed status column
    (a message, span events), NULLs."""
    from relay.store.codec import dump_attributes, replay_record, replay_records

    events = '[{"name":"e","time_ns":3,"attributes":{"k":{"i":1},"p":2}}]'
    rows = [
        ("a1", None, "root", 1, 9, "ok", dump_attributes({"s": "x", "i": 7})),
        ("a2", "a1", "n", 2, None, "unset", dump_attributes({"t": ("a", 2**70)})),
        (
            "a3",
            "a1",
            "m",
            3,
            4,
            f"5:{len(events)}:error{events}boom: é",
            '{"k":{"d":1.0},"b":{"b":true}}',
        ),
        ("a4", "a1", "o", 4, 5, "ok", "{}"),
        ("a5", "a1", "q", 5, 6, "2:2:ok[]", "{}"),
    ]
    expected = [replay_record("t" * 32, row) for row in rows]
    assert replay_records("t" * 32, rows) == expected
    assert (expected[2].status, expected[2].status_message) == ("error", "boom: é")
    assert expected[2].events == [{"name": "e", "time_ns": 3, "attributes": {"k": 1, "p": 2}}]
    assert (expected[4].status, expected[4].status_message, expected[4].events) == ("ok", "", ())
    odd = [*rows, ("a6", "a1", "p", 5, 6, "ok", dump_attributes({"bad": "x \ud800"}))]
    assert replay_records("t" * 32, odd) == [*expected, replay_record("t" * 32, odd[-1])]
    assert replay_records("t" * 32, odd)[-1].attributes == {"bad": "x \ud800"}


def test_the_status_column_packs_what_the_usual_span_lacks(make_store: Callable[..., Any]) -> None:
    """The replay reads status, message and span events as one column, packed by SQL with
    lengths that the database counts (characters, also past the BMP): what a replay reads
    equals what was written, on both backends, for every mix of the three."""
    store = make_store()
    root = turn_spans(10)[0]
    odd = [
        ("error", "", ()),
        ("error", "a: b ✓ 😀", ()),
        ("unset", "", ()),
        ("STATUS_CODE_OK", "", ()),
        ("ok", "", [{"name": "😀 : é", "time_ns": 5, "attributes": {"k": "v ✓"}}]),
        ("error", "x:y", [{"name": "e", "time_ns": 6, "attributes": {}}]),
    ]
    spans = [
        root,
        *(
            SpanRecord(
                trace_id=root.trace_id,
                span_id=f"{k + 32:016x}",
                parent_span_id=root.span_id,
                name=f"s{k}",
                start_ns=root.start_ns + k + 1,
                end_ns=root.start_ns + k + 2,
                attributes={"k": k},
                status=status,
                status_message=message,
                events=events,
            )
            for k, (status, message, events) in enumerate(odd)
        ),
    ]
    store.write(spans)
    _, stream = store.turn_span_stream("turn-10")
    assert stream is not None
    read = [r for chunk in stream for r in chunk]
    assert [(r.status, r.status_message, list(r.events)) for r in read] == [
        (r.status, r.status_message, list(r.events)) for r in spans
    ]


# -- round trip and indexes ---------------------------------------------------------------


def test_rows_round_trip_to_equal_span_records(make_store: Callable[..., Any]) -> None:
    store = make_store()
    chat = turn_spans(1, outcome="paused")
    resume = turn_spans(1, run=1, kind="resume")
    assert store.write(chat + resume) == 6
    state, spans = store.turn_spans("turn-1")
    assert state == STORED
    key = lambda r: (r.trace_id, r.span_id)  # noqa: E731
    assert sorted(spans, key=key) == sorted(chat + resume, key=key)
    tool = next(r for r in spans if r.name == "execute_tool t")
    assert tool.attributes["tags"] == ("x", "y") and type(tool.attributes["ratio"]) is float
    root = next(r for r in spans if r.attributes.get(c.TURN_ID) and r.links)
    assert root.attributes[c.TURN_RESPONSE] == chat[0].attributes[c.TURN_RESPONSE]
    assert store.turn_of_trace(chat[0].trace_id) == "turn-1"
    assert store.turn_of_trace(resume[2].trace_id) == "turn-1"
    assert store.trace_spans(resume[0].trace_id) == sorted(resume, key=lambda r: r.start_ns)


def test_children_stored_before_their_root_belong_to_the_turn(
    make_store: Callable[..., Any],
) -> None:
    store = make_store()
    root, node, tool = turn_spans(2)
    store.write([tool])  # batches arrive as spans end: children first
    store.write([node])
    assert store.turn_spans("turn-2") == (UNKNOWN, [])
    store.write([root])
    state, spans = store.turn_spans("turn-2")
    assert state == STORED and len(spans) == 3


def test_turns_lists_newest_first_with_outcome(make_store: Callable[..., Any]) -> None:
    store = make_store()
    store.write(turn_spans(1, start_ns=1_000_000_000_000))
    store.write(turn_spans(2, start_ns=2_000_000_000_000, outcome="paused"))
    store.write(turn_spans(2, run=1, kind="resume", start_ns=2_000_000_000_000, outcome="answered"))
    listed = store.turns(limit=10)
    assert [t["turn_id"] for t in listed] == ["turn-2", "turn-1"]
    assert listed[0]["outcome"] == "answered" and listed[0]["runs"] == 2
    assert listed[0]["message"] == "message 2" and listed[0]["thread_id"] == "thread-2"
    assert [t["turn_id"] for t in store.turns(limit=10, before_ns=2_000_000_000_000)] == ["turn-1"]


def test_rewriting_a_span_is_idempotent(make_store: Callable[..., Any]) -> None:
    store = make_store()
    spans = turn_spans(3)
    store.write(spans)
    store.write(spans, source="import")
    assert len(store.turn_spans("turn-3")[1]) == 3


def test_a_batch_is_all_or_nothing(make_store: Callable[..., Any]) -> None:
    store = make_store()
    good = turn_spans(4)
    bad = SpanRecord("f" * 32, "e" * 16, None, None, 1, 2, {})  # type: ignore[arg-type]
    with pytest.raises(Exception):  # noqa: B017 - the backend's NOT NULL error
        store.write([*good, bad])
    assert store.turn_spans("turn-4") == (UNKNOWN, [])
    assert store.trace_spans(good[0].trace_id) == []
    store.write(good)  # the store is still usable
    assert store.turn_spans("turn-4")[0] == STORED


# -- retention ----------------------------------------------------------------------------


def test_retention_by_age_leaves_a_tombstone(make_store: Callable[..., Any]) -> None:
    clock = Clock()
    store = make_store(retention_s=60, clock=clock)
    store.write(turn_spans(1))
    clock.advance(30)
    store.write(turn_spans(2))
    clock.advance(40)  # turn-1 is 70 s old, turn-2 40 s
    assert store.turn_spans("turn-1") == (EXPIRED, [])  # read-time check, before expiry runs
    assert store.expire() == 1
    assert store.turn_spans("turn-1") == (EXPIRED, [])
    assert store.trace_spans(turn_spans(1)[0].trace_id) == []
    assert store.turn_spans("turn-2")[0] == STORED
    assert store.turn_spans("never") == (UNKNOWN, [])
    clock.advance(60 * 11)  # tombstones go after 10 x the retention
    store.expire()
    assert store.turn_spans("turn-1") == (UNKNOWN, [])


def test_retention_by_count_keeps_the_newest(make_store: Callable[..., Any]) -> None:
    store = make_store(max_turns=2)
    for turn in (1, 2, 3):
        store.write(turn_spans(turn, start_ns=turn * 1_000_000_000_000))
    assert store.turn_spans("turn-1") == (EXPIRED, [])
    assert store.turn_spans("turn-2")[0] == STORED and store.turn_spans("turn-3")[0] == STORED


def test_orphan_spans_expire_by_age(make_store: Callable[..., Any]) -> None:
    clock = Clock()
    store = make_store(retention_s=10, clock=clock)
    orphan = turn_spans(5)[1:]  # a run whose root never ended (its process died)
    store.write(orphan)
    clock.advance(11)
    store.expire()
    assert store.trace_spans(orphan[0].trace_id) == []


# -- migrations ---------------------------------------------------------------------------


def test_schema_is_versioned_and_reopening_keeps_data(make_store: Callable[..., Any]) -> None:
    first = make_store()
    assert first.schema_version() == 3
    first.write(turn_spans(6))
    second = make_store()  # a restart, or a second instance on shared storage
    assert second.schema_version() == 3
    assert second.turn_spans("turn-6")[0] == STORED


def test_foreign_runs_are_indexed_by_whoever_mapped_them(make_store: Callable[..., Any]) -> None:
    """Spans of another instrumentation carry no relay.turn.id: the receiver indexes
    their runs (the turn's trace id, and a resume's trace under the same turn), before or
    after the spans are written; then the store finds, lists and expires them as ours."""
    from relay.store import RunIndex

    store = make_store(max_turns=1)
    chat = turn_spans(7)
    resume = turn_spans(7, run=1, kind="resume")
    for record in (*chat, *resume):  # as OpenInference writes them: no relay.* on roots
        for key in (c.TURN_ID, c.RUN_KIND, c.TURN_OUTCOME, c.TURN_MESSAGE):
            record.attributes.pop(key, None)
    first = chat[0].trace_id
    second = resume[0].trace_id
    store.write(chat)
    assert store.turn_spans(first)[0] == UNKNOWN  # nothing says it is a turn yet
    store.index_runs(
        [
            RunIndex(
                turn_id=first,
                trace_id=first,
                root_span_id=chat[0].span_id,
                run_kind="chat",
                thread_id="thread-7",
                message="Where is it?",
                start_ns=chat[0].start_ns,
                end_ns=None,
                outcome=None,
            )
        ]
    )
    store.index_runs(
        [
            RunIndex(
                turn_id=first,
                trace_id=second,
                root_span_id=None,
                run_kind="resume",
                thread_id="",
                message="",
                start_ns=resume[0].start_ns,
                end_ns=resume[0].end_ns,
                outcome="answered",
            )
        ]
    )  # before its spans
    store.write(resume)
    state, spans = store.turn_spans(first)
    assert state == STORED and {r.trace_id for r in spans} == {first, second}
    assert store.turn_of_trace(second) == first
    [listed] = store.turns()
    assert listed["turn_id"] == first and listed["thread_id"] == "thread-7"
    assert listed["message"] == "Where is it?" and listed["runs"] == 2
    assert listed["outcome"] == "answered"
    store.write(turn_spans(8, start_ns=1_800_000_000_000_000_000))  # past max_turns=1:
    # the older turn, the foreign one, expires like ours
    assert store.turn_spans(first)[0] == EXPIRED


# -- the streaming read (a replay) ------------------------------------------------------------


def test_streamed_read_gives_what_the_mapping_reads_in_start_order(
    make_store: Callable[..., Any],
) -> None:
    """A turn of two runs (two traces, merged by start) read as a replay reads it: every
    span with what the mapping reads (not its kind, links or resource), in start order,
    and the events derived from it equal the reference replay of the stored spans."""
    from relay.mapping.feed import iter_replay_events

    store = make_store()
    chat = turn_spans(8, outcome="paused")
    resume = turn_spans(8, run=1, kind="resume")
    store.write(resume + chat)
    state, stream = store.turn_span_stream("turn-8")
    assert state == STORED and stream is not None
    read = [r for chunk in stream for r in chunk]
    # read to the end, it still answers the mapping's lookups (the replay's ordering asks
    # them at its end: a turn of one span), until its owner closes it
    assert not stream.closed
    assert stream.coarse(chat[0].trace_id) in (True, False)
    stream.close()
    assert stream.closed
    expected = sorted(chat + resume, key=lambda r: r.start_ns)
    assert [r.start_ns for r in read] == [r.start_ns for r in expected]
    for got, want in zip(read, expected, strict=True):
        assert got == SpanRecord(
            trace_id=want.trace_id,
            span_id=want.span_id,
            parent_span_id=want.parent_span_id,
            name=want.name,
            start_ns=want.start_ns,
            end_ns=want.end_ns,
            attributes=want.attributes,
            status=want.status,
            status_message=want.status_message,
            events=want.events,
        )
    _, stored = store.turn_spans("turn-8")
    _, again = store.turn_span_stream("turn-8")
    assert again is not None
    streamed = [e for batch in iter_replay_events(again, lookups=again) for e in batch]
    assert [e.to_json() for e in streamed] == [e.to_json() for e in reference_events(stored)]


def test_a_long_turn_streams_past_its_first_chunk(make_store: Callable[..., Any]) -> None:
    """One trace of more spans than the first chunk and a later one hold (``fetchmany``,
    decoded a chunk at a time): every span read once, in start order (a PostgreSQL
    server-side cursor that was iterated for the first chunk used to skip rows), and the
    events derived from them equal the reference replay of the stored spans."""
    from relay.mapping.feed import iter_replay_events
    from relay.store.reading import CHUNK, FIRST_CHUNK

    store = make_store()
    root, node, tool = turn_spans(9)
    spans = [root]
    for k in range(FIRST_CHUNK + CHUNK):  # nodes, each with a tool under it
        at = root.start_ns + (k + 1) * 10_000
        node_id = f"{2 * k + 16:016x}"
        tool_id = f"{2 * k + 17:016x}"
        spans.append(
            SpanRecord(
                root.trace_id,
                node_id,
                root.span_id,
                node.name,
                at,
                at + 8_000,
                {**node.attributes, c.NODE_STEP: k + 1},
            )
        )
        spans.append(
            SpanRecord(
                trace_id=root.trace_id,
                span_id=tool_id,
                parent_span_id=node_id,
                name=tool.name,
                start_ns=at + 1_000,
                end_ns=at + 5_000,
                attributes=tool.attributes,
                status=tool.status,
                status_message=tool.status_message,
                events=[{**tool.events[0], "time_ns": at + 2_000}],
            )
        )
    store.write(spans)
    _, stream = store.turn_span_stream("turn-9")
    assert stream is not None
    chunks = list(stream)
    assert [len(chunk) for chunk in chunks][:2] == [FIRST_CHUNK, CHUNK]
    read = [r for chunk in chunks for r in chunk]
    assert read == [
        SpanRecord(
            trace_id=r.trace_id,
            span_id=r.span_id,
            parent_span_id=r.parent_span_id,
            name=r.name,
            start_ns=r.start_ns,
            end_ns=r.end_ns,
            attributes=r.attributes,
            status=r.status,
            status_message=r.status_message,
            events=r.events,
        )
        for r in spans
    ]
    _, again = store.turn_span_stream("turn-9")
    assert again is not None
    streamed = [e for batch in iter_replay_events(again, lookups=again) for e in batch]
    assert [e.to_json() for e in streamed] == [e.to_json() for e in reference_events(spans)]
