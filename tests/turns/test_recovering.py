"""What a claimed turn becomes (relay/turns/recovering.py): the policy, the attempts, and
the judgment of a cut run from its events, on the real Redis bus's shared log.

- a tool that started in a node that did not complete makes the cut step unsafe; one in
  a node that completed, an idempotent one and a client's do not;
- ``safe`` recovers a cut run without such a tool, ``always`` whatever it ran, ``off``
  and a graph this instance does not serve never; past the attempts, ``recovery_exhausted``;
- a cut run whose log is gone (or was never shared) is not judged safe.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from relay import events as ev
from relay.bus.memory import MemoryBus
from relay.bus.redis import RedisBus
from relay.events import Event
from relay.turns.records import RUNNING, TurnRecord
from relay.turns.recovering import (
    ALWAYS,
    HANDED_OVER,
    OFF,
    OWNER_LOST,
    SAFE,
    Recovery,
    TurnRecovery,
    cut_tools,
)


def event(seq: int, type_: str, **fields: Any) -> Event:
    return Event(type_, "thread", "turn", "0" * 32, 0.0, fields).with_seq(seq)


def run(*steps: tuple[str, dict[str, Any]]) -> list[Event]:
    return [event(seq, type_, **fields) for seq, (type_, fields) in enumerate(steps, 1)]


def steps(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, e.fields) for e in events]


def started(node: str, span: str) -> tuple[str, dict[str, Any]]:
    return ev.NODE_STARTED, {"node": node, "span_id": span}


def completed(node: str, span: str) -> tuple[str, dict[str, Any]]:
    return ev.NODE_COMPLETED, {"node": node, "span_id": span}


def tool(name: str, node: str | None, **more: Any) -> tuple[str, dict[str, Any]]:
    return ev.TOOL_STARTED, {"tool": name, "node": node, "span_id": uuid.uuid4().hex, **more}


def test_a_tool_in_the_cut_node_is_unsafe_and_one_in_a_completed_node_is_not() -> None:
    assert cut_tools(run(started("prepare", "p"), completed("prepare", "p"))) == []
    assert cut_tools(run(started("hold", "h"), tool("charge", "hold"))) == ["charge"]
    done = run(started("tools", "t1"), tool("charge", "tools"), completed("tools", "t1"))
    assert cut_tools(done) == []  # its node's checkpoint has it: not run again
    again = run(*steps(done), started("tools", "t2"))
    assert cut_tools(again) == []  # the node runs again, no tool of it yet
    refund = run(*steps(again), tool("refund", "tools"))
    assert cut_tools(refund) == ["refund"]  # the second run of the node was cut in it
    assert cut_tools(run(started("hold", "h"), tool("lookup", "hold", idempotent=True))) == []
    assert cut_tools(run(started("hold", "h"), tool("ask", "hold", client=True))) == []
    # a tool whose node is not known counts against every node still running
    assert cut_tools(run(started("a", "a1"), started("b", "b1"), tool("x", None))) == ["x", "x"]


class Graph:
    """A served graph as recovery sees it: records the recoveries it is asked for."""

    def __init__(self, policy: str | None = None) -> None:
        self.recovery_policy = policy
        self.recovered: list[tuple[str, Recovery]] = []

    async def checkpoint_id(self, thread_id: str) -> str | None:
        return "checkpoint-1"

    async def recover(self, record: TurnRecord, recovery: Recovery) -> None:
        self.recovered.append((record.turn_id, recovery))


@pytest.fixture
async def bus() -> AsyncIterator[RedisBus]:
    from tests.conftest import redis_test_url

    shared = RedisBus(redis_test_url(), prefix=f"t{uuid.uuid4().hex[:8]}")
    await shared.start()
    yield shared
    await shared.stop()


def claimed(attempt: int = 2, **more: Any) -> TurnRecord:
    return TurnRecord(
        turn_id=uuid.uuid4().hex,
        thread_id="thread",
        status=RUNNING,
        graph="g",
        attempt=attempt,
        **more,
    )


async def cut(bus: RedisBus, record: TurnRecord, *steps: tuple[str, dict[str, Any]]) -> None:
    """The cut run's events in the shared log (as its owner wrote them)."""
    bus.open_turn(record.turn_id, 0)
    for type_, fields in steps:
        bus.publish(Event(type_, record.thread_id, record.turn_id, "0" * 32, 0.0, fields))
    for _ in range(1000):  # until the writer has them in Redis (a bound on a hang)
        if len(await bus.history(record.turn_id, 0) or []) == len(steps):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the bus did not write the cut run's events")


