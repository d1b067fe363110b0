"""relay.bus.memory.MemoryBus: per-turn logs, cursors, waits, caps and retention."""

from __future__ import annotations

import asyncio

import pytest

from relay.bus import CursorExpired, MemoryBus, UnknownTurn
from relay.bus import memory as memory_module
from relay.events import Event


def ev(turn: str, type_: str = "node_started", n: int = 0) -> Event:
    return Event(type_, "th", turn, "f" * 32, 1000.0 + n, {"n": n})


def publish_n(bus: MemoryBus, turn: str, count: int, start: int = 0) -> list[Event]:
    return [bus.publish(ev(turn, n=start + i)) for i in range(count)]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clk = Clock()
    monkeypatch.setattr(memory_module.time, "monotonic", clk)
    return clk


# -- seq -------------------------------------------------------------------------------


def test_seq_starts_at_one_and_increases() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    stamped = publish_n(bus, "t", 5)
    assert [e.seq for e in stamped] == [1, 2, 3, 4, 5]
    assert bus.last_seq("t") == 5


def test_publish_numbers_a_fresh_event_and_copies_one_already_numbered() -> None:
    bus = MemoryBus()
    original = ev("t")
    stamped = bus.publish(original)
    assert stamped is original and stamped.seq == 1  # one object per event, not two
    assert stamped.to_dict()["seq"] == 1
    again = bus.publish(original)  # (a retry): a copy, the first keeps its number
    assert again is not original and (original.seq, again.seq) == (1, 2)
    assert (again.type, again.fields, again.ts) == (original.type, original.fields, original.ts)
    assert [e.seq for e in bus.reader("t", 0).take()] == [1, 2]


def test_an_event_encoded_before_its_number_is_copied_not_changed() -> None:
    bus = MemoryBus()
    original = ev("t")
    text = original.to_json()  # someone holds its encoding: it must stay true
    stamped = bus.publish(original)
    assert stamped is not original and original.to_json() == text
    assert stamped.seq == 1 and '"seq":1' in stamped.to_json()


def test_open_turn_continues_after_last_seq() -> None:
    bus = MemoryBus()
    bus.open_turn("t", last_seq=41)
    assert bus.last_seq("t") == 41
    assert [e.seq for e in publish_n(bus, "t", 3)] == [42, 43, 44]


def test_open_turn_again_never_reuses_seq() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    publish_n(bus, "t", 2)
    bus.open_turn("t", last_seq=0)  # an existing log keeps its numbering
    assert bus.publish(ev("t")).seq == 3


def test_seqs_are_per_turn() -> None:
    bus = MemoryBus()
    a = publish_n(bus, "a", 3)
    b = publish_n(bus, "b", 2)
    assert [e.seq for e in a] == [1, 2, 3] and [e.seq for e in b] == [1, 2]
    assert bus.last_seq("unknown") == 0
    assert bus.has_turn("a") and not bus.has_turn("unknown")


# -- readers ----------------------------------------------------------------------------


@pytest.mark.parametrize("after", [0, 1, 4, 7, 10])
def test_reader_from_any_cursor_gets_exactly_the_later_events(after: int) -> None:
    bus = MemoryBus()
    publish_n(bus, "t", 10)
    reader = bus.reader("t", after=after)
    got = reader.take()
    assert [e.seq for e in got] == list(range(after + 1, 11))
    assert reader.cursor == 10
    assert reader.take() == []
    publish_n(bus, "t", 2)
    assert [e.seq for e in reader.take()] == [11, 12]


def test_two_readers_are_independent() -> None:
    bus = MemoryBus()
    publish_n(bus, "t", 3)
    r1 = bus.reader("t")
    r2 = bus.reader("t", after=2)
    assert [e.seq for e in r1.take()] == [1, 2, 3]
    assert [e.seq for e in r2.take()] == [3]
    assert bus.reader_count("t") == 2
    r1.close()
    r1.close()  # idempotent
    assert bus.reader_count("t") == 1
    r2.close()
    assert bus.reader_count("t") == 0
    assert bus.reader_count("nope") == 0


