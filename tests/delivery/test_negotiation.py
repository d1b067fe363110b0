"""relay.negotiation.negotiate: Accept -> JSON, SSE or NDJSON (406 otherwise)."""

from __future__ import annotations

import pytest

from relay.delivery.negotiation import JSON, NDJSON, SSE, NotAcceptable, negotiate


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "   ",
        "application/json",
        "*/*",
        "application/*",
        "application/json, text/event-stream",  # equal q: JSON, the unchanged contract
        "text/event-stream, application/json",
        "*/*, text/event-stream;q=0.5",
        "application/json;q=0.9, text/event-stream;q=0.8",
        "APPLICATION/JSON",
        "application/json; charset=utf-8",
        "text/html, application/xhtml+xml, application/xml;q=0.9, */*;q=0.8",  # a browser
    ],
)
def test_json(accept: str | None) -> None:
    assert negotiate(accept) == JSON


@pytest.mark.parametrize(
    "accept",
    [
        "text/event-stream",
        "Text/Event-Stream",
        "text/event-stream; charset=utf-8",
        "application/json;q=0.1, text/event-stream",
        "text/event-stream;q=0.9, application/json;q=0.5",
        "text/*",
        "text/*, image/png",
        "image/png, text/event-stream;q=0.001",
        "text/event-stream;q=1.0, */*;q=0.1",
        "text/event-stream;Q=0.8, application/json;q=0.2",
        "text/event-stream, application/x-ndjson",  # tie: SSE is offered before NDJSON
        " text/event-stream ",
    ],
)
def test_sse(accept: str) -> None:
    assert negotiate(accept) == SSE


@pytest.mark.parametrize(
    "accept",
    [
        "application/x-ndjson",
        "application/x-ndjson, text/event-stream;q=0.5",
        "application/json;q=0.2, application/x-ndjson",
        "text/event-stream;q=0.3, application/x-ndjson;q=0.4",
    ],
)
def test_ndjson(accept: str) -> None:
    assert negotiate(accept) == NDJSON


def test_specific_range_beats_wildcard_at_equal_q() -> None:
    assert negotiate("*/*, application/x-ndjson") == NDJSON
    assert negotiate("application/*, application/x-ndjson") == NDJSON
    assert negotiate("text/*, */*") == SSE


@pytest.mark.parametrize(
    "accept",
    [
        "image/png",
        "text/html",
        "application/xml, text/plain",
        "text/event-stream;q=0",
        "application/json;q=0, text/event-stream;q=0.0",
        "*/*;q=0",
        "nonsense",
        "text/event-stream;q=abc",  # malformed q: the entry is ignored
        ",,,",
    ],
)
def test_not_acceptable(accept: str) -> None:
    with pytest.raises(NotAcceptable) as info:
        negotiate(accept)
    message = str(info.value)
    assert JSON in message and SSE in message and NDJSON in message


def test_malformed_entry_does_not_spoil_the_others() -> None:
    assert negotiate("text/event-stream;q=abc, application/json") == JSON
    assert negotiate("garbage, text/event-stream") == SSE
    assert negotiate("text/event-stream;q=, application/x-ndjson;q=0.5") == NDJSON


def test_not_acceptable_is_a_value_error() -> None:
    assert issubclass(NotAcceptable, ValueError)


def test_explicit_q0_excludes_json_even_with_wildcard() -> None:
    assert negotiate("application/json;q=0, */*;q=0.5") == SSE


def test_most_specific_range_sets_the_q() -> None:
    assert negotiate("application/json;q=0.1, application/*;q=0.9") == NDJSON


def test_nan_q_is_ignored_in_any_position() -> None:
    assert negotiate("application/json, text/event-stream;q=nan") == JSON
    assert negotiate("text/event-stream;q=nan, application/json") == JSON