async def test_safe_recovers_a_cut_step_without_a_tool_and_ends_one_with(bus: RedisBus) -> None:
    graph = Graph()
    recovery = TurnRecovery({"g": graph}, bus, policy=SAFE, max_attempts=3)
    quiet = claimed()
    await cut(bus, quiet, (ev.GRAPH_TOPOLOGY, {}), started("hold", "h"))
    assert await recovery(quiet) is None
    assert graph.recovered == [(quiet.turn_id, Recovery(1, OWNER_LOST, "checkpoint-1"))]
    assert quiet.last_seq == 2  # the recovered run's events follow the log's last

    charged = claimed()
    await cut(bus, charged, (ev.GRAPH_TOPOLOGY, {}), started("hold", "h"), tool("charge", "hold"))
    ending = await recovery(charged)
    assert ending is not None and (ending.code, ending.outcome) == ("interrupted", "unsafe")
    assert ending.said()["reason"] == "tool_running" and ending.said()["tools"] == ["charge"]
    assert "charge" in ending.message
    assert [turn for turn, _ in graph.recovered] == [quiet.turn_id]


async def test_the_policies_the_attempts_and_a_log_that_is_gone(bus: RedisBus) -> None:
    charged = claimed()
    await cut(bus, charged, (ev.GRAPH_TOPOLOGY, {}), started("hold", "h"), tool("charge", "hold"))
    always = Graph(ALWAYS)  # the graph's own word over RELAY_RECOVERY
    assert await TurnRecovery({"g": always}, bus, policy=SAFE)(charged) is None
    assert len(always.recovered) == 1

    off = await TurnRecovery({"g": Graph()}, bus, policy=OFF)(claimed())
    assert off is not None and (off.code, off.outcome) == ("interrupted", "ended")
    elsewhere = await TurnRecovery({"other": Graph()}, bus)(claimed())
    assert elsewhere is not None and elsewhere.outcome == "ended"

    spent = await TurnRecovery({"g": Graph(ALWAYS)}, bus, max_attempts=2)(claimed(attempt=4))
    assert spent is not None and (spent.code, spent.outcome) == ("recovery_exhausted", "exhausted")
    assert await TurnRecovery({"g": Graph(ALWAYS)}, bus, max_attempts=2)(claimed(attempt=3)) is None

    # no log to judge by: never written (lost with Redis), or never shared
    gone = await TurnRecovery({"g": Graph()}, bus)(claimed())
    assert gone is not None and gone.outcome == "unsafe"
    local = await TurnRecovery({"g": Graph()}, MemoryBus())(claimed())
    assert local is not None and local.outcome == "unsafe"


async def test_a_handed_over_turn_says_so_and_an_ended_run_is_not_taken_up(
    bus: RedisBus,
) -> None:
    graph = Graph()
    recovery = TurnRecovery({"g": graph}, bus)
    handed = claimed(handover="cut")  # cut mid-step by the stop: judged by its log
    await cut(bus, handed, (ev.GRAPH_TOPOLOGY, {}), started("hold", "h"))
    assert await recovery(handed) is None
    assert graph.recovered[0][1].reason == HANDED_OVER
    # drained at a step boundary: nothing was cut, whatever the log (here: none at all)
    assert await recovery(claimed(handover="drained")) is None
    assert [r.reason for _, r in graph.recovered] == [HANDED_OVER, HANDED_OVER]
    # the owner published its end and died before recording it: nothing to take up
    ended = claimed()
    await cut(bus, ended, (ev.GRAPH_TOPOLOGY, {}), (ev.TURN_COMPLETED, {"response": {}}))
    finished = await recovery(ended)
    assert finished is not None and finished.outcome == "ended"
    assert len(graph.recovered) == 2
