"""Trace files -> SpanRecords: what ``span-relay replay FILE`` and ``POST /imports`` read.

Three shapes, recognised by their top-level keys (one JSON document, or one per line):

- OTLP JSON, ``{"resourceSpans": [...]}``: the Collector's file exporter, an OTLP/HTTP
  JSON body;
- Jaeger v2 API, ``{"result": {"resourceSpans": [...]}}``: ``GET /api/v3/traces/{id}``;
- Jaeger UI JSON (legacy), ``{"data": [{"traceID", "spans": [...], "processes": {}}]}``:
  Jaeger's "Download JSON", ``GET /api/traces/{id}``.

OTLP JSON ids are hex (the OTLP/JSON rule, not protobuf's base64); enums may be numbers
or names; 64-bit integers may be strings. Jaeger UI JSON keeps microseconds
(``startTime``/``duration``), ``tags`` typed ``string``/``bool``/``int64``/``float64``/
``binary``, the parent as the first ``CHILD_OF`` reference, other references as links,
``logs`` as span events, the resource as the span's ``process``. The tags Jaeger adds
when it converts OpenTelemetry spans (``span.kind``, ``otel.status_code``,
``otel.status_description``, ``error``, ``otel.scope.*``) become kind and status again.

Every problem is a :class:`TraceFileError` that names what is wrong; a file is parsed
whole before anything is stored, and stored in one transaction.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from relay.spans import SpanRecord

OTLP_JSON = "otlp_json"
JAEGER_V2 = "jaeger_v2"
JAEGER_UI = "jaeger_ui"

_HEX = re.compile(r"^[0-9a-fA-F]*$")
_KINDS = {0: "internal", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUS = {0: "unset", 1: "ok", 2: "error"}
#: tags Jaeger adds when it stores an OpenTelemetry span; kind and status come back out
_JAEGER_SPECIAL = {"span.kind", "otel.status_code", "otel.status_description", "error",
                   "otel.scope.name", "otel.scope.version", "otel.library.name",
                   "otel.library.version", "internal.span.format", "w3c.tracestate"}


class TraceFileError(ValueError):
    """A trace file that cannot be read; ``code`` and the message say why."""

    def __init__(self, code: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


# -- the file ---------------------------------------------------------------------------

def parse_trace_file(data: bytes | str) -> tuple[str, list[SpanRecord]]:
    """``(format, spans)`` of a whole trace file; :class:`TraceFileError` otherwise."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise TraceFileError("not_json", f"The file is not UTF-8 text (byte "
                                 f"{exc.start}): send OTLP JSON or Jaeger JSON.", 400) from None
    else:
        text = data
    if not text.strip():
        raise TraceFileError("empty_file", "The file is empty: send OTLP JSON or Jaeger JSON.",
                             400)
    formats: set[str] = set()
    records: list[SpanRecord] = []
    for n, doc in _documents(text):
        fmt, spans = _parse_document(doc, n)
        formats.add(fmt)
        records.extend(spans)
    if len(formats) > 1:
        raise TraceFileError("mixed_formats", "The file mixes formats ("
                             f"{', '.join(sorted(formats))}); send one.")
    if not records:
        raise TraceFileError("no_spans", "The file holds no spans.")
    _check_unique(records)
    return formats.pop(), records


def _documents(text: str) -> Iterator[tuple[int, Any]]:
    """One JSON document, or one per line (the file exporter and Jaeger's stream)."""
    try:
        yield 1, json.loads(text)
        return
    except json.JSONDecodeError as whole:
        first_error = whole
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) < 2:
        raise _json_error(first_error, text, None)
    docs = []
    for i, line in lines:
        try:
            docs.append((i, json.loads(line)))
        except json.JSONDecodeError as exc:
            if i == lines[0][0]:  # not JSON lines either: report the whole-file error
                raise _json_error(first_error, text, None) from None
            raise _json_error(exc, line, i) from None
    yield from docs


