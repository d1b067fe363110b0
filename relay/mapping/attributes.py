"""Small readers of span attributes that the rule table and the engine share: a JSON
attribute, the name after a span name's verb, a LangGraph task id, lenient str and int.
Pure functions; nothing here knows an instrumentation (start markers:
:mod:`relay.mapping.markers`)."""

from __future__ import annotations

import json
from typing import Any

from relay.json_depth import MAX_DEPTH, TooDeep, too_deep
from relay.json_depth import loads as json_loads

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
