"""langgraph.json's ``auth`` as LangGraph's Python client (``langgraph_sdk``) sees it, from
span-relay and from LangGraph's own Agent Server (``langgraph dev``) serving the same
project: the same ``auth.py`` (tests/http/test_agent_server_auth.py's: owner-only threads
as in LangGraph's docs, runs refused to a read-only user, assistants filtered, store
namespaces rewritten per user), the same client calls (:func:`client_script`), the same
report: which calls fail and how (the status; a handler's own detail), the
metadata the handlers stamp, what each user lists and finds."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from relay.cli.graph_app import create_graph_app
from relay.cli.langgraph_auth import load_project_auth
from relay.cli.langgraph_config import read_config
from tests.auth.langgraph_project import write_project
from tests.conftest import LiveServers
from tests.http.test_agent_server_auth import AUTH
from tests.interop.langgraph_dev import langgraph_dev as peer

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
HELLO = {"messages": [{"role": "user", "content": "hello"}]}
#: the failures whose message is the server's own wording (a 404's, a ``False``'s 403):
#: their status is what a client reads of them
WORDED_BY_SERVER = {
    "bob_get",
    "bob_state",
    "bob_history",
    "bob_update",
    "bob_delete",
    "bob_run",
    "bob_assistant",
    "carol_put",
    "deleted",
}


def sdk(url: str, token: str) -> SyncLangGraphClient:
    return get_sync_client(url=url, api_key=None, headers={"Authorization": f"Bearer {token}"})


def failure(call: Callable[[], Any]) -> Any:
    """How ``call`` fails: ``[status, message]`` (the message as the SDK reads it from
    either server's error body); what it returned when it does not."""
    try:
        return call()
    except httpx.HTTPStatusError as exc:  # the SDK's APIStatusError, or httpx's own
        return [exc.response.status_code, message_of(exc.response.json())]


def message_of(body: Any) -> Any:
    """An error body's message: LangGraph's ``{"detail"}``, span-relay's
    ``{"error": {"message"}}`` (both read by langgraph_sdk's ``_extract_error_message``)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"].get("message")
    return body.get("detail") if isinstance(body, dict) else body


def client_script(url: str) -> dict[str, Any]:
    """The calls, as a frontend of three users makes them; what each got."""
    alice, bob, carol = (sdk(url, f"{name}-token") for name in ("alice", "bob", "carol"))
    nobody = sdk(url, "nobody's-token")
    report: dict[str, Any] = {"nobody": failure(lambda: nobody.threads.search())}

    thread_id = alice.threads.create(metadata={"topic": "tea"})["thread_id"]
    report["created"] = alice.threads.get(thread_id)["metadata"]
    report["bob_get"] = failure(lambda: bob.threads.get(thread_id))
    report["bob_state"] = failure(lambda: bob.threads.get_state(thread_id))
    report["bob_history"] = failure(lambda: bob.threads.get_history(thread_id))
    report["bob_update"] = failure(lambda: bob.threads.update(thread_id, metadata={"a": 1}))
    report["bob_delete"] = failure(lambda: bob.threads.delete(thread_id))
    report["carol_run"] = failure(lambda: carol.runs.wait(thread_id, "support_agent", input=HELLO))
    report["bob_run"] = failure(lambda: bob.runs.wait(thread_id, "support_agent", input=HELLO))
    answered = alice.runs.wait(thread_id, "support_agent", input=HELLO)
    report["answer"] = answered["messages"][-1]["content"]
    given = alice.threads.update(thread_id, metadata={"owner": "bob"})
    report["updated"] = given["metadata"]

    made = str(uuid.uuid4())
    alice.runs.wait(
        made, "support_agent", input=HELLO, if_not_exists="create", metadata={"source": "test"}
    )
    report["run_made"] = alice.threads.get(made)["metadata"]
    report["alice_threads"] = sorted(
        str(t["metadata"].get("topic") or t["metadata"].get("source"))
        for t in alice.threads.search()
    )
    report["alice_count"] = alice.threads.count()
    report["bob_threads"] = bob.threads.search()
    report["bob_count"] = bob.threads.count()

    report["assistants"] = sorted(a["graph_id"] for a in alice.assistants.search())
    assistant_id = alice.assistants.search(graph_id="support_agent")[0]["assistant_id"]
    report["assistant_id"] = assistant_id
    report["bob_assistants"] = bob.assistants.search()
    report["bob_assistant"] = failure(lambda: bob.assistants.get(assistant_id))
    report["carol_assistants"] = failure(lambda: carol.assistants.search())

    alice.store.put_item(["notes"], "a", {"text": "tea", "shared": True})
    alice.store.put_item(["notes"], "b", {"text": "coffee", "shared": False})
    bob.store.put_item(["notes"], "a", {"text": "bob's", "shared": True})
    report["carol_put"] = failure(lambda: carol.store.put_item(["notes"], "a", {"text": "x"}))
    item = alice.store.get_item(["notes"], "a")
    report["item"] = [item["namespace"], item["key"], item["value"]]
    report["alice_search"] = sorted(
        i["value"]["text"] for i in alice.store.search_items([])["items"]
    )
    report["bob_search"] = [i["value"]["text"] for i in bob.store.search_items([])["items"]]
    report["alice_namespaces"] = alice.store.list_namespaces()["namespaces"]
    bob.store.delete_item(["notes"], "a")
    report["after_bobs_delete"] = alice.store.get_item(["notes"], "a")["value"]["text"]
    report["missing_item"] = alice.store.get_item(["notes"], "nothing here")

    alice.threads.delete(thread_id)
    report["deleted"] = failure(lambda: alice.threads.get(thread_id))
    return report


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report as a client reads it: of a failure the server words, its status only."""
    return {
        key: value[0] if key in WORDED_BY_SERVER and isinstance(value, list) else value
        for key, value in report.items()
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project (tests/auth/langgraph_project.py's graph, the tests' AUTH); its config."""
    return write_project(tmp_path_factory.mktemp("auth-project") / "project", AUTH)


@pytest.fixture(scope="module")
def peer_report(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    logs = tmp_path_factory.mktemp("langgraph-dev-auth")
    with peer(project.parent, logs) as url:
        yield client_script(url)


def test_the_same_client_reads_the_same_auth_from_both_servers(
    project: Path,
    peer_report: dict[str, Any],
    app_env: dict[str, str],
    live_servers: LiveServers,
) -> None:
    app = create_graph_app(
        read_config(project).graphs, app_env, base=project.parent, auth=load_project_auth(project)
    )
    relay_report = client_script(live_servers.start(app).url)

    support_agent = str(uuid.uuid5(NAMESPACE_GRAPH, "support_agent"))
    for report in (relay_report, peer_report):
        # what the handlers did, spelled out: a report of two failed servers is no pass
        assert report["nobody"] == [401, "Unknown token."]
        assert report["created"] == {"topic": "tea", "owner": "alice"}
        assert report["carol_run"] == [403, "Read-only users start no runs."]
        assert report["answer"] == "You asked: hello"
        assert report["updated"] == {
            "topic": "tea",
            "owner": "alice",
            "graph_id": "support_agent",
            "assistant_id": support_agent,
        }
        assert report["run_made"] == {
            "graph_id": "support_agent",
            "assistant_id": support_agent,
            "source": "test",
            "owner": "alice",
        }
        assert report["alice_threads"] == ["tea", "test"] and report["alice_count"] == 2
        assert report["bob_threads"] == [] and report["bob_count"] == 0
        assert report["assistants"] == ["other", "support_agent"]
        assert report["bob_assistants"] == []
        assert report["carol_assistants"] == [403, "No assistants for you."]
        assert report["item"] == [["alice", "notes"], "a", {"text": "tea", "shared": True}]
        assert report["alice_search"] == ["tea"] and report["bob_search"] == ["bob's"]
        assert report["alice_namespaces"] == [["alice", "notes"]]
        assert report["after_bobs_delete"] == "tea"
        assert report["missing_item"] is None  # 200 null on both: the SDK's None
        for key in ("bob_get", "bob_state", "bob_history", "bob_update", "bob_run"):
            assert report[key][0] == 404, (key, report[key])
        for key in ("bob_delete", "carol_put"):
            assert report[key][0] == 403, (key, report[key])
        assert report["bob_assistant"][0] == 404
        assert report["deleted"][0] == 404
    assert comparable(relay_report) == comparable(peer_report)
