"""Another span-relay's tables, of older shapes, to plant in a schema the relay under test
must not touch: the fixtures put such a schema on every test's ``search_path``, after the
test's own (tests/conftest.py ``postgres_url``, tests/replicas/conftest.py), so each test
that uses PostgreSQL also proves that the relay creates, inspects and migrates its own
schema only.

Each table has a name the relay or LangGraph uses and a shape an older install had, and
rows that no test of ours writes. The shapes are chosen so that a store reading the wrong
table fails loudly: ``relay_turns`` has the key columns (a column check by name alone finds
them and skips its own migration) but not the later ones, the version tables claim
versions far ahead (a store that reads them would skip its migrations), and the data
tables lack columns the relay writes. :func:`plant` makes them, :func:`snapshot` reads
back what they hold, to compare after a run.
"""

from __future__ import annotations

from typing import Any

#: the tables planted, by name: the columns of an older install, then its rows
STALE_TABLES: dict[str, tuple[str, list[str]]] = {
    "relay_turns": (
        "turn_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, status TEXT NOT NULL, "
        "started_at DOUBLE PRECISION NOT NULL DEFAULT 0, owner TEXT NOT NULL DEFAULT '', "
        "turn_key TEXT, thread_key TEXT",
        ["('stale-turn', 'stale-thread', 'running', 1, 'stale', 'stale-turn', 'stale-thread')"],
    ),
    "relay_messages": (
        "message_id TEXT PRIMARY KEY, turn_id TEXT NOT NULL, text TEXT NOT NULL",
        ["('stale-message', 'stale-turn', 'an old answer')"],
    ),
    "span_schema_version": ("version INTEGER", ["(99)"]),
    "spans": (
        "trace_id TEXT NOT NULL, span_id TEXT NOT NULL, name TEXT NOT NULL",
        ["('stale-trace', 'stale-span', 'stale')"],
    ),
    "turn_traces": ("turn_id TEXT NOT NULL, trace_id TEXT NOT NULL", []),
    "span_turns": ("turn_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL", []),
    "checkpoint_migrations": ("v INTEGER PRIMARY KEY", ["(999)"]),
    "checkpoints": ("thread_id TEXT NOT NULL, checkpoint JSONB NOT NULL", []),
    "store_migrations": ("v INTEGER PRIMARY KEY", ["(999)"]),
    "store": ("prefix TEXT NOT NULL, key TEXT NOT NULL", []),
}


def plant(conn: Any, schema: str) -> None:
    """Create ``schema`` (if missing) and the stale tables in it, on an autocommit
    connection."""
    from psycopg import sql

    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    for table, (columns, rows) in STALE_TABLES.items():
        name = sql.Identifier(schema, table)
        conn.execute(sql.SQL("CREATE TABLE {} (" + columns + ")").format(name))
        for row in rows:
            conn.execute(sql.SQL("INSERT INTO {} VALUES " + row).format(name))


def snapshot(conn: Any, schema: str) -> dict[str, Any]:
    """What ``schema``'s tables look like: each table's columns and rows, and its
    indexes."""
    from psycopg import sql

    tables = [
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (schema,),
        ).fetchall()
    ]
    shot: dict[str, Any] = {}
    for table in tables:
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (schema, table),
        ).fetchall()
        rows = conn.execute(
            sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(schema, table))
        ).fetchall()
        shot[table] = (columns, sorted(map(repr, rows)))
    shot["indexes"] = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s ORDER BY 1", (schema,)
    ).fetchall()
    return shot
