"""Every graph form langgraph.json allows, served by ``create_graph_app`` on a real uvicorn:
a compiled graph, a StateGraph builder, ``module:attr`` and ``./file.py:attr`` specs, the
``{"path", "description"}`` form, and factories: of no argument, of a RunnableConfig, of a
ServerRuntime, ``async``, and context managers (async and sync) entered for the app's
lifetime and exited at shutdown. And each wrong form's message."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relay.cli.graph_app import create_graph_app
from relay.cli.graph_loading import GraphLoadError, import_graph
from relay.cli.langgraph_config import read_config
from relay.settings import ConfigError
from tests.conftest import LiveServer, LiveServers

GRAPHS = """\
import contextlib
import json
import os
from pathlib import Path

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph_sdk.runtime import ServerRuntime

LOG = Path(os.environ["FORMS_LOG"])


def note(line):
    with LOG.open("a") as f:
        f.write(line + "\\n")


def builder_saying(words):
    def answer(state):
        return {"messages": [AIMessage(words)]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder


graph = builder_saying("compiled").compile()
builder = builder_saying("builder")


def make_plain():
    return builder_saying("plain").compile()


def make_with_config(config: RunnableConfig):
    note("config " + json.dumps(sorted(config["configurable"])))
    return builder_saying("config").compile()


def make_with_runtime(runtime: ServerRuntime):
    note(f"runtime {runtime.access_context} user={runtime.user}")
    return builder_saying("runtime")


async def make_async(config):
    return builder_saying("async").compile()


@contextlib.asynccontextmanager
async def make_async_cm(config: RunnableConfig):
    note("async cm entered")
    try:
        yield builder_saying("async cm").compile()
    finally:
        note("async cm exited")


@contextlib.contextmanager
def make_sync_cm():
    note("sync cm entered")
    yield builder_saying("sync cm").compile()
    note("sync cm exited")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A project with the graphs both as a file and as a package module (a name of its
    own per test, so that no test reads another's module)."""
    package = f"forms_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "graphs.py").write_text(GRAPHS)
    monkeypatch.setenv("FORMS_LOG", str(tmp_path / "log.txt"))
    yield tmp_path, package
    for name in [m for m in sys.modules if m.startswith(package)]:
        del sys.modules[name]


def log_of(root: Path) -> list[str]:
    path = root / "log.txt"
    return path.read_text().splitlines() if path.exists() else []


def chat(url: str, name: str) -> str:
    answer = httpx.post(f"{url}/graphs/{name}/chat", json={"message": "hi"}, timeout=30).json()
    assert answer["status"] == "answered", answer
    return str(answer["answer"])


def test_every_form_is_served_and_context_managers_live_as_long_as_the_app(
    project: tuple[Path, str], app_env: dict[str, str], live_servers: LiveServers
) -> None:
    root, package = project
    file = f"./{package}/graphs.py"
    forms = {
        "compiled": f"{file}:graph",
        "builder": f"{package}.graphs:builder",  # module form
        "plain": f"{file}:make_plain",
        "config": f"{file}:make_with_config",
        "runtime": f"{file}:make_with_runtime",
        "async": f"{package}.graphs:make_async",
        "async_cm": {"path": f"{file}:make_async_cm", "description": "Opens and closes."},
        "sync_cm": f"{file}:make_sync_cm",
    }
    (root / "langgraph.json").write_text(json.dumps({"graphs": forms}))
    config = read_config(root / "langgraph.json")
    app = create_graph_app(config.graphs, app_env, base=config.base)
    assert log_of(root) == []  # nothing is built before the server starts
    server: LiveServer = live_servers.start(app)
    assert log_of(root)[-2:] == ["async cm entered", "sync cm entered"]
    assert "config []" in log_of(root)  # a RunnableConfig, its configurable empty
    assert "runtime threads.create_run user=None" in log_of(root)
    listed = httpx.get(f"{server.url}/graphs").json()
    assert [g["name"] for g in listed["graphs"]] == list(forms)
    assert listed["default"] == "compiled"  # the first is also at /chat
    described = httpx.get(f"{server.url}/graphs/async_cm").json()
    assert described["description"] == "Opens and closes."
    assert httpx.get(f"{server.url}/graphs/plain").json()["description"] is None
    for name in forms:
        assert chat(server.url, name) == name.replace("_", " ")
    assert httpx.post(f"{server.url}/chat", json={"message": "x"}).json()["answer"] == "compiled"
    assert "async cm exited" not in log_of(root)
    server.stop()
    assert log_of(root)[-2:] == ["sync cm exited", "async cm exited"]  # last in, first out


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("async def make():\n    yield 1\n", "decorate it with @contextlib.asynccontextmanager"),
        ("def make(a, b, c):\n    pass\n", "takes no argument, a RunnableConfig, a ServerRuntime"),
        ("def make(a, b):\n    pass\n", "takes a RunnableConfig and a ServerRuntime"),
        ("make = {'nodes': []}\n", "is a dict, not a compiled LangGraph graph"),
        ("import no_such_module_here\nmake = 1\n", "ModuleNotFoundError"),
        ("make = 1 / 0\n", "ZeroDivisionError: division by zero"),
    ],
)
def test_a_wrong_form_says_what_to_change(tmp_path: Path, source: str, words: str) -> None:
    (tmp_path / "bad.py").write_text(source)
    with pytest.raises(ConfigError) as caught:
        import_graph("./bad.py:make", tmp_path, name="agent")
    assert words in str(caught.value)
    assert "graph 'agent'" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("def make():\n    return 'graph'\n", "its factory returned a str, not a compiled"),
        ("async def make(config):\n    raise KeyError('OPENAI_API_KEY')\n", "KeyError"),
        (
            "import contextlib\n@contextlib.asynccontextmanager\nasync def make():\n"
            "    raise RuntimeError('no database')\n    yield\n",
            "its factory raised RuntimeError: no database",
        ),
    ],
)
def test_a_factory_that_fails_is_one_line(tmp_path: Path, source: str, words: str) -> None:
    (tmp_path / "bad.py").write_text(source)
    graph = import_graph("./bad.py:make", tmp_path, name="agent")

    async def build() -> None:
        async with contextlib.AsyncExitStack() as stack:
            await graph.build(stack)

    with pytest.raises(GraphLoadError) as caught:
        asyncio.run(build())
    assert words in str(caught.value) and "graph 'agent'" in str(caught.value)


def test_a_factory_parameter_with_a_default_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text(
        "def make(checkpointer=None): ...\n"
        "def make_config(config=None): ...\n"
        "def make_typed(cfg: 'RunnableConfig | None' = None): ...\n"
    )

    def arguments(attr: str) -> object:
        return import_graph(f"./f.py:{attr}", tmp_path).arguments

    assert arguments("make") == {}
    assert arguments("make_config") == {"config": "config"}
    assert arguments("make_typed") == {"cfg": "config"}
