"""A database shared with others: every PostgreSQL store of the relay (turn records,
thread locks, saved answers, spans, LangGraph's checkpointer and the graphs' store)
creates, inspects and migrates its tables in its own schema only (relay/store/schema.py),
on the real PostgreSQL (with CI=true a missing one fails the test).

Another span-relay's tables of older shapes (tests/stale_tables.py) sit in a second
schema on the search_path, after the relay's own, as a shared database's ``public``
would: the relay starts, migrates its own older table, works, and leaves the other schema
exactly as it was. Two deployments with different ``RELAY_PG_SCHEMA`` in one database each
see only their own turns, and neither their thread locks nor their migration locks block
each other. A role given only its schema (no right to create schemas) can run there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from relay.settings import ConfigError, RelaySettings
from relay.store.schema import lock_key
from relay.turns.records import TurnRecord
from tests.conftest import postgres_admin
from tests.stale_tables import STALE_TABLES, plant, snapshot
from tests.store.conftest import Launcher
from tests.store.support import replayed_events, run_turn
from tests.store.test_store import turn_spans

#: what the relay's stores and LangGraph's checkpointer make in their schema
OWN_TABLES = {
    "relay_turns",
    "relay_messages",
    "spans",
    "turn_traces",
    "span_turns",
    "span_schema_version",
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
    "store",
    "store_migrations",
}


class Schemas:
    """Schemas of one test in its database (the worker's), dropped at its end."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.admin = postgres_admin(database)
        self.made: list[str] = []

    def name(self, what: str) -> str:
        name = f"relay_{what}_{uuid.uuid4().hex[:10]}"
        self.made.append(name)
        return name

    def url(self, *search_path: str, **options: str) -> str:
        """The database's URL with this search_path (and other server options)."""
        settings = [f"-csearch_path%3D{'%2C'.join(search_path)}"] if search_path else []
        settings += [f"-c{key}%3D{value}" for key, value in options.items()]
        sep = "&" if "?" in self.database else "?"
        return f"{self.database}{sep}options={'%20'.join(settings)}"

    def tables(self, schema: str) -> set[str]:
        rows = self.admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
        return {row[0] for row in rows}

    def drop(self) -> None:
        for name in self.made:
            self.admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        self.admin.close()


@pytest.fixture
def schemas(postgres_database: str) -> Iterator[Schemas]:
    made = Schemas(postgres_database)
    yield made
    made.drop()


class Opened(TypedDict):
    turns: Any
    messages: Any
    spans: Any


def open_stores(settings: RelaySettings) -> Opened:
    """The relay's PostgreSQL stores as ``Relay`` opens them (relay/core.py)."""
    from relay.store import open_store
    from relay.turns.postgres import open_turn_store
    from relay.turns.postgres_messages import open_message_store

    return {
        "turns": open_turn_store(settings),
        "messages": open_message_store(settings),
        "spans": open_store(settings),
    }


def close_stores(stores: Opened) -> None:
    for store in stores.values():
        store.close()


async def use_the_stores(stores: Opened, settings: RelaySettings) -> None:
    """A turn recorded and read back, a thread locked, an answer saved and rated, spans
    written and read, a graph's checkpoints written and read, a memory put in the graphs'
    store and read back."""
    from langgraph.graph import END, START, StateGraph

    from relay.langgraph.checkpoints import open_checkpointer
    from relay.langgraph.store import open_store as open_memory_store
    from relay.turns.messages import Message

    turns = stores["turns"]
    await turns.create(TurnRecord(turn_id="turn-1", thread_id="thread-1", status="running"))
    await turns.update("turn-1", status="answered", graph="g", user_id="u")
    got = await turns.get("turn-1")
    assert got is not None and (got.status, got.graph, got.user_id) == ("answered", "g", "u")
    assert [r.turn_id for r in await turns.list(thread_id="thread-1")] == ["turn-1"]
    lock = await turns.lock_thread("thread-1")
    assert lock is not None
    await lock.release()

    messages = stores["messages"]
    await messages.save(Message("m-1", "turn-1", "thread-1", "an answer", 1.0))
    assert await messages.rate("m-1", "up", None)
    saved = await messages.get("m-1")
    assert saved is not None and (saved.text, saved.rating) == ("an answer", "up")

    spans = stores["spans"]
    written = turn_spans(1)
    assert spans.write(written) == len(written)
    state, read = spans.turn_spans("turn-1")
    assert state == "stored" and sorted(read, key=lambda r: r.span_id) == sorted(
        written, key=lambda r: r.span_id
    )

    class State(TypedDict):
        n: int

    builder = StateGraph(State)
    builder.add_node("add", lambda state: {"n": state["n"] + 1})
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    async with open_checkpointer(settings, {}) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "thread-1"}}
        assert await graph.ainvoke({"n": 1}, config) == {"n": 2}
        assert (await graph.aget_state(config)).values == {"n": 2}

    async with open_memory_store(settings) as memory:
        await memory.aput(("users", "u"), "likes", {"text": "tea"})
        item = await memory.aget(("users", "u"), "likes")
        assert item is not None and item.value == {"text": "tea"}


