"""LangGraph's streaming protocol across two replicas (Redis bus, PostgreSQL turn store
and checkpointer): a run started on one is streamed on the other with the same event ids,
and a stream cut on one and opened again on the other with its cursor gets exactly the
rest, through a pause answered on either."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.agent_server_graphs import agent_server_app
from tests.conftest import LiveServer, LiveServers
from tests.http.test_agent_server_events import after, command, ended, lifecycle, read_events


def test_a_stream_cut_on_one_replica_goes_on_on_the_other(
    app_env: dict[str, str],
    tmp_path: Path,
    live_servers: LiveServers,
    redis_url: str,
    postgres_url: str,
) -> None:
    def replica(name: str) -> LiveServer:
        env = {
            **app_env,
            "RELAY_DATA_DIR": str(tmp_path / name),
            "RELAY_INSTANCE_ID": name,
            "RELAY_BUS": redis_url,
            "RELAY_STORE": postgres_url,
        }
        return live_servers.start(agent_server_app(env))

    a, b = replica("a"), replica("b")
    thread_id = str(uuid.uuid4())
    started = command(
        a.url, thread_id, "run.start", {"assistant_id": "approval", "input": {"question": "Both?"}}
    )
    assert started.status_code == 200, started.text
    on_a = read_events(a.url, thread_id, ended("interrupted"))
    on_b = read_events(b.url, thread_id, ended("interrupted"))
    assert on_a == on_b and lifecycle(on_a) == ["running", "interrupted"]

    for cut in range(1, len(on_a)):
        head = read_events(a.url, thread_id, after(cut))
        rest = read_events(b.url, thread_id, ended("interrupted"), since=head[-1]["seq"])
        assert head + rest == on_a

    [asked] = [e for e in on_a if e["method"] == "input.requested"]
    answer = {
        "namespace": [],
        "interrupt_id": asked["params"]["data"]["interrupt_id"],
        "response": "yes",
    }
    assert command(b.url, thread_id, "input.respond", answer).status_code == 200
    resumed = read_events(
        a.url, thread_id, ended("completed"), headers={"Last-Event-ID": str(on_a[-1]["seq"])}
    )
    assert lifecycle(resumed) == ["running", "completed"]
    assert read_events(b.url, thread_id, ended("completed"), since=0) == on_a + resumed
