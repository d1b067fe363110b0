"""The real AG-UI client holds the turn's answer as its conversation's last message when a
node other than the model wrote it after the model streamed its text: ``@ag-ui/client``
1.0's HttpAgent (tests/interop/agui/answer.mjs, Node.js 20) against a graph written for
this test on a real uvicorn, held against LangGraph's own ``ainvoke`` of the same input."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver

from relay import GraphAgent, Relay
from tests.conftest import LiveServer
from tests.delivery.agui_checks import check_stream
from tests.zoo.test_answer_shapes import review_graph, streamed_graph

pytestmark = pytest.mark.slow


@pytest.fixture
def served(app_env: dict[str, str]) -> Iterator[LiveServer]:
    relay = Relay.from_env(app_env)
    app = FastAPI(lifespan=relay.lifespan)
    relay.mount(
        app,
        GraphAgent(review_graph(), name="review"),
        GraphAgent(streamed_graph(), name="streamed"),
    )
    server = LiveServer(app).start()
    yield server
    server.stop()


def _client(agui_client: Path, url: str, message: str, out: Path) -> dict:
    result = subprocess.run(
        ["node", "answer.mjs", url, message, "--out", str(out)],
        cwd=agui_client,
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert not report["problems"], report["problems"]
    check_stream(report["events"])
    return report


def test_the_clients_conversation_ends_with_the_answer(
    agui_client: Path, served: LiveServer, tmp_path: Path
) -> None:
    message = "Tell me about cats."
    truth = asyncio.run(
        review_graph(InMemorySaver()).ainvoke(
            {"messages": [{"role": "user", "content": message}]},
            {"configurable": {"thread_id": "reference"}},
        )
    )
    answer = truth["messages"][-1].content
    report = _client(agui_client, f"{served.url}/graphs/review/agui", message, tmp_path / "r.json")
    assert report["result"]["answer"] == answer
    said = [(m["role"], m.get("content")) for m in report["messages"]]
    assert said[0] == ("user", message)
    assert said[-1] == ("assistant", answer)
    assert ("assistant", "Draft: let me think about cats.") in said

    streamed = _client(
        agui_client, f"{served.url}/graphs/streamed/agui", "Cats?", tmp_path / "s.json"
    )
    assert [m["content"] for m in streamed["messages"] if m["role"] == "assistant"] == [
        "Cats sleep a lot."
    ]
