"""langgraph.json's ``store`` and ``checkpointer`` sections: a wrong value refuses to
start with one sentence (relay/langgraph/store.py, checkpointer_config.py); a project
whose langgraph.json has a ``store`` section, served by ``span-relay serve --config`` (a
real process), answers from its store; ``checkpointer.serde`` reaches the checkpointer."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay import ConfigError, RelaySettings, open_checkpointer
from relay.cli import main
from relay.langgraph.checkpointer_config import checkpointer_options
from relay.langgraph.store import store_options
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]

#: the project's graph: remembers per user across threads (the store of the relay), and
#: answers with the store's TTL setting, which langgraph.json's section decides
GRAPH = """\
import uuid
from langchain_core.messages import AIMessage
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph


async def recall(state: MessagesState) -> dict:
    store = get_store()
    text = str(state["messages"][-1].content)
    if text.startswith("remember "):
        await store.aput(("memories",), uuid.uuid4().hex, {"text": text[9:]})
        return {"messages": [AIMessage("noted")]}
    held = sorted(item.value["text"] for item in await store.asearch(("memories",)))
    ttl = (store.ttl_config or {}).get("default_ttl")
    return {"messages": [AIMessage(f"{'; '.join(held)} (ttl {ttl})")]}


builder = StateGraph(MessagesState)
builder.add_node("recall", recall)
builder.add_edge(START, "recall")
graph = builder.compile()
"""

EMBED = """\
def embed(texts):
    return [[float(len(t)), 1.0] for t in texts]

NOT_A_FUNCTION = 42
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "memory_agent.py").write_text(GRAPH)
    (tmp_path / "src" / "embeddings.py").write_text(EMBED)
    return tmp_path


def write_config(project: Path, **sections: Any) -> Path:
    path = project / "langgraph.json"
    config = {"dependencies": ["."], "graphs": {"memory": "./src/memory_agent.py:graph"}}
    path.write_text(json.dumps({**config, **sections}))
    return path


def refusal(section: str, value: Any, base: Path) -> str:
    with pytest.raises(ConfigError) as refused:
        if section == "store":
            store_options(value, base)
        else:
            checkpointer_options(value)
    message = str(refused.value)
    assert "\n" not in message  # one sentence
    return message


def test_wrong_store_values_say_what_to_change(project: Path) -> None:
    for value, words in (
        ("sqlite", "store: expected an object with 'index' and/or 'ttl'"),
        ({"indexes": {}}, "store: unknown key(s) 'indexes'"),
        ({"index": []}, "store.index: expected an object"),
        ({"index": {"embed": "./src/embeddings.py:embed"}}, "store.index.dims"),
        ({"index": {"dims": 0, "embed": "./src/embeddings.py:embed"}}, "positive integer"),
        ({"index": {"dims": True, "embed": "./src/embeddings.py:embed"}}, "not True"),
        ({"index": {"dims": 2}}, "store.index.embed: name the embeddings"),
        ({"index": {"dims": 2, "embed": "./src/nothing.py:embed"}}, "does not exist"),
        ({"index": {"dims": 2, "embed": "./src/embeddings.py:nope"}}, "no attribute 'nope'"),
        ({"index": {"dims": 2, "embed": "./src/embeddings.py:NOT_A_FUNCTION"}}, "is a int"),
        ({"index": {"dims": 2, "embed": "nosuchprovider:model"}}, "store.index.embed"),
        (
            {"index": {"dims": 2, "embed": "./src/embeddings.py:embed", "fields": "text"}},
            "store.index.fields",
        ),
        ({"index": {"dims": 2, "embed": "./src/embeddings.py:embed", "dim": 2}}, "'dim'"),
        ({"ttl": 5}, "store.ttl: expected an object"),
        ({"ttl": {"default_ttl": -1}}, "store.ttl.default_ttl"),
        ({"ttl": {"default_ttl": "1h"}}, "store.ttl.default_ttl"),
        ({"ttl": {"refresh_on_read": "yes"}}, "store.ttl.refresh_on_read"),
        ({"ttl": {"sweep_interval_minutes": 0.5}}, "store.ttl.sweep_interval_minutes"),
        ({"ttl": {"max_ttl": 5}}, "store.ttl: unknown key(s) 'max_ttl'"),
    ):
        assert words in refusal("store", value, project), value


