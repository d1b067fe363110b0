"""A turn's outcome from its record, when its event log is gone (a restart, retention).

A reconnecting client always gets a terminal event, never a hang or a silent empty stream:
the record says how the turn ended, and this builds the event that says so.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import Any

from relay import events as ev
from relay.events import INTERRUPTED_MESSAGE, Event
from relay.turns.records import TurnRecord, TurnStore
from relay.turns.response import ChatResponse

_MESSAGES = {
    "interrupted": INTERRUPTED_MESSAGE,
    "cancelled": "The turn was cancelled.",
    "error": "The agent could not finish this turn.",
}


def ended_response(response: ChatResponse, said: Mapping[str, Any]) -> str:
    """The recorded response of a turn ended ``interrupted`` by its claimer, with what its
    terminal ``error`` said (``error``: code, message, reason, tools), which the event a
    later reader gets from the record says too."""
    return json.dumps({**response.to_dict(), "error": dict(said)})


def terminal_event(
    record: TurnRecord, after: int = 0, said: Mapping[str, Any] | None = None
) -> Event:
    """The turn's terminal event. A run that ended recorded the seq of its terminal event,
    which this one keeps; a turn that died with its process gets the next seq after both
    the record's and the client's (``after``). ``said``: an ``error``'s fields (code,
    message, reason, ...) when its record does not say them (:func:`ended_response`)."""
    response = json.loads(record.response) if record.response else None
    ts = record.ended_at or record.paused_at or time.time() * 1000
    envelope = (record.thread_id, record.turn_id, record.root_trace_id or "0" * 32, ts)
    if record.status in ("answered", "refused") and response is not None:
        event = Event(ev.TURN_COMPLETED, *envelope, {"response": response})
    elif record.status == "paused" and response is not None:
        event = Event(
            ev.PAUSED,
            *envelope,
            {
                "interrupts": response.get("interrupts", []),
                "resume": {
                    "method": "POST",
                    "path": f"/graphs/{record.graph}/chat/resume"
                    if record.graph
                    else "/chat/resume",
                    "body": {
                        "thread_id": record.thread_id,
                        "turn_id": record.turn_id,
                        "resume": "<your answer to the interrupt>",
                    },
                },
            },
        )
    else:
        status = record.status if record.status in _MESSAGES else "error"
        if said is None and response is not None and status == "interrupted":
            said = response.get("error")  # a claimer's end (ended_response)
        fields = dict(said) if isinstance(said, Mapping) else {}
        code = str(fields.pop("code", None) or (status if status != "error" else "turn_failed"))
        message = str(fields.pop("message", None) or _MESSAGES[status])
        event = Event(
            ev.ERROR,
            *envelope,
            {
                "code": code,
                "message": message,
                "node": None,
                # only a stopped server or a cancel is worth sending again for (not a
                # turn that stopped its server each time it was taken up)
                "retryable": status != "error" and code != "recovery_exhausted",
                **fields,  # an interrupted turn's reason and tools
            },
        )
    if record.last_seq > 0 and (record.status != "interrupted" or record.response):
        # the run ended and recorded its last seq (or the died turn's end was settled)
        return event.with_seq(record.last_seq)
    return event.with_seq(max(record.last_seq, after) + 1)


async def settle_outcome(turns: TurnStore, record: TurnRecord, after: int) -> TurnRecord:
    """A turn that died with its process has no terminal event in its log: a reader gets
    one made from its record, under the next seq after both the record's and the
    reader's cursor, and that seq is recorded. A reader at that seq has it (204); one
    before it gets the same event; one past it (it had read further while the process
    lived) gets a new one under its next seq, which is then recorded."""
    if record.status != "interrupted" or (record.response and after <= record.last_seq):
        return record
    recorded = json.loads(record.response) if record.response else {}
    said = recorded.get("error")  # a claimer's end (ended_response): the same words again
    event = terminal_event(dataclasses.replace(record, response=None), after, said)
    response = ChatResponse(
        record.thread_id,
        record.turn_id,
        record.root_trace_id or "",
        "interrupted",
        answer=str(event.fields["message"]),
    )
    record.last_seq = event.seq
    record.response = ended_response(response, said) if said else response.to_json()
    await turns.update(record.turn_id, last_seq=record.last_seq, response=record.response)
    return record


def outcome_delivered(record: TurnRecord, after: int) -> bool:
    """Has a reader at ``after`` already got the terminal event of ``record``'s ended turn
    (:func:`settle_outcome` first)? Then the answer is 204, not the end again."""
    return record.last_seq > 0 and after >= record.last_seq
