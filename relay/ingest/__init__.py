"""Spans in: the live processor on the agent's threads (:mod:`relay.ingest.processor`),
the OTLP receivers for agents in other processes (:mod:`relay.ingest.receiver`, its gRPC
server in :mod:`relay.ingest.grpc`), the one OTLP decoder (:mod:`relay.ingest.otlp`) and
trace files (:mod:`relay.ingest.tracefile`). Everything here hands spans to the mapping."""
