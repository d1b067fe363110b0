"""Runs: each turn's run is its own asyncio task; streams only read its log.

:class:`RunManager` starts a run's coroutine as a task, keeps the turn record in step
(running -> paused / answered / ...), enforces one running turn per thread, and cancels
a run whose last reader went away once the grace period has passed without a new one.

A run's coroutine is the agent's: it opens the run's root span, runs the graph and
returns the ChatResponse. The relay never sees the graph; it sees the spans, through the
processor, and the response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from relay.bus.base import Bus
from relay.events import ERROR, Event
from relay.logs import current_turn
from relay.processor import RelaySpanProcessor
from relay.response import ChatResponse
from relay.turns import PAUSED, RUNNING, SQLiteTurnStore, TurnRecord

log = logging.getLogger("relay.runs")

Runner = Callable[[], Awaitable[ChatResponse]]


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
    task: asyncio.Task[ChatResponse] | None = None
    cancel_timer: asyncio.TimerHandle | None = None
    watchers: int = 0
    cancel_reason: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    thread_lock: Any = None  # held across instances while the run runs


class RunManager:
    def __init__(
        self,
        bus: Bus,
        turns: SQLiteTurnStore,
        processor: RelaySpanProcessor,
        *,
        disconnect_grace_s: float,
        thread_policy: str = "reject",
    ) -> None:
        self.bus = bus
        self.turns = turns
        self.processor = processor
        self.disconnect_grace_s = disconnect_grace_s
        self.thread_policy = thread_policy
        self._runs: dict[str, _Run] = {}  # turn_id -> running run
        self._threads: dict[str, str] = {}  # thread_id -> running turn_id
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

    async def start(self, record: TurnRecord, kind: str, runner: Runner,
                    create: bool = False) -> int:
        """Start a run of ``record``'s turn; returns the cursor its stream reads after.

        ``create``: the record is new and is stored once the thread is held (a chat);
        otherwise the caller loaded it (a resume). Raises :class:`ThreadBusy` when the
        thread already runs a turn (here or, with shared turn records, on another
        instance) and the policy rejects; then nothing was stored.
        """
        self.check_thread(record.thread_id)
        busy = self._threads.get(record.thread_id)
        previous = self._runs.get(busy) if busy else None
        thread_lock = None
        lock_thread = getattr(self.turns, "lock_thread", None)
        if previous is None and lock_thread is not None:  # shared turn records: replicas
            thread_lock = await lock_thread(record.thread_id)
            if thread_lock is None:
                raise ThreadBusy(record.thread_id, "(running on another instance)")
        if create:
            try:
                await self.turns.create(record)
            except BaseException:
                if thread_lock is not None:
                    await thread_lock.release()
                raise
        self.bus.open_turn(record.turn_id, record.last_seq)
        first_seq = self.bus.last_seq(record.turn_id)
        run = _Run(record.turn_id, record.thread_id, kind, first_seq, thread_lock=thread_lock)
        self._runs[record.turn_id] = run
        self._threads[record.thread_id] = record.turn_id
        record.run_after_seq = first_seq
        await self.turns.update(record.turn_id, status=RUNNING, ended_at=None,
                                run_after_seq=first_seq)
        run.task = asyncio.create_task(self._run(run, runner, previous),
                                       name=f"turn {record.turn_id}")
        return first_seq

    async def _run(self, run: _Run, runner: Runner, previous: _Run | None) -> ChatResponse:
        if previous is not None:  # RELAY_THREAD_POLICY=enqueue: in order, one at a time
            await previous.done.wait()
            self._threads[run.thread_id] = run.turn_id
        current_turn.set(run.turn_id)  # this task's log lines carry the turn id
        response: ChatResponse | None = None
        cancelled = False
        try:
            response = await runner()
            return response
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            log.info("run ended", extra={"run_kind": run.kind, "status": response.status
                                         if response else ("cancelled" if cancelled
                                                           else "error")})
            self.processor.flush()  # spans that ended on other threads reach the bus now
            self._ensure_terminal(run, cancelled)
            await self._record_end(run, response, cancelled)
            self._runs.pop(run.turn_id, None)
            if self._threads.get(run.thread_id) == run.turn_id:
                del self._threads[run.thread_id]
            if run.cancel_timer is not None:
                run.cancel_timer.cancel()
            if run.thread_lock is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(run.thread_lock.release())
            run.done.set()

    def _terminal_sent(self, run: _Run) -> bool:
        """Has this run published its terminal event? It is the last event a run
        publishes (but for a ``message_saved`` after it), so the log's last events say,
        however long the log."""
        last = self.bus.last_seq(run.turn_id)
        if last <= run.first_seq:
            return False
        try:
            reader = self.bus.reader(run.turn_id, max(run.first_seq, last - 2))
        except LookupError:
            return False
        try:
            return any(e.is_run_terminal for e in reader.take())
        finally:
            reader.close()

    def _ensure_terminal(self, run: _Run, cancelled: bool) -> None:
        """A run whose spans produced no terminal event still ends its streams, loudly."""
        if self._terminal_sent(run):
            return
        log.error("relay: run of turn %s ended without a terminal event", run.turn_id)
        self.bus.publish(Event(ERROR, run.thread_id, run.turn_id, "0" * 32,
                               time.time() * 1000, {
            "code": "cancelled" if cancelled else "turn_failed",
            "message": "The turn was cancelled." if cancelled
            else "The agent could not finish this turn.",
            "node": None,
            "retryable": True,
        }))

    async def settle(self, turn_id: str, timeout_s: float = 5.0) -> None:
        """Let a run that has sent its terminal event finish recording its end.

        A client acts on ``paused`` the moment it reads it (a resume), which can be a
        moment before the run's task has written the turn's new status."""
        run = self._runs.get(turn_id)
        if run is None or not self._terminal_sent(run):
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await run.done.wait()

    async def _record_end(self, run: _Run, response: ChatResponse | None,
                          cancelled: bool) -> None:
        now = time.time() * 1000
        if response is not None:
            status = response.status
        else:
            status = "error"
            if cancelled:
                status = "interrupted" if self._shutting_down else "cancelled"
        changes: dict[str, object] = {"status": status,
                                      "last_seq": self.bus.last_seq(run.turn_id)}
        if response is not None:
            changes["response"] = response.to_json()
            if response.trace_id:
                changes["root_trace_id"] = response.trace_id
        if status == PAUSED:
            changes["paused_at"] = now
            changes["ended_at"] = None
        else:
            changes["ended_at"] = now
        try:
            await asyncio.shield(self.turns.update(run.turn_id, **changes))
        except Exception:
            log.exception("relay: could not record the end of turn %s", run.turn_id)

    # -- waiting, cancelling ------------------------------------------------------------

    async def wait(self, turn_id: str) -> ChatResponse | None:
        """The run's response (the JSON path). None if it was cancelled or failed."""
        run = self._runs.get(turn_id)
        if run is None or run.task is None:
            return None
        try:
            return await asyncio.shield(run.task)
        except (asyncio.CancelledError, Exception):
            if run.task.done():
                return None
            raise

    def cancel(self, turn_id: str, reason: str = "cancelled by request") -> bool:
        """Cancel a running turn. Idempotent: False when nothing was running."""
        run = self._runs.get(turn_id)
        if run is None or run.task is None or run.task.done():
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
            self.disconnect_grace_s, self._cancel_if_unwatched, turn_id)

    def _cancel_if_unwatched(self, turn_id: str) -> None:
        run = self._runs.get(turn_id)
        if run is not None and run.watchers == 0:
            log.info("relay: turn %s has no reader after the grace period; cancelling",
                     turn_id)
            self.cancel(turn_id, "the last reader disconnected")

    async def shutdown(self, grace_s: float = 0.0) -> None:
        """Let running turns finish for ``grace_s``, then cancel the rest. A turn cut short
        by the shutdown is recorded ``interrupted``, not ``cancelled``: nobody asked."""
        self._shutting_down = True
        tasks = [r.task for r in self._runs.values() if r.task is not None]
        if tasks and grace_s > 0:
            await asyncio.wait(tasks, timeout=grace_s)
        for task in tasks:
            task.cancel("server shutting down")
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
