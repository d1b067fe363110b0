"""The OTLP/gRPC receiver: ``TraceService/Export`` on ``RELAY_OTLP_GRPC`` (host:port).

A ``grpc.aio`` server on the relay's event loop, so ``Export`` calls the receiver
directly, as the HTTP route does. gzip request compression is gRPC's own (negotiated by
the channel). Status codes: INVALID_ARGUMENT never happens for a well-framed message (a
bad span is rejected and counted in ``partial_success``), RESOURCE_EXHAUSTED when the
store queue is full, UNAVAILABLE when the bus is down, UNAUTHENTICATED without the bearer
token when ``RELAY_API_TOKEN`` is set (``authorization: Bearer <token>`` metadata).
"""

from __future__ import annotations

import hmac
import logging
from typing import TYPE_CHECKING, Any

import grpc
from grpc import aio
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from relay.ingest.otlp import from_request

if TYPE_CHECKING:
    from relay.ingest.receiver import OTLPReceiver

log = logging.getLogger("relay.receiver")


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OTLPReceiver, api_token: str | None) -> None:
        self.receiver = receiver
        self._token = api_token.encode() if api_token else None

    async def Export(self, request: Any, context: Any) -> Any:
        receiver = self.receiver
        if self._token is not None:
            header = dict(context.invocation_metadata()).get("authorization", "")
            scheme, _, given = str(header).partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self._token
            ):
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "This receiver needs 'authorization: Bearer <token>' "
                    "metadata (RELAY_API_TOKEN).",
                )
        problem = receiver.unavailable()
        if problem is not None:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE, f"The relay cannot take spans now: {problem}."
            )
        decoded = from_request(request)
        if receiver.busy(len(decoded.records)):
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "The relay is storing spans more slowly than they arrive.",
            )
        receiver.stats["rejected"] += decoded.rejected
        events = receiver.accept(decoded.records)
        await receiver.deliver(events)
        response = trace_service_pb2.ExportTraceServiceResponse()
        if decoded.rejected:
            response.partial_success.rejected_spans = decoded.rejected
            response.partial_success.error_message = decoded.reason
        return response


class GrpcReceiver:
    """The OTLP/gRPC server (``RELAY_OTLP_GRPC``) in front of ``receiver``: bodies up to
    ``max_bytes``, ``authorization: Bearer <api_token>`` metadata when a token is set."""

    def __init__(
        self, receiver: OTLPReceiver, address: str, *, max_bytes: int, api_token: str | None
    ) -> None:
        self.receiver = receiver
        self.max_bytes = max_bytes
        self.api_token = api_token
        self.address = address
        self.port: int | None = None
        self._server: aio.Server | None = None

    async def start(self) -> None:
        limit = self.max_bytes
        server = aio.server(
            options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)]
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            _TraceService(self.receiver, self.api_token), server
        )
        port = server.add_insecure_port(self.address)
        if not port:
            raise RuntimeError(f"RELAY_OTLP_GRPC={self.address}: cannot listen there")
        await server.start()
        self._server = server
        self.port = port
        log.info("relay: OTLP/gRPC receiver on %s", self.address)

    async def stop(self, grace_s: float = 2.0) -> None:
        server = self._server
        self._server = None
        if server is not None:
            await server.stop(grace_s)
