"""relay.runs.RunManager: each run its own task; streams only read; cancel after the grace."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relay.bus import MemoryBus
from relay.events import Event
from relay.ingest.processor import RelaySpanProcessor
from relay.turns.records import PAUSED, RUNNING, TurnRecord
from relay.turns.response import ChatResponse
from relay.turns.runs import RunManager, ThreadBusy
from relay.turns.sqlite import SQLiteTurnStore


class World:
    def __init__(
        self,
        tmp: Path,
        *,
        grace: float = 0.05,
        policy: str = "reject",
        bus: MemoryBus | None = None,
        **manager: Any,
    ) -> None:
        self.bus = bus or MemoryBus()
        self.turns = SQLiteTurnStore(tmp / "turns.db")
        self.processor = RelaySpanProcessor(self.bus.publish)
        self.runs = RunManager(
            self.bus,
            self.turns,
            self.processor.flush,
            disconnect_grace_s=grace,
            thread_policy=policy,
            **manager,
        )

    async def record(self, turn: str, thread: str = "th", **kw) -> TurnRecord:
        record = TurnRecord(
            turn_id=turn, thread_id=thread, status=RUNNING, started_at=time.time() * 1000, **kw
        )
        await self.turns.create(record)
        return record

    def event(self, turn: str, type_: str, thread: str = "th", **fields) -> Event:
        return self.bus.publish(Event(type_, thread, turn, "a" * 32, 1.0, fields))

    def types(self, turn: str, after: int = 0) -> list[str]:
        reader = self.bus.reader(turn, after)
        try:
            return [e.type for e in reader.take()]
        finally:
            reader.close()


@pytest.fixture
async def world(tmp_path: Path):
    w = World(tmp_path)
    w.processor.bind(asyncio.get_running_loop())
    yield w
    await w.runs.shutdown()
    w.turns.close()


def answering(
    w: World,
    turn: str,
    thread: str = "th",
    status: str = "answered",
    gate: asyncio.Event | None = None,
) -> Callable:
    async def runner() -> ChatResponse:
        w.event(turn, "graph_topology", thread)
        if gate is not None:
            await gate.wait()
        terminal = "paused" if status == "paused" else "turn_completed"
        w.event(turn, terminal, thread)
        return ChatResponse(thread, turn, "a" * 32, status, answer="ok")

    return runner


async def finished(w: World, turn: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while w.runs.running(turn):
        assert time.monotonic() < deadline, "the run did not end"
        await asyncio.sleep(0.005)


async def test_run_is_a_task_and_its_end_is_recorded(world: World) -> None:
    record = await world.record("t1")
    after = await world.runs.start(record, "chat", answering(world, "t1"))
    assert after == 0 and world.runs.running("t1") and world.runs.running_count() == 1
    assert world.runs.first_seq("t1") == 0
    response = await world.runs.wait("t1")
    assert response is not None and response.status == "answered"
    await finished(world, "t1")
    got = await world.turns.get("t1")
    assert got.status == "answered" and got.last_seq == 2 and got.ended_at is not None
    assert ChatResponse.from_json(got.response).answer == "ok"
    assert world.types("t1") == ["graph_topology", "turn_completed"]
    assert await world.runs.wait("t1") is None  # no longer running


async def test_paused_run_records_paused_at(world: World) -> None:
    record = await world.record("t1")
    await world.runs.start(record, "chat", answering(world, "t1", status="paused"))
    await world.runs.wait("t1")
    await finished(world, "t1")
    got = await world.turns.get("t1")
    assert got.status == PAUSED and got.paused_at is not None and got.ended_at is None


async def test_resume_continues_the_seq(world: World) -> None:
    record = await world.record("t1")
    await world.runs.start(record, "chat", answering(world, "t1", status="paused"))
    await world.runs.wait("t1")
    await finished(world, "t1")
    record = await world.turns.get("t1")
    after = await world.runs.start(record, "resume", answering(world, "t1"))
    assert after == 2
    await world.runs.wait("t1")
    await finished(world, "t1")
    assert world.types("t1", after) == ["graph_topology", "turn_completed"]
    assert (await world.turns.get("t1")).last_seq == 4


async def test_run_without_terminal_event_gets_one(world: World) -> None:
    record = await world.record("t1")

    async def silent() -> ChatResponse:
        world.event("t1", "graph_topology")
        raise RuntimeError("agent bug")

    await world.runs.start(record, "chat", silent)
    assert await world.runs.wait("t1") is None
    await finished(world, "t1")
    reader = world.bus.reader("t1")
    last = reader.take()[-1]
    reader.close()
    assert last.type == "error" and last.fields["code"] == "turn_failed"
    assert (await world.turns.get("t1")).status == "error"


async def test_cancel(world: World) -> None:
    record = await world.record("t1")
    gate = asyncio.Event()
    await world.runs.start(record, "chat", answering(world, "t1", gate=gate))
    await asyncio.sleep(0.01)
    assert world.runs.cancel("t1") is True
    assert await world.runs.wait("t1") is None
    await finished(world, "t1")
    assert world.runs.cancel("t1") is False  # idempotent
    assert world.runs.cancel("unknown") is False
    assert (await world.turns.get("t1")).status == "cancelled"
    assert world.types("t1")[-1] == "error"


async def test_cancel_fallback_event_says_cancelled(world: World) -> None:
    record = await world.record("t1")
    await world.runs.start(record, "chat", answering(world, "t1", gate=asyncio.Event()))
    await asyncio.sleep(0.01)
    world.runs.cancel("t1")
    await finished(world, "t1")
    reader = world.bus.reader("t1")
    last = reader.take()[-1]
    reader.close()
    assert last.fields["code"] == "cancelled"


async def test_thread_busy_is_rejected(world: World) -> None:
    gate = asyncio.Event()
    await world.runs.start(await world.record("t1"), "chat", answering(world, "t1", gate=gate))
    with pytest.raises(ThreadBusy) as info:
        await world.runs.start(await world.record("t2"), "chat", answering(world, "t2"))
    assert info.value.turn_id == "t1" and info.value.thread_id == "th"
    # another thread is free
    await world.runs.start(
        await world.record("t3", thread="other"), "chat", answering(world, "t3", thread="other")
    )
    gate.set()
    await finished(world, "t1")
    await finished(world, "t3")


async def test_a_run_past_its_terminal_event_is_waited_for_not_refused(world: World) -> None:
    """check_thread_settled: a run still busy before its terminal event is a ThreadBusy at
    once; one that has sent it (only recording its end now) is waited for."""
    gate = asyncio.Event()
    ending = asyncio.Event()

    async def runner() -> ChatResponse:
        world.event("t1", "graph_topology")
        await gate.wait()
        world.event("t1", "turn_completed")
        await ending.wait()  # the terminal event is out; the run has not ended yet
        return ChatResponse("th", "t1", "a" * 32, "answered", answer="ok")

    await world.runs.start(await world.record("t1"), "chat", runner)
    with pytest.raises(ThreadBusy):
        await world.runs.check_thread_settled("th")
    gate.set()
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_later(0.05, ending.set)
    await world.runs.check_thread_settled("th")  # returns once t1 has ended
    assert not world.runs.running("t1")
    assert (await world.turns.get("t1")).status == "answered"


async def test_enqueue_policy_runs_in_order(tmp_path: Path) -> None:
    w = World(tmp_path, policy="enqueue")
    w.processor.bind(asyncio.get_running_loop())
    order: list[str] = []
    gate = asyncio.Event()

    def runner(turn: str, wait: bool) -> Callable:
        async def run() -> ChatResponse:
            order.append(f"{turn} start")
            if wait:
                await gate.wait()
            w.event(turn, "turn_completed")
            order.append(f"{turn} end")
            return ChatResponse("th", turn, "", "answered")

        return run

    await w.runs.start(await w.record("t1"), "chat", runner("t1", True))
    await w.runs.start(await w.record("t2"), "chat", runner("t2", False))
    await asyncio.sleep(0.02)
    assert order == ["t1 start"]
    gate.set()
    await finished(w, "t2")
    assert order == ["t1 start", "t1 end", "t2 start", "t2 end"]
    w.turns.close()


async def test_last_reader_leaving_cancels_after_grace(world: World) -> None:
    await world.runs.start(
        await world.record("t1"), "chat", answering(world, "t1", gate=asyncio.Event())
    )
    world.runs.reader_attached("t1")
    world.runs.reader_left("t1", completed=False)
    assert world.runs.running("t1")  # not at once: a grace period
    await finished(world, "t1")
    assert (await world.turns.get("t1")).status == "cancelled"


async def test_reader_coming_back_within_grace_keeps_the_run(world: World) -> None:
    gate = asyncio.Event()
    await world.runs.start(await world.record("t1"), "chat", answering(world, "t1", gate=gate))
    world.runs.reader_attached("t1")
    world.runs.reader_left("t1", completed=False)
    world.runs.reader_attached("t1")
    await asyncio.sleep(0.15)  # three grace periods
    assert world.runs.running("t1")
    gate.set()
    await finished(world, "t1")
    assert (await world.turns.get("t1")).status == "answered"


@pytest.mark.parametrize(
    ("completed", "policy", "others"),
    [(True, "cancel", 0), (False, "continue", 0), (False, "cancel", 1)],
)
async def test_reader_leaving_without_cancel(
    world: World, completed: bool, policy: str, others: int
) -> None:
    gate = asyncio.Event()
    await world.runs.start(await world.record("t1"), "chat", answering(world, "t1", gate=gate))
    for _ in range(others + 1):
        world.runs.reader_attached("t1")
    world.runs.reader_left("t1", completed=completed, on_disconnect=policy)
    await asyncio.sleep(0.15)
    assert world.runs.running("t1")
    gate.set()
    await finished(world, "t1")
    assert (await world.turns.get("t1")).status == "answered"


async def test_reader_left_for_unknown_turn_is_ignored(world: World) -> None:
    world.runs.reader_left("nope", completed=False)
    world.runs.reader_attached("nope")


async def test_shutdown_interrupts_running_turns(world: World) -> None:
    await world.runs.start(
        await world.record("t1"), "chat", answering(world, "t1", gate=asyncio.Event())
    )
    await asyncio.sleep(0.01)
    await asyncio.wait_for(world.runs.shutdown(), 5)
    assert not world.runs.running("t1")
    # nobody asked for it: a turn cut short by the shutdown is "interrupted"
    assert (await world.turns.get("t1")).status == "interrupted"
    assert world.types("t1")[-1] == "error"


async def test_shutdown_grace_lets_a_quick_turn_finish(world: World) -> None:
    gate = asyncio.Event()
    await world.runs.start(await world.record("t1"), "chat", answering(world, "t1", gate=gate))
    asyncio.get_running_loop().call_later(0.02, gate.set)
    # a bound on a hang, far past what the run needs: the grace is what lets it finish
    await asyncio.wait_for(world.runs.shutdown(grace_s=60), 60)
    assert (await world.turns.get("t1")).status == "answered"


async def test_long_run_beyond_the_bus_cap_still_ends(tmp_path: Path) -> None:
    w = World(tmp_path, bus=MemoryBus(max_events_per_turn=3))
    w.processor.bind(asyncio.get_running_loop())

    async def chatty() -> ChatResponse:
        for _ in range(5):
            w.event("t1", "node_started")
        w.event("t1", "turn_completed")
        return ChatResponse("th", "t1", "", "answered")

    await w.runs.start(await w.record("t1"), "chat", chatty)
    try:
        await finished(w, "t1")
        assert (await w.turns.get("t1")).status == "answered"
    finally:
        await w.runs.shutdown()
        w.turns.close()


# -- a run always ends (DESIGN.md §6) ----------------------------------------------------


def terminals(w: World, turn: str, after: int = 0) -> list[Event]:
    reader = w.bus.reader(turn, after)
    try:
        return [e for e in reader.take() if e.is_run_terminal]
    finally:
        reader.close()


async def assert_thread_free(w: World, thread: str = "th") -> None:
    """A new run on the thread starts and ends."""
    w.runs.check_thread(thread)
    turn = f"next-{time.monotonic_ns()}"
    await w.runs.start(await w.record(turn, thread), "chat", answering(w, turn, thread))
    assert (await w.runs.wait(turn)) is not None
    await finished(w, turn)


async def test_a_coroutine_is_a_type_error_at_the_call(world: World) -> None:
    record = TurnRecord(turn_id="t1", thread_id="th", status=RUNNING)
    coroutine = answering(world, "t1")()
    with pytest.raises(TypeError, match="callable"):
        await world.runs.start(record, "chat", coroutine, create=True)  # type: ignore[arg-type]
    # closed, so never "never awaited"; nothing stored, nothing reserved
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
    assert await world.turns.get("t1") is None
    assert not world.runs.running("t1") and not world.bus.has_turn("t1")
    await assert_thread_free(world)


@pytest.mark.parametrize(
    "args",
    [
        ("record", "chat", lambda: None),
        (None, "chat", lambda: None),
        ("RECORD", 3, lambda: None),
        ("RECORD", "chat", None),
        ("RECORD", "chat", "not callable"),
        ("RECORD", "chat", lambda record: None),
    ],
    ids=["record-str", "record-none", "kind-int", "runner-none", "runner-str", "runner-takes-args"],
)
async def test_wrong_arguments_are_type_errors_at_the_call(world: World, args: tuple) -> None:
    record = TurnRecord(turn_id="t1", thread_id="th", status=RUNNING)
    args = tuple(record if a == "RECORD" else a for a in args)
    with pytest.raises(TypeError):
        await world.runs.start(*args, create=True)
    assert await world.turns.get("t1") is None
    assert world.runs.running_count() == 0
    await assert_thread_free(world)


async def test_a_run_returning_a_dict_ends_failed(world: World) -> None:
    async def graph_values() -> Any:
        world.event("t1", "graph_topology")
        return {"answer": "the graph's state, not a ChatResponse"}

    run_after = await world.runs.start(await world.record("t1"), "chat", graph_values)
    assert await world.runs.wait("t1") is None
    [terminal] = terminals(world, "t1", run_after)
    assert terminal.type == "error" and terminal.fields["code"] == "turn_failed"
    assert (await world.turns.get("t1")).status == "error"
    assert not world.runs.running("t1")
    await assert_thread_free(world)


async def test_a_run_cancelled_before_its_first_step_still_ends(world: World) -> None:
    """cancel() right after start(): the task's coroutine never runs, so no finally in it
    could record the end."""
    await world.runs.start(await world.record("t1"), "chat", answering(world, "t1"))
    assert world.runs.cancel("t1") is True
    assert await world.runs.wait("t1") is None
    [terminal] = terminals(world, "t1")
    assert terminal.fields["code"] == "cancelled"
    assert (await world.turns.get("t1")).status == "cancelled"
    await assert_thread_free(world)


async def test_a_run_past_the_turn_timeout_is_stopped(tmp_path: Path) -> None:
    w = World(tmp_path, turn_timeout_s=0.05, turn_timeout_margin_s=0.0)
    w.processor.bind(asyncio.get_running_loop())
    never = asyncio.Event()

    async def hangs() -> ChatResponse:
        w.event("t1", "node_started")
        await never.wait()
        raise AssertionError("not reached")

    try:
        await w.runs.start(await w.record("t1"), "chat", hangs)
        assert await w.runs.wait("t1") is None
        [terminal] = terminals(w, "t1")
        assert terminal.type == "error" and terminal.fields["code"] == "turn_timeout"
        assert terminal.fields["retryable"] is True
        assert terminal.fields["message"] == "This took too long and was stopped. Please try again."
        assert (await w.turns.get("t1")).status == "error"
        await assert_thread_free(w)
    finally:
        await w.runs.shutdown()
        w.turns.close()


async def test_the_agents_own_timeout_answers_before_the_relays(tmp_path: Path) -> None:
    """An agent that applies the turn timeout inside its run (relay/langgraph/agent.py) gives the
    answer: the relay's bound waits a margin longer."""
    w = World(tmp_path, turn_timeout_s=0.05)
    w.processor.bind(asyncio.get_running_loop())

    async def own_timeout() -> ChatResponse:
        try:
            async with asyncio.timeout(0.05):
                await asyncio.Event().wait()
        except TimeoutError:
            w.event("t1", "error", code="turn_timeout")
            return ChatResponse("th", "t1", "a" * 32, "error", answer="too long")
        raise AssertionError("not reached")

    try:
        await w.runs.start(await w.record("t1"), "chat", own_timeout)
        response = await w.runs.wait("t1")
        assert response is not None and response.answer == "too long"
        assert [e.fields.get("code") for e in terminals(w, "t1")] == ["turn_timeout"]
        got = await w.turns.get("t1")
        assert got.status == "error" and ChatResponse.from_json(got.response).answer == "too long"
    finally:
        await w.runs.shutdown()
        w.turns.close()


