"""The bodies of the JSON endpoints, on a real uvicorn: a body must be sent as JSON (415
otherwise, so a cross-site form cannot POST without a CORS preflight), ``/chat`` and
``/chat/resume`` refuse fields they do not know (a ``threadId`` typo would start a new
thread), and a graph whose input has no ``messages`` says what to send instead of
answering nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langgraph.graph import StateGraph
from typing_extensions import TypedDict

from relay import GraphAgent, Relay
from tests.conftest import LiveServer, LiveServers

FORM_TYPES = [
    None,  # no Content-Type at all
    "text/plain",
    "text/plain; charset=utf-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "text/json",
]


def _error(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["code"] == code, error
    return str(error["message"])


def _post(url: str, body: bytes, content_type: str | None, **headers: str) -> httpx.Response:
    if content_type is not None:
        headers["Content-Type"] = content_type
    return httpx.post(url, content=body, headers=headers, timeout=30)


@pytest.mark.parametrize("content_type", FORM_TYPES)
def test_a_body_that_is_not_declared_json_is_415(server: LiveServer, content_type: str) -> None:
    body = b'{"message": "How do refunds work?"}'
    message = _error(_post(f"{server.url}/chat", body, content_type), 415, "unsupported_media_type")
    assert "application/json" in message
    assert (content_type or "no Content-Type").split(";")[0] in message
    # and no turn was started by it
    assert httpx.get(f"{server.url}/turns", timeout=30).json()["turns"] == []


@pytest.mark.parametrize(
    "path",
    ["/chat/resume", "/graphs/support_agent/chat", "/agui", "/messages/m1/feedback", "/imports"],
)
def test_every_json_endpoint_takes_json_only(server: LiveServer, path: str) -> None:
    _error(_post(f"{server.url}{path}", b"{}", "text/plain"), 415, "unsupported_media_type")
    _error(_post(f"{server.url}{path}", b"{}", None), 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.acme+json",
    ],
)
def test_json_in_every_spelling_is_read(server: LiveServer, content_type: str) -> None:
    r = _post(f"{server.url}/chat", b'{"message": "How do refunds work?"}', content_type)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "answered"


def test_the_otlp_receiver_keeps_its_own_types(make_server: Callable[..., LiveServer]) -> None:
    """/v1/traces reads protobuf (and JSON) by its own content types: no 415 for them."""
    server = make_server(RELAY_OTLP_HTTP="true")
    r = _post(f"{server.url}/v1/traces", b"", "application/x-protobuf")
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"message": "hi", "threadId": "t1"}, "'threadId' (did you mean 'thread_id'?)"),
        ({"message": "hi", "thread-id": "t1"}, "'thread-id' (did you mean 'thread_id'?)"),
        ({"mesage": "hi"}, "'mesage' (did you mean 'message'?)"),
        ({"message": "hi", "stream": True, "zzz": 1}, "'stream', 'zzz'"),
    ],
)
def test_unknown_chat_fields_are_named(
    server: LiveServer, body: dict[str, Any], named: str
) -> None:
    message = _error(httpx.post(f"{server.url}/chat", json=body, timeout=30), 422, "unknown_field")
    assert named in message
    assert "'thread_id'" in message and "'input'" in message  # what it takes
    assert httpx.get(f"{server.url}/turns", timeout=30).json()["turns"] == []


def test_unknown_resume_fields_are_named(server: LiveServer) -> None:
    body = {"thread_id": "t", "turn_id": "x", "resume": {"approved": True}, "turnId": "y"}
    message = _error(
        httpx.post(f"{server.url}/chat/resume", json=body, timeout=30), 422, "unknown_field"
    )
    assert "'turnId' (did you mean 'turn_id'?)" in message


# -- a graph without `messages` ----------------------------------------------------------


class Question(TypedDict):
    question: str
    answer: str


def _answer(state: Question) -> dict[str, str]:
    return {"answer": f"You asked: {state['question']}"}


def _question_graph() -> Any:
    return StateGraph(Question).add_node("reply", _answer).set_entry_point("reply").compile()


@pytest.fixture
def question_app(app_env: dict[str, str], live_servers: LiveServers) -> Callable[..., LiveServer]:
    """``question_app(**agent_kwargs)``: a user's app serving a graph whose state is
    ``{question, answer}`` (no ``messages``), in a real uvicorn."""

    def start(**kwargs: Any) -> LiveServer:
        relay = Relay.from_env(app_env)
        app = FastAPI(lifespan=relay.lifespan)
        relay.mount(app, GraphAgent(_question_graph(), name="qa", **kwargs))
        return live_servers.start(app)

    return start


def test_a_message_to_a_graph_without_messages_names_input(
    question_app: Callable[..., LiveServer],
) -> None:
    server = question_app()
    for url in (f"{server.url}/chat", f"{server.url}/graphs/qa/chat"):
        message = _error(httpx.post(url, json={"message": "hi"}, timeout=30), 422, "input_required")
        assert "'input'" in message and "'question'" in message and "'answer'" in message
    # what it says to send works
    r = httpx.post(f"{server.url}/chat", json={"input": {"question": "hi"}}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "answered" and r.json()["answer"] == "You asked: hi"


def test_an_input_of_hook_decides_for_itself(question_app: Callable[..., LiveServer]) -> None:
    server = question_app(input_of=lambda message, turn: {"question": message})
    r = httpx.post(f"{server.url}/chat", json={"message": "hi"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == "You asked: hi"
