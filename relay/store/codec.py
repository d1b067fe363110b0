"""SpanRecord <-> row: a type-preserving JSON encoding of attribute values.

Plain JSON loses what OpenTelemetry keeps: a tuple comes back a list, NaN is not JSON,
an integer past 64 bits becomes a float in most readers. An attribute value that plain
JSON (as ``orjson`` writes and reads it) keeps exactly is stored as itself: a str, a
bool, None, an int within 64 bits, a finite float (``1.0`` is written ``1.0`` and read
back a float). Every other value is tagged, like OTLP's ``AnyValue``, with one letter:

| tag | value | JSON |
|---|---|---|
| ``s`` | str | string |
| ``b`` | bool | true/false |
| ``i`` | int | number, or its decimal text past 64 bits (``{"i":"123..."}``) |
| ``d`` | float | number, or ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` |
| ``a`` | sequence (decoded as a tuple, as the SDK keeps it) | list of tagged values |
| ``m`` | mapping (OTLP kvlist, from a receiver or an import) | object of tagged values |
| ``x`` | bytes | hex string |
| ``n`` | None | null |

so ``{"k": 1.0, "t": ("a",)}`` is stored as ``{"k":1.0,"t":{"a":[{"s":"a"}]}}``. A plain
value is never a JSON object, so the reader tells the two apart by type: an object is a
tagged value, anything else is the value. Rows written before schema version 3 tag
every value (``{"k":{"d":1.0}}``) and read back the same; rows written since decode
without a Python call per plain value (:func:`decode_attributes`: one pass in C finds
whether a row has any tagged value at all; most have none). Elements of sequences and
mappings stay tagged. A JSON-string attribute (``relay.graph.topology``,
``relay.turn.response``) is a plain string: stored and returned byte for byte.

The JSON text itself is written and read with ``orjson``: several times faster than the
standard library on these small objects, and the store writes and the replay reads
every span through here.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import orjson

from relay.spans import SpanRecord

# the integers orjson writes as a number
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


def encode_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"b": value}
    if isinstance(value, int):
        # past 64 bits as decimal text: JSON readers (orjson among them) would make a
        # float of the number
        return {"i": value} if _INT_MIN <= value <= _INT_MAX else {"i": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"d": value}
        return {"d": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, str):
        return {"s": value}
    if value is None:
        return {"n": None}
    if isinstance(value, bytes | bytearray):
        return {"x": bytes(value).hex()}
    if isinstance(value, Mapping):
        return {"m": {str(k): encode_value(v) for k, v in value.items()}}
    if isinstance(value, Sequence):
        return {"a": [encode_value(v) for v in value]}
    return {"s": str(value)}


def decode_value(tagged: Mapping[str, Any]) -> Any:
    ((tag, value),) = tagged.items()
    if tag in ("s", "b", "n"):
        return value
    if tag == "i":
        return value if isinstance(value, int) else int(value)
    if tag == "d":
        return float(value)  # float("NaN") / float("Infinity") too
    if tag == "a":
        return tuple(decode_value(v) for v in value)
    if tag == "m":
        return {k: decode_value(v) for k, v in value.items()}
    if tag == "x":
        return bytes.fromhex(value)
    raise ValueError(f"unknown attribute value tag {tag!r}")


def stored_value(value: Any) -> Any:
    """An attribute value as stored: itself where plain JSON keeps it exactly (exact
    types only: a subclass, an IntEnum say, is tagged and reads back as its base type,
    as before), else tagged (:func:`encode_value`)."""
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is int:
        return value if _INT_MIN <= value <= _INT_MAX else {"i": str(value)}
    if t is float and math.isfinite(value):
        return value
    return encode_value(value)


def encode_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): stored_value(v) for k, v in attributes.items()}


def decode_attributes(encoded: Mapping[str, Any]) -> dict[str, Any]:
    """Stored attributes (a JSON object as read) -> their values. ``dict in map(type,
    ...)`` runs in C: a row of plain values (the usual one) is returned as read."""
    if dict in map(type, encoded.values()):
        return {k: decode_value(v) if type(v) is dict else v for k, v in encoded.items()}
    return encoded if type(encoded) is dict else dict(encoded)


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate in a str from user code
        return json.dumps(value, separators=(",", ":"))  # \ud800 escapes store as text


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except ValueError:  # orjson.JSONDecodeError: such an escaped lone surrogate
        return json.loads(text)


def dump_attributes(attributes: Mapping[str, Any]) -> str:
    if not attributes:
        return "{}"
    return _dumps(encode_attributes(attributes))


def load_attributes(text: str) -> dict[str, Any]:
    if text == "{}":  # most spans have no resource attributes of their own, many no events
        return {}
    if '":{' not in text:
        # no value is a JSON object (the store writes compact JSON, so a tagged value is
        # a key's closing quote, a colon and a brace; in a string they would read \":{):
        # the values are the object's own
        return _loads(text)
    return decode_attributes(_loads(text))


@functools.lru_cache(maxsize=64)
def _resource(text: str) -> dict[str, Any]:
    return load_attributes(text)


def load_resource(text: str) -> dict[str, Any]:
    """A resource: the same few texts over and over (one per process), decoded once."""
    return dict(_resource(text))


def dump_events(events: Sequence[Mapping[str, Any]]) -> str:
    if not events:
        return "[]"
    return _dumps(
        [
            {
                "name": e.get("name", ""),
                "time_ns": int(e.get("time_ns") or 0),
                "attributes": encode_attributes(e.get("attributes") or {}),
            }
            for e in events
        ]
    )


def load_events(text: str) -> Sequence[dict[str, Any]]:
    if text == "[]":
        return ()  # as a SpanRecord's default: no list per span
    return [
        {
            "name": e["name"],
            "time_ns": e["time_ns"],
            "attributes": decode_attributes(e["attributes"]),
        }
        for e in _loads(text)
    ]


def dump_links(links: Sequence[Mapping[str, Any]]) -> str:
    if not links:
        return "[]"
    return _dumps(
        [
            {
                "trace_id": link["trace_id"],
                "span_id": link["span_id"],
                "attributes": encode_attributes(link.get("attributes") or {}),
            }
            for link in links
        ]
    )


def load_links(text: str) -> Sequence[dict[str, Any]]:
    if text == "[]":
        return ()
    return [
        {
            "trace_id": link["trace_id"],
            "span_id": link["span_id"],
            "attributes": decode_attributes(link["attributes"]),
        }
        for link in _loads(text)
    ]


#: the ``spans`` table's columns, in order (both backends)
COLUMNS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "status",
    "status_message",
    "attributes",
    "events",
    "links",
    "resource",
)


def to_row(record: SpanRecord) -> tuple[Any, ...]:
    return (
        record.trace_id,
        record.span_id,
        record.parent_span_id,
        record.name,
        record.kind,
        int(record.start_ns),
        None if record.end_ns is None else int(record.end_ns),
        record.status,
        record.status_message,
        dump_attributes(record.attributes),
        dump_events(record.events),
        dump_links(record.links),
        dump_attributes(record.resource),
    )


#: what a replay reads of a span (:func:`replay_record`): the mapping reads no kind, links
#: or resource (as the live processor's :func:`relay.ingest.live.live_record` does not); the
#: trace id is the one the query asks for (one string for all its rows). The status, its
#: message and the span events come as one column (each column read costs as much as a
#: small decode): the status alone for the usual span (:data:`PLAIN_STATUSES`, no
#: message, no span events), else all three packed (:func:`unpack_status`)
REPLAY_COLUMNS = (
    "span_id",
    "parent_span_id",
    "name",
    "start_ns",
    "end_ns",
    "CASE WHEN status_message = '' AND events = '[]' AND status IN ('unset', 'ok', 'error') "
    "THEN status ELSE CAST(length(status) AS TEXT) || ':' || CAST(length(events) AS TEXT) "
    "|| ':' || status || events || status_message END",
    "attributes",
)
#: the index of ``start_ns`` in a row of :data:`REPLAY_COLUMNS`
REPLAY_START = 3
#: the status column of a replayed row when it holds the status alone
PLAIN_STATUSES = frozenset({"unset", "ok", "error"})


def unpack_status(packed: str) -> tuple[str, str, Sequence[dict[str, Any]]]:
    """The status, its message and the span events of a packed status column:
    ``{len(status)}:{len(events)}:{status}{events}{message}`` (lengths in characters, as
    SQLite's and PostgreSQL's ``length`` count them)."""
    status_len, events_len, rest = packed.split(":", 2)
    a = int(status_len)
    b = a + int(events_len)
    return rest[:a], rest[b:], load_events(rest[a:b])


def replay_record(trace_id: str, row: Sequence[Any]) -> SpanRecord:
    """A row of :data:`REPLAY_COLUMNS` of trace ``trace_id``, as the mapping reads it:
    kind, links and resource left at their defaults."""
    span_id, parent, name, start_ns, end_ns, status, attributes = row
    message = ""
    events: Sequence[dict[str, Any]] = ()
    if status not in PLAIN_STATUSES:
        status, message, events = unpack_status(status)
    return SpanRecord(
        trace_id,
        span_id,
        parent,
        name,
        start_ns,
        end_ns,
        load_attributes(attributes),
        status,
        message,
        "internal",
        events,
    )


#: the resource of a replayed record (the mapping reads none): one empty mapping for all
_NO_RESOURCE: Mapping[str, Any] = MappingProxyType({})


def replay_records(trace_id: str, rows: Iterable[Sequence[Any]]) -> list[SpanRecord]:
    """:func:`replay_record` of each row, in one loop: attributes with no tagged value
    (:func:`load_attributes`) read by ``orjson`` with no call in between, the usual
    status column (:data:`PLAIN_STATUSES`) taken as it is."""
    loads = orjson.loads
    record = SpanRecord
    plain = PLAIN_STATUSES
    try:
        return [
            record(
                trace_id,
                span_id,
                parent,
                name,
                start_ns,
                end_ns,
                loads(attributes) if '":{' not in attributes else load_attributes(attributes),
                status,
                "",
                "internal",
                (),
                (),
                _NO_RESOURCE,
            )
            if status in plain
            else replay_record(
                trace_id, (span_id, parent, name, start_ns, end_ns, status, attributes)
            )
            for (span_id, parent, name, start_ns, end_ns, status, attributes) in rows
        ]
    except ValueError:  # (an escaped lone surrogate, which only the standard library reads)
        return [replay_record(trace_id, row) for row in rows]


def from_row(row: Sequence[Any]) -> SpanRecord:
    (
        trace_id,
        span_id,
        parent,
        name,
        kind,
        start_ns,
        end_ns,
        status,
        status_message,
        attributes,
        events,
        links,
        resource,
    ) = row
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_ns=int(start_ns),
        end_ns=None if end_ns is None else int(end_ns),
        attributes=load_attributes(attributes),
        status=status,
        status_message=status_message,
        kind=kind,
        events=load_events(events),
        links=load_links(links),
        resource=load_resource(resource),
    )
