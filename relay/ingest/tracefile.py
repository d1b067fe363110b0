"""Trace files -> SpanRecords: what ``span-relay replay FILE`` and ``POST /imports`` read.

Three shapes, recognised by their top-level keys (one JSON document, or one per line):

- OTLP JSON, ``{"resourceSpans": [...]}``: the Collector's file exporter, an OTLP/HTTP
  JSON body;
- Jaeger v2 API, ``{"result": {"resourceSpans": [...]}}``: ``GET /api/v3/traces/{id}``;
- Jaeger UI JSON (legacy), ``{"data": [{"traceID", "spans": [...], "processes": {}}]}``:
  Jaeger's "Download JSON", ``GET /api/traces/{id}``.

The two OTLP shapes are read by the receiver's OTLP/JSON reader
(:func:`relay.ingest.otlp.json_span`): ids are hex (the OTLP/JSON rule, not protobuf's
base64), enums may be numbers or names, 64-bit integers may be strings, and a span
without an end time ends at its start. Jaeger UI JSON keeps microseconds
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
from collections.abc import Iterator, Mapping
from typing import Any

from relay.ingest.otlp import PayloadError, SpanRejected, hex_id, integer, json_span, json_spans
from relay.json_depth import MAX_DEPTH, TooDeep, loads
from relay.spans import SpanRecord

OTLP_JSON = "otlp_json"
JAEGER_V2 = "jaeger_v2"
JAEGER_UI = "jaeger_ui"

#: tags Jaeger adds when it stores an OpenTelemetry span; kind and status come back out
_JAEGER_SPECIAL = {
    "span.kind",
    "otel.status_code",
    "otel.status_description",
    "error",
    "otel.scope.name",
    "otel.scope.version",
    "otel.library.name",
    "otel.library.version",
    "internal.span.format",
    "w3c.tracestate",
}


#: the whitespace JSON allows between values (a line of only these is blank)
_JSON_SPACE = " \t\r\n"


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
            raise TraceFileError(
                "not_json",
                f"The file is not UTF-8 text (byte {exc.start}): send OTLP JSON or Jaeger JSON.",
                400,
            ) from None
    else:
        text = data
    if not text.strip():
        raise TraceFileError("empty_file", "The file is empty: send OTLP JSON or Jaeger JSON.", 400)
    formats: set[str] = set()
    records: list[SpanRecord] = []
    for n, doc in _documents(text):
        fmt, spans = _parse_document(doc, n)
        formats.add(fmt)
        records.extend(spans)
    if len(formats) > 1:
        raise TraceFileError(
            "mixed_formats", f"The file mixes formats ({', '.join(sorted(formats))}); send one."
        )
    if not records:
        raise TraceFileError("no_spans", "The file holds no spans.")
    _check_unique(records)
    return formats.pop(), records


def _documents(text: str) -> Iterator[tuple[int, Any]]:
    """One JSON document, or one per line (the file exporter and Jaeger's stream).

    Lines end at a line feed only, as JSON lines are defined (a carriage return before
    it is JSON whitespace): ``str.splitlines()`` would also split inside strings that
    hold U+2028, U+2029 or U+0085, which JSON writers (the relay's own included) leave
    unescaped."""
    try:
        yield 1, _loads(text)
        return
    except json.JSONDecodeError as whole:
        first_error = whole
    lines = [(i, line) for i, line in enumerate(text.split("\n"), 1) if line.strip(_JSON_SPACE)]
    if len(lines) < 2:
        raise _json_error(first_error, text, None)
    docs = []
    for i, line in lines:
        try:
            docs.append((i, _loads(line, i)))
        except json.JSONDecodeError as exc:
            if i == lines[0][0]:  # not JSON lines either: report the whole-file error
                raise _json_error(first_error, text, None) from None
            raise _json_error(exc, line, i) from None
    yield from docs


def _loads(text: str, line: int | None = None) -> Any:
    """One JSON document, or :class:`TraceFileError` (``json_too_deep``) for one nested
    deeper than ``relay.json_depth.MAX_DEPTH`` levels."""
    try:
        return loads(text)
    except TooDeep:
        where = f" (line {line})" if line is not None else ""
        raise TraceFileError(
            "json_too_deep",
            f"The file's JSON{where} nests deeper than {MAX_DEPTH} levels; the relay "
            "reads no deeper.",
            400,
        ) from None


def _json_error(exc: json.JSONDecodeError, text: str, line: int | None) -> TraceFileError:
    where = f"line {line}" if line is not None else f"line {exc.lineno} column {exc.colno}"
    if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
        return TraceFileError(
            "truncated_file",
            f"The file is truncated: its JSON ends early ({where}: {exc.msg}).",
            400,
        )
    return TraceFileError(
        "not_json",
        f"The file is not JSON ({where}: {exc.msg}); send OTLP JSON or Jaeger JSON.",
        400,
    )


def _parse_document(doc: Any, n: int) -> tuple[str, list[SpanRecord]]:
    if isinstance(doc, dict):
        if "resourceSpans" in doc:
            return OTLP_JSON, _otlp(doc, f"document {n}")
        if "result" in doc:
            result = doc["result"]
            if not isinstance(result, dict) or "resourceSpans" not in result:
                raise TraceFileError(
                    "unknown_format",
                    f"document {n}: 'result' holds no "
                    "'resourceSpans' (not a Jaeger v2 API answer).",
                )
            return JAEGER_V2, _otlp(result, f"document {n}")
        if "error" in doc and "data" not in doc:
            raise TraceFileError(
                "unknown_format",
                f"document {n} is an API error, not traces: {str(doc['error'])[:200]}",
            )
        data = doc.get("data")
        if isinstance(data, list) and all(isinstance(t, dict) and "spans" in t for t in data):
            return JAEGER_UI, _jaeger_ui(data, f"document {n}")
    raise TraceFileError(
        "unknown_format",
        "The file is neither OTLP JSON "
        '({"resourceSpans": [...]}), a Jaeger v2 API answer '
        '({"result": {"resourceSpans": [...]}}) nor Jaeger UI JSON '
        '({"data": [{"spans": [...]}]}).',
    )


def _check_unique(records: list[SpanRecord]) -> None:
    seen: set[tuple[str, str]] = set()
    for r in records:
        key = (r.trace_id, r.span_id)
        if key in seen:
            raise TraceFileError(
                "duplicate_span", f"span {r.span_id} of trace {r.trace_id} appears twice."
            )
        seen.add(key)


# -- OTLP JSON: relay.ingest.otlp's reader, its errors named by their place in the file --


def _otlp(doc: Mapping[str, Any], where: str) -> list[SpanRecord]:
    records = []
    try:
        for (ri, si, pi), span, resource in json_spans(doc):
            try:
                records.append(json_span(span, resource))
            except SpanRejected as exc:
                raise TraceFileError(
                    "invalid_span",
                    f"{where} resourceSpans[{ri}] scopeSpans[{si}] spans[{pi}]: {exc}.",
                ) from None
    except PayloadError as exc:
        place = f"{where} {exc.where}" if exc.where else where
        raise TraceFileError("invalid_span", f"{place}: {exc}.") from None
    return records


# -- Jaeger UI JSON ---------------------------------------------------------------------


def _jaeger_ui(traces: list[dict[str, Any]], where: str) -> list[SpanRecord]:
    records = []
    for ti, trace in enumerate(traces):
        twhere = f"{where} data[{ti}]"
        processes = trace.get("processes") or {}
        if not isinstance(processes, dict):
            raise TraceFileError("invalid_span", f"{twhere}: processes is not an object.")
        resources = {
            pid: _jaeger_process(p, f"{twhere} processes[{pid!r}]") for pid, p in processes.items()
        }
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
        if (
            parent is None
            and ref.get("refType", "CHILD_OF") == "CHILD_OF"
            and ref_trace == trace_id
        ):
            parent = ref_span
        else:
            links.append({"trace_id": ref_trace, "span_id": ref_span, "attributes": {}})
    tags = _jaeger_tags(span.get("tags"), where)
    kind = str(tags.get("span.kind", "internal")).lower()
    code = str(tags.get("otel.status_code", "")).upper()
    status = {"OK": "ok", "ERROR": "error"}.get(
        code, "error" if tags.get("error") is True else "unset"
    )
    message = str(tags.get("otel.status_description", ""))
    events = []
    for log in _list(span, "logs", where, required=False):
        fields = _jaeger_tags(log.get("fields"), where)
        name = str(fields.pop("event", ""))
        events.append(
            {
                "name": name,
                "time_ns": _int(log.get("timestamp", 0), "logs.timestamp", where) * 1000,
                "attributes": fields,
            }
        )
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
        kind=kind
        if kind in ("internal", "server", "client", "producer", "consumer")
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
    out: dict[str, Any] = {}
    for tag in tags:
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            raise TraceFileError("invalid_span", f"{where}: a tag has no key.")
        key = tag["key"]
        kind = str(tag.get("type", "string")).lower()
        value = tag.get("value")
        if kind == "bool":
            out[key] = value if isinstance(value, bool) else str(value).lower() == "true"
        elif kind == "int64":
            out[key] = _int(value, f"tag {key}", where)
        elif kind == "float64":
            try:
                out[key] = float(value if value is not None else "")
            except (TypeError, ValueError):
                raise TraceFileError(
                    "invalid_span", f"{where}: tag {key} is not a float64."
                ) from None
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
        raise TraceFileError(
            "invalid_span", f"{where}: '{key}' is {'missing' if value is None else 'not a list'}."
        )
    return value


def _hex_id(value: Any, length: int, field: str, where: str, pad: bool = False) -> str:
    if pad and isinstance(value, str) and 0 < len(value) < length:
        value = value.rjust(length, "0")
    try:
        return hex_id(value, length, field)
    except SpanRejected as exc:
        raise TraceFileError("invalid_span", f"{where}: {exc}.") from None


def _int(value: Any, field: str, where: str) -> int:
    try:
        return integer(value, field)
    except SpanRejected as exc:
        raise TraceFileError("invalid_span", f"{where}: {exc}.") from None