@pytest.mark.parametrize("named", [False, True], ids=["current-schema", "RELAY_PG_SCHEMA"])
async def test_the_stores_work_in_their_schema_beside_another_deployments_tables(
    schemas: Schemas, named: bool
) -> None:
    """Another span-relay's older tables in a second schema on the path, after the
    relay's own: the relay starts, migrates its own older ``relay_turns`` (current
    schema) or creates its schema (RELAY_PG_SCHEMA), works, and changes nothing of the
    other schema: no column, no row, no index, no table added or dropped."""
    other = schemas.name("other")
    plant(schemas.admin, other)
    mine = schemas.name("mine")
    if named:  # the URL's current schema is the other one; the setting names ours
        env = {"RELAY_STORE": schemas.url(other), "RELAY_PG_SCHEMA": mine}
    else:  # ours first on the URL's search_path, holding an older relay_turns of its own
        columns, _ = STALE_TABLES["relay_turns"]
        schemas.admin.execute(f'CREATE SCHEMA "{mine}"')
        schemas.admin.execute(f'CREATE TABLE "{mine}".relay_turns ({columns})')
        schemas.admin.execute(
            f'INSERT INTO "{mine}".relay_turns (turn_id, thread_id, status, started_at) '
            "VALUES ('Old-Turn', 'old-thread', 'answered', 5)"
        )
        env = {"RELAY_STORE": schemas.url(mine, other)}
    before = snapshot(schemas.admin, other)
    settings = RelaySettings.from_env(env)

    stores = open_stores(settings)
    try:
        await use_the_stores(stores, settings)
        if not named:  # its own older table: migrated, its row keyed and read
            old = await stores["turns"].get("Old-Turn")
            assert old is not None and (old.thread_id, old.graph) == ("old-thread", "")
    finally:
        close_stores(stores)

    assert snapshot(schemas.admin, other) == before
    assert schemas.tables(other) == set(STALE_TABLES)
    assert OWN_TABLES <= schemas.tables(mine)


