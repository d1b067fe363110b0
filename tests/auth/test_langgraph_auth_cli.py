"""``span-relay serve --config langgraph.json`` with an ``auth`` entry, by the real command:
a broken entry refuses to start in one line (exit 2), never serving the project open; a
working one protects ``POST /chat``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from relay.cli import main
from tests.auth.langgraph_project import AUTH, bearer, write_project
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        RELAY_DATA_DIR=str(tmp_path / "data"), OTEL_TRACES_EXPORTER="none", PYTHONPATH=str(ROOT)
    )
    return env


def _serve(config: Path, port: int, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay.cli",
            "serve",
            "--port",
            str(port),
            "--config",
            str(config),
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_broken_auth_file_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    config = write_project(
        tmp_path / "project", auth='import os\nSECRET = os.environ["MY_AUTH_SECRET"]\n'
    )
    proc = _serve(config, free_port(), tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (out, err)
    assert err.splitlines() == [
        "span-relay: configuration error: auth ./src/agent/auth.py:auth: importing it "
        "failed: KeyError: 'MY_AUTH_SECRET'"
    ]


@pytest.mark.parametrize(
    ("auth", "entry", "words"),
    [
        (AUTH, {"path": "./src/agent/missing.py:auth"}, "missing.py does not exist"),
        (AUTH, {"path": "./src/agent/auth.py:nothing"}, "has no attribute 'nothing'"),
        (AUTH, {"path": "./src/agent/auth.py:USERS"}, "is a dict, not a langgraph_sdk.Auth"),
        (AUTH, {"path": "no_such_package.auth:auth"}, "cannot import 'no_such_package.auth'"),
        (AUTH, ["./src/agent/auth.py:auth"], "'auth' must be an object"),
        (
            "from langgraph_sdk import Auth\nauth = Auth()\n",
            None,
            "has no @auth.authenticate handler",
        ),
        (
            "from langgraph_sdk import Auth\nauth = Auth()\n\n"
            "@auth.authenticate\nasync def who(cookie: str) -> str:\n    return cookie\n",
            None,
            "asks for cookie",
        ),
    ],
)
def test_an_auth_entry_that_cannot_be_honoured_is_a_configuration_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    auth: str,
    entry: object,
    words: str,
) -> None:
    config = write_project(tmp_path / "project", auth=auth, entry=entry)
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("span-relay: configuration error:"), err
    assert words in err[0], err


def test_a_working_auth_protects_the_served_project(tmp_path: Path) -> None:
    config = write_project(tmp_path / "project")
    port = free_port()
    proc = _serve(config, port, tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=30) as client:
            while True:  # until it listens (or has died)
                assert proc.poll() is None, proc.communicate()
                try:
                    if client.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            anonymous = client.post(f"{url}/chat", json={"message": "hi"})
            assert anonymous.status_code == 401, anonymous.text
            assert anonymous.json()["error"]["code"] == "unauthorized"
            answered = client.post(
                f"{url}/chat", headers=bearer("alice-token"), json={"message": "hi"}
            )
            assert answered.status_code == 200, answered.text
            assert answered.json()["answer"] == "You asked: hi"
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def test_workers_refuse_a_broken_auth_before_starting_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_project(tmp_path / "project", entry={"path": "./src/agent/gone.py:auth"})
    assert main(["serve", "--workers", "2", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gone.py does not exist" in err[0], err
