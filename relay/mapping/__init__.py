"""Spans -> events: the one mapping that the live path, the replay and the receiver all
use, so a replayed turn is the live one, payload for payload."""

from relay.mapping.engine import MappingState, can_start_run, classify, map_span, map_span_event

__all__ = ["MappingState", "can_start_run", "classify", "map_span", "map_span_event"]