async def test_two_deployments_in_one_database_each_keep_their_own(
    schemas: Schemas, postgres_url: str
) -> None:
    """Two ``RELAY_PG_SCHEMA`` in one database: the same turn id in each is two turns;
    each lists only its own; a thread held by one is free in the other (and held, as
    before, for a second instance of the same deployment)."""
    a, b = schemas.name("a"), schemas.name("b")
    settings_a = RelaySettings.from_env({"RELAY_STORE": postgres_url, "RELAY_PG_SCHEMA": a})
    settings_b = RelaySettings.from_env({"RELAY_STORE": postgres_url, "RELAY_PG_SCHEMA": b})
    one, two, one_again = open_stores(settings_a), open_stores(settings_b), None
    held: list[Any] = []
    try:
        await one["turns"].create(TurnRecord(turn_id="t", thread_id="th", status="running"))
        await two["turns"].create(TurnRecord(turn_id="t", thread_id="th", status="paused"))
        got_a, got_b = await one["turns"].get("t"), await two["turns"].get("t")
        assert got_a is not None and got_a.status == "running"
        assert got_b is not None and got_b.status == "paused"
        assert [r.status for r in await one["turns"].list()] == ["running"]
        assert [r.status for r in await two["turns"].list()] == ["paused"]

        held.append(await one["turns"].lock_thread("th"))
        assert held[0] is not None
        held.append(await two["turns"].lock_thread("th"))  # another deployment's thread
        assert held[1] is not None
        one_again = open_stores(settings_a)  # a second replica of deployment a
        assert await one_again["turns"].lock_thread("th") is None

        one["spans"].write(turn_spans(1))
        assert one["spans"].turn_spans("turn-1")[0] == "stored"
        assert two["spans"].turn_spans("turn-1") == ("unknown", [])
    finally:
        for lock in held:
            if lock is not None:
                await lock.release()
        for stores in (one, two, one_again):
            if stores is not None:
                close_stores(stores)


async def test_a_deployments_migrations_do_not_wait_for_another_schemas(
    schemas: Schemas, postgres_database: str
) -> None:
    """While deployment a's migration locks are held (as while its instances migrate),
    deployment b's stores and checkpointer start and migrate. Should b wait for a's locks,
    its statements fail at ``lock_timeout`` (a bound on the failure, not a measurement);
    the checkpointer's and the graphs' store's locks are polled, so their wait is bounded
    here the same way."""
    from relay.langgraph.checkpoints import open_checkpointer
    from relay.langgraph.store import open_store as open_memory_store

    a, b = schemas.name("a"), schemas.name("b")
    url = schemas.url(lock_timeout="10s")
    settings_b = RelaySettings.from_env({"RELAY_STORE": url, "RELAY_PG_SCHEMA": b})
    # session locks, held outside a transaction: a transaction left open would hold up
    # LangGraph's CREATE INDEX CONCURRENTLY anywhere in the database, locks or not
    with postgres_admin(postgres_database) as holder:
        for purpose in ("turns", "messages", "spans", "checkpoints", "store"):
            holder.execute("SELECT pg_advisory_lock(%s)", (lock_key(a, purpose),))
        stores = open_stores(settings_b)
        try:
            async with asyncio.timeout(60):
                async with open_checkpointer(settings_b, {}), open_memory_store(settings_b):
                    pass
        finally:
            close_stores(stores)
    assert OWN_TABLES <= schemas.tables(b)


async def test_a_role_given_only_its_schema_runs_there(schemas: Schemas) -> None:
    """The grants RUNBOOK.md names: USAGE and CREATE on an existing schema, no right to
    create schemas in the database (PostgreSQL 15: none on ``public`` either). The relay
    does not try to create a schema that is there, and works."""
    role = f"relay_role_{uuid.uuid4().hex[:10]}"
    mine = schemas.name("granted")
    admin = schemas.admin
    admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        admin.execute(f'CREATE SCHEMA "{mine}"')
        admin.execute(f'GRANT USAGE, CREATE ON SCHEMA "{mine}" TO {role}')
        rights = admin.execute(
            "SELECT has_database_privilege(%s, current_database(), 'CREATE'), "
            "has_schema_privilege(%s, 'public', 'CREATE')",
            (role, role),
        ).fetchone()
        assert rights == (False, False)  # PostgreSQL's defaults, from version 15 on
        parts = urlsplit(schemas.database)
        base = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))
        settings = RelaySettings.from_env({"RELAY_STORE": base, "RELAY_PG_SCHEMA": mine})
        stores = open_stores(settings)
        try:
            await use_the_stores(stores, settings)
        finally:
            close_stores(stores)
        assert OWN_TABLES <= schemas.tables(mine)
    finally:
        admin.execute(f'DROP SCHEMA IF EXISTS "{mine}" CASCADE')
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE {role}")


