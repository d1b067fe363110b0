"""A run always ends (DESIGN.md §6), whatever it does and whatever fails as it ends.

Each example drives one run through a chosen misbehaviour at a chosen point, with chosen
faults in the machinery around it, and checks the three facts: exactly one run-terminal
event after the run's ``first_seq``, a final status in its turn record, and its thread
free again. Runs publish their events from their spans, through the processor; here the
run publishes on the bus directly, as if its spans had.

Nothing waits on the clock: a hanging run waits on an event nobody sets, and the tiny
turn timeout is what ends it.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import given, note, settings
from hypothesis import strategies as st

from relay.bus import MemoryBus
from relay.events import Event
from relay.ingest.processor import RelaySpanProcessor
from relay.turns.records import RUNNING, TurnRecord
from relay.turns.response import STATUSES, ChatResponse
from relay.turns.runs import RunManager
from relay.turns.sqlite import SQLiteTurnStore

THREAD = "th"


class Boom(Exception):
    pass


class Abort(BaseException):
    """Not an Exception and not a cancel (KeyboardInterrupt or SystemExit would stop the
    test's own event loop, as they are meant to)."""


class FlakyBus(MemoryBus):
    """The ``fail_at``-th publish raises (once)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_at: int | None = None
        self.published = 0
        self.failed_on: str | None = None

    def publish(self, event: Event) -> Event:
        self.published += 1
        if self.published == self.fail_at:
            self.failed_on = event.type
            raise ConnectionError("bus down for a moment")
        return super().publish(event)


class FlakyTurns(SQLiteTurnStore):
    """The first write of a final status raises; ``hold`` blocks it until released."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.fail_final = False
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()

    async def update(self, turn_id: str, **changes: Any) -> None:
        if changes.get("status", RUNNING) != RUNNING:
            if self.hold is not None:
                self.holding.set()
                await self.hold.wait()
            if self.fail_final:
                self.fail_final = False
                raise OSError("database is locked")
        await super().update(turn_id, **changes)


class FlakyProcessor(RelaySpanProcessor):
    raises = False

    def flush(self) -> None:
        if self.raises:
            raise RuntimeError("processor broken")
        super().flush()


class Lock:
    """A cross-instance thread lock (PostgresTurnStore.lock_thread's), maybe broken."""

    def __init__(self, raises: bool) -> None:
        self.raises = raises

    async def release(self) -> None:
        if self.raises:
            raise OSError("connection lost")


#: how the run's code ends: a ChatResponse of each status, the wrong type, a failure, a hang
ENDINGS = (*STATUSES, "dict", "none", "str", "raise", "abort", "hang")


@dataclass
class Case:
    ending: str
    before: int  # non-terminal events before the terminal one
    terminal: str | None  # the run's own terminal event, if it sends one
    saved: bool  # a message_saved after that terminal event
    pause_at: int  # where in its events the run stops for a moment (a cancel lands there)
    cancel: str | None  # None, "first_step", "running", "ending" (while its end is written)
    fail_publish_at: int | None
    fail_final_write: bool
    flush_raises: bool
    lock: str | None  # None, "ok", "raises"


@st.composite
def cases(draw: st.DrawFn) -> Case:
    before = draw(st.integers(0, 3))
    terminal = draw(st.sampled_from([None, "turn_completed", "paused", "error"]))
    saved = terminal is not None and draw(st.booleans())
    script = before + (terminal is not None) + saved
    return Case(
        ending=draw(st.sampled_from(ENDINGS)),
        before=before,
        terminal=terminal,
        saved=saved,
        pause_at=draw(st.integers(0, script)),
        cancel=draw(st.sampled_from([None, "first_step", "running", "ending"])),
        fail_publish_at=draw(st.none() | st.integers(1, script + 2)),
        fail_final_write=draw(st.booleans()),
        flush_raises=draw(st.booleans()),
        lock=draw(st.sampled_from([None, "ok", "raises"])),
    )


async def scenario(case: Case, tmp: Path) -> None:
    bus = FlakyBus()
    turns = FlakyTurns(tmp / "turns.db")
    processor = FlakyProcessor(bus.publish)
    processor.bind(asyncio.get_running_loop())
    runs = RunManager(
        bus,
        turns,
        processor.flush,
        disconnect_grace_s=60,
        turn_timeout_s=0.05,
        turn_timeout_margin_s=0.0,
    )
    if case.lock is not None:

        async def lock_thread(thread_id: str) -> Lock:
            return Lock(raises=case.lock == "raises")

        turns.lock_thread = lock_thread  # type: ignore[attr-defined]
    try:
        async with asyncio.timeout(10):  # a safety net: a run that never ends fails here
            await run_one(case, bus, turns, processor, runs)
    finally:
        await runs.shutdown()
        turns.close()


async def run_one(
    case: Case, bus: FlakyBus, turns: FlakyTurns, processor: FlakyProcessor, runs: RunManager
) -> None:
    script = ["node_started"] * case.before
    if case.terminal is not None:
        script.append(case.terminal)
        if case.saved:
            script.append("message_saved")
    paused = asyncio.Event()
    proceed = asyncio.Event()
    if case.cancel != "running":
        proceed.set()
    failed_in_run = False

    async def runner() -> Any:
        nonlocal failed_in_run
        for i in range(len(script) + 1):
            if i == case.pause_at:
                paused.set()
                await proceed.wait()
            if i < len(script):
                try:
                    bus.publish(Event(script[i], THREAD, "t1", "a" * 32, 1.0, {}))
                except ConnectionError:
                    failed_in_run = True
                    raise
        if case.ending in STATUSES:
            return ChatResponse(THREAD, "t1", "a" * 32, case.ending, answer="ok")
        if case.ending == "hang":
            await asyncio.Event().wait()  # nobody sets it: the turn timeout ends this
        if case.ending == "raise":
            raise Boom("agent bug")
        if case.ending == "abort":
            raise Abort
        return {"dict": {"answer": "graph state"}, "none": None, "str": "ok"}[case.ending]

    bus.fail_at = case.fail_publish_at
    turns.fail_final = case.fail_final_write
    processor.raises = case.flush_raises
    if case.cancel == "ending":
        turns.hold = asyncio.Event()

    record = TurnRecord(
        turn_id="t1", thread_id=THREAD, status=RUNNING, started_at=time.time() * 1000
    )
    first_seq = await runs.start(record, "chat", runner, create=True)
    run = runs._runs["t1"]
    cancelled = False
    if case.cancel == "first_step":
        cancelled = runs.cancel("t1")
        assert cancelled
    elif case.cancel == "running":
        done = asyncio.create_task(run.done.wait())
        stopped = asyncio.create_task(paused.wait())
        await asyncio.wait([done, stopped], return_when=asyncio.FIRST_COMPLETED)
        done.cancel()
        stopped.cancel()
        if paused.is_set():  # it may have failed before it got there (a publish raised)
            cancelled = runs.cancel("t1")
            assert cancelled
    elif case.cancel == "ending":
        assert turns.hold is not None
        await turns.holding.wait()
        assert runs.cancel("t1") is False  # the run is over: only its end is written
        assert run.task is not None
        run.task.cancel()  # as a shutdown would
        turns.hold.set()
    await run.done.wait()

    # 1. exactly one run-terminal event after the run's first_seq
    reader = bus.reader("t1", first_seq)
    try:
        ends = [e for e in reader.take(10_000) if e.is_run_terminal]
    finally:
        reader.close()
    assert len(ends) == 1, [e.type for e in ends]
    if ends[0].trace_id == "0" * 32:  # the relay's own: the run's spans sent none
        if cancelled:
            code = "cancelled"
        elif case.ending == "hang" and not failed_in_run:
            code = "turn_timeout"
        else:
            code = "turn_failed"
        assert ends[0].type == "error" and ends[0].fields["code"] == code

    # 2. a final status in its record
    got = await turns.get("t1")
    assert got is not None and got.status in STATUSES
    if cancelled:
        expected = "cancelled"
    elif failed_in_run or case.ending not in STATUSES:
        expected = "error"
    else:
        expected = case.ending
    assert got.status == expected
    assert got.last_seq == bus.last_seq("t1")

    # 3. its thread free: nothing running, done, and a new run on the thread ends
    assert not runs.running("t1") and run.done.is_set() and runs.running_count() == 0
    bus.fail_at = None
    turns.hold = None
    processor.raises = False
    nxt = TurnRecord(turn_id="t2", thread_id=THREAD, status=RUNNING, started_at=time.time() * 1000)

    async def answers() -> ChatResponse:
        bus.publish(Event("turn_completed", THREAD, "t2", "b" * 32, 1.0, {}))
        return ChatResponse(THREAD, "t2", "b" * 32, "answered")

    await runs.start(nxt, "chat", answers, create=True)
    assert await runs.wait("t2") is not None
    assert (await turns.get("t2")).status == "answered"


@settings(max_examples=60, deadline=None)
@given(case=cases())
def test_a_run_always_ends(case: Case) -> None:
    note(repr(case))  # the composite's draws are not shown otherwise
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(case, Path(tmp)))
