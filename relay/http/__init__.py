"""The FastAPI surface: the turn API (:mod:`relay.http.turns`), trace imports
(:mod:`relay.http.imports`), health, readiness, metrics and the SPA's config
(:mod:`relay.http.operations`), the OTLP/HTTP receiver's route (:mod:`relay.http.otlp`), the
SPA (:mod:`relay.http.spa`), request bodies, cursors and auth (:mod:`relay.http.requests`),
middleware and rate limits, the error answers (:mod:`relay.http.errors`) and the
relay-only app (:mod:`relay.cli.relay_only`)."""
