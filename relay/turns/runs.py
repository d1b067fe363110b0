"""Runs: each turn's run is its own asyncio task; streams only read its log.

:class:`RunManager` starts a run's coroutine as a task, keeps the turn record in step
(running -> paused / answered / ...), enforces one running turn per thread, and cancels
a run whose last reader went away once the grace period has passed without a new one.

A run's coroutine is the agent's: it opens the run's root span, runs the graph and
returns the ChatResponse. The relay never sees the graph; it sees the spans, through the
processor, and the response. The manager never sees the processor either: it is handed
a ``flush`` callable (the relay's wiring passes the processor's), which it calls when a
run ends so that spans ended on other threads reach the bus before the run's end does.

A run always ends (DESIGN.md §6): whatever its code does (raises, returns something
other than a ChatResponse, hangs past the turn timeout, is cancelled, even before its
first step) and whatever fails while its end is recorded, the turn gets exactly one
terminal event, a final status in its record, and its thread back (relay/turns/run_end.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from relay.bus.base import Bus
from relay.logs import current_turn
from relay.turns.draining import CUT, DRAINED, HANDED_OVER_LEASE, Drain, RunDrained, current_drain
from relay.turns.fencing import Fence, current_fence
from relay.turns.records import RUNNING, TurnRecord, TurnStore, lease_until
from relay.turns.response import ChatResponse
from relay.turns.run_end import (
    CANCELLED,
    HANDOVER,
    SHUTDOWN,
    TURN_TIMEOUT,
    Outcome,
    end_changes,
    ensure_terminal,
    record_end,
    record_end_eventually,
    terminal_sent,
)
from relay.turns.run_leases import LeasedRuns

log = logging.getLogger("relay.runs")

Runner = Callable[[], Awaitable[ChatResponse]]

#: how long past ``turn_timeout_s`` the relay's own bound fires: an agent that applies the
#: same timeout inside its run (relay/langgraph/agent.py) answers first, with its own error
TURN_TIMEOUT_MARGIN_S = 1.0


class ThreadBusy(Exception):
    def __init__(self, thread_id: str, turn_id: str) -> None:
        super().__init__(f"thread {thread_id} is running turn {turn_id}")
        self.thread_id = thread_id
        self.turn_id = turn_id


@dataclass(slots=True)
class _Run:
    turn_id: str
    thread_id: str
    kind: str
    first_seq: int  # events of this run have seq > first_seq
    task: asyncio.Task[ChatResponse | None] | None = None
    cancel_timer: asyncio.TimerHandle | None = None
    watchers: int = 0
    cancel_reason: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    thread_lock: Any = None  # held across instances while the run runs
    ending: bool = False  # its end is being recorded: a cancel changes nothing now
    attempt: int = 1  # the attempt at the turn this run is (its record's, a lease's key)
    lease_until: float = 0.0  # epoch ms: its lease, as last written (0: none yet)
    lost: bool = False  # another instance took the turn over: end without a word
    drain: Drain = field(default_factory=Drain)  # a graceful stop: end at a step boundary
    handover: str = ""  # how it stopped to be handed over (draining.DRAINED, CUT), if so


def _check_start(record: object, kind: object, runner: object) -> None:
    """A wrong argument is a TypeError at the call, not a failure later inside the task."""
    if inspect.isawaitable(runner):
        if inspect.iscoroutine(runner):
            runner.close()  # it will never run: no "never awaited" warning for it
        raise TypeError(
            "RunManager.start() takes a zero-argument callable that makes the "
            "run's coroutine (lambda: agent.chat(...)), not an awaitable"
        )
    if not callable(runner):
        raise TypeError(f"runner must be a zero-argument callable, not {type(runner).__name__}")
    try:
        inspect.signature(runner).bind()
    except TypeError:
        raise TypeError(f"runner must take no arguments: {runner!r}") from None
    except ValueError:  # no signature to read (some builtins): the call will tell
        pass
    if not isinstance(record, TurnRecord):
        raise TypeError(f"record must be a TurnRecord, not {type(record).__name__}")
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, not {type(kind).__name__}")


class RunManager(LeasedRuns):
    """Runs turns as tasks. ``turn_timeout_s`` (None: no limit) bounds each run: one still
    running ``turn_timeout_s + turn_timeout_margin_s`` after it started is cancelled and
    ends with an ``error`` event, code ``turn_timeout``. The margin (default 1 s) lets an
    agent that applies the same timeout inside its run answer first, in its own words."""

    def __init__(
        self,
        bus: Bus,
        turns: TurnStore,
        flush: Callable[[], None],
        *,
        disconnect_grace_s: float,
        thread_policy: str = "reject",
        turn_timeout_s: float | None = None,
        turn_timeout_margin_s: float = TURN_TIMEOUT_MARGIN_S,
        lease_s: float | None = None,
    ) -> None:
        if turn_timeout_s is not None and not turn_timeout_s > 0:
            raise ValueError(f"turn_timeout_s must be positive or None, not {turn_timeout_s}")
        self.bus = bus
        self.turns = turns
        #: drains the span processor's queue onto the bus (spans ended on other threads)
        self.flush = flush
        self.disconnect_grace_s = disconnect_grace_s
        self.thread_policy = thread_policy
        self.turn_timeout_s = turn_timeout_s
        self.turn_timeout_margin_s = turn_timeout_margin_s
        #: RELAY_LEASE_S: each run holds a lease on its record (relay/turns/leases.py
        #: renews it); None: no leases
        self.lease_s = lease_s
        self._runs: dict[str, _Run] = {}  # turn_id -> running run
        self._threads: dict[str, str] = {}  # thread_id -> running turn_id
        self._ending: set[asyncio.Task[None]] = set()  # ends being recorded (kept alive)
        self._late: set[asyncio.Task[None]] = set()  # ends written once the store is back
        self._shutting_down = False

    # -- starting -----------------------------------------------------------------------

    def running(self, turn_id: str) -> bool:
        return turn_id in self._runs

    def running_count(self) -> int:
        return len(self._runs)

    def first_seq(self, turn_id: str) -> int:
        run = self._runs.get(turn_id)
        return run.first_seq if run else 0

    def check_thread(self, thread_id: str) -> None:
        """Raise :class:`ThreadBusy` if the thread runs a turn and the policy rejects."""
        busy = self._threads.get(thread_id)
        if busy is not None and busy in self._runs and self.thread_policy == "reject":
            raise ThreadBusy(thread_id, busy)

    async def check_thread_settled(self, thread_id: str) -> None:
        """:meth:`check_thread`, but a run that has already sent its terminal event is
        waited for first: it is only recording its end, and a client that acts the
        moment it reads that event (the thread's next message, a resume) must not get a
        409 for a run that is over."""
        try:
            self.check_thread(thread_id)
            return
        except ThreadBusy as exc:
            busy = exc.turn_id
        await self.settle(busy)
        self.check_thread(thread_id)

    async def start(
        self, record: TurnRecord, kind: str, runner: Runner, create: bool = False
    ) -> int:
        """Start a run of ``record``'s turn; returns the cursor its stream reads after.

        ``runner`` is called with no arguments in the run's task and returns the run's
        coroutine. ``create``: the record is new and is stored once the thread is held
        (a chat); otherwise the caller loaded it (a resume). Raises :class:`ThreadBusy`
        when the thread already runs a turn (here or, with shared turn records, on
        another instance) and the policy rejects, and :class:`TypeError` for a wrong
        argument; then nothing was stored or reserved.
        """
        _check_start(record, kind, runner)
        self.check_thread(record.thread_id)
        busy = self._threads.get(record.thread_id)
        previous = self._runs.get(busy) if busy else None
        thread_lock = None
        if previous is None:  # shared turn records hold the thread across replicas
            thread_lock = await self.turns.lock_thread(record.thread_id)
            if thread_lock is None:
                raise ThreadBusy(record.thread_id, "(running on another instance)")
        run: _Run | None = None
        lease: dict[str, Any] = {}
        if self.lease_s is not None:  # the run holds the turn from its first write
            record.lease_until = lease_until(self.lease_s)
            record.lock_holder = thread_lock.holder if thread_lock is not None else 0
            record.handover = ""  # held by this run now, not waiting to be taken over
            lease = {
                "lease_until": record.lease_until,
                "lock_holder": record.lock_holder,
                "handover": "",
            }
        try:
            if create:  # one write: the new record already says where this run stands
                record.status = RUNNING
                record.ended_at = None
                record.run_after_seq = record.last_seq
                await self.turns.create(record)
            self.bus.open_turn(record.turn_id, record.last_seq)
            first_seq = self.bus.last_seq(record.turn_id)
            run = _Run(record.turn_id, record.thread_id, kind, first_seq, thread_lock=thread_lock)
            run.attempt = record.attempt
            self._runs[record.turn_id] = run
            self._threads[record.thread_id] = record.turn_id
            if not create or first_seq != record.run_after_seq:
                record.run_after_seq = first_seq
                await self.turns.update(
                    record.turn_id,
                    status=RUNNING,
                    ended_at=None,
                    run_after_seq=first_seq,
                    **lease,
                )
            run.lease_until = record.lease_until  # leased from here (leases())
        except BaseException:
            # no run: the thread goes back to the run it was queued behind, or is free
            if run is not None:
                del self._runs[record.turn_id]
                if previous is not None:
                    self._threads[record.thread_id] = previous.turn_id
                else:
                    self._threads.pop(record.thread_id, None)
            if thread_lock is not None:
                with contextlib.suppress(Exception):
                    await thread_lock.release()
            raise
        run.task = asyncio.create_task(
            self._run(run, runner, previous), name=f"turn {record.turn_id}"
        )
        run.task.add_done_callback(functools.partial(self._task_done, run))
        return first_seq

    async def _run(self, run: _Run, runner: Runner, previous: _Run | None) -> ChatResponse | None:
        """The run's task: the response, or None when the run failed (logged, and told
        on the stream: nobody need retrieve the exception)."""
        outcome = Outcome()  # what stays for a BaseException that is not a cancel
        bound: asyncio.Timeout | None = None
        try:
            if previous is not None:  # RELAY_THREAD_POLICY=enqueue: in order, one at a time
                await previous.done.wait()
                self._threads[run.thread_id] = run.turn_id
            current_turn.set(run.turn_id)  # this task's log lines carry the turn id
            current_drain.set(run.drain)  # a graceful stop asks the run to drain here
            current_fence.set(self._fence(run))  # its checkpoint writes, fenced
            limit = (
                None
                if self.turn_timeout_s is None
                else self.turn_timeout_s + self.turn_timeout_margin_s
            )
            bound = asyncio.timeout(limit)  # from here: the wait in the queue is no run
            async with bound:
                result = await runner()
            outcome = Outcome.of(run.turn_id, result)
            return outcome.response
        except asyncio.CancelledError:
            outcome = Outcome(code=CANCELLED)
            raise
        except RunDrained:  # stopped at a step boundary: handed over (run.drain)
            run.handover = DRAINED
            return None
        except Exception as exc:
            if isinstance(exc, TimeoutError) and bound is not None and bound.expired():
                log.error(
                    "relay: turn %s ran past its timeout (%ss); stopped it",
                    run.turn_id,
                    self.turn_timeout_s,
                )
                outcome = Outcome(code=TURN_TIMEOUT)
            else:
                log.exception("relay: the run of turn %s failed", run.turn_id)
            return None
        finally:
            run.ending = True
            await self._to_the_end(self._spawn_end(run, outcome))

    def _fence(self, run: _Run) -> Fence:
        """The run's fence (relay/turns/fencing.py): its lease as last renewed, the
        records asked past it, the run given up when its turn was taken over."""
        return Fence(
            run.turn_id,
            lambda: run.lease_until,
            lambda: self._still_ours(run),
            lambda: self.lose(run.turn_id),
        )

    def _spawn_end(self, run: _Run, outcome: Outcome) -> asyncio.Task[None]:
        end = asyncio.create_task(self._end(run, outcome), name=f"end of turn {run.turn_id}")
        self._ending.add(end)
        end.add_done_callback(self._ending.discard)
        return end

    @staticmethod
    async def _to_the_end(end: asyncio.Task[None]) -> None:
        """Wait for the end to be recorded even if this task is cancelled again meanwhile
        (a shutdown): a half-recorded end would keep the turn running and its thread
        reserved. The cancellation is passed on once the end is recorded."""
        cancelled = False
        while not end.done():
            try:
                await asyncio.shield(end)
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError

    def _task_done(self, run: _Run, task: asyncio.Task[ChatResponse | None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            # an Exception ends the task as None: this is a BaseException (retrieved
            # here, so asyncio does not also say it was never retrieved)
            log.error(
                "relay: the run of turn %s raised %s", run.turn_id, type(exc).__name__, exc_info=exc
            )
        if not run.ending:  # cancelled before its first step: none of _run ran
            run.ending = True
            self._spawn_end(run, Outcome(code=CANCELLED))

    async def _end(self, run: _Run, outcome: Outcome) -> None:
        """Record the run's end, then give its thread back. Never raises; each step is
        tried whatever the one before did."""
        try:
            if not await self._still_ours(run):
                log.warning(
                    "relay: turn %s was taken over by another instance; "
                    "this run ends without a terminal event or a record of its own",
                    run.turn_id,
                )
                return
            if run.handover:
                await self._hand_over(run)
                return
            log.info(
                "run ended",
                extra={"run_kind": run.kind, "status": outcome.status(self._shutting_down)},
            )
            try:
                self.flush()  # spans that ended on other threads reach the bus now
            except Exception:
                log.exception("relay: could not flush the spans of turn %s", run.turn_id)
            try:
                ensure_terminal(
                    self.bus,
                    run.thread_id,
                    run.turn_id,
                    run.first_seq,
                    outcome.terminal_code(self._shutting_down),
                )
            except Exception:
                log.exception("relay: could not end the stream of turn %s", run.turn_id)
            changes = end_changes(outcome, self.bus.last_seq(run.turn_id), self._shutting_down)
            if not await record_end(self.turns, run.turn_id, changes):
                late = asyncio.create_task(record_end_eventually(self.turns, run.turn_id, changes))
                self._late.add(late)
                late.add_done_callback(self._late.discard)
        finally:
            self._runs.pop(run.turn_id, None)
            if self._threads.get(run.thread_id) == run.turn_id:
                del self._threads[run.thread_id]
            if run.cancel_timer is not None:
                run.cancel_timer.cancel()
            try:
                if run.thread_lock is not None:
                    await run.thread_lock.release()
            except Exception:
                log.exception("relay: could not release the thread of turn %s", run.turn_id)
            finally:
                run.done.set()

    async def _hand_over(self, run: _Run) -> None:
        """A run stopped by a graceful stop (relay/turns/draining.py): no terminal event;
        the turn stays ``running``, its lease long past, so that another instance (or
        this one's next start) claims it at once and takes it up again. Its events reach
        the bus first (the claimer judges the cut step by them)."""
        try:
            self.flush()
        except Exception:
            log.exception("relay: could not flush the spans of turn %s", run.turn_id)
        changes = {
            "lease_until": HANDED_OVER_LEASE,
            "lock_holder": 0,
            "handover": run.handover,
            "last_seq": self.bus.last_seq(run.turn_id),
        }
        try:
            await self.turns.update(run.turn_id, **changes)
        except Exception:  # its lease runs out as if the process had died
            log.exception("relay: could not hand turn %s over", run.turn_id)
            return
        log.warning(
            "relay: turn %s handed over (%s): another instance takes it up",
            run.turn_id,
            run.handover,
        )

    def _terminal_sent(self, run: _Run) -> bool:
        return terminal_sent(self.bus, run.turn_id, run.first_seq)

    async def settle(self, turn_id: str, timeout_s: float = 5.0) -> bool:
        """Let a run that has sent its terminal event finish recording its end (a client
        acts on ``paused`` the moment it reads it, which can be a moment before the run's
        task has written the turn's new status); True when there was such a run."""
        run = self._runs.get(turn_id)
        if run is None or not self._terminal_sent(run):
            return False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await run.done.wait()
        return True

    # -- waiting, cancelling ------------------------------------------------------------

    async def wait(self, turn_id: str) -> ChatResponse | None:
        """The run's response (the JSON path), once its end is recorded. None if it was
        cancelled or failed."""
        run = self._runs.get(turn_id)
        if run is None or run.task is None:
            return None
        task = run.task
        await run.done.wait()
        try:
            return await asyncio.shield(task)  # done, or a step from it
        except BaseException:
            if task.done():
                return None
            raise

    def cancel(self, turn_id: str, reason: str = "cancelled by request") -> bool:
        """Cancel a running turn. Idempotent: False when nothing was running."""
        run = self._runs.get(turn_id)
        if run is None or run.task is None or run.task.done() or run.ending:
            return False
        run.cancel_reason = reason
        run.task.cancel(reason)
        return True

    # -- readers ------------------------------------------------------------------------

    def reader_attached(self, turn_id: str) -> None:
        run = self._runs.get(turn_id)
        if run is not None:
            run.watchers += 1
            if run.cancel_timer is not None:
                run.cancel_timer.cancel()
                run.cancel_timer = None

    def reader_left(self, turn_id: str, completed: bool, on_disconnect: str = "cancel") -> None:
        """A stream ended. If it was cut and nobody else reads, cancel after the grace."""
        run = self._runs.get(turn_id)
        if run is None:
            return
        run.watchers = max(0, run.watchers - 1)
        if completed or on_disconnect != "cancel" or run.watchers > 0:
            return
        loop = asyncio.get_running_loop()
        if run.cancel_timer is not None:
            run.cancel_timer.cancel()
        run.cancel_timer = loop.call_later(
            self.disconnect_grace_s, self._cancel_if_unwatched, turn_id
        )

    def _cancel_if_unwatched(self, turn_id: str) -> None:
        run = self._runs.get(turn_id)
        if run is not None and run.watchers == 0:
            log.info("relay: turn %s has no reader after the grace period; cancelling", turn_id)
            self.cancel(turn_id, "the last reader disconnected")

    async def shutdown(self, grace_s: float = 0.0) -> None:
        """Stop, handing the running turns over when they hold leases: each run is asked
        to stop at its next step boundary (relay/turns/draining.py) and given ``grace_s``
        to end or drain; the rest are cut, and handed over too. Without leases, they are
        given ``grace_s`` to finish and cut, recorded ``interrupted``, not ``cancelled``:
        nobody asked."""
        self._shutting_down = True
        runs = list(self._runs.values())
        handing_over = self.lease_s is not None
        if handing_over and runs:
            log.warning(
                "relay: stopping: %d running turn(s) asked to stop at their next step "
                "boundary, to be handed over",
                len(runs),
            )
            for run in runs:
                run.drain.request()
        tasks = [r.task for r in runs if r.task is not None]
        if tasks and grace_s > 0:
            await asyncio.wait(tasks, timeout=grace_s)
        for run in runs:
            if run.task is None or run.task.done() or run.ending:
                continue
            if handing_over:
                run.handover = CUT
                run.task.cancel(HANDOVER)
            else:
                run.task.cancel(SHUTDOWN)
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for run in runs:  # a run cancelled before its first step ends in a task of its own
            await run.done.wait()
        for late in list(self._late):  # the next start marks those turns interrupted
            late.cancel()
