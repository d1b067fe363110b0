"""Fixtures for the span store, replay and import tests.

- ``launcher``: starts the real app (``span-relay serve``: span_relay_demo.app:create_app in
  uvicorn) as subprocesses on 127.0.0.1 with their own RELAY_DATA_DIR and RELAY_FAULTS=1,
  and stops them all at the end of the module; a restart is a real process restart;
- ``make_store``: a SpanStore of either backend (``sqlite`` or ``postgres``);
- ``fixture_file`` / ``recorded``: the trace files in ``fixtures/`` (made from our own
  agent's spans by ``python -m tests.store.fixtures.make_fixtures``) and the live events
  recorded with them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.store.support import RelayProcess

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class Launcher:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[RelayProcess] = []

    def start(self, data_dir: Path | str | None = None, **env: str) -> RelayProcess:
        path = Path(data_dir) if data_dir else self.root / f"data-{len(self.started)}"
        server = RelayProcess(path, env).start()
        self.started.append(server)
        return server

    def stop_all(self) -> None:
        for server in self.started:
            server.stop()


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    launcher = Launcher(tmp_path_factory.mktemp("relay"))
    yield launcher
    launcher.stop_all()


# -- stores -----------------------------------------------------------------------------


@pytest.fixture
def make_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """``make_store(retention_s=..., max_turns=..., clock=...)`` of the test's backend;
    every call opens the same storage (a second instance, or a reopen)."""
    stores: list[Any] = []
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None

    def make(retention_s: float = 3600.0, max_turns: int = 1000, **kw: Any) -> Any:
        if url is not None:
            from relay.store.postgres import PostgresSpanStore

            store: Any = PostgresSpanStore(url, retention_s=retention_s, max_turns=max_turns, **kw)
        else:
            from relay.store.sqlite import SQLiteSpanStore

            store = SQLiteSpanStore(
                tmp_path / "spans.db", retention_s=retention_s, max_turns=max_turns, **kw
            )
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


# -- trace-file fixtures ----------------------------------------------------------------


def fixture_file(name: str) -> Path:
    return FIXTURES / name


def recorded(turn: str) -> list[dict[str, Any]]:
    """The live events recorded together with ``{turn}.*`` trace files."""
    text = (FIXTURES / f"{turn}.events.ndjson").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]
