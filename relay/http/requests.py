"""What the HTTP surface reads from a request: the body (the one size-limited reader, and
the JSON object reader on it) and the reader's cursor (``Last-Event-ID`` / ``?after``).
Who is asking is relay/http/identity.py's.

A JSON body must say so: ``Content-Type: application/json`` (or ``application/*+json``,
with or without a charset); any other type, ``text/plain`` and none included, is ``415
unsupported_media_type``. A cross-site HTML form can only send ``text/plain``,
``application/x-www-form-urlencoded`` or ``multipart/form-data`` without a CORS preflight,
so no page of another origin can start a run with a form."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import Request

from relay.errors import ApiError
from relay.json_depth import MAX_DEPTH, TooDeep, loads

#: an event id: plain ASCII digits, at most 18 (below 2**63)
_EVENT_ID = re.compile(r"[0-9]{1,18}")
MAX_EVENT_ID = 10**18 - 1


async def read_body(request: Request, limit: int, too_large: Callable[[], Exception]) -> bytes:
    """The raw body, at most ``limit`` bytes: ``too_large()`` is raised as soon as the body
    is over (its Content-Length, or what has been read so far), not after reading it all.
    Each route says its own 413 (its code, message and body format)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large()
    return bytes(body)


def media_type_of(request: Request) -> str:
    """The request's media type, lower case, without its parameters (``""`` for none)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def is_json(media_type: str) -> bool:
    """``application/json`` or a JSON-based ``application/*+json`` type."""
    kind, _, subtype = media_type.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def require_media_type(request: Request, accepted: str, ok: Callable[[str], bool]) -> None:
    """``415 unsupported_media_type`` unless ``ok(the request's media type)``;
    ``accepted`` names what to send, for the message."""
    media_type = media_type_of(request)
    if not ok(media_type):
        sent = f"Content-Type: {media_type}" if media_type else "no Content-Type"
        raise ApiError(
            415,
            "unsupported_media_type",
            f"The request body must be {accepted}; this request has {sent}.",
        )


async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object (sent as ``application/json``), or a 4xx that says what
    is wrong with it: 415 for another content type, 413 over ``limit`` bytes, 400 for a
    body that is not a JSON object (``json_too_deep``: nested deeper than
    ``relay.json_depth.MAX_DEPTH`` levels)."""
    require_media_type(request, "JSON, sent with Content-Type: application/json", is_json)
    body = await read_body(
        request,
        limit,
        lambda: ApiError(413, "body_too_large", f"The request body is over {limit} bytes."),
    )
    if not body:
        raise ApiError(400, "invalid_json", "The request body is empty; send a JSON object.")
    try:
        value = loads(body)
    except TooDeep:
        raise ApiError(
            400,
            "json_too_deep",
            f"The request body nests deeper than {MAX_DEPTH} levels; the relay reads no deeper.",
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "invalid_json", f"The request body is not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_json", "The request body must be a JSON object.")
    return value


def parse_cursor(request: Request) -> int:
    """The reader's cursor: ``Last-Event-ID`` wins over ``?after``; each an event id of
    plain ASCII digits (``[0-9]``, at most 18 of them), else ``400 invalid_cursor`` naming
    it (``str.isdigit`` would take ``²`` and ``¹¹``, which ``int`` refuses, and ``int``
    refuses more than 4,300 digits)."""
    raw = request.headers.get("last-event-id")
    if raw is not None:
        return _event_id(raw.strip(), "Last-Event-ID")
    after = request.query_params.get("after")
    if after is not None:
        return _event_id(after, "after")
    return 0


def _event_id(raw: str, name: str) -> int:
    if not _EVENT_ID.fullmatch(raw):
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise ApiError(
            400,
            "invalid_cursor",
            f"{name} {shown!r} is not an event id (a non-negative number of at most 18 "
            "ASCII digits).",
        )
    return int(raw)
