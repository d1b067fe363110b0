"""Fencing (relay/turns/fencing.py, relay/langgraph/fenced_saver.py): a run whose turn
another instance took over saves no checkpoint, on the real PostgreSQL turn records and a
real LangGraph graph and saver.

- while the run's lease holds, its writes go through without asking anyone;
- past its lease, a run whose turn is still its own renews and writes;
- past its lease, a run whose turn was claimed by another attempt is given up, and its
  graph's checkpoint write is refused: the thread has no checkpoint of it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from relay.langgraph.fenced_saver import FencedSaver, fenced
from relay.turns.fencing import Fence, TurnLost, current_fence
from relay.turns.records import RUNNING, TurnRecord


class State(TypedDict):
    count: int


def step(state: State) -> dict[str, int]:
    return {"count": state["count"] + 1}


def graph(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=saver)


def _now() -> float:
    return time.time() * 1000


@pytest.fixture
def store(postgres_url: str) -> Any:
    from relay.turns.postgres import PostgresTurnStore

    records = PostgresTurnStore(postgres_url, instance_id="owner")
    yield records
    records.close()


async def running_turn(store: Any) -> TurnRecord:
    record = TurnRecord(
        turn_id=uuid.uuid4().hex,
        thread_id=uuid.uuid4().hex,
        status=RUNNING,
        started_at=_now(),
        graph="g",
        lease_until=_now() - 1,  # past: the owner hung
    )
    await store.create(record)
    return record


def fence_of(store: Any, record: TurnRecord, given_up: list[str]) -> Fence:
    """The run's fence as the run manager makes it, over the real records."""

    async def still_ours() -> bool:
        return record.turn_id in await store.renew_leases({record.turn_id: 1}, _now() + 60_000)

    return Fence(
        record.turn_id,
        lambda: record.lease_until,
        still_ours,
        lambda: given_up.append(record.turn_id),
    )


async def test_a_run_whose_turn_was_taken_over_saves_no_checkpoint(store: Any) -> None:
    record = await running_turn(store)
    claimed = await store.claim_expired(_now(), _now() + 60_000, [], False)  # attempt 2
    assert [r.turn_id for r in claimed] == [record.turn_id]
    inner = InMemorySaver()
    given_up: list[str] = []
    config = {"configurable": {"thread_id": record.thread_id}}
    token = current_fence.set(fence_of(store, record, given_up))
    try:
        with pytest.raises(TurnLost):
            await graph(fenced(inner)).ainvoke({"count": 0}, config)
    finally:
        current_fence.reset(token)
    assert given_up == [record.turn_id]
    assert await inner.aget_tuple(config) is None  # nothing of the lost run was saved


async def test_a_run_past_its_lease_that_still_holds_its_turn_renews_and_writes(
    store: Any,
) -> None:
    record = await running_turn(store)  # past its lease, but nobody claimed it
    inner = InMemorySaver()
    given_up: list[str] = []
    config = {"configurable": {"thread_id": record.thread_id}}
    token = current_fence.set(fence_of(store, record, given_up))
    try:
        assert await graph(fenced(inner)).ainvoke({"count": 0}, config) == {"count": 1}
    finally:
        current_fence.reset(token)
    assert given_up == []
    assert (await store.get(record.turn_id)).lease_until > _now()  # renewed on the way
    assert (await inner.aget_tuple(config)) is not None


async def test_without_a_run_or_within_the_lease_the_saver_is_its_inner_one() -> None:
    inner = InMemorySaver()
    saver = fenced(inner)
    assert isinstance(saver, FencedSaver) and fenced(saver) is saver and fenced(None) is None
    config = {"configurable": {"thread_id": "t"}}
    assert await graph(saver).ainvoke({"count": 1}, config) == {"count": 2}
    snapshot = await graph(saver).aget_state(config)
    assert snapshot.values == {"count": 2}
    assert [c.config for c in inner.list(config)] == [c.config async for c in saver.alist(config)]
