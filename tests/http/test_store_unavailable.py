"""A database that is away: the 503 JSON answer (for our StoreUnavailable and for a driver
error no store translated), and readiness checks that name the part, run together and
never hang /readyz. The SQLite defaults answer the same checks. The real outage, with a
PostgreSQL cluster shut down mid-turn, is tests/replicas/test_postgres_outage.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import PoolTimeout
from starlette.requests import Request

from relay.errors import StoreUnavailable
from relay.http.errors import store_unavailable_handler
from relay.readiness import problems, store_checks
from relay.store.pool import unavailable_as


def request() -> Request:
    return Request(
        {"type": "http", "method": "POST", "path": "/chat", "headers": [], "query_string": b""}
    )


@pytest.mark.parametrize(
    "exc",
    [
        StoreUnavailable("checkpoints", "no database connection"),
        psycopg.OperationalError("the connection is closed"),  # nothing translated it
        PoolTimeout("couldn't get a connection after 5.00 sec"),
    ],
)
async def test_a_store_that_is_away_is_a_503_json_with_retry_after(exc: Exception) -> None:
    response = await store_unavailable_handler(request(), exc)
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) > 0
    body = json.loads(bytes(response.body))
    assert body["error"]["code"] == "store_unavailable"
    assert "5432" not in body["error"]["message"]  # the reason is for the log


def test_driver_errors_become_store_unavailable_and_others_pass() -> None:
    with pytest.raises(StoreUnavailable, match=r"^turn records: no database connection"):
        with unavailable_as("turn records"):
            raise PoolTimeout("couldn't get a connection after 5.00 sec")
    with pytest.raises(psycopg.errors.UniqueViolation):  # a duplicate turn id is no outage
        with unavailable_as("turn records"):
            raise psycopg.errors.UniqueViolation("duplicate key")


def test_every_route_of_an_app_answers_503_for_a_driver_error(tmp_path: Path) -> None:
    """Relay.install registers the handler: the app's own routes get it too (a real
    uvicorn on 127.0.0.1, as every HTTP test here)."""
    import httpx

    from relay.cli.relay_only import create_relay_app
    from tests.conftest import LiveServer

    app = create_relay_app({"RELAY_DATA_DIR": str(tmp_path), "OTEL_TRACES_EXPORTER": "none"})

    @app.post("/chat")
    async def chat() -> None:  # as the checkpointer's connection dies under a request
        raise psycopg.OperationalError("the connection is closed")

    server = LiveServer(app).start()
    try:
        response = httpx.post(f"{server.url}/chat", timeout=30)
    finally:
        server.stop()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "store_unavailable"
    assert response.headers["retry-after"]


async def test_readiness_names_the_part_runs_checks_together_and_is_bounded() -> None:
    async def fine() -> None:
        return None

    async def away() -> None:
        raise StoreUnavailable("thread locks", "no database connection")

    async def hangs() -> None:
        await asyncio.sleep(30)

    found = await problems(
        [("turn store", fine), ("turn store", away), ("checkpoints", hangs), ("span store", hangs)],
        timeout_s=0.3,
    )
    assert found == [
        "thread locks: no database connection",
        "checkpoints: no answer within 0.3 s",
        "span store: no answer within 0.3 s",
    ]
    # together, not one after the other: each check waits for the other to have started,
    # which only checks that run at the same time can do
    started = [asyncio.Event(), asyncio.Event()]

    def meeting(mine: int) -> Callable[[], Awaitable[None]]:
        async def check() -> None:
            started[mine].set()
            await started[1 - mine].wait()

        return check

    assert await problems([("a", meeting(0)), ("b", meeting(1))], timeout_s=30) == []


async def test_the_sqlite_defaults_answer_the_same_checks(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from relay.langgraph.checkpoints import check_checkpointer
    from relay.store.sqlite import SQLiteSpanStore
    from relay.turns.sqlite import SQLiteTurnStore

    turns = SQLiteTurnStore(tmp_path / "turns.db")
    store = SQLiteSpanStore(tmp_path / "spans.db", retention_s=60, max_turns=10)
    try:
        assert await problems(store_checks(turns, store)) == []
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "ck.db")) as saver:
            await check_checkpointer(saver)
    finally:
        turns.close()
        store.close()


async def test_a_checkpoint_read_that_waits_too_long_is_a_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The saver queues its operations behind one lock: a request's read is bounded."""
    from relay.langgraph import checkpoints

    monkeypatch.setattr(checkpoints, "READ_TIMEOUT_S", 0.1)
    with pytest.raises(StoreUnavailable, match=r"^checkpoints: no answer within 0.1 s"):
        await checkpoints.read_checkpoints(asyncio.sleep(30))
    with pytest.raises(StoreUnavailable, match=r"^checkpoints: "):
        await checkpoints.read_checkpoints(_raises(psycopg.OperationalError("closed")))
    assert await checkpoints.read_checkpoints(asyncio.sleep(0, "state")) == "state"


async def _raises(exc: Exception) -> None:
    raise exc
