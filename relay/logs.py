"""Structured logs: one JSON object per line, with the trace and turn they belong to.

``RELAY_LOG_FORMAT=json`` (the default of the container image) switches ``span-relay
serve`` to :class:`JsonFormatter`. The trace and span ids come from the OpenTelemetry
context current where the record is made; the turn id from :data:`current_turn`, which
the run manager sets for the duration of each run's task.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time

from opentelemetry import trace

#: the turn whose run the current task executes (set by relay.runs)
current_turn: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "span_relay_turn", default=None
)

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            entry["trace_id"] = format(ctx.trace_id, "032x")
            entry["span_id"] = format(ctx.span_id, "016x")
        turn = current_turn.get()
        if turn is not None:
            entry["turn_id"] = turn
        for key, value in vars(record).items():  # extra={...} fields
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str, fmt: str) -> None:
    """Root logging for the server: ``fmt`` is ``json`` or ``text``."""
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