def test_embed_names_a_provider_or_a_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # constructing calls nothing
    by_provider = store_options({"index": {"dims": 1536, "embed": "openai:text-embedding-3-small"}})
    assert by_provider.index is not None
    embeddings = by_provider.index["embed"]
    assert type(embeddings).__name__ == "OpenAIEmbeddings"
    assert embeddings.model == "text-embedding-3-small"
    by_module = store_options(
        {"index": {"dims": 6, "embed": "tests.langgraph.test_memory_store:embed"}}
    )
    assert by_module.index is not None
    assert by_module.index["embed"](["tea and a dog"]) == [[0.0, 1.0, 1.0, 0.0, 0.0, 0.0]]
    monkeypatch.delenv("OPENAI_API_KEY")
    assert "OPENAI_API_KEY" in refusal(
        "store", {"index": {"dims": 1536, "embed": "openai:text-embedding-3-small"}}, ROOT
    )


def test_right_store_values_are_read(project: Path) -> None:
    options = store_options(
        {
            "index": {"dims": 2, "embed": "./src/embeddings.py:embed", "fields": ["text"]},
            "ttl": {"default_ttl": 30, "sweep_interval_minutes": 5},
        },
        project,
    )
    assert options.index is not None and options.ttl is not None
    assert options.index["dims"] == 2 and options.index["fields"] == ["text"]
    assert options.index["embed"](["abc"]) == [[3.0, 1.0]]  # the project's own function
    assert options.ttl == {
        "refresh_on_read": True,
        "default_ttl": 30.0,
        "sweep_interval_minutes": 5,
    }
    assert store_options({"index": None, "ttl": None}).index is None
    bare = store_options({"index": {"dims": 2, "embed": "./src/embeddings.py:embed"}}, project)
    assert bare.index is not None and bare.index["fields"] == ["$"]


def test_the_checkpointer_section_is_honoured_or_refused(project: Path) -> None:
    for value, words in (
        ("sqlite", "checkpointer: expected an object"),
        ({"ttl": {"strategy": "keep_latest", "default_ttl": 60}}, "is not supported"),
        ({"path": "./src/saver.py:make"}, "checkpointer.path"),
        ({"serde": {"pickle_fallback": "no"}}, "checkpointer.serde.pickle_fallback"),
        ({"serde": {"allowed_json_modules": [["ok"], [1]]}}, "allowed_json_modules"),
        ({"serde": {"allowed_msgpack_modules": "all"}}, "allowed_msgpack_modules"),
        ({"serde": {"pickle": True}}, "checkpointer.serde: unknown key(s) 'pickle'"),
        ({"saver": {}}, "checkpointer: unknown key(s) 'saver'"),
    ):
        assert words in refusal("checkpointer", value, project), value
    assert checkpointer_options(None).serde is None
    serde = checkpointer_options(
        {"serde": {"allowed_msgpack_modules": None, "pickle_fallback": False}}
    ).serde
    assert type(serde).__name__ == "JsonPlusSerializer" and serde.pickle_fallback is False


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_serde_reaches_the_checkpointer(
    backend: str, app_env: dict[str, str], request: pytest.FixtureRequest
) -> None:
    env = dict(app_env)
    if backend == "postgres":
        env["RELAY_STORE"] = request.getfixturevalue("postgres_url")
    serde = checkpointer_options({"serde": {"pickle_fallback": False}}).serde
    settings = RelaySettings.from_env(env)
    settings.data_dir.mkdir(parents=True, exist_ok=True)  # as a Relay's turn store does

    async def opened() -> Any:
        async with open_checkpointer(settings, env, serde) as saver:
            return saver.serde

    assert asyncio.run(opened()) is serde


def test_serve_refuses_a_wrong_store_in_one_sentence(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_DATA_DIR", str(project / "data"))
    config = write_config(project, store={"index": {"dims": "many", "embed": "x:y"}})
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("span-relay: configuration error: store.index.dims"), err
    assert len(err.splitlines()) == 1
    config = write_config(project, checkpointer={"ttl": {"strategy": "delete"}})
    assert main(["serve", "--config", str(config)]) == 2
    assert "checkpointer.ttl.default_ttl" in capsys.readouterr().err


def test_serve_config_answers_from_its_store(project: Path, tmp_path: Path) -> None:
    config = write_config(project, store={"ttl": {"default_ttl": 90, "refresh_on_read": True}})
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        RELAY_DATA_DIR=str(tmp_path / "data"),
        OTEL_TRACES_EXPORTER="none",
        PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "relay.cli", "serve", "--port", str(port), "--config", str(config)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:  # until it listens (or has died)
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "span-relay serve did not listen"
                try:
                    if client.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            first = client.post(f"{url}/chat", json={"message": "remember the blue door"}).json()
            assert first["answer"] == "noted", first
            second = client.post(f"{url}/chat", json={"message": "what do you know?"}).json()
            assert second["thread_id"] != first["thread_id"]
            assert second["answer"] == "the blue door (ttl 90.0)", second
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert (tmp_path / "data" / "store.db").is_file()  # under RELAY_DATA_DIR
