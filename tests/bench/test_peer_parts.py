"""The pure parts of the side-by-side benchmark (tests/bench/peer/): raw SSE parsing, the
reconnect arithmetic (lost, duplicated, resent; per event type), percentiles and the
tables' verdicts (the same-client table's per-cut figures included)."""

from __future__ import annotations

from tests.bench.peer import same_client
from tests.bench.peer.figures import pct
from tests.bench.peer.report import Row
from tests.bench.peer.sse import (
    Resumed,
    SSEEvent,
    SSEParser,
    differences,
    distinct_ids,
    lost_and_duplicated,
    per_event,
)

RELAY_FRAMES = (
    b"retry: 2000\n\n"
    b'id: 1\nevent: node_started\ndata: {"seq":1}\n\n'
    b": hb\n\n"
    b'id: 2\nevent: text_delta\ndata: {"seq":2}\n\n'
)
# the peer writes its id after the data, and CRLF is allowed too
PEER_FRAMES = (
    b'event: metadata\r\ndata: {"run_id":"r"}\r\nid: 17-0\r\n\r\n'
    b'event: messages\ndata: [{"content":"a "}]\nid: 17-0\n\n'
)


def parse_in_pieces(raw: bytes, size: int) -> tuple[list[SSEEvent], SSEParser]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for i in range(0, len(raw), size):
        events.extend(parser.feed(raw[i : i + size]))
    return events, parser


def test_events_are_the_same_whatever_the_chunking() -> None:
    whole, parser = parse_in_pieces(RELAY_FRAMES, len(RELAY_FRAMES))
    assert whole == [
        SSEEvent("node_started", '{"seq":1}', "1"),
        SSEEvent("text_delta", '{"seq":2}', "2"),
    ]
    assert parser.comments == 1 and parser.last_id == "2"
    for size in (1, 2, 7, 13):
        assert parse_in_pieces(RELAY_FRAMES, size)[0] == whole


def test_id_after_data_crlf_and_repeated_ids() -> None:
    events, parser = parse_in_pieces(PEER_FRAMES, 5)
    assert [(e.event, e.id) for e in events] == [("metadata", "17-0"), ("messages", "17-0")]
    assert parser.last_id == "17-0"
    assert distinct_ids(events) == 1


def test_multiline_data_default_type_and_an_unfinished_frame() -> None:
    events, _ = parse_in_pieces(b"data: a\ndata: b\n\ndata: c", 3)
    assert events == [SSEEvent("message", "a\nb", None)]  # "c" has no blank line yet


def test_lost_and_duplicated_count_a_multiset() -> None:
    uncut = [SSEEvent("t", str(i), str(i)) for i in range(6)] + [SSEEvent("t", "0", "6")]
    before = uncut[:3]
    assert lost_and_duplicated(uncut, before, uncut[3:]) == Resumed(lost=0, duplicated=0)
    # a resume that repeats event 2 and skips event 4
    resumed = lost_and_duplicated(uncut, before, [uncut[2], uncut[3], uncut[5], uncut[6]])
    assert (resumed.lost, resumed.duplicated) == (1, 1)
    # two events with equal payloads are two events: getting one of them loses the other
    assert lost_and_duplicated(uncut, before, uncut[3:6]).lost == 1


def test_percentiles_and_who_is_ahead() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (pct(values, 50), pct(values, 99), pct([], 50)) == (50.0, 99.0, None)
    assert Row("t", 1.0, 2.0, "ms", "lower").ahead == "span-relay"
    assert Row("t", 1.0, 2.0, "/s", "higher").ahead == "peer"
    assert Row("t", 0.0, 0.0, "", "lower").ahead == "even"
    assert Row("t", 0.0, 3.0, "", "lower").ratio == 0.0
    assert Row("t", 1.0, 0.0, "", "lower").ratio is None


