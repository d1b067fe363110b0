"""OTLP trace payloads -> SpanRecords: protobuf (gRPC and HTTP) and OTLP/JSON (HTTP, and
the OTLP shapes of trace files: :mod:`relay.ingest.tracefile` reads them with
:func:`json_spans` and :func:`json_span`).

A payload whose structure cannot be read at all is a :class:`PayloadError` (HTTP 400,
gRPC INVALID_ARGUMENT). A readable payload may still hold spans that cannot be used (an id
of the wrong length or all zeros, a missing start time): those are *rejected* one by one
and counted, and the rest are accepted; the answer's ``partial_success`` says how many
were rejected and why (the first reason).

Nesting is bounded: an OTLP/JSON body nested deeper than ``relay.json_depth.MAX_DEPTH``
levels is a :class:`PayloadError`, and an attribute value (an AnyValue: arrays and
key-value lists inside each other, in protobuf or JSON) nested deeper than
:data:`MAX_VALUE_DEPTH` levels rejects its span.

OTLP/JSON differs from the protobuf JSON mapping in one place that matters: trace and
span ids are hex strings, not base64. Enums may be numbers or names; 64-bit integers may
be strings; field names may be lowerCamelCase or snake_case.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from relay.json_depth import TooDeep, loads
from relay.spans import SpanRecord

#: the deepest an attribute value (an AnyValue in arrays and key-value lists) may nest
MAX_VALUE_DEPTH = 32

_KINDS = {0: "internal", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUS = {0: "unset", 1: "ok", 2: "error"}
_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+=*")
_INTEGER = re.compile(r"-?[0-9]+")


class PayloadError(ValueError):
    """The payload cannot be read at all; ``where`` says where in it (``resourceSpans[0]``),
    when that is known."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


class SpanRejected(ValueError):
    """One span cannot be used (the others can); the message says why."""


@dataclass(slots=True)
class Decoded:
    records: list[SpanRecord] = field(default_factory=list)
    rejected: int = 0
    reason: str = ""

    def reject(self, reason: str) -> None:
        self.rejected += 1
        if not self.reason:
            self.reason = reason


# -- protobuf ------------------------------------------------------------------------------


def decode_protobuf(body: bytes) -> Decoded:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except Exception as exc:  # google.protobuf.message.DecodeError and friends
        raise PayloadError(
            f"the body is not an OTLP ExportTraceServiceRequest (protobuf): {exc}"
        ) from None
    return from_request(request)


def from_request(request: ExportTraceServiceRequest) -> Decoded:
    out = Decoded()
    for rs in request.resource_spans:
        try:
            resource = _pb_attributes(rs.resource.attributes)
        except SpanRejected as exc:
            raise PayloadError(f"the resource's {exc}") from None
        for ss in rs.scope_spans:
            for span in ss.spans:
                problem = _pb_problem(span)
                if problem:
                    out.reject(problem)
                    continue
                try:
                    out.records.append(_pb_span(span, resource))
                except SpanRejected as exc:
                    out.reject(str(exc))
    return out


def _pb_problem(span: Any) -> str | None:
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return "a span's trace_id is not 16 non-zero bytes"
    if len(span.span_id) != 8 or not any(span.span_id):
        return "a span's span_id is not 8 non-zero bytes"
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return "a span's parent_span_id is not 8 bytes"
    if span.start_time_unix_nano == 0:
        return "a span has no start time"
    return None


def _pb_span(span: Any, resource: dict[str, Any]) -> SpanRecord:
    parent = span.parent_span_id.hex() if span.parent_span_id and any(span.parent_span_id) else None
    start = span.start_time_unix_nano
    end = span.end_time_unix_nano or start
    events = span.events
    links = span.links
    return SpanRecord(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=parent,
        name=span.name,
        start_ns=start,
        end_ns=max(end, start),
        attributes=_pb_attributes(span.attributes),
        status=_STATUS.get(span.status.code, "unset"),
        status_message=span.status.message,
        kind=_KINDS.get(span.kind, "internal"),
        events=[
            {
                "name": e.name,
                "time_ns": e.time_unix_nano,
                "attributes": _pb_attributes(e.attributes),
            }
            for e in events
        ]
        if events
        else [],
        links=[
            {
                "trace_id": link.trace_id.hex(),
                "span_id": link.span_id.hex(),
                "attributes": _pb_attributes(link.attributes),
            }
            for link in links
        ]
        if links
        else [],
        resource=resource,
    )


def _pb_attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in items}


