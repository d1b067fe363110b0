"""A graceful stop hands a run over: the run is asked to stop at its next step boundary,
its checkpoint saved, and another instance takes its turn up from there.

:class:`relay.turns.runs.RunManager` gives each run a :class:`Drain` (in the run task's
context, :data:`current_drain`); on SIGTERM it asks every run to drain. The agent that runs
the graph (relay/langgraph/agent.py) passes the request on to LangGraph
(``RunControl.request_drain``), which stops the graph after the step in flight with
``GraphDrained``; the agent then raises :class:`RunDrained`, and the manager records the
turn as handed over instead of ending it: no terminal event, the turn still ``running``,
its lease released for a peer (or the next start) to claim at once
(relay/turns/recovering.py).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

#: ``TurnRecord.handover``: the run stopped at a step boundary, its checkpoint saved
#: (nothing was cut: taking the turn up again is safe whatever ran)
DRAINED = "drained"
#: ``TurnRecord.handover``: the run was cut mid-step by the stop (the grace ran out)
CUT = "cut"
#: a handed-over turn's lease: long past, so that any instance's next sweep claims it
HANDED_OVER_LEASE = 1.0


class RunDrained(Exception):
    """Raised by a run that stopped at a step boundary because its drain was asked for."""


class Drain:
    """One run's request to stop at its next step boundary."""

    def __init__(self) -> None:
        self.requested = False
        self._callbacks: list[Callable[[], None]] = []

    def on_request(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the drain is asked for (at once if it was)."""
        if self.requested:
            callback()
        else:
            self._callbacks.append(callback)

    def request(self) -> None:
        """Ask the run to stop at its next step boundary."""
        if self.requested:
            return
        self.requested = True
        for callback in self._callbacks:
            callback()


#: the drain of the run this task runs (set by the run manager in the run's task)
current_drain: contextvars.ContextVar[Drain | None] = contextvars.ContextVar(
    "relay_run_drain", default=None
)