def test_resent_counts_only_what_the_reader_had() -> None:
    uncut = [SSEEvent("messages", str(i), None) for i in range(6)]
    # a resume that starts over from the first event: 3 resent, 3 duplicated, none lost
    replayed = lost_and_duplicated(uncut, uncut[:3], uncut)
    assert (replayed.lost, replayed.duplicated, replayed.resent) == (0, 3, 3)
    # a resume that sends one of its own events twice: a duplicate, not a resent one
    twice = lost_and_duplicated(uncut, uncut[:3], [*uncut[3:], uncut[4]])
    assert (twice.lost, twice.duplicated, twice.resent) == (0, 1, 0)
    # equal payloads: the second `values` frame after the cut is the run's rest, not resent
    same = [SSEEvent("values", "s", None)] * 3
    assert lost_and_duplicated(same, same[:1], same[1:]) == Resumed(0, 0, 0)
    assert lost_and_duplicated(same, same[:1], same).resent == 1


def test_per_event_splits_the_counts_by_event_type() -> None:
    uncut = [
        SSEEvent("metadata", "m", "1"),
        SSEEvent("messages", "a", "2"),
        SSEEvent("updates", "u", "3"),
        SSEEvent("messages", "b", "4"),
    ]
    kinds = per_event(uncut, uncut[:2], [uncut[1], uncut[3]])  # "a" again, "u" lost
    assert kinds == {
        "messages": Resumed(lost=0, duplicated=1, resent=1),
        "metadata": Resumed(0, 0, 0),
        "updates": Resumed(lost=1, duplicated=0, resent=0),
    }


def test_differences_name_the_events() -> None:
    uncut = [SSEEvent("messages", "a", "1"), SSEEvent("values", "x" * 200, "2")]
    got = differences(uncut, uncut[:1], uncut[:1])  # "a" twice, the values frame lost
    assert got == {"lost_events": ["values: " + "x" * 120], "duplicated_events": ["messages: a"]}


def test_same_client_rows_per_cut_and_sides_without_a_figure() -> None:
    point = {"lost": 1, "duplicated": 0}
    data = {
        "latency": {
            side: {
                "first_event_ms": [1.0, 3.0],
                "first_token_ms": [2.0],
                "turn_ms": [4.0],
                "events_per_turn": 82,
            }
            for side in ("span-relay", "peer")
        },
        "idle_joined": {"peer": {"kib_per_stream": 30.0}},  # span-relay: not served
        "reconnect": {
            "peer": {
                "cuts": 4,
                "lost": 2,
                "duplicated": 6,
                "resent": 4,
                "by_event": {"messages": {"lost": 2, "duplicated": 4, "resent": 4}},
                "events": 80,
                "distinct_ids": 64,
                "points": [point, point, {"lost": 0, "duplicated": 0}],
            }
        },
        "events": {},  # the newer protocol: served by neither
        "nocursor": {},
        "idle_events": {},
        "broken_count": {"span-relay": 0, "peer": 0},
    }
    table = {row.figure: row for row in same_client.rows(data, 20)}
    assert table["runs/stream: first SSE frame p50"].ours == 1.0
    assert table["runs/stream: first SSE frame p99"].peer == 3.0
    assert table["memory per idle joined stream (20)"].ours is None
    assert table["memory per idle joined stream (20)"].ahead == "-"
    assert table["join stream, 4 cuts: gap per cut (frames missing)"].peer == 0.5
    assert table["join stream, 4 cuts: dup per cut (frames twice)"].peer == 1.5
    assert table["join stream, 4 cuts: events resent per reconnect"].peer == 1.0
    assert table["join stream, 4 cuts: cuts with a gap or a dup"].peer == 2
    assert table["join stream, 4 cuts: distinct ids per frame"].peer == 0.8
    of_which = [r for r in same_client.rows(data, 20) if r.figure.startswith("  of which")]
    # messages, updates, values: gaps, then dups; the newer protocol's rows all n/a
    assert [r.peer for r in of_which[:6]] == [0.5, 0.0, 0.0, 1.0, 0.0, 0.0]
    newer = [r for r in same_client.rows(data, 20) if r.figure.startswith("stream/events")]
    assert newer and all(r.ours is None and r.peer is None for r in newer)
    assert table["runs not served whole"].ahead == "even"
