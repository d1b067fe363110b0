"""``span-relay serve --config langgraph.json`` and ``--graph MODULE:ATTR``: the LangGraph
CLI's own config file, served by the real command, and its errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from relay.cli import main
from relay.cli.graph_app import graph_name
from relay.cli.graph_loading import import_graph
from relay.cli.langgraph_config import GraphEntry, read_config
from tests.conftest import events_of, free_port, stream_post

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = """\
import os
from tests.zoo.graphs import build_custom, build_react

graph = build_react()          # a compiled graph
make_custom = build_custom     # a function that returns one
GREETING = os.environ.get("ZOO_GREETING")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A LangGraph CLI project: langgraph.json, its graphs file and its .env."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "zoo_agents.py").write_text(GRAPHS)
    (tmp_path / ".env").write_text("# the project's settings\nexport ZOO_GREETING='hello'\n")
    (tmp_path / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "env": ".env",
                "graphs": {
                    "react": "./src/zoo_agents.py:graph",
                    "custom": "./src/zoo_agents.py:make_custom",
                },
            }
        )
    )
    return tmp_path


def test_read_config(project: Path) -> None:
    config = read_config(project / "langgraph.json")
    assert config.graphs == [
        GraphEntry("react", "./src/zoo_agents.py:graph"),
        GraphEntry("custom", "./src/zoo_agents.py:make_custom"),
    ]
    assert config.env == {"ZOO_GREETING": "hello"}
    assert config.warning() is None  # dependencies, env, graphs: nothing left unsaid
    factory = import_graph("./src/zoo_agents.py:make_custom", project)
    assert factory.arguments == {}  # a factory of no argument, called in the lifespan
    assert graph_name("my_pkg.agent:graph") == "agent"
    assert graph_name("./src/chat.py:app") == "chat"


def test_bad_specs_say_what_to_change(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for spec, words in (
        ("nocolon", "module:attribute"),
        ("./src/missing.py:graph", "does not exist"),
        ("./src/zoo_agents.py:nothing", "no attribute 'nothing'"),
        ("./src/zoo_agents.py:GREETING", "not a compiled"),
    ):
        assert (
            main(["serve", "--graph", str(project / spec) if spec.startswith("./") else spec]) == 2
        )
        assert words in capsys.readouterr().err
    assert main(["serve", "--relay-only", "--graph", "x:y"]) == 2
    assert "choose one of" in capsys.readouterr().err


def test_serve_config_runs_every_graph(project: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        RELAY_DATA_DIR=str(tmp_path / "data"), OTEL_TRACES_EXPORTER="none", PYTHONPATH=str(ROOT)
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay.cli",
            "serve",
            "--port",
            str(port),
            "--config",
            str(project / "langgraph.json"),
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=30) as client:
            while True:  # until it listens (or has died)
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                try:
                    if client.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            listed = client.get(f"{url}/graphs").json()
            assert [g["name"] for g in listed["graphs"]] == ["react", "custom"]
            assert listed["default"] == "react"
            custom = client.get(f"{url}/graphs/custom").json()
            assert custom["routes"]["chat"] == "/graphs/custom/chat"
            assert {n["id"] for n in custom["topology"]["nodes"]} >= {"review", "approval"}
            events = events_of(
                stream_post(
                    client,
                    f"{url}/graphs/custom/chat",
                    {"message": "Summarize alpha, beta and gamma?"},
                )
            )
            assert events[-1]["type"] == "paused"
            resumed = events_of(
                stream_post(
                    client,
                    f"{url}/graphs/custom/chat/resume",
                    {
                        "thread_id": events[0]["thread_id"],
                        "turn_id": events[0]["turn_id"],
                        "resume": {"approved": True},
                    },
                )
            )
            assert resumed[-1]["type"] == "turn_completed"
            answer = client.post(f"{url}/chat", json={"message": "Weather in Paris?"}).json()
            assert answer["status"] == "answered" and answer["answer"]
            assert client.get(f"{url}/graphs/nope").status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=20)
