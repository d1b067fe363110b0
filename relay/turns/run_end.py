"""The end of a run: one terminal event on the bus, a final status in the turn record.

:class:`relay.runs.RunManager` calls these from a run's cleanup, whatever the run did.
Each step is on its own: a bus that refuses a publish, or a turn store that refuses the
final write, costs a logged retry, never the steps after it (the thread's release).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from relay.bus.base import Bus
from relay.events import ERROR, INTERRUPTED_MESSAGE, Event
from relay.turns.records import PAUSED, TurnStore
from relay.turns.response import STATUSES, ChatResponse, client_tool_round

log = logging.getLogger("relay.runs")

#: ``error.code`` of the terminal event the relay sends for a run whose spans sent none
TURN_FAILED = "turn_failed"
TURN_TIMEOUT = "turn_timeout"
CANCELLED = "cancelled"
#: a run cut short by its server's stop (what its record says too)
INTERRUPTED = "interrupted"
#: the message of the cancel the shutdown sends a run's task: the run's root span reads
#: it (relay/langgraph/spans.py) and ends ``interrupted``, as the turn's record will
SHUTDOWN = "the server is shutting down"
#: the cancel message of a run cut by a stop that hands its turn over to another instance
#: (relay/turns/draining.py): it ends without a terminal event, and so does its root span
HANDOVER = "the server is handing this turn over"
#: the root span's ``relay.turn.outcome`` of a run that stopped to be handed over
HANDED_OVER = "handed_over"

#: the ``error.message`` for each code: said to the user, so nothing internal in it
_MESSAGES = {
    TURN_FAILED: "The agent could not finish this turn.",
    # the words of the agent's own timeout (relay/langgraph/agent.py): one sentence for one event
    TURN_TIMEOUT: "This took too long and was stopped. Please try again.",
    CANCELLED: "The turn was cancelled.",
    INTERRUPTED: INTERRUPTED_MESSAGE,
}

#: a failed publish is retried at once (the bus appends to a local log: nothing to wait for)
PUBLISH_ATTEMPTS = 3
#: the pauses between attempts at the final write of a turn record
RECORD_RETRY_DELAYS_S = (0.05, 0.5)
#: then it is tried in the background, this long at most, this far apart at most
LATE_RECORD_WINDOW_S = 900.0
LATE_RECORD_FIRST_DELAY_S = 1.0
LATE_RECORD_MAX_DELAY_S = 10.0


@dataclass(slots=True)
class Outcome:
    """How a run ended, as its cleanup needs it.

    ``response``: the run's ChatResponse (None when it raised, returned something else,
    timed out or was cancelled). ``code``: the terminal event to send if the run's spans
    sent none.
    """

    response: ChatResponse | None = None
    code: str = TURN_FAILED

    @classmethod
    def of(cls, turn_id: str, result: object) -> Outcome:
        """The outcome of a run that returned ``result``."""
        if isinstance(result, ChatResponse) and result.status in STATUSES:
            return cls(result)
        log.error(
            "relay: the run of turn %s returned %s, not a ChatResponse",
            turn_id,
            type(result).__name__,
        )
        return cls()

    def terminal_code(self, shutting_down: bool) -> str:
        """The code of the terminal event the relay sends for it when its spans sent
        none: a cancel by the shutdown is ``interrupted``, as its record says."""
        return INTERRUPTED if shutting_down and self.code == CANCELLED else self.code

    def status(self, shutting_down: bool) -> str:
        if self.response is not None:
            return self.response.status
        if self.code == CANCELLED:  # nobody asked for a cancel by the shutdown
            return "interrupted" if shutting_down else "cancelled"
        return "error"


def terminal_sent(bus: Bus, turn_id: str, first_seq: int) -> bool:
    """Has the run whose events follow ``first_seq`` published its terminal event? It is
    the last event a run publishes (but for a ``message_saved`` after it), so the log's
    last events say, however long the log."""
    last = bus.last_seq(turn_id)
    if last <= first_seq:
        return False
    try:
        reader = bus.reader(turn_id, max(first_seq, last - 2))
    except LookupError:
        return False
    try:
        return any(e.is_run_terminal for e in reader.take())
    finally:
        reader.close()


def ensure_terminal(bus: Bus, thread_id: str, turn_id: str, first_seq: int, code: str) -> None:
    """A run whose spans produced no terminal event still ends its streams, loudly.

    Exactly one: a publish that raised is retried only if the log does not show it
    (a bus may raise after it appended)."""
    if terminal_sent(bus, turn_id, first_seq):
        return
    log.error("relay: run of turn %s ended without a terminal event", turn_id)
    event = Event(
        ERROR,
        thread_id,
        turn_id,
        "0" * 32,
        time.time() * 1000,
        {
            "code": code,
            "message": _MESSAGES[code],
            "node": None,
            # a run that raised or returned no answer fails the same way again
            "retryable": code != TURN_FAILED,
        },
    )
    for attempt in range(1, PUBLISH_ATTEMPTS + 1):
        try:
            bus.publish(event)
            return
        except Exception:
            log.exception(
                "relay: could not publish the end of turn %s (attempt %d of %d)",
                turn_id,
                attempt,
                PUBLISH_ATTEMPTS,
            )
        if terminal_sent(bus, turn_id, first_seq):
            return


def end_changes(outcome: Outcome, last_seq: int, shutting_down: bool) -> dict[str, Any]:
    """The turn record's fields at the run's end."""
    now = time.time() * 1000
    status = outcome.status(shutting_down)
    changes: dict[str, Any] = {"status": status, "last_seq": last_seq}
    response = outcome.response
    if response is not None:
        try:
            changes["response"] = response.to_json()
        except Exception:  # an answer that cannot be encoded does not keep the turn open
            log.exception("relay: could not encode the response of turn %s", response.turn_id)
        if response.trace_id:
            changes["root_trace_id"] = response.trace_id
    if status == PAUSED:
        changes["paused_at"] = now
        changes["ended_at"] = None
        # the turn's client-tool rounds so far (they only grow: a pause on anything else
        # leaves the count as it was), for RELAY_CLIENT_TOOL_MAX_ROUNDS on its next resumes
        if response is not None and (rounds := client_tool_round(response.interrupts)):
            changes["client_tool_round"] = rounds
    else:
        changes["ended_at"] = now
    return changes


async def record_end(turns: TurnStore, turn_id: str, changes: dict[str, Any]) -> bool:
    """Write the run's end to its turn record; a failed write is retried twice. False when
    it was not written: the caller goes on (a turn store that is down must not keep the
    thread reserved) and leaves the write to :func:`record_end_eventually`."""
    for delay in (*RECORD_RETRY_DELAYS_S, None):
        try:
            await turns.update(turn_id, **changes)
            return True
        except Exception:
            log.exception(
                "relay: could not record the end of turn %s%s",
                turn_id,
                "; retrying" if delay is not None else "; retrying in the background",
            )
        if delay is not None:
            await asyncio.sleep(delay)
    return False


async def record_end_eventually(turns: TurnStore, turn_id: str, changes: dict[str, Any]) -> None:
    """Go on writing a run's end while its turn store is away (a database restarting):
    with backoff up to ``LATE_RECORD_MAX_DELAY_S``, for ``LATE_RECORD_WINDOW_S`` at most.
    Without it the record would say ``running`` until the instance restarts. Cancelled
    at shutdown; the next start marks the turn ``interrupted`` then."""
    delay = LATE_RECORD_FIRST_DELAY_S
    give_up = time.monotonic() + LATE_RECORD_WINDOW_S
    while time.monotonic() < give_up:
        await asyncio.sleep(delay)
        try:
            await turns.update(turn_id, **changes)
        except Exception as exc:
            log.warning(
                "relay: the end of turn %s is not recorded yet (%s)", turn_id, type(exc).__name__
            )
            delay = min(delay * 2, LATE_RECORD_MAX_DELAY_S)
            continue
        log.info("relay: recorded the end of turn %s after all", turn_id)
        return
    log.error(
        "relay: gave up recording the end of turn %s after %ss", turn_id, LATE_RECORD_WINDOW_S
    )
