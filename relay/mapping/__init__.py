"""Spans -> events: the one mapping that the live path, the replay and the receiver all
use, so a replayed turn is the live one, payload for payload.

Bottom up: ``facts`` (a span's role and the facts read from it), ``foreign_attributes``
(the other instrumentations' attribute names and their readers), ``rules`` (what a span
is), ``state`` (what is remembered between spans), ``summary`` (what a node's children add
up to), ``answers`` (how a run ends), ``placement`` (the node a span runs in, nodes
recognised late, and what waits for them), ``payloads`` (the node and tool events'
fields), ``engine`` (``map_span``: one span phase -> events) and ``feed`` (phases in
order, and the one loop that feeds them, which every path uses).
"""

from relay.mapping.deltas import map_span_event
from relay.mapping.engine import map_span
from relay.mapping.feed import feed
from relay.mapping.rules import can_start_run, classify
from relay.mapping.state import MappingState

__all__ = ["MappingState", "can_start_run", "classify", "feed", "map_span", "map_span_event"]
