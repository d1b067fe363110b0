"""``span-relay serve --config langgraph.json`` as a user runs it, in a process of its own: a
template-shaped project (``src/agent/``) with ``env``, ``http.app`` and ``http.cors``; the
one warning line; a graph that fails at import or at start-up (one line, exit 2);
``--workers`` reading ``env`` as ``--config`` does; ``serve --app`` with an app object."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.cli import main
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
SPAN_RELAY = str(Path(sys.executable).parent / "span-relay")

GRAPH = """\
import os

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph


def answer(state, config):
    name = config["configurable"].get("x-greeting-to")
    words = "greeting: " + os.environ.get("GREETING", "?") + (f" to {name}" if name else "")
    return {"messages": [AIMessage(words)]}


builder = StateGraph(MessagesState)
builder.add_node("answer", answer)
builder.add_edge(START, "answer")
builder.add_edge("answer", END)
graph = builder.compile()
"""

WEBAPP = """\
import contextlib
import os
from pathlib import Path

from fastapi import FastAPI, Request


@contextlib.asynccontextmanager
async def lifespan(app):
    app.state.opened = "yes"
    yield
    Path(os.environ["WEBAPP_CLOSED"]).write_text("closed")


app = FastAPI(lifespan=lifespan)


@app.get("/hello")
async def hello(request: Request):
    return {"hello": "world", "opened": request.app.state.opened}


@app.get("/config")
async def config():
    return {"mine": True}


@app.get("/env/{key}")
async def env(key: str):
    return {"value": os.environ.get(key)}
"""

CORS = {
    "allow_origins": ["https://app.example"],
    "allow_methods": ["GET", "POST"],
    "allow_headers": ["content-type", "x-custom"],
    "allow_credentials": True,
    "expose_headers": ["x-exposed"],
    "max_age": 123,
}


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        RELAY_DATA_DIR=str(tmp_path / "data"),
        OTEL_TRACES_EXPORTER="none",
        PYTHONPATH=str(ROOT),
    )
    return env


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """LangGraph's project template: ``src/agent/graph.py``, ``langgraph.json``, ``.env``."""
    folder = tmp_path / "project"
    (folder / "src" / "agent").mkdir(parents=True)
    (folder / "src" / "agent" / "__init__.py").write_text("")
    (folder / "src" / "agent" / "graph.py").write_text(GRAPH)
    (folder / "src" / "agent" / "webapp.py").write_text(WEBAPP)
    (folder / ".env").write_text("GREETING=from-file # the file wins\n")
    (folder / "langgraph.json").write_text(
        json.dumps(
            {
                "$schema": "https://langgra.ph/schema.json",
                "dependencies": ["."],
                "graphs": {
                    "agent": {"path": "./src/agent/graph.py:graph", "description": "Greets."}
                },
                "env": ".env",
                "image_distro": "wolfi",
                "ui": {"agent": "./src/agent/ui.tsx"},
                "http": {
                    "app": "./src/agent/webapp.py:app",
                    "cors": CORS,
                    "configurable_headers": {"includes": ["x-greeting-*"]},
                },
            }
        )
    )
    return folder


class Served:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = cwd / f"serve-{self.port}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [SPAN_RELAY, "serve", "--port", str(self.port), *argv],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait(self) -> Served:
        with httpx.Client(timeout=5) as client:
            while True:  # until it listens (or has died)
                assert self.proc.poll() is None, self.output()
                try:
                    if client.get(f"{self.url}/healthz").status_code == 200:
                        return self
                except httpx.TransportError:
                    time.sleep(0.05)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout=30)

    def output(self) -> str:
        return self.log.read_text()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []

    def start(argv: list[str], env: dict[str, str], cwd: Path) -> Served:
        started.append(Served(argv, env, cwd))
        return started[-1]

    yield start
    for served in started:
        served.stop()


