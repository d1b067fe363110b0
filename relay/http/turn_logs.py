"""Where a turn's log stands against its record, for ``GET /turns/{id}/events``
(relay/http/turn_events.py): a turn ended off the bus (its end is the record's), and a
running turn whose log the shared bus lost (followed from the reader's cursor, never
ended)."""

from __future__ import annotations

from relay.http.parts import RelayParts
from relay.turns.records import RUNNING, TurnRecord

#: a turn ended by its own run: its record's last seq is its log's
ENDED_BY_RUN = frozenset({"answered", "refused", "error", "cancelled"})


def ended_off_the_bus(relay: RelayParts, record: TurnRecord | None, turn_id: str) -> bool:
    """Is the turn over by its record while its bus log holds no end? A turn ended
    ``interrupted`` without its run (its process died; ended at the next start, or taken
    over) whose end is settled in the record (a response: the same event the takeover
    published, or one made for an earlier reader), or whose record is behind the log: a
    reader gets the record's end, never a wait on a log nobody writes. (A run cut by a
    shutdown recorded a seq past the log's: its own end is on its way to the log.)"""
    return (
        record is not None
        and record.status == "interrupted"
        and relay.bus.terminal_seq(turn_id) is None
        and (bool(record.response) or record.last_seq <= relay.bus.last_seq(turn_id))
    )


def follows_lost_log(
    relay: RelayParts, record: TurnRecord | None, turn_id: str, cursor: int
) -> bool:
    """Is the turn running by its record while the shared bus holds less of its log than
    the reader has (Redis restarted without its data)? Then the reader follows the log
    from its cursor, as the owner writes it again; it is never handed a made-up end (the
    owner gone, its lease's sweep ends the turn on the bus: relay/turns/leases.py)."""
    bus = relay.bus
    return (
        record is not None
        and record.status == RUNNING
        and bus.shared
        and bus.terminal_seq(turn_id) is None
        and (not bus.has_turn(turn_id) or cursor > bus.last_seq(turn_id))
    )