def _pb_value(value: AnyValue, depth: int = 1) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":  # most attributes: one lookup fewer
        return value.string_value
    if kind is None:
        return None
    if kind == "array_value":
        _check_depth(depth)
        return tuple(_pb_value(v, depth + 1) for v in value.array_value.values)
    if kind == "kvlist_value":
        _check_depth(depth)
        return {kv.key: _pb_value(kv.value, depth + 1) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def _check_depth(depth: int) -> None:
    """:class:`SpanRejected` for an attribute value nested past MAX_VALUE_DEPTH levels."""
    if depth > MAX_VALUE_DEPTH:
        raise SpanRejected(
            f"an attribute value nests deeper than {MAX_VALUE_DEPTH} levels "
            "(arrays and key-value lists inside each other)"
        )


# -- OTLP/JSON: the receiver's bodies (decode_json) and trace files (json_spans, json_span)

#: where a span is in its document: (resourceSpans, scopeSpans, spans) indexes
Where = tuple[int, int, int]


def decode_json(body: bytes) -> Decoded:
    try:
        doc = loads(body, what="the body")
    except TooDeep as exc:
        raise PayloadError(str(exc)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise PayloadError(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise PayloadError('the body is not an OTLP/JSON object ({"resourceSpans": [...]})')
    out = Decoded()
    for _, span, resource in json_spans(doc):
        try:
            out.records.append(json_span(span, resource))
        except SpanRejected as exc:
            out.reject(str(exc))
    return out


def json_spans(doc: Mapping[str, Any]) -> Iterator[tuple[Where, Any, dict[str, Any]]]:
    """Every span object of an OTLP/JSON document (``{"resourceSpans": [...]}``), with where
    it is and its resource's attributes. :class:`PayloadError` (with its ``where``) for a
    structure that cannot be read; the spans themselves are read by :func:`json_span`."""
    for ri, rs in enumerate(
        _list(_get(doc, "resourceSpans", "resource_spans"), "resourceSpans", "")
    ):
        if not isinstance(rs, dict):
            raise PayloadError(
                "resourceSpans holds something that is not an object", f"resourceSpans[{ri}]"
            )
        resource_obj = rs.get("resource") or {}
        try:
            resource = _json_attributes(
                resource_obj.get("attributes") if isinstance(resource_obj, dict) else None
            )
        except SpanRejected as exc:
            raise PayloadError(f"the resource's {exc}", f"resourceSpans[{ri}]") from None
        scopes = _get(rs, "scopeSpans", "scope_spans", rs.get("instrumentationLibrarySpans"))
        for si, ss in enumerate(_list(scopes, "scopeSpans", f"resourceSpans[{ri}]")):
            if not isinstance(ss, dict):
                raise PayloadError(
                    "scopeSpans holds something that is not an object",
                    f"resourceSpans[{ri}] scopeSpans[{si}]",
                )
            for pi, span in enumerate(
                _list(ss.get("spans"), "spans", f"resourceSpans[{ri}] scopeSpans[{si}]")
            ):
                yield (ri, si, pi), span, resource


def _list(value: Any, name: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PayloadError(f"'{name}' is not a list", where)
    return value


def _get(obj: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    return obj.get(camel, obj.get(snake, default))


def json_span(span: Any, resource: dict[str, Any]) -> SpanRecord:
    """One OTLP/JSON span; :class:`SpanRejected` when it cannot be used.

    A span without an end time (or one before its start) ends at its start, as in the
    protobuf path: OTLP sends a span once it has ended, and ``end_ns=None`` would mean a
    span that is still running (no end in a replay, no ``node_completed``)."""
    if not isinstance(span, dict):
        raise SpanRejected("a span is not an object")
    trace_id = hex_id(_get(span, "traceId", "trace_id"), 32, "traceId")
    span_id = hex_id(_get(span, "spanId", "span_id"), 16, "spanId")
    parent_raw = _get(span, "parentSpanId", "parent_span_id")
    parent = hex_id(parent_raw, 16, "parentSpanId") if parent_raw else None
    start = _nanos(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
    if not start:
        raise SpanRejected("a span has no start time")
    end = _nanos(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano")
    status = span.get("status") or {}
    if not isinstance(status, dict):
        raise SpanRejected("a span's status is not an object")
    links = []
    for link in _items(span, "links"):
        if not isinstance(link, dict):
            raise SpanRejected("a span link is not an object")
        links.append(
            {
                "trace_id": hex_id(_get(link, "traceId", "trace_id"), 32, "links.traceId"),
                "span_id": hex_id(_get(link, "spanId", "span_id"), 16, "links.spanId"),
                "attributes": _json_attributes(link.get("attributes")),
            }
        )
    events = []
    for event in _items(span, "events"):
        if not isinstance(event, dict):
            raise SpanRejected("a span event is not an object")
        events.append(
            {
                "name": str(event.get("name", "")),
                "time_ns": _nanos(_get(event, "timeUnixNano", "time_unix_nano"), "timeUnixNano"),
                "attributes": _json_attributes(event.get("attributes")),
            }
        )
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=str(span.get("name", "")),
        start_ns=start,
        end_ns=max(end or start, start),
        attributes=_json_attributes(span.get("attributes")),
        status=_enum(status.get("code", 0), _STATUS, "STATUS_CODE_"),
        status_message=str(status.get("message", "")),
        kind=_enum(span.get("kind", 0), _KINDS, "SPAN_KIND_"),
        events=events,
        links=links,
        resource=resource,
    )


def _items(span: Mapping[str, Any], key: str) -> list[Any]:
    value = span.get(key)
    if not value:
        return []
    if not isinstance(value, list):
        raise SpanRejected(f"a span's {key} is not a list")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def hex_id(value: Any, length: int, name: str) -> str:
    """An id of ``length`` hex digits, lowercase; :class:`SpanRejected` otherwise."""
    if not isinstance(value, str) or not value:
        raise SpanRejected(f"a span's {name} is missing")
    if len(value) != length or not _HEX.fullmatch(value):
        hint = (
            " (it looks like base64: OTLP/JSON ids are hex)"
            if _BASE64.fullmatch(value) and not _HEX.fullmatch(value)
            else ""
        )
        raise SpanRejected(f"a span's {name} {_show(value)} is not {length} hex digits{hint}")
    if not value.strip("0"):
        raise SpanRejected(f"a span's {name} is all zeros")
    return value.lower()


def integer(value: Any, name: str) -> int:
    """An integer: a JSON number with no fraction, or a string of digits (64-bit integers
    in OTLP/JSON); :class:`SpanRejected` otherwise."""
    if isinstance(value, bool):
        raise SpanRejected(f"a span's {name} {_show(value)} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value)
    raise SpanRejected(f"a span's {name} {_show(value)} is not an integer")


def _nanos(value: Any, name: str) -> int:
    """A time or an intValue: absent (``None`` or ``""``) is 0."""
    if value is None or value == "":
        return 0
    return integer(value, name)


def _enum(value: Any, names: Mapping[int, str], prefix: str) -> str:
    """A number or a name; one this relay does not know is the default (as in protobuf)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value, names[0])
    if isinstance(value, str):
        name = value.upper().removeprefix(prefix).lower()
        if name in names.values():
            return name
    return names[0]


def _json_attributes(items: Any) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise SpanRejected("attributes is not a list")
    out = {}
    for kv in items:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise SpanRejected("an attribute has no key")
        try:
            out[kv["key"]] = _json_value(kv.get("value") or {})
        except SpanRejected as exc:
            raise SpanRejected(f"attribute {kv['key']!r}: {exc}") from None
    return out


def _json_value(value: Any, depth: int = 1) -> Any:
    if not isinstance(value, dict):
        raise SpanRejected("an attribute value is not an AnyValue object")
    if not value:
        return None
    kind, v = next(iter(value.items()))
    if kind in ("stringValue", "string_value"):
        return str(v)
    if kind in ("boolValue", "bool_value"):
        return bool(v)
    if kind in ("intValue", "int_value"):
        return _nanos(v, "intValue")
    if kind in ("doubleValue", "double_value"):
        try:
            return float(v)
        except (TypeError, ValueError):
            raise SpanRejected(f"a doubleValue {_show(v)} is not a number") from None
    if kind in ("arrayValue", "array_value"):
        _check_depth(depth)
        return tuple(_json_value(x, depth + 1) for x in _values(v, kind))
    if kind in ("kvlistValue", "kvlist_value"):
        _check_depth(depth)
        return {
            kv["key"]: _json_value(kv.get("value") or {}, depth + 1)
            for kv in _values(v, kind)
            if isinstance(kv, dict) and "key" in kv
        }
    if kind in ("bytesValue", "bytes_value"):
        try:
            return base64.b64decode(v, validate=True)
        except (ValueError, TypeError):
            raise SpanRejected("a bytesValue is not base64") from None
    raise SpanRejected(f"an attribute value has an unknown kind {kind!r}")


def _values(v: Any, kind: str) -> list[Any]:
    v = v or {}
    values = v.get("values") if isinstance(v, dict) else ()
    if values is None:
        return []
    if not isinstance(values, list):
        raise SpanRejected(f"{kind} holds no list of values")
    return values


# -- answers -------------------------------------------------------------------------------


def response_json(rejected: int, reason: str) -> bytes:
    if not rejected:
        return b"{}"
    return json.dumps(
        {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": reason}}
    ).encode()


def response_protobuf(rejected: int, reason: str) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = reason
    return response.SerializeToString()