def test_a_template_project_with_env_http_app_and_cors(
    project: Path, tmp_path: Path, serve: Any
) -> None:
    env = {**base_env(tmp_path), "GREETING": "from-process", "WEBAPP_CLOSED": str(tmp_path / "c")}
    served = serve(["--config", "langgraph.json"], env, project).wait()
    url = served.url
    with httpx.Client(base_url=url, timeout=30) as client:
        # the user's app beside the relay's routes, its lifespan run, one state for both
        assert client.get("/hello").json() == {"hello": "world", "opened": "yes"}
        # its routes come first, as the Agent Server puts a custom app's before its own
        assert client.get("/config").json() == {"mine": True}
        # one API document and offline pages: the user's app's own (CDN) docs left out
        paths = client.get("/openapi.json").json()["paths"]
        assert "/hello" in paths and "/chat" in paths
        docs = client.get("/docs").text
        assert "/docs-assets/" in docs and "cdn." not in docs
        listed = client.get("/graphs").json()
        assert [g["name"] for g in listed["graphs"]] == ["agent"]
        assert client.get("/graphs/agent").json()["description"] == "Greets."
        # env: python-dotenv's reading (the inline comment dropped), the file winning
        assert client.get("/env/GREETING").json() == {"value": "from-file"}
        answer = client.post("/chat", json={"message": "hi"}).json()
        assert answer["answer"] == "greeting: from-file"
        # http.configurable_headers: the headers it names reach the run's configurable
        answer = client.post(
            "/chat", json={"message": "hi"}, headers={"X-Greeting-To": "Ada", "X-Other": "no"}
        ).json()
        assert answer["answer"] == "greeting: from-file to Ada"
        # http.cors: the preflight answered per its settings
        preflight = client.options(
            "/chat",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-custom",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert preflight.headers["access-control-allow-credentials"] == "true"
        assert preflight.headers["access-control-max-age"] == "123"
        assert "POST" in preflight.headers["access-control-allow-methods"]
        refused = client.options(
            "/chat",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers
        simple = client.get("/hello", headers={"Origin": "https://app.example"})
        assert simple.headers["access-control-expose-headers"] == "x-exposed"
    served.stop()
    assert (tmp_path / "c").read_text() == "closed"  # the user's lifespan ran to its end
    warnings = [line for line in served.output().splitlines() if "not honoured" in line]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        "WARNING relay.cli: langgraph.json: not honoured here: ui "
        "(see README, 'span-relay serve --config')"
    )


def test_a_graph_that_fails_at_import_is_one_line_and_exit_2(project: Path, tmp_path: Path) -> None:
    (project / "src" / "agent" / "graph.py").write_text("import foo\n")
    env = base_env(tmp_path)
    done = subprocess.run(
        [SPAN_RELAY, "serve", "--port", "1", "--config", "langgraph.json"],
        cwd=project,
        env={**env, "WEBAPP_CLOSED": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()  # the warning line (ui), then the error
    assert lines[-1] == (
        "span-relay: cannot load graph 'agent' from ./src/agent/graph.py: "
        "ModuleNotFoundError: No module named 'foo'"
    )
    assert len(lines) == 2 and "not honoured here: ui" in lines[0]
    debug = subprocess.run(
        [SPAN_RELAY, "serve", "--port", "1", "--config", "langgraph.json", "--log-level", "debug"],
        cwd=project,
        env={**env, "WEBAPP_CLOSED": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert debug.returncode == 2
    assert "Traceback" in debug.stdout + debug.stderr  # kept, at DEBUG


def test_a_factory_that_fails_at_start_up_is_one_line_and_exit_2(
    project: Path, tmp_path: Path
) -> None:
    (project / "src" / "agent" / "graph.py").write_text(
        "import contextlib\n\n@contextlib.asynccontextmanager\nasync def graph(config):\n"
        "    raise RuntimeError('the database is away')\n    yield\n"
    )
    done = subprocess.run(
        [SPAN_RELAY, "serve", "--port", str(free_port()), "--config", "langgraph.json"],
        cwd=project,
        env={**base_env(tmp_path), "WEBAPP_CLOSED": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert (
        "span-relay: cannot build graph 'agent' from ./src/agent/graph.py: its factory "
        "raised RuntimeError: the database is away"
    ) in output
    assert "Traceback" not in output


def test_workers_read_env_as_config_does(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The parent of ``--workers 2`` applies the file over the process environment: the
    file's RELAY_BUS wins, so only the store is left to refuse."""
    for key in list(os.environ):
        if key.startswith(("RELAY_", "OTEL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("RELAY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RELAY_BUS", "memory")
    monkeypatch.setenv("GREETING", "from-process")
    (project / ".env").write_text("RELAY_BUS=redis://127.0.0.1:6379/0\nGREETING=from-file\n")
    config = str(project / "langgraph.json")
    assert main(["serve", "--port", "1", "--workers", "2", "--config", config]) == 2
    err = capsys.readouterr().err
    assert "RELAY_STORE=sqlite" in err and "RELAY_BUS=memory" not in err
    assert os.environ["GREETING"] == "from-file"  # what the workers inherit


def test_serve_app_takes_an_app_object(tmp_path: Path, serve: Any) -> None:
    (tmp_path / "myapp.py").write_text(
        "from fastapi import FastAPI\n\napp = FastAPI()\n\n"
        "@app.get('/healthz')\nasync def healthz():\n    return {'ok': True}\n\n"
        "@app.get('/mine')\nasync def mine():\n    return {'mine': True}\n"
    )
    served = serve(["--app", "myapp:app"], base_env(tmp_path), tmp_path).wait()
    assert httpx.get(f"{served.url}/mine").json() == {"mine": True}
    done = subprocess.run(
        [SPAN_RELAY, "serve", "--port", "1", "--app", "myapp:nothing"],
        cwd=tmp_path,
        env=base_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("span-relay: configuration error: --app myapp:nothing")
    assert "Traceback" not in done.stderr
