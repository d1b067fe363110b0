"""The pure parts of the side-by-side benchmark (tests/bench/peer/): raw SSE parsing, the
reconnect arithmetic, percentiles and the table's verdicts."""

from __future__ import annotations

from tests.bench.peer.figures import pct
from tests.bench.peer.report import Row
from tests.bench.peer.sse import Resumed, SSEEvent, SSEParser, distinct_ids, lost_and_duplicated

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