async def test_a_run_raising_a_base_exception_still_ends(world: World) -> None:
    class Abort(BaseException):
        pass

    async def aborts() -> ChatResponse:
        raise Abort

    await world.runs.start(await world.record("t1"), "chat", aborts)
    assert await world.runs.wait("t1") is None
    assert [e.fields["code"] for e in terminals(world, "t1")] == ["turn_failed"]
    assert (await world.turns.get("t1")).status == "error"
    await assert_thread_free(world)


async def test_a_turn_store_that_refuses_the_end_still_frees_the_thread(world: World) -> None:
    update = world.turns.update

    async def refuses(turn_id: str, **changes: Any) -> None:
        if changes.get("status") != RUNNING:
            raise OSError("disk full")
        await update(turn_id, **changes)

    world.turns.update = refuses  # type: ignore[method-assign]
    await world.runs.start(await world.record("t1"), "chat", answering(world, "t1"))
    await finished(world, "t1")
    assert [e.type for e in terminals(world, "t1")] == ["turn_completed"]
    world.turns.update = update  # type: ignore[method-assign]
    await assert_thread_free(world)


async def test_a_failed_start_reserves_nothing(world: World) -> None:
    update = world.turns.update

    async def refuses(turn_id: str, **changes: Any) -> None:
        raise OSError("disk full")

    world.turns.update = refuses  # type: ignore[method-assign]
    with pytest.raises(OSError):
        await world.runs.start(await world.record("t1"), "chat", answering(world, "t1"))
    assert not world.runs.running("t1") and world.runs.running_count() == 0
    world.turns.update = update  # type: ignore[method-assign]
    await assert_thread_free(world)


