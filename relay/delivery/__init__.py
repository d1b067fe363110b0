"""Events out as bytes: the one stream writer (:mod:`relay.delivery.streaming`: SSE and
NDJSON), the AG-UI encoder (:mod:`relay.delivery.agui`), ``Accept`` negotiation
(:mod:`relay.delivery.negotiation`) and the paced replay of stored turns
(:mod:`relay.delivery.replay`)."""
