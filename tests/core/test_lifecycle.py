"""relay.lifecycle.Lifecycles: work started with the relay in the background, a failure
logged and never raised, stopped and cancelled with it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from relay.lifecycle import Lifecycles


async def test_start_runs_each_entry_in_the_background_and_stop_ends_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lifecycles = Lifecycles()
    done = asyncio.Event()
    held = asyncio.Event()
    stopped: list[str] = []
    cancelled: list[str] = []

    async def quick() -> None:
        done.set()

    async def failing() -> None:
        raise RuntimeError("the store is away")

    async def long() -> None:
        held.set()
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            cancelled.append("long")
            raise

    def stop_that_fails() -> None:
        stopped.append("failing")
        raise RuntimeError("no timers to cancel")

    lifecycles.add(quick, lambda: stopped.append("quick"))
    lifecycles.add(failing, stop_that_fails)
    lifecycles.add(long, lambda: stopped.append("long"))
    with caplog.at_level(logging.ERROR, logger="relay.lifecycle"):
        lifecycles.start()  # returns at once: nothing runs before the loop does
        assert not done.is_set()
        await asyncio.wait_for(done.wait(), 10)
        await asyncio.wait_for(held.wait(), 10)
        await lifecycles.stop()
    assert stopped == ["quick", "failing", "long"]  # each, whatever the one before did
    assert cancelled == ["long"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("failing" in m and "failed" in m for m in messages), messages
    assert any("stop_that_fails" in m for m in messages), messages
