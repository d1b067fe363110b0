"""relay.events.dumps: the one wire encoding, the same text the standard library writes."""

from __future__ import annotations

import json
import math

import pytest

from relay.events import Event, dumps


def stdlib(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize(
    "value",
    [
        {
            "v": 1,
            "type": "node_completed",
            "seq": 3,
            "ts": 1796116914377.123,
            "summary": {"model": "offline", "input_tokens": 120},
            "children": [],
            "status": "ok",
            "duration_ms": 0.001,
        },
        {
            "answer": "Réponse « naïve » — 東京 🙂",
            "quote": '"\\\n\t',
            "none": None,
            "flags": [True, False],
            "tuple": (1, 2.5, "x"),
        },
        {1: "int key", 2.5: "float key", None: "none key", False: "bool key"},
        {"tiny": 0.1 + 0.2, "big": 2**63 - 1, "neg": -(2**63), "float_int": 3.0},
    ],
)
def test_same_text_as_the_standard_library(value: object) -> None:
    assert dumps(value) == stdlib(value)


def test_beyond_orjson_falls_back_to_the_standard_library() -> None:
    assert dumps({"n": 2**70}) == '{"n":1180591620717411303424}'
    with pytest.raises(ValueError):
        dumps({"n": 2**70, "x": math.nan})  # the fallback keeps refusing NaN


def test_a_lone_surrogate_is_escaped_so_the_frame_stays_utf8() -> None:
    text = dumps({"delta": "broken \ud83d", "ok": "é"})
    text.encode()  # the stream writes UTF-8: this must not raise
    assert json.loads(text) == {"delta": "broken \ud83d", "ok": "é"}


def test_nan_is_null_not_invalid_json() -> None:
    text = dumps({"x": math.nan, "y": math.inf})
    assert json.loads(text) == {"x": None, "y": None}


def test_event_json_is_encoded_once() -> None:
    event = Event("node_started", "th", "tu", "0" * 32, 1.5, {"node": "n"}, seq=1)
    first = event.to_json()
    assert first is event.to_json()
    assert json.loads(first) == {
        "v": 1,
        "type": "node_started",
        "seq": 1,
        "thread_id": "th",
        "turn_id": "tu",
        "trace_id": "0" * 32,
        "ts": 1.5,
        "node": "n",
    }


def test_event_frame_is_built_once_per_framing_and_shared() -> None:
    e = Event("node_started", "th", "t", "f" * 32, 1.0, {"node": "n"}, seq=3)
    built: list[str] = []

    def sse(event: Event) -> bytes:
        built.append("sse")
        return f"id: {event.seq}\ndata: {event.to_json()}\n\n".encode()

    def ndjson(event: Event) -> bytes:
        built.append("ndjson")
        return (event.to_json() + "\n").encode()

    first = e.frame("sse", sse)
    assert e.frame("sse", sse) is first  # the same object for every reader
    assert built == ["sse"]
    assert e.frame("ndjson", ndjson) == (e.to_json() + "\n").encode()
    assert e.frame("sse", sse) == first  # another framing in between: rebuilt, equal
    assert built == ["sse", "ndjson", "sse"]
    assert e == Event("node_started", "th", "t", "f" * 32, 1.0, {"node": "n"}, seq=3)
    assert "_frame" not in repr(e)