def _json_error(exc: json.JSONDecodeError, text: str, line: int | None) -> TraceFileError:
    where = f"line {line}" if line is not None else f"line {exc.lineno} column {exc.colno}"
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        return TraceFileError("truncated_file", f"The file is truncated: its JSON ends "
                              f"early ({where}: {exc.msg}).", 400)
    return TraceFileError("not_json", f"The file is not JSON ({where}: {exc.msg}); send "
                          "OTLP JSON or Jaeger JSON.", 400)


def _parse_document(doc: Any, n: int) -> tuple[str, list[SpanRecord]]:
    if isinstance(doc, dict):
        if "resourceSpans" in doc:
            return OTLP_JSON, _otlp(doc, f"document {n}")
        if "result" in doc:
            result = doc["result"]
            if not isinstance(result, dict) or "resourceSpans" not in result:
                raise TraceFileError("unknown_format", f"document {n}: 'result' holds no "
                                     "'resourceSpans' (not a Jaeger v2 API answer).")
            return JAEGER_V2, _otlp(result, f"document {n}")
        if "error" in doc and "data" not in doc:
            raise TraceFileError("unknown_format", f"document {n} is an API error, not "
                                 f"traces: {str(doc['error'])[:200]}")
        data = doc.get("data")
        if isinstance(data, list) and all(isinstance(t, dict) and "spans" in t for t in data):
            return JAEGER_UI, _jaeger_ui(data, f"document {n}")
    raise TraceFileError("unknown_format", "The file is neither OTLP JSON "
                         "({\"resourceSpans\": [...]}), a Jaeger v2 API answer "
                         "({\"result\": {\"resourceSpans\": [...]}}) nor Jaeger UI JSON "
                         "({\"data\": [{\"spans\": [...]}]}).")


def _check_unique(records: list[SpanRecord]) -> None:
    seen: set[tuple[str, str]] = set()
    for r in records:
        key = (r.trace_id, r.span_id)
        if key in seen:
            raise TraceFileError("duplicate_span", f"span {r.span_id} of trace {r.trace_id} "
                                 "appears twice.")
        seen.add(key)


# -- OTLP JSON --------------------------------------------------------------------------

def _otlp(doc: Mapping[str, Any], where: str) -> list[SpanRecord]:
    records = []
    for ri, rs in enumerate(_list(doc, "resourceSpans", where)):
        rwhere = f"{where} resourceSpans[{ri}]"
        resource = _otlp_attributes((rs.get("resource") or {}).get("attributes"), rwhere)
        scopes = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", []))
        if not isinstance(scopes, list):
            raise TraceFileError("invalid_span", f"{rwhere}: scopeSpans is not a list.")
        for si, ss in enumerate(scopes):
            for pi, span in enumerate(_list(ss, "spans", f"{rwhere} scopeSpans[{si}]")):
                records.append(_otlp_span(span, resource,
                                          f"{rwhere} scopeSpans[{si}] spans[{pi}]"))
    return records


def _otlp_span(span: Any, resource: dict[str, Any], where: str) -> SpanRecord:
    if not isinstance(span, dict):
        raise TraceFileError("invalid_span", f"{where} is not an object.")
    trace_id = _hex_id(span.get("traceId"), 32, "traceId", where)
    span_id = _hex_id(span.get("spanId"), 16, "spanId", where)
    parent = span.get("parentSpanId") or None
    start = _int(span.get("startTimeUnixNano"), "startTimeUnixNano", where)
    end_raw = span.get("endTimeUnixNano")
    end = _int(end_raw, "endTimeUnixNano", where) if end_raw not in (None, "", "0", 0) else None
    status = span.get("status") or {}
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=_hex_id(parent, 16, "parentSpanId", where) if parent else None,
        name=str(span.get("name", "")),
        start_ns=start,
        end_ns=end,
        attributes=_otlp_attributes(span.get("attributes"), where),
        status=_enum(status.get("code", 0), _STATUS, "STATUS_CODE_", "status.code", where),
        status_message=str(status.get("message", "")),
        kind=_enum(span.get("kind", 0), _KINDS, "SPAN_KIND_", "kind", where),
        events=[{"name": str(e.get("name", "")),
                 "time_ns": _int(e.get("timeUnixNano", 0), "timeUnixNano", where),
                 "attributes": _otlp_attributes(e.get("attributes"), where)}
                for e in _list(span, "events", where, required=False)],
        links=[{"trace_id": _hex_id(link.get("traceId"), 32, "links.traceId", where),
                "span_id": _hex_id(link.get("spanId"), 16, "links.spanId", where),
                "attributes": _otlp_attributes(link.get("attributes"), where)}
               for link in _list(span, "links", where, required=False)],
        resource=resource,
    )