def test_a_search_path_without_an_existing_schema_refuses_to_start(schemas: Schemas) -> None:
    """No RELAY_PG_SCHEMA and a search_path that names no schema that exists: one sentence
    that says what to do, not PostgreSQL's "no schema has been selected" mid-migration."""
    from relay.turns.postgres import PostgresTurnStore

    missing = schemas.name("missing")
    with pytest.raises(ConfigError, match=r"names no schema that exists.*RELAY_PG_SCHEMA"):
        PostgresTurnStore(schemas.url(missing), instance_id="x")


@pytest.mark.parametrize(
    ("value", "problem"),
    [("x" * 64, "longer than 63 bytes"), ("pg_relay", "PostgreSQL's own"), ("é" * 32, "longer")],
)
def test_a_schema_name_postgresql_would_cut_or_reserves_is_refused(
    value: str, problem: str
) -> None:
    store = {"RELAY_STORE": "postgresql://db.example/relay"}  # the setting needs one
    with pytest.raises(ConfigError, match=problem):
        RelaySettings.from_env({**store, "RELAY_PG_SCHEMA": value})
    assert RelaySettings.from_env({**store, "RELAY_PG_SCHEMA": "Team A"}).pg_schema == "Team A"


async def test_instances_starting_together_create_the_schema_once(schemas: Schemas) -> None:
    """Replicas (or workers) that start together with a schema that is not there yet take
    turns creating it: while one holds the schema's creation lock, the others wait for it
    (seen in pg_locks), then find the schema there and start, all of them."""
    from relay.store.schema import find

    mine = schemas.name("together")
    url = schemas.url()
    key = lock_key(mine, "schema")
    starts: list[asyncio.Task[str]] = []
    with postgres_admin(schemas.database) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        for _ in range(3):
            starts.append(
                asyncio.create_task(asyncio.to_thread(find, url, mine, {"autocommit": True}))
            )
        async with asyncio.timeout(30):  # a bound on a failure (nobody ever waits)
            while True:
                waiting = schemas.admin.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                    "AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = %s",
                    (key,),
                ).fetchone()[0]
                if waiting == 3:
                    break
                await asyncio.sleep(0.05)
        assert mine not in {
            row[0] for row in schemas.admin.execute("SELECT nspname FROM pg_namespace")
        }
        holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
        assert await asyncio.gather(*starts) == [mine, mine, mine]
    assert schemas.tables(mine) == set()  # there, and empty
    assert schemas.admin.execute(
        "SELECT 1 FROM pg_namespace WHERE nspname = %s", (mine,)
    ).fetchone() == (1,)


@pytest.mark.slow
def test_span_relay_serve_starts_in_its_schema_of_a_shared_database(
    schemas: Schemas, launcher: Launcher
) -> None:
    """The report, end to end: ``span-relay serve`` with ``RELAY_STORE`` on a database
    whose current schema holds another span-relay's older tables, and
    ``RELAY_PG_SCHEMA`` naming its own. It starts, runs a turn that pauses and resumes
    (turn records, thread lock, checkpoints), lists it and replays it from the span
    store; the other schema is as it was."""
    other = schemas.name("other")
    plant(schemas.admin, other)
    before = snapshot(schemas.admin, other)
    mine = schemas.name("served")
    server = launcher.start(RELAY_STORE=schemas.url(other), RELAY_PG_SCHEMA=mine)
    turn_id = run_turn(server.url, "paused")  # paused, then resumed
    record = httpx.get(f"{server.url}/turns/{turn_id}").json()
    assert record["status"] == "answered", record
    replayed = replayed_events(server.url, turn_id, speed=0)
    assert "turn_completed" in [event["type"] for event in replayed], replayed
    server.stop()
    assert snapshot(schemas.admin, other) == before
    assert OWN_TABLES <= schemas.tables(mine)
