"""Small readers of span attributes that the rule table and the engine share: a JSON
attribute, the name after a span name's verb, a LangGraph task id, lenient str and int, a start
marker's attributes and the start it stands for.
Pure functions; nothing here knows an instrumentation (a start marker is ours)."""

from __future__ import annotations

import json
from typing import Any

from relay import conventions as c
from relay.json_depth import MAX_DEPTH, TooDeep, too_deep
from relay.json_depth import loads as json_loads
from relay.spans import SpanRecord

#: ``json.loads``' own scanner (C), called without the three Python frames and two regex
#: matches around it; read-only (its memo is cleared inside each call, under the GIL)
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # (set in its __init__)


def json_attr(attrs: Any, key: str, default: Any) -> tuple[Any, bool]:
    """A JSON-valued attribute; ``ok`` is False when it is present but cut or malformed.
    Read as ``json.loads`` reads it: a text that starts and ends with its value goes
    through the scanner ``json.loads`` uses; any other (whitespace around it, not a str,
    malformed, extra data) through ``json.loads`` itself. One nested deeper than
    ``relay.json_depth.MAX_DEPTH`` levels is :class:`~relay.json_depth.TooDeep`, raised:
    a span the mapping cannot read (its run ends ``unmappable_spans``,
    :mod:`relay.mapping.unmappable`)."""
    raw = attrs.get(key)
    if raw is None:
        return default, True
    if type(raw) is str:
        if too_deep(raw):
            raise TooDeep(MAX_DEPTH, f"the span attribute {key}")
        try:
            value, end = _SCAN(raw, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            if end == len(raw):
                return value, True
    try:
        return json_loads(raw), True
    except TooDeep:
        raise
    except (TypeError, ValueError):
        return default, False


def suffix(name: str) -> str:
    """``execute_tool search`` -> ``search``: the name a span's name gives after its verb."""
    return name.split(" ", 1)[1] if " " in name else name


def str_or_none(value: Any) -> str | None:
    """None for a missing or empty value, else its text."""
    return None if value is None or value == "" else str(value)


def int_or_none(value: Any) -> int | None:
    """An integer, or None for a missing, boolean or unreadable value."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def task_id_of(ns: str | None) -> str | None:
    """The task id in a checkpoint namespace: its last segment's part after ``:``."""
    if not ns:
        return None
    last = ns.split("|")[-1]
    return last.rsplit(":", 1)[-1] if ":" in last else None


def marker_attributes(record: SpanRecord) -> dict[str, Any] | None:
    """The start attributes a start marker (``relay.start_of``) carries for its span."""
    raw = record.attributes.get(c.START_ATTRIBUTES, "{}")
    try:
        value = json_loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def marked_span(marker: SpanRecord) -> SpanRecord | None:
    """The start of the span a start marker names, as that span's own start would read;
    None when the marker is cut or malformed. A marker is a child of its span (then it
    names the span's parent, if any, in ``relay.start.parent``) or a sibling (then its
    own parent is the span's)."""
    attributes = marker_attributes(marker)
    span_id = str(marker.attributes.get(c.START_OF, "")).lower()
    if attributes is None or len(span_id) != 16:
        return None
    parent = marker.attributes.get(c.START_PARENT)
    if not parent and marker.parent_span_id != span_id:
        parent = marker.parent_span_id
    return SpanRecord(
        trace_id=marker.trace_id,
        span_id=span_id,
        parent_span_id=str(parent).lower() if parent else None,
        name=marker.name.removeprefix(c.START_PREFIX),
        start_ns=marker.start_ns,
        end_ns=None,
        attributes=attributes,
    )
