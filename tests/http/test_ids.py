"""A turn id is the id the client sent (DESIGN.md §5): any spelling of a UUID finds the
turn on every route, and the turn is reported under the spelling it was created with.

A client whose ``POST /chat`` dropped before the first byte has only its own id
(``crypto.randomUUID()`` or ``str(uuid.uuid4())``): it must be able to reconnect, cancel and
look the turn up with it. Thread ids the same, wherever a UUID is given.
"""

from __future__ import annotations

import uuid

import httpx

from tests.conftest import LiveServer, events_of, stream_get, stream_post

REFUNDS = "How do refunds work?"
REFUND_ORDER = "Please refund order 1234 ($20)."


def spellings(value: uuid.UUID) -> list[str]:
    """The spellings of one UUID that clients send."""
    return [str(value), value.hex, str(value).upper(), value.hex.upper(), f"urn:uuid:{value}"]


def test_every_route_finds_the_turn_by_any_spelling(
    server: LiveServer, client: httpx.Client
) -> None:
    made = uuid.uuid4()
    sent = str(made)  # as crypto.randomUUID() spells it
    done = client.post(f"{server.url}/chat", json={"message": REFUNDS, "turn_id": sent})
    assert done.status_code == 200 and done.json()["turn_id"] == sent
    for spelling in spellings(made):
        turn = client.get(f"{server.url}/turns/{spelling}")
        assert turn.status_code == 200, (spelling, turn.text)
        assert turn.json()["turn_id"] == sent  # reported as it was created
        events = events_of(
            stream_get(client, f"{server.url}/turns/{spelling}/events"), trailer=True
        )
        assert {e["turn_id"] for e in events} == {sent}
        assert events[-1]["type"] == "message_saved"
        cancel = client.post(f"{server.url}/turns/{spelling}/cancel")
        assert cancel.status_code == 200 and cancel.json() == {
            "turn_id": sent,
            "cancelled": False,
            "status": "answered",
        }
    replayed = events_of(
        stream_get(
            client, f"{server.url}/turns/{made.hex.upper()}/events", params={"source": "spans"}
        ),
        trailer=True,
    )
    assert replayed[-1]["type"] == "message_saved"
    assert {e["turn_id"] for e in replayed} == {sent}
    # a retry of the POST in another spelling is the same turn (no second run)
    again = client.post(f"{server.url}/chat", json={"message": REFUNDS, "turn_id": made.hex})
    assert again.status_code == 200 and again.content == done.content
    other = client.post(
        f"{server.url}/chat", json={"message": "Something else", "turn_id": made.hex.upper()}
    )
    assert other.status_code == 409 and other.json()["error"]["code"] == "turn_conflict"
    listed = client.get(f"{server.url}/turns").json()["turns"]
    assert [t["turn_id"] for t in listed] == [sent]
    assert client.get(f"{server.url}/turns/{uuid.uuid4()}").status_code == 404


def test_a_stream_the_client_lost_is_found_by_its_own_id(
    server: LiveServer, client: httpx.Client
) -> None:
    made = uuid.uuid4()
    # the first answer is never read (the POST "dropped"): the client has only its id
    r = client.post(
        f"{server.url}/chat",
        json={"message": REFUNDS, "turn_id": str(made)},
        headers={"Prefer": "respond-async"},
    )
    assert r.status_code == 202 and r.json()["turn_id"] == str(made)
    assert r.headers["location"] == f"/turns/{made}"
    events = events_of(stream_get(client, f"{server.url}/turns/{made}/events"))
    assert events[0]["type"] == "graph_topology" and events[0]["turn_id"] == str(made)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_resume_with_other_spellings_of_turn_and_thread(
    server: LiveServer, client: httpx.Client
) -> None:
    turn = uuid.uuid4()
    thread = uuid.uuid4()
    paused = client.post(
        f"{server.url}/chat",
        json={"message": REFUND_ORDER, "turn_id": str(turn), "thread_id": str(thread)},
    ).json()
    assert paused["status"] == "paused"
    assert (paused["turn_id"], paused["thread_id"]) == (str(turn), str(thread))
    resumed = events_of(
        stream_post(
            client,
            f"{server.url}/chat/resume",
            {"turn_id": turn.hex.upper(), "thread_id": thread.hex, "resume": {"approved": True}},
        )
    )
    assert resumed[-1]["type"] == "turn_completed"
    response = resumed[-1]["response"]
    assert (response["turn_id"], response["thread_id"]) == (str(turn), str(thread))
    assert response["status"] == "answered"
    # the same resume again, spelled another way: attaches to that run, no second refund
    again = client.post(
        f"{server.url}/chat/resume",
        json={"turn_id": str(turn), "thread_id": str(thread).upper(), "resume": {"approved": True}},
    )
    assert again.status_code == 200 and again.json() == response


def test_a_thread_is_one_thread_in_every_spelling(server: LiveServer, client: httpx.Client) -> None:
    thread = uuid.uuid4()
    first = client.post(
        f"{server.url}/chat", json={"message": REFUND_ORDER, "thread_id": str(thread)}
    ).json()
    assert first["status"] == "paused"
    # the thread waits for its approval, whichever way its id is spelled
    busy = client.post(
        f"{server.url}/chat", json={"message": REFUNDS, "thread_id": thread.hex.upper()}
    )
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "thread_paused"
    client.post(
        f"{server.url}/chat/resume",
        json={"turn_id": first["turn_id"], "thread_id": thread.hex, "resume": {"approved": False}},
    )
    second = client.post(
        f"{server.url}/chat", json={"message": REFUNDS, "thread_id": thread.hex}
    ).json()
    assert second["status"] == "answered"
    assert second["thread_id"] == str(thread)  # the thread's own spelling
    for spelling in spellings(thread):
        listed = client.get(f"{server.url}/turns", params={"thread_id": spelling}).json()
        assert [t["turn_id"] for t in listed["turns"]] == [second["turn_id"], first["turn_id"]]


def test_agui_run_ids_in_any_spelling_are_one_run(server: LiveServer, client: httpx.Client) -> None:
    thread = uuid.uuid4()
    run = uuid.uuid4()

    def agui(thread_id: str, run_id: str) -> httpx.Response:
        return client.post(
            f"{server.url}/agui",
            json={
                "threadId": thread_id,
                "runId": run_id,
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
                "messages": [{"id": "m1", "role": "user", "content": REFUNDS}],
            },
            headers={"Accept": "text/event-stream"},
        )

    first = agui(str(thread), str(run))
    assert first.status_code == 200 and "RUN_FINISHED" in first.text
    again = agui(thread.hex.upper(), run.hex)  # a retry: attaches, same outcome
    assert again.status_code == 200 and "RUN_FINISHED" in again.text
    turns = client.get(f"{server.url}/turns", params={"thread_id": thread.hex}).json()
    assert len(turns["turns"]) == 1 and turns["turns"][0]["thread_id"] == str(thread)
