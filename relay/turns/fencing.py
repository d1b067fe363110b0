"""Fencing: a run whose turn another instance took over writes nothing more that lasts.

A process that hangs past its lease (SIGSTOP, a paused VM, a synchronous node that holds
the event loop) loses its turn to a claimer (relay/turns/leases.py), which may run the
cut step again from the thread's checkpoint (relay/turns/recovering.py). When the hung
process wakes, its run must not save a checkpoint of that step on top: the thread would
fork, two runs writing one thread. Its renewal finds the turn lost and cancels the run
(relay/turns/run_leases.py), but the run's own code may reach a checkpoint write first.

So every checkpoint write of a run is fenced (relay/langgraph/fenced_saver.py wraps the
graph's checkpointer): :meth:`Fence.check` runs just before it, in the run's task. While
the run's lease holds (the clock says so) it costs nothing; past it, one statement asks
the turn records whether the turn is still this run's attempt (renewing the lease if
so); when it is not, the run is given up (cancelled, its bus log disowned, as a renewal
would) and the write refused with :class:`TurnLost`.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable


class TurnLost(Exception):
    """The run's turn was taken over by another instance: its writes are refused."""


class Fence:
    """One run's fence: ``lease_until()`` reads the run's lease as last renewed (epoch
    ms; 0: none), ``still_ours()`` asks the records (renewing the lease when it is), and
    ``give_up()`` cancels the run quietly."""

    def __init__(
        self,
        turn_id: str,
        lease_until: Callable[[], float],
        still_ours: Callable[[], Awaitable[bool]],
        give_up: Callable[[], object],
    ) -> None:
        self.turn_id = turn_id
        self._lease_until = lease_until
        self._still_ours = still_ours
        self._give_up = give_up
        self._lost = False
        self._asking = asyncio.Lock()  # writes of parallel tasks ask the records once

    async def check(self) -> None:
        """Raise :class:`TurnLost` when the run's turn is no longer its own (the run is
        given up once; every later write is refused without asking again)."""
        if not self._lost and self._holds():
            return  # no lease (a run without leases), or one that holds: no I/O
        async with self._asking:
            if not self._lost and not self._holds():
                if await self._still_ours():
                    return
                self._lost = True
                self._give_up()
        if not self._lost:
            return  # another write asked meanwhile, and the lease was renewed
        raise TurnLost(
            f"turn {self.turn_id} was taken over by another instance while this one did "
            "not renew its lease: this run's checkpoint write is refused"
        )

    def _holds(self) -> bool:
        until = self._lease_until()
        return not until or time.time() * 1000 < until


#: the fence of the run this task runs (set by the run manager in the run's task; the
#: graph's own tasks inherit it)
current_fence: contextvars.ContextVar[Fence | None] = contextvars.ContextVar(
    "relay_run_fence", default=None
)


async def check_fence() -> None:
    """:meth:`Fence.check` of the current run, if there is one."""
    fence = current_fence.get()
    if fence is not None:
        await fence.check()
