"""The ownership matrix, shared by the one-instance test (tests/auth/test_ownership.py) and
the two-replica one (tests/replicas/test_ownership.py): what a user may do to another
user's turns through every route (nothing: 404, as for a turn that does not exist), and
what the owner may do (everything)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.conftest import events_of, iter_frames


@dataclass
class Turns:
    """Alice's turns: one answered (with its saved message), one paused on a refund."""

    answered: str
    answered_thread: str
    message_id: str
    paused: str
    paused_thread: str


def sse_turn(
    client: httpx.Client, base: str, headers: dict[str, str], body: dict[str, Any]
) -> list[dict[str, Any]]:
    with client.stream(
        "POST", f"{base}/chat", json=body, headers={**headers, "Accept": "text/event-stream"}
    ) as response:
        assert response.status_code == 200, response.read()
        return events_of(list(iter_frames(response)), trailer=True)


def alices_turns(client: httpx.Client, base: str, alice: dict[str, str]) -> Turns:
    answered = sse_turn(client, base, alice, {"message": "How do refunds work?"})
    assert answered[-2]["type"] == "turn_completed" and answered[-1]["type"] == "message_saved"
    paused = client.post(
        f"{base}/chat", headers=alice, json={"message": "Please refund order 2001 ($20)."}
    ).json()
    assert paused["status"] == "paused", paused
    return Turns(
        answered[0]["turn_id"],
        answered[0]["thread_id"],
        answered[-1]["message_id"],
        paused["turn_id"],
        paused["thread_id"],
    )


def requests_on(turns: Turns) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, request kwargs) of every route that names one of the turns."""
    resume = {
        "thread_id": turns.paused_thread,
        "turn_id": turns.paused,
        "resume": {"approved": True},
    }
    agui_run = {
        "threadId": turns.answered_thread,
        "runId": "r-1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": "Hello again"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    return [
        ("GET", f"/turns/{turns.answered}", {}),
        ("GET", f"/turns/{turns.answered}/events", {}),
        ("GET", f"/turns/{turns.answered}/events?source=spans", {}),
        ("GET", f"/turns/{turns.answered}/events?format=agui", {}),
        ("GET", f"/turns/{turns.paused}/events?after=0", {}),
        ("POST", f"/turns/{turns.paused}/cancel", {}),
        ("POST", "/chat/resume", {"json": resume}),
        ("POST", "/graphs/support_agent/chat/resume", {"json": resume}),
        (
            "POST",
            "/chat",
            {"json": {"message": "And shipping?", "thread_id": turns.answered_thread}},
        ),
        ("POST", "/agui", {"json": agui_run}),
        (
            "POST",
            "/agui",
            {
                "json": {
                    **agui_run,
                    "threadId": turns.paused_thread,
                    "messages": [],
                    "resume": [
                        {"interruptId": "x", "status": "resolved", "payload": {"approved": True}}
                    ],
                }
            },
        ),
        ("POST", f"/messages/{turns.message_id}/feedback", {"json": {"rating": "down"}}),
    ]


def assert_none_reachable(
    client: httpx.Client, base: str, other: dict[str, str], turns: Turns
) -> None:
    """Every route answers ``other`` as if alice's turns did not exist."""
    for method, path, kwargs in requests_on(turns):
        response = client.request(method, f"{base}{path}", headers=other, **kwargs)
        assert response.status_code == 404, (method, path, response.status_code, response.text)
        assert response.json().get("error", {}).get("code") in (
            "unknown_turn",
            "unknown_thread",
            "unknown_message",
        ), (method, path, response.text)
        assert "alice" not in response.text
    # a turn id of hers, reused for a new turn: taken, as any id in use is (no owner said)
    taken = client.post(
        f"{base}/chat", headers=other, json={"message": "hi", "turn_id": turns.answered}
    )
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "turn_conflict"
    # the listings hold none of hers
    assert listed(client, base, other) & {turns.answered, turns.paused} == set()
    assert listed(client, base, other, thread_id=turns.answered_thread) == set()


def listed(client: httpx.Client, base: str, headers: dict[str, str], **params: str) -> set[str]:
    response = client.get(f"{base}/turns", headers=headers, params=params)
    assert response.status_code == 200, response.text
    return {t["turn_id"] for t in response.json()["turns"]}


def assert_all_reachable(
    client: httpx.Client, base: str, alice: dict[str, str], turns: Turns
) -> None:
    """The owner reads, rates and resumes her turns."""
    assert client.get(f"{base}/turns/{turns.answered}", headers=alice).status_code == 200
    assert listed(client, base, alice) >= {turns.answered, turns.paused}
    with client.stream(
        "GET", f"{base}/turns/{turns.answered}/events?source=spans", headers=alice
    ) as response:
        assert response.status_code == 200
        replayed = events_of(list(iter_frames(response)))
    assert replayed[-1]["type"] == "turn_completed"
    rated = client.post(
        f"{base}/messages/{turns.message_id}/feedback", headers=alice, json={"rating": "up"}
    )
    assert rated.status_code == 200, rated.text
    resumed = client.post(
        f"{base}/chat/resume",
        headers=alice,
        json={
            "thread_id": turns.paused_thread,
            "turn_id": turns.paused,
            "resume": {"approved": True},
        },
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "answered"
    assert "Done: I refunded $20.00 on order 2001" in resumed.json()["answer"]