async def test_a_cancel_while_the_end_is_recorded_changes_nothing(world: World) -> None:
    update = world.turns.update
    writing = asyncio.Event()
    go_on = asyncio.Event()

    async def slow_end(turn_id: str, **changes: Any) -> None:
        if changes.get("status") != RUNNING:
            writing.set()
            await go_on.wait()
        await update(turn_id, **changes)

    world.turns.update = slow_end  # type: ignore[method-assign]
    await world.runs.start(await world.record("t1"), "chat", answering(world, "t1"))
    await writing.wait()
    assert world.runs.cancel("t1") is False  # it is over: only its end is being written
    shutdown = asyncio.create_task(world.runs.shutdown())  # cancels the task itself
    await asyncio.sleep(0)
    go_on.set()
    await shutdown
    assert not world.runs.running("t1")
    assert (await world.turns.get("t1")).status == "answered"
    assert [e.type for e in terminals(world, "t1")] == ["turn_completed"]


async def test_an_end_the_store_refused_is_written_once_it_is_back(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn store that is away when a run ends (a database restarting) gets the end
    written in the background once it answers again: the record never stays running."""
    import relay.turns.run_end as run_end

    monkeypatch.setattr(run_end, "RECORD_RETRY_DELAYS_S", (0.0, 0.0))
    monkeypatch.setattr(run_end, "LATE_RECORD_FIRST_DELAY_S", 0.0)
    monkeypatch.setattr(run_end, "LATE_RECORD_MAX_DELAY_S", 0.0)
    back = asyncio.Event()
    refused = 0
    write = world.turns.update

    async def update(turn_id: str, **changes: Any) -> None:
        nonlocal refused
        if changes.get("status") == "answered" and not back.is_set():
            refused += 1
            if refused == 5:  # the store answers again from the fifth final write on
                back.set()
            raise RuntimeError("the database is away")
        await write(turn_id, **changes)

    record = await world.record("t-late")
    await world.runs.start(record, "chat", answering(world, "t-late"))
    monkeypatch.setattr(world.turns, "update", update)
    await world.runs.wait("t-late")
    assert not world.runs.running("t-late")  # the thread is back at once
    await asyncio.wait_for(back.wait(), 10)
    for _ in range(100):  # the background write lands on the loop's next turns
        stored = await world.turns.get("t-late")
        if stored is not None and stored.status == "answered":
            break
        await asyncio.sleep(0.01)
    assert stored is not None and stored.status == "answered" and refused == 5
