"""A turn's check-and-start waits only for requests that name the same turn or thread
(relay/turns/starting.py): a start held up on one thread does not hold up the others, and
the held one still gets its answer once it may go on."""

from __future__ import annotations

import asyncio
import threading
import uuid

import httpx

from relay.turns.starting import StartLocks
from tests.conftest import LiveServer, events_of, stream_post
from tests.contract import check_stream

REFUNDS = "How do refunds work?"


def test_a_held_thread_holds_up_only_its_own_starts(
    server: LiveServer, client: httpx.Client
) -> None:
    held_thread = f"t-held-{uuid.uuid4().hex[:8]}"
    locks: StartLocks = server.relay._starting
    release = asyncio.Event()
    entered = threading.Event()

    async def hold() -> None:  # what a start on that thread that is mid-check looks like
        async with locks.hold(StartLocks.keys(thread=held_thread)):
            entered.set()
            await release.wait()

    assert server.loop is not None
    holder = asyncio.run_coroutine_threadsafe(hold(), server.loop)
    assert entered.wait(10)
    waiting: list[httpx.Response] = []

    def post_on_the_held_thread() -> None:
        with httpx.Client(timeout=60) as c:
            waiting.append(
                c.post(f"{server.url}/chat", json={"message": REFUNDS, "thread_id": held_thread})
            )

    blocked = threading.Thread(target=post_on_the_held_thread)
    blocked.start()
    try:
        # other threads (a new one, a named one) and a client-sent turn id go through
        events = events_of(stream_post(client, f"{server.url}/chat", {"message": REFUNDS}))
        check_stream(events)
        other = client.post(
            f"{server.url}/chat",
            json={"message": REFUNDS, "thread_id": "t-free", "turn_id": str(uuid.uuid4())},
        )
        assert other.status_code == 200 and other.json()["status"] == "answered"
        assert blocked.is_alive() and not waiting  # still waiting behind the held thread
    finally:
        server.loop.call_soon_threadsafe(release.set)
        holder.result(timeout=10)
        blocked.join(timeout=60)
    assert [r.status_code for r in waiting] == [200]
    assert waiting[0].json()["thread_id"] == held_thread
    assert waiting[0].json()["status"] == "answered"