def test_reader_of_unknown_turn() -> None:
    with pytest.raises(UnknownTurn):
        MemoryBus().reader("nope")


async def test_wait_returns_at_once_when_events_are_there() -> None:
    bus = MemoryBus()
    publish_n(bus, "t", 1)
    reader = bus.reader("t")
    assert await asyncio.wait_for(reader.wait(None), 5) is True


async def test_wait_wakes_on_publish() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    reader = bus.reader("t")
    waiter = asyncio.ensure_future(reader.wait(30))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    bus.publish(ev("t"))
    assert await asyncio.wait_for(waiter, 5) is True
    assert [e.seq for e in reader.take()] == [1]


async def test_wait_times_out_without_publish() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    reader = bus.reader("t")
    assert await reader.wait(0.02) is False
    bus.publish(ev("other"))  # another turn does not wake this reader
    assert await reader.wait(0.02) is False


async def test_many_waiters_all_wake_and_leave_no_futures() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    readers = [bus.reader("t") for _ in range(5)]
    waits = [asyncio.ensure_future(r.wait(30)) for r in readers]
    await asyncio.sleep(0.01)
    bus.publish(ev("t"))
    assert await asyncio.wait_for(asyncio.gather(*waits), 5) == [True] * 5
    assert bus._logs["t"].waiters == set()
    await readers[0].wait(0.01)  # timed-out waits clean up after themselves too
    assert bus._logs["t"].waiters == set()


async def test_cancelled_wait_leaves_no_future() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    task = asyncio.ensure_future(bus.reader("t").wait(30))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bus._logs["t"].waiters == set()


# -- the per-turn cap ---------------------------------------------------------------------


def test_cap_trims_oldest_and_expires_old_cursors() -> None:
    bus = MemoryBus(max_events_per_turn=3)
    bus.open_turn("t")
    slow = bus.reader("t")
    publish_n(bus, "t", 5)
    assert [e.seq for e in bus.reader("t", after=2).take()] == [3, 4, 5]
    with pytest.raises(CursorExpired) as info:
        slow.take()
    assert info.value.cursor == 0 and info.value.oldest == 3 and info.value.turn_id == "t"
    with pytest.raises(CursorExpired):
        bus.reader("t", after=1)
    assert bus.publish(ev("t")).seq == 6  # numbering goes on


def test_cursor_expired_message_says_what_is_kept() -> None:
    exc = CursorExpired("t", 2, 9)
    assert "2" in str(exc) and "9" in str(exc) and isinstance(exc, LookupError)


# -- retention ------------------------------------------------------------------------------


def finish(bus: MemoryBus, turn: str) -> None:
    bus.open_turn(turn)
    bus.publish(ev(turn, "turn_completed"))


def test_running_turns_are_never_dropped(clock: Clock) -> None:
    bus = MemoryBus(max_finished_turns=1, retention_s=10)
    bus.open_turn("running")
    bus.publish(ev("running"))
    bus.publish(ev("running", "paused"))  # paused is not turn-terminal
    clock.now += 1000
    for i in range(5):
        finish(bus, f"done{i}")
    assert bus.has_turn("running")


def test_finished_turns_are_kept_by_count(clock: Clock) -> None:
    bus = MemoryBus(max_finished_turns=2, retention_s=3600)
    for i in range(4):
        finish(bus, f"t{i}")
        clock.now += 1
    bus.open_turn("new")  # retention runs when a turn opens
    assert [bus.has_turn(f"t{i}") for i in range(4)] == [False, False, True, True]
    assert bus.turn_count() == 3


def test_finished_turns_are_kept_by_age(clock: Clock) -> None:
    bus = MemoryBus(max_finished_turns=100, retention_s=60)
    finish(bus, "old")
    clock.now += 30
    finish(bus, "young")
    clock.now += 31  # old: 61 s, young: 31 s
    bus.open_turn("new")
    assert not bus.has_turn("old")
    assert bus.has_turn("young") and bus.has_turn("new")
    clock.now += 30
    bus.open_turn("newer")
    assert not bus.has_turn("young")


