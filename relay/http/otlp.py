"""``POST /v1/traces``: the OTLP/HTTP receiver (protobuf or JSON, optionally gzip).

Answers, as OTLP/HTTP specifies them, in the encoding of the request:

- 200 with an ``ExportTraceServiceResponse`` (``partial_success`` counts rejected spans);
- 400 for a body that cannot be read (not protobuf / not JSON / bad gzip), with a
  ``google.rpc.Status`` (protobuf, or JSON ``{"code", "message"}``);
- 413 when the body, compressed or decompressed, is over ``RELAY_OTLP_MAX_BYTES``;
- 415 for another content type or content encoding;
- 429 (store queue full) and 503 (the bus or the receiver is unavailable) with
  ``Retry-After``: exporters retry those;
- 401 without the bearer token when ``RELAY_API_TOKEN`` is set (the relay's own error
  shape, from :func:`relay.http.identity.token_checker`).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from relay.http.parts import RelayParts
from relay.http.requests import read_body
from relay.ingest.otlp import (
    PayloadError,
    decode_json,
    decode_protobuf,
    response_json,
    response_protobuf,
)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_PROTOBUF_TYPES = {"application/x-protobuf", "application/protobuf", "application/octet-stream"}
#: gRPC status codes used in the google.rpc.Status bodies
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8
UNAVAILABLE = 14
RETRY_AFTER_S = "2"


class _TooLarge(Exception):
    pass


def _status(
    media: str, http: int, code: int, message: str, headers: dict[str, str] | None = None
) -> Response:
    if media == PROTOBUF:
        from google.rpc import status_pb2

        body = status_pb2.Status(code=code, message=message).SerializeToString()
        return Response(body, status_code=http, media_type=PROTOBUF, headers=headers)
    return Response(
        json.dumps({"code": code, "message": message}),
        status_code=http,
        media_type=JSON,
        headers=headers,
    )


def _gunzip(data: bytes, limit: int) -> bytes:
    """Decompress, stopping as soon as the output would pass ``limit`` (no zip bombs)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(data, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise _TooLarge
    out += inflater.flush()
    if len(out) > limit:
        raise _TooLarge
    if not inflater.eof:
        raise zlib.error("the gzip stream is truncated")
    return out


async def receive_traces(relay: RelayParts, request: Request) -> Response:
    receiver = relay.receiver
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in _PROTOBUF_TYPES:
        media = PROTOBUF
    elif content_type == JSON:
        media = JSON
    else:
        return JSONResponse(
            {
                "error": {
                    "code": "unsupported_media_type",
                    "message": (
                        f"Content-Type {content_type or '(none)'!r} is not OTLP: send "
                        "application/x-protobuf or application/json."
                    ),
                }
            },
            status_code=415,
        )
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("gzip", "identity", ""):
        return _status(
            media,
            415,
            INVALID_ARGUMENT,
            f"Content-Encoding {encoding!r} is not supported: use gzip or none.",
        )
    limit = relay.settings.otlp_max_bytes
    too_large = _status(
        media,
        413,
        INVALID_ARGUMENT,
        f"The payload is over {limit} bytes (RELAY_OTLP_MAX_BYTES); "
        "send smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE).",
    )
    try:
        body = await read_body(request, limit, _TooLarge)
        if encoding == "gzip":
            body = _gunzip(body, limit)
    except _TooLarge:
        return too_large
    except zlib.error as exc:
        return _status(media, 400, INVALID_ARGUMENT, f"The body is not valid gzip: {exc}.")
    assert receiver is not None  # the route exists only when the receiver is on
    problem = receiver.unavailable()
    if problem is not None:
        return _status(
            media,
            503,
            UNAVAILABLE,
            f"The relay cannot take spans now: {problem}.",
            {"Retry-After": RETRY_AFTER_S},
        )
    try:
        decoded = decode_protobuf(body) if media == PROTOBUF else decode_json(body)
    except PayloadError as exc:
        return _status(media, 400, INVALID_ARGUMENT, f"Unreadable OTLP payload: {exc}.")
    finally:
        del body  # up to RELAY_OTLP_MAX_BYTES: not held while the spans are mapped
    if receiver.busy(len(decoded.records)):
        return _status(
            media,
            429,
            RESOURCE_EXHAUSTED,
            "The relay is storing spans more slowly than they arrive; retry later.",
            {"Retry-After": RETRY_AFTER_S},
        )
    receiver.stats["rejected"] += decoded.rejected
    events = receiver.accept(decoded.records)
    await receiver.deliver(events)
    if media == PROTOBUF:
        return Response(response_protobuf(decoded.rejected, decoded.reason), media_type=PROTOBUF)
    return Response(response_json(decoded.rejected, decoded.reason), media_type=JSON)


def add_receiver_routes(router: Any, relay: RelayParts, dependencies: list[Any]) -> None:
    """``POST /v1/traces`` on the relay's router, when RELAY_OTLP_HTTP is on."""
    if relay.receiver is None or not relay.settings.otlp_http:
        return

    @router.post(
        "/v1/traces",
        dependencies=dependencies,
        tags=["otlp"],
        summary="OTLP/HTTP trace receiver (protobuf or JSON, gzip)",
    )
    async def otlp_traces(request: Request) -> Response:
        return await receive_traces(relay, request)
