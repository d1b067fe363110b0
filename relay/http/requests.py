"""What the HTTP surface reads from a request: the body (the one size-limited reader, and
the JSON object reader on it) and the reader's cursor (``Last-Event-ID`` / ``?after``).
Who is asking is relay/http/identity.py's.

A JSON body must say so: ``Content-Type: application/json`` (or ``application/*+json``,
with or without a charset); any other type, ``text/plain`` and none included, is ``415
unsupported_media_type``. A cross-site HTML form can only send ``text/plain``,
``application/x-www-form-urlencoded`` or ``multipart/form-data`` without a CORS preflight,
so no page of another origin can start a run with a form."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import Request

from relay.errors import ApiError


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
    body that is not a JSON object."""
    require_media_type(request, "JSON, sent with Content-Type: application/json", is_json)
    body = await read_body(
        request,
        limit,
        lambda: ApiError(413, "body_too_large", f"The request body is over {limit} bytes."),
    )
    if not body:
        raise ApiError(400, "invalid_json", "The request body is empty; send a JSON object.")
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "invalid_json", f"The request body is not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_json", "The request body must be a JSON object.")
    return value


def parse_cursor(request: Request, after: int | None) -> int:
    """The reader's cursor: ``Last-Event-ID`` wins over ``?after``; both non-negative ints."""
    raw = request.headers.get("last-event-id")
    if raw is not None:
        raw = raw.strip()
        if not raw.isdigit():
            raise ApiError(
                400, "invalid_cursor", f"Last-Event-ID {raw!r} is not a non-negative event number."
            )
        return int(raw)
    if after is not None and after < 0:
        raise ApiError(400, "invalid_cursor", "after must be a non-negative event number.")
    return after or 0
