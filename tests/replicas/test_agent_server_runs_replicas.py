"""The runs routes across two replicas (Redis bus, PostgreSQL turn store and
checkpointer): a run streamed on one, cut while it runs, joined again on the other with
``Last-Event-ID`` (exactly the rest: the same frames and ids, built from the shared log
and checkpoints), waited for there (its end read from the shared log), and read from
both. The run's second node waits for a file the test writes after its cut."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.agent_server_graphs import agent_server_app
from tests.conftest import LiveServer, LiveServers

Frame = tuple[str, str, Any]  # (id, event, data)


def frames_of(response: httpx.Response, customs: int | None = None) -> list[Frame]:
    """The SSE frames of a streamed response (all, or up to its ``customs``-th custom)."""
    found: list[Frame] = []
    event_id, name, data = "", "", None
    for line in response.iter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and name:
            found.append((event_id, name, data))
            event_id, name, data = "", "", None
            if customs is not None and [f[1] for f in found].count("custom") == customs:
                break
    return found


def test_a_run_cut_on_one_replica_is_joined_again_on_the_other(
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
    thread_id = httpx.post(f"{a.url}/threads", json={}).json()["thread_id"]
    gate = tmp_path / "gate"
    body = {
        "assistant_id": "gated",
        "input": {"gate": str(gate)},
        "stream_mode": ["values", "updates", "custom"],
        "stream_resumable": True,
        "on_disconnect": "continue",
    }
    with httpx.stream(
        "POST", f"{a.url}/threads/{thread_id}/runs/stream", json=body, timeout=30
    ) as on_a:
        assert on_a.status_code == 200
        join = on_a.headers["location"]
        first = frames_of(on_a, customs=3)
    run_id = first[0][2]["run_id"]
    assert [d for _, name, d in first if name == "custom"] == [{"part": n} for n in range(3)]
    assert httpx.get(f"{b.url}/threads/{thread_id}/runs/{run_id}").json()["status"] == "running"

    with httpx.stream(
        "GET", f"{b.url}{join}", headers={"Last-Event-ID": first[-1][0]}, timeout=30
    ) as on_b:
        assert on_b.status_code == 200
        gate.write_text("go")  # the run goes on while B follows it
        rest = frames_of(on_b)
    assert [d for _, name, d in rest if name == "custom"] == [{"part": n} for n in range(3, 6)]
    assert rest[-1][1] == "values" and rest[-1][2]["parts"] == [0, 1, 2, 3, 4, 5]

    # the whole stream, read on either replica: the same frames, the same ids
    for server in (a, b):
        with httpx.stream("GET", f"{server.url}{join}", headers={"Last-Event-ID": "-1"}) as whole:
            assert frames_of(whole) == first + rest
    joined = httpx.get(f"{b.url}/threads/{thread_id}/runs/{run_id}/join", timeout=30).json()
    assert joined["parts"] == [0, 1, 2, 3, 4, 5]
    for server in (a, b):
        run = httpx.get(f"{server.url}/threads/{thread_id}/runs/{run_id}").json()
        assert run["status"] == "success"