def _otlp_attributes(items: Any, where: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise TraceFileError("invalid_span", f"{where}: attributes is not a list.")
    out = {}
    for kv in items:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise TraceFileError("invalid_span", f"{where}: an attribute has no key.")
        out[kv["key"]] = _any_value(kv.get("value") or {}, f"{where} attribute {kv['key']!r}")
    return out


def _any_value(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise TraceFileError("invalid_span", f"{where}: the value is not an AnyValue object.")
    if not value:
        return None
    ((kind, v),) = list(value.items())[:1]
    if kind == "stringValue":
        return str(v)
    if kind == "boolValue":
        return bool(v)
    if kind == "intValue":
        return _int(v, "intValue", where)
    if kind == "doubleValue":
        try:
            return float(v)
        except (TypeError, ValueError):
            raise TraceFileError("invalid_span", f"{where}: doubleValue {v!r}.") from None
    if kind == "arrayValue":
        return tuple(_any_value(x, where) for x in (v or {}).get("values", []))
    if kind == "kvlistValue":
        return {kv["key"]: _any_value(kv.get("value") or {}, where)
                for kv in (v or {}).get("values", [])}
    if kind == "bytesValue":
        try:
            return base64.b64decode(v, validate=True)
        except (ValueError, TypeError):
            raise TraceFileError("invalid_span", f"{where}: bytesValue is not base64.") \
                from None
    raise TraceFileError("invalid_span", f"{where}: unknown AnyValue kind {kind!r}.")


# -- Jaeger UI JSON ---------------------------------------------------------------------

def _jaeger_ui(traces: list[dict[str, Any]], where: str) -> list[SpanRecord]:
    records = []
    for ti, trace in enumerate(traces):
        twhere = f"{where} data[{ti}]"
        processes = trace.get("processes") or {}
        if not isinstance(processes, dict):
            raise TraceFileError("invalid_span", f"{twhere}: processes is not an object.")
        resources = {pid: _jaeger_process(p, f"{twhere} processes[{pid!r}]")
                     for pid, p in processes.items()}
        for si, span in enumerate(_list(trace, "spans", twhere)):
            records.append(_jaeger_span(span, resources, f"{twhere} spans[{si}]"))
    return records


def _jaeger_process(process: Any, where: str) -> dict[str, Any]:
    if not isinstance(process, dict):
        raise TraceFileError("invalid_span", f"{where} is not an object.")
    resource: dict[str, Any] = {}
    if process.get("serviceName"):
        resource["service.name"] = str(process["serviceName"])
    resource.update(_jaeger_tags(process.get("tags"), where))
    return resource


def _jaeger_span(span: Any, resources: dict[str, dict[str, Any]], where: str) -> SpanRecord:
    if not isinstance(span, dict):
        raise TraceFileError("invalid_span", f"{where} is not an object.")
    trace_id = _hex_id(span.get("traceID"), 32, "traceID", where, pad=True)
    span_id = _hex_id(span.get("spanID"), 16, "spanID", where, pad=True)
    start_us = _int(span.get("startTime"), "startTime", where)
    duration_us = _int(span.get("duration", 0), "duration", where)
    parent: str | None = None
    links = []
    for ref in _list(span, "references", where, required=False):
        ref_trace = _hex_id(ref.get("traceID"), 32, "references.traceID", where, pad=True)
        ref_span = _hex_id(ref.get("spanID"), 16, "references.spanID", where, pad=True)
        if parent is None and ref.get("refType", "CHILD_OF") == "CHILD_OF" \
                and ref_trace == trace_id:
            parent = ref_span
        else:
            links.append({"trace_id": ref_trace, "span_id": ref_span, "attributes": {}})
    tags = _jaeger_tags(span.get("tags"), where)
    kind = str(tags.get("span.kind", "internal")).lower()
    code = str(tags.get("otel.status_code", "")).upper()
    status = {"OK": "ok", "ERROR": "error"}.get(code, "error" if tags.get("error") is True
                                                 else "unset")
    message = str(tags.get("otel.status_description", ""))
    events = []
    for log in _list(span, "logs", where, required=False):
        fields = _jaeger_tags(log.get("fields"), where)
        name = str(fields.pop("event", ""))
        events.append({"name": name,
                       "time_ns": _int(log.get("timestamp", 0), "logs.timestamp", where) * 1000,
                       "attributes": fields})
    process_id = span.get("processID")
    resource = dict(resources.get(process_id, {})) if process_id is not None else {}
    if process_id is None and isinstance(span.get("process"), dict):
        resource = _jaeger_process(span["process"], where)
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=str(span.get("operationName", "")),
        start_ns=start_us * 1000,
        end_ns=(start_us + duration_us) * 1000,
        attributes={k: v for k, v in tags.items() if k not in _JAEGER_SPECIAL},
        status=status,
        status_message=message,
        kind=kind if kind in ("internal", "server", "client", "producer", "consumer")
        else "internal",
        events=events,
        links=links,
        resource=resource,
    )


def _jaeger_tags(tags: Any, where: str) -> dict[str, Any]:
    if tags is None:
        return {}
    if not isinstance(tags, list):
        raise TraceFileError("invalid_span", f"{where}: tags is not a list.")
    out = {}
    for tag in tags:
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise TraceFileError("invalid_span", f"{where}: a tag has no key.")
        key, kind, value = tag["key"], str(tag.get("type", "string")).lower(), tag.get("value")
        if kind == "bool":
            out[key] = value if isinstance(value, bool) else str(value).lower() == "true"
        elif kind == "int64":
            out[key] = _int(value, f"tag {key}", where)
        elif kind == "float64":
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                raise TraceFileError("invalid_span", f"{where}: tag {key} is not a float64.") \
                    from None
        elif kind == "binary":
            try:
                out[key] = base64.b64decode(str(value), validate=True)
            except ValueError:
                out[key] = str(value)
        else:
            out[key] = "" if value is None else str(value)
    return out


# -- small parsers ----------------------------------------------------------------------

def _list(obj: Any, key: str, where: str, required: bool = True) -> list[Any]:
    if not isinstance(obj, dict):
        raise TraceFileError("invalid_span", f"{where} is not an object.")
    value = obj.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise TraceFileError("invalid_span", f"{where}: '{key}' is "
                             f"{'missing' if value is None else 'not a list'}.")
    return value


def _hex_id(value: Any, length: int, field: str, where: str, pad: bool = False) -> str:
    if not isinstance(value, str) or not value:
        raise TraceFileError("invalid_span", f"{where}: {field} is missing.")
    if pad and len(value) < length:
        value = value.rjust(length, "0")
    if len(value) != length or not _HEX.match(value):
        hint = " (it looks like base64: OTLP JSON ids are hex)" \
            if re.fullmatch(r"[A-Za-z0-9+/]+=*", value) and not _HEX.match(value) else ""
        raise TraceFileError("invalid_span", f"{where}: {field} {value!r} is not "
                             f"{length} hex digits{hint}.")
    if int(value, 16) == 0:
        raise TraceFileError("invalid_span", f"{where}: {field} is all zeros.")
    return value.lower()


def _int(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool):
        raise TraceFileError("invalid_span", f"{where}: {field} is not an integer.")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value)
    raise TraceFileError("invalid_span", f"{where}: {field} {value!r} is not an integer.")


def _enum(value: Any, names: Mapping[int, str], prefix: str, field: str, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value in names:
        return names[value]
    if isinstance(value, str):
        name = value.upper().removeprefix(prefix).lower()
        if name in names.values():
            return name
        if name == "unspecified":
            return names[0]
    raise TraceFileError("invalid_span", f"{where}: {field} {value!r} is not a known value.")
