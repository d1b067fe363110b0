"""Replica fixtures: two instances of the demo app (real uvicorn, 127.0.0.1, different
ports) sharing Redis (the bus) and PostgreSQL (turn records, span store, LangGraph
checkpoints), and a private redis-server and a private PostgreSQL cluster that a test may
kill.

Redis on 127.0.0.1:6379 and PostgreSQL on 127.0.0.1:5432 (database ``test``); under
CI=true a missing one fails the test instead of skipping it."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    LiveServer,
    LiveServers,
    create_database,
    drop_database,
    free_port,
    postgres_admin,
    redis_test_url,
    service_missing,
)
from tests.replicas.private_postgres import MissingPostgres, PrivatePostgres
from tests.stale_tables import plant


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The shared Redis (``RELAY_TEST_REDIS``), on a database of this xdist worker's own."""
    import redis

    url = redis_test_url()
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:
        service_missing(f"Redis at {url}", f"start redis-server ({exc})")
    return url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh database per test (the instances share it; nothing leaks between tests:
    advisory locks and instance ids are per database), made from ``template0``. The
    instances work in its ``public`` (no RELAY_PG_SCHEMA: the current schema), with a
    schema of another span-relay's older tables after it on the database's search_path
    (tests/stale_tables.py), which they must leave alone."""
    name = f"relay_{uuid.uuid4().hex[:12]}"
    url = create_database(name)
    with postgres_admin(url) as admin:
        plant(admin, "relay_stale")
        admin.execute(f'ALTER DATABASE {name} SET search_path = "$user", public, relay_stale')
    yield url
    drop_database(name)


class RedisProcess:
    """A redis-server of our own on a free port (no persistence), to kill and restart."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisProcess:
        binary = shutil.which("redis-server")
        if binary is None:
            service_missing("redis-server", "apt-get install redis-server")
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path).start()
    yield server
    server.kill()


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster of the test's own (tests/replicas/private_postgres.py), for a
    test that stops it: never the shared one. Stopped and removed at teardown whatever
    happened; ask for it before ``make_instance`` so that it outlives the instances."""
    try:
        server = PrivatePostgres()
    except MissingPostgres as exc:
        service_missing("PostgreSQL server binaries", str(exc))
    try:
        yield server.init().start()
    finally:
        server.destroy()


@pytest.fixture
def make_instance(
    app_env: dict[str, str], tmp_path: Path, live_servers: LiveServers
) -> Callable[..., LiveServer]:
    """``make_instance("a", RELAY_BUS=..., RELAY_STORE=...)``: one replica of the demo app."""
    from span_relay_demo.app import create_app

    def make(name: str, **overrides: str) -> LiveServer:
        env = {
            **app_env,
            "RELAY_DATA_DIR": str(tmp_path / name),
            "RELAY_INSTANCE_ID": name,
            **overrides,
        }
        return live_servers.start(create_app(env))

    return make
