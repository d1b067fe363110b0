"""AG-UI fixtures: the real AG-UI client (Node.js, ``@ag-ui/client`` 1.0, installed from the
committed lock file in tests/agui/client/), and readers that check AG-UI streams against the
``ag-ui-protocol`` Python models and the rules the real client enforces.

The app under test is the real one (``tests.conftest``'s ``make_server``: a real uvicorn on
127.0.0.1). Without Node.js 20+ (or its packages) the client tests skip, saying how to get
them; with ``CI=true`` they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import service_missing

CLIENT_DIR = Path(__file__).parent / "client"
CLIENT_VERSION = "1.0."  # @ag-ui/client 1.0.x, as package-lock.json pins it
INSTALL = f"npm ci --prefix {CLIENT_DIR.relative_to(Path(__file__).parents[2])}"


@pytest.fixture(scope="session")
def agui_client() -> Path:
    """The directory of the Node.js demo client, its packages installed."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None:
        service_missing(
            "Node.js 20+", f"apt-get install nodejs npm (or nodesource), then {INSTALL}"
        )
    assert node is not None
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if int(version.strip().lstrip("v").split(".")[0] or 0) < 20:
        service_missing("Node.js 20+", f"found {version.strip()}")
    installed = CLIENT_DIR / "node_modules" / "@ag-ui" / "client" / "package.json"
    if not installed.exists() or not json.loads(installed.read_text())["version"].startswith(
        CLIENT_VERSION
    ):
        if npm is None:
            service_missing("npm", f"apt-get install npm, then {INSTALL}")
        assert npm is not None
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=CLIENT_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            service_missing("the AG-UI client packages", f"{INSTALL}  ({result.stderr[-400:]})")
    return CLIENT_DIR


def run_client(
    client_dir: Path,
    base_url: str,
    *flows: str,
    out: Path,
    timeout: float = 120,
    on_delta: Callable[[], None] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run demo.mjs against ``base_url``; its exit status and its JSON report.

    ``on_delta`` is called each time the client has delivered a TEXT_MESSAGE_CONTENT (the
    script writes a line to an inherited pipe, ACK_FD, as it does): a test lets the
    server go on from there."""
    env = {k: v for k, v in os.environ.items() if k != "SUPPRESS_TRANSFORMATION_WARNINGS"}
    if on_delta is None:
        result = subprocess.run(
            ["node", "demo.mjs", base_url, *flows, "--out", str(out)],
            cwd=client_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    else:
        read_fd, write_fd = os.pipe()

        def acks() -> None:
            with os.fdopen(read_fd) as lines:
                for _ in lines:
                    on_delta()

        reader = threading.Thread(target=acks, daemon=True)
        reader.start()
        try:
            result = subprocess.run(
                ["node", "demo.mjs", base_url, *flows, "--out", str(out)],
                cwd=client_dir,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**env, "ACK_FD": str(write_fd)},
                pass_fds=(write_fd,),
            )
        finally:
            os.close(write_fd)  # the script is gone: the reader sees the end of the pipe
            reader.join(10)
    report = json.loads(out.read_text()) if out.exists() else {}
    return result, report


# -- reading and checking AG-UI streams --------------------------------------------------


def read_agui(response: httpx.Response) -> list[dict[str, Any]]:
    """The AG-UI events of an SSE response, checking the framing on the way: LF only, one
    ``data:`` line per frame (comments allowed), every data line a JSON object."""
    assert response.headers["content-type"].startswith("text/event-stream")
    raw = b"".join(response.iter_bytes())
    assert b"\r" not in raw, "CR in an AG-UI stream"
    text = raw.decode("utf-8")
    assert text.endswith("\n\n") or not text, f"the stream ends mid-frame: {text[-80:]!r}"
    events = []
    for block in text.split("\n\n")[:-1]:
        lines = block.split("\n")
        data = [line for line in lines if not line.startswith(":")]
        if not data:
            continue  # a heartbeat or another comment
        assert len(data) == 1 and data[0].startswith("data: "), f"not AG-UI framing: {block!r}"
        events.append(json.loads(data[0][len("data: ") :]))
    return events


def post_agui(
    client: httpx.Client, base: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    with client.stream(
        "POST",
        f"{base}/agui",
        json=body,
        headers={"Accept": "text/event-stream", **(headers or {})},
    ) as r:
        assert r.status_code == 200, r.read()
        return read_agui(r)


def get_agui(client: httpx.Client, url: str) -> list[dict[str, Any]]:
    with client.stream("GET", url) as r:
        assert r.status_code == 200, r.read()
        return read_agui(r)


def _no_nulls(value: Any, path: str = "") -> None:
    if value is None:
        raise AssertionError(f"null at {path or '/'}")
    if isinstance(value, dict):
        for k, v in value.items():
            _no_nulls(v, f"{path}/{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_nulls(v, f"{path}/{i}")


def _no_extras(model: Any, path: str) -> None:
    from pydantic import BaseModel

    if isinstance(model, BaseModel):
        extra = model.model_extra or {}
        assert not extra, f"fields the protocol does not know at {path}: {sorted(extra)}"
        for name in type(model).model_fields:
            _no_extras(getattr(model, name), f"{path}/{name}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            _no_extras(item, f"{path}/{i}")


def validate_event(event: dict[str, Any]) -> Any:
    """One AG-UI event against the ``ag-ui-protocol`` models: valid, no field they do not
    describe, no ``null``. Returns the model."""
    from ag_ui.core import Event
    from pydantic import TypeAdapter

    _no_nulls(event)
    model = TypeAdapter(Event).validate_python(event)
    _no_extras(model, event.get("type", "?"))
    return model


def check_stream(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Every event valid (:func:`validate_event`), and the rules the real client enforces:
    RUN_STARTED first, steps/messages/tool calls opened before and closed by their run's
    end, a terminal event for every run. Returns the runs."""
    assert events, "an empty AG-UI stream"
    for event in events:
        validate_event(event)
    runs: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] | None = None
    steps: set[str] = set()
    messages: set[str] = set()
    calls: set[str] = set()
    for event in events:
        t = event["type"]
        if t == "RUN_STARTED":
            assert current is None, "RUN_STARTED inside a run"
            assert event.get("protocolVersion") == "1.0"
            current = [event]
            runs.append(current)
            continue
        assert current is not None, f"{t} outside a run"
        current.append(event)
        if t == "STEP_STARTED":
            assert event["stepName"] not in steps, f"step {event['stepName']} opened twice"
            steps.add(event["stepName"])
        elif t == "STEP_FINISHED":
            steps.remove(event["stepName"])
        elif t == "TEXT_MESSAGE_START":
            assert event["messageId"] not in messages
            messages.add(event["messageId"])
        elif t == "TEXT_MESSAGE_CONTENT":
            assert event["messageId"] in messages
        elif t == "TEXT_MESSAGE_END":
            messages.remove(event["messageId"])
        elif t == "TOOL_CALL_START":
            calls.add(event["toolCallId"])
        elif t in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert event["toolCallId"] in calls
            if t == "TOOL_CALL_END":
                calls.remove(event["toolCallId"])
        elif t in ("RUN_FINISHED", "RUN_ERROR"):
            assert not (steps or messages or calls), f"open at {t}: {steps} {messages} {calls}"
            current = None
    assert current is None, f"the stream ends inside a run: {events[-1]}"
    return runs


def user(text: str, message_id: str = "m1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(30.0)) as c:
        yield c
