"""Turn listings by graph and status (``GET /turns?graph=&status=``), on both turn stores:
SQLite and PostgreSQL (a real server; with CI=true a missing one fails the test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relay.turns.records import TurnRecord
from relay.turns.sqlite import SQLiteTurnStore


@pytest.fixture
def turns(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "postgres":
        from relay.turns.postgres import PostgresTurnStore

        store: Any = PostgresTurnStore(request.getfixturevalue("postgres_url"), instance_id="test")
    else:
        store = SQLiteTurnStore(tmp_path / "turns.db")
    yield store
    store.close()


async def test_list_by_graph_and_status(turns: Any) -> None:
    for i, (graph, status) in enumerate(
        [("research", "answered"), ("writer", "running"), ("research", "paused"), ("", "answered")]
    ):
        await turns.create(
            TurnRecord(
                turn_id=f"t{i}",
                thread_id=f"th{i}",
                status=status,
                started_at=1000.0 + i,
                graph=graph,
            )
        )
    assert [r.turn_id for r in await turns.list(graph="research")] == ["t2", "t0"]
    assert [r.turn_id for r in await turns.list(status="answered")] == ["t3", "t0"]
    assert [r.turn_id for r in await turns.list(graph="research", status="paused")] == ["t2"]
    assert [r.turn_id for r in await turns.list(graph="nobody")] == []
    got = await turns.get("t1")
    assert got is not None and got.graph == "writer"
    assert got.public()["graph"] == "writer"
    received = await turns.get("t3")  # a turn that came in over OTLP: no graph of ours
    assert received is not None and received.public()["graph"] is None


async def test_a_turns_client_tool_rounds_are_kept(turns: Any) -> None:
    """The client-tool rounds a turn has had (RELAY_CLIENT_TOOL_MAX_ROUNDS counts them
    over all its runs): 0 for a new turn, then what the relay records, on both stores."""
    await turns.create(
        TurnRecord(turn_id="t-new", thread_id="th", status="running", started_at=1000.0)
    )
    await turns.create(
        TurnRecord(
            turn_id="t-two",
            thread_id="th2",
            status="paused",
            started_at=1001.0,
            client_tool_round=2,
        )
    )
    new = await turns.get("t-new")
    assert new is not None and new.client_tool_round == 0
    await turns.update("t-two", client_tool_round=3)
    two = await turns.get("t-two")
    assert two is not None and two.client_tool_round == 3
    assert [r.client_tool_round for r in await turns.list(status="paused")] == [3]
