"""Saved answers on both backends: saved, read and rated; with PostgreSQL, an answer saved
through one instance's store is read and rated through another's (the replicas of
RELAY_STORE=postgresql://... share them)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from relay.settings import RelaySettings
from relay.turns.messages import Message
from relay.turns.postgres_messages import open_message_store


def _stores(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> list[Any]:
    store = request.getfixturevalue("postgres_url") if backend == "postgres" else "sqlite"
    settings = RelaySettings(data_dir=tmp_path, store=store)
    return [open_message_store(settings), open_message_store(settings)]


def test_an_answer_is_saved_read_and_rated_by_any_instance(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    one, other = _stores(backend, tmp_path, request)

    async def scenario() -> None:
        await one.save(Message("m-1", "turn-1", "thread-1", "Refunds take 5 days.", 1.5))
        seen = await other.get("m-1")
        assert seen == Message("m-1", "turn-1", "thread-1", "Refunds take 5 days.", 1.5)
        assert await other.rate("m-1", "down", "too slow")
        rated = await one.get("m-1")
        assert rated is not None and (rated.rating, rated.comment) == ("down", "too slow")
        assert not await one.rate("no-such-message", "up", None)
        assert await one.get("no-such-message") is None
        await other.save(Message("m-1", "turn-1", "thread-1", "Saved again.", 2.0))
        again = await one.get("m-1")
        assert again is not None and again.text == "Saved again."

    try:
        asyncio.run(scenario())
    finally:
        one.close()
        other.close()