def test_error_is_turn_terminal_for_retention(clock: Clock) -> None:
    bus = MemoryBus(max_finished_turns=100, retention_s=1)
    bus.open_turn("failed")
    bus.publish(ev("failed", "error"))
    clock.now += 5
    bus.open_turn("new")
    assert not bus.has_turn("failed")


def test_reopened_turn_is_live_again(clock: Clock) -> None:
    bus = MemoryBus(max_finished_turns=100, retention_s=1)
    finish(bus, "t")
    bus.open_turn("t")  # runs again: no longer finished
    clock.now += 5
    bus.open_turn("other")
    assert bus.has_turn("t")
    assert bus.publish(ev("t")).seq == 2


def test_finished_turn_with_a_reader_is_kept_while_read(clock: Clock) -> None:
    bus = MemoryBus(max_finished_turns=100, retention_s=1)
    finish(bus, "t")
    reader = bus.reader("t")
    clock.now += 5
    bus.open_turn("other")
    assert bus.has_turn("t")
    assert [e.type for e in reader.take()] == ["turn_completed"]
    reader.close()


def test_finished_turn_is_dropped_after_its_reader_leaves(clock: Clock) -> None:
    bus = MemoryBus(max_finished_turns=100, retention_s=1)
    finish(bus, "t")
    reader = bus.reader("t")
    clock.now += 5
    bus.open_turn("a")
    reader.close()
    clock.now += 5
    finish(bus, "b")
    clock.now += 5
    bus.open_turn("c")  # retention runs again, long after the reader left
    assert not bus.has_turn("t")


# -- bounded takes and finished ------------------------------------------------------------------


def test_take_with_limit_pages_through_the_log() -> None:
    bus = MemoryBus()
    publish_n(bus, "t", 10)
    reader = bus.reader("t")
    assert [e.seq for e in reader.take(4)] == [1, 2, 3, 4]
    assert reader.cursor == 4
    assert [e.seq for e in reader.take(4)] == [5, 6, 7, 8]
    assert [e.seq for e in reader.take(4)] == [9, 10]
    assert reader.take(4) == []
    assert len(bus.reader("t").take()) == 10  # the default batch holds these


def test_finished() -> None:
    bus = MemoryBus()
    assert not bus.finished("t")
    bus.open_turn("t")
    bus.publish(ev("t", "paused"))
    assert not bus.finished("t")
    bus.publish(ev("t", "turn_completed"))
    assert bus.finished("t")
    bus.open_turn("t")  # a new run: live again
    assert not bus.finished("t")


# -- push readers (the stream writer's wait) --------------------------------------------


def test_watch_calls_back_once_per_burst() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    reader = bus.reader("t")
    calls: list[int] = []
    assert reader.watch(lambda: calls.append(bus.last_seq("t"))) is True
    publish_n(bus, "t", 3)  # a burst: the first publish calls back and disarms
    assert calls == [1]
    assert reader.watch(lambda: calls.append(-1)) is False  # events are there: take them
    assert [e.seq for e in reader.take()] == [1, 2, 3]
    assert reader.watch(lambda: calls.append(bus.last_seq("t"))) is True
    bus.publish(ev("other"))  # another turn does not call back
    bus.publish(ev("t"))
    assert calls == [1, 4]


def test_unwatch_and_close_disarm() -> None:
    bus = MemoryBus()
    bus.open_turn("t")
    readers = [bus.reader("t") for _ in range(3)]
    calls: list[int] = []
    for i, r in enumerate(readers):
        assert r.watch(lambda i=i: calls.append(i))
    readers[0].unwatch()
    readers[1].close()
    bus.publish(ev("t"))
    assert calls == [2]
    assert bus._logs["t"].watchers == {}


def test_watch_with_an_expired_cursor_says_take() -> None:
    bus = MemoryBus(max_events_per_turn=2)
    bus.open_turn("t")
    reader = bus.reader("t")
    publish_n(bus, "t", 4)  # the log keeps seq 3 and 4: the cursor (0) expired
    assert reader.watch(lambda: None) is False  # take, which says so
    with pytest.raises(CursorExpired):
        reader.take()
