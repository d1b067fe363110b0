"""The start-up log (relay/startup.py): one INFO record that says what the process serves:
the graphs and their routes, the OTLP receivers, the bus, the stores, the checkpointer and
the SPA (from which folder, or why not), never a password; and RELAY_SPA_DIR without an
index.html refuses to start, naming the folder."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from relay import GraphAgent, Relay
from relay.cli import main
from relay.logs import JsonFormatter
from relay.settings import PACKAGE_SPA_DIR, ConfigError, RelaySettings
from relay.startup import ServedGraph, log_served


def tiny_graph(checkpointer: Any = None) -> Any:
    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="hello")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


def env_of(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"RELAY_DATA_DIR": str(tmp_path / "data"), "OTEL_TRACES_EXPORTER": "none", **more}


def startup_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "relay.startup"]


async def started(relay: Relay, app: Any, caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    """Run ``app``'s lifespan (``relay.lifespan``) through its start; the one record."""
    with caplog.at_level(logging.INFO, logger="relay.startup"):
        async with relay.lifespan(app):
            pass
    [record] = startup_records(caplog)
    return record


async def test_it_lists_the_graphs_routes_stores_checkpointer_and_spa(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    relay = Relay.from_env(env_of(tmp_path))
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(
        app,
        GraphAgent(tiny_graph(), name="agent"),
        GraphAgent(tiny_graph(InMemorySaver()), name="memo"),
    )
    record = await started(relay, app, caplog)
    assert record.levelno == logging.INFO
    lines = record.getMessage().splitlines()
    data = (tmp_path / "data").resolve()
    assert lines[0].startswith("span-relay ") and lines[0].endswith(" serves:")
    assert lines[1:] == [
        "  graph agent: /graphs/agent/chat, /graphs/agent/chat/resume, /graphs/agent/agui",
        "    and, as the first graph, /chat, /chat/resume, /agui",
        "  graph memo: /graphs/memo/chat, /graphs/memo/chat/resume, /graphs/memo/agui",
        "  OTLP receivers: off",
        "  bus: memory (this process only)",
        f"  turn records: SQLite {data / 'turns.db'}",
        f"  saved answers: SQLite {data / 'messages.db'}",
        f"  span store: SQLite {data / 'spans.db'}",
        f"  checkpointer: SQLite {data / 'checkpoints.db'}; graph memo: its own InMemorySaver",
        f"  graphs' store: SQLite {data / 'store.db'}",
        "  who may call: anyone (RELAY_AUTH=none: no credential asked)",
        f"  SPA: GET / from {PACKAGE_SPA_DIR} (the package's own)",
    ]
    # the files it names are the ones the relay opened
    for name in ("turns.db", "messages.db", "spans.db", "checkpoints.db", "store.db"):
        assert (data / name).is_file(), name
    # the same facts as the record's fields (RELAY_LOG_FORMAT=json shows them as data)
    fields: Any = record.__dict__
    assert [g["name"] for g in fields["graphs"]] == ["agent", "memo"]
    assert fields["spa"] == {
        "served": True,
        "folder": str(PACKAGE_SPA_DIR),
        "source": "the package's own",
        "why": None,
    }


async def test_a_spa_folder_of_ones_own_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spa = tmp_path / "spa"
    spa.mkdir()
    (spa / "index.html").write_text("<!doctype html><title>mine</title>")
    relay = Relay.from_env(env_of(tmp_path, RELAY_SPA_DIR=str(spa)))
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(tiny_graph(), name="agent"))
    record = await started(relay, app, caplog)
    assert f"  SPA: GET / from {spa.resolve()} (RELAY_SPA_DIR)" in record.getMessage().splitlines()


async def test_an_app_without_the_relays_routes_says_why_no_spa(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    relay = Relay.from_env(env_of(tmp_path, RELAY_OTLP_HTTP="true"))
    with caplog.at_level(logging.INFO, logger="relay.startup"):
        await relay.start()
        await relay.stop()
    [record] = startup_records(caplog)
    lines = record.getMessage().splitlines()
    assert "  graphs: none in this process" in lines
    assert "  OTLP receivers: HTTP POST /v1/traces" in lines
    assert "  checkpointer: none (no graph in this process)" in lines
    assert lines[-1] == (
        "  SPA: not served (this app does not include the relay's routes "
        "(relay.mount or relay.router))"
    )


def test_urls_show_host_and_database_never_a_password(caplog: pytest.LogCaptureFixture) -> None:
    settings = RelaySettings.from_env(
        {
            "RELAY_STORE": "postgresql://relay:s3cret-pg@db.internal:5433/relaydb?sslmode=require",
            "RELAY_BUS": "rediss://:s3cret-redis@cache.internal:6380/2",
            "RELAY_OTLP_GRPC": "127.0.0.1:4317",
        }
    )
    environ = {"RELAY_CHECKPOINTER": "postgresql://ckpt:s3cret-ck@ckpt.internal/graphs"}

    with caplog.at_level(logging.INFO, logger="relay.startup"):
        log_served(settings, environ, [ServedGraph("agent")], routes=True)
    [record] = startup_records(caplog)
    lines = record.getMessage().splitlines()
    assert "  OTLP receivers: gRPC 127.0.0.1:4317" in lines
    assert "  bus: Redis cache.internal:6380/2 (TLS)" in lines
    assert "  turn records, saved answers and spans: PostgreSQL db.internal:5433/relaydb" in lines
    assert "  checkpointer: PostgreSQL ckpt.internal/graphs" in lines
    as_json = JsonFormatter().format(record)
    assert json.loads(as_json)["bus"] == "Redis cache.internal:6380/2 (TLS)"
    for shown in (record.getMessage(), as_json):
        assert "s3cret" not in shown and "relay@" not in shown and "ckpt@" not in shown


def test_a_spa_folder_without_index_html_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="RELAY_SPA_DIR") as refused:
        RelaySettings.from_env({"RELAY_SPA_DIR": str(tmp_path)})
    assert f"{tmp_path.resolve()} holds no index.html" in str(refused.value)


def test_serve_says_so_in_one_sentence_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in list(os.environ):
        if key.startswith(("RELAY_", "OTEL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("RELAY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RELAY_SPA_DIR", str(tmp_path / "nowhere"))
    assert main(["serve", "--relay-only", "--port", "9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("span-relay: configuration error: RELAY_SPA_DIR=")
    assert f"{(tmp_path / 'nowhere').resolve()} holds no index.html" in err
    assert len(err.strip().splitlines()) == 1


async def test_an_install_without_its_spa_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "site-packages" / "relay" / "spa"
    broken.mkdir(parents=True)
    monkeypatch.setattr("relay.settings.PACKAGE_SPA_DIR", broken)
    monkeypatch.setattr("relay.startup.PACKAGE_SPA_DIR", broken)
    relay = Relay.from_env(env_of(tmp_path))
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(app, GraphAgent(tiny_graph(), name="agent"))
    record = await started(relay, app, caplog)
    assert record.getMessage().splitlines()[-1] == (
        f"  SPA: not served ({broken} holds no index.html: an incomplete install of "
        "span-relay (reinstall it, or set RELAY_SPA_DIR))"
    )
