"""The OTLP receivers: spans of an agent in another process or language -> the same
mapping -> the bus (and the span store).

- OTLP/HTTP ``POST /v1/traces`` (``RELAY_OTLP_HTTP=true``; on by default in
  ``span-relay serve --relay-only``): protobuf or JSON, gzip;
- OTLP/gRPC ``TraceService/Export`` (``RELAY_OTLP_GRPC=host:port``), started and stopped
  with the relay (:meth:`relay.Relay.start` / :meth:`~relay.Relay.stop`).

See :mod:`relay.receiver.core` for de-duplication, ordering and back-pressure, and
docs/events.md ("Receiving spans over OTLP", "Start markers").
"""

from relay.receiver.core import OTLPReceiver

__all__ = ["OTLPReceiver"]
