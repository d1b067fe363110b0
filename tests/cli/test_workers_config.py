"""``span-relay serve --workers N``: what it refuses (exit 2, naming what to change) and
what each worker is given. The workers themselves run in tests/replicas/test_workers.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from relay.cli import main
from relay.cli.workers import worker_env
from relay.settings import RelaySettings

ROOT = Path(__file__).resolve().parents[2]
REDIS = "redis://127.0.0.1:6379/0"
PG = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.startswith(("RELAY_", "OTEL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("RELAY_DATA_DIR", str(tmp_path))
    return monkeypatch


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["--workers", "2"], {}, ["RELAY_BUS=redis://", "RELAY_STORE=postgresql://"]),
        (["--workers", "2"], {"RELAY_BUS": REDIS}, ["RELAY_STORE=postgresql://"]),
        ([], {"RELAY_WORKERS": "3", "RELAY_STORE": PG}, ["--workers 3", "RELAY_BUS=redis://"]),
        (
            ["--workers", "2"],
            {"RELAY_BUS": REDIS, "RELAY_STORE": PG, "RELAY_CHECKPOINTER": "sqlite"},
            ["RELAY_CHECKPOINTER"],
        ),
        (
            ["--workers", "2", "--relay-only"],
            {"RELAY_BUS": REDIS, "RELAY_STORE": PG},
            ["RELAY_OTLP_HTTP=false", "RELAY_OTLP_GRPC"],
        ),
        (
            ["--workers", "2"],
            {"RELAY_BUS": REDIS, "RELAY_STORE": PG, "RELAY_OTLP_HTTP": "true"},
            ["RELAY_OTLP_HTTP"],
        ),
        (["--workers", "0"], {}, ["1 or more"]),
        ([], {"RELAY_WORKERS": "0"}, ["RELAY_WORKERS must be >= 1"]),
    ],
)
def test_per_process_configurations_are_refused(
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    words: list[str],
) -> None:
    for key, value in env.items():
        clean_env.setenv(key, value)
    assert main(["serve", "--port", "1", *argv]) == 2  # refused before it binds a port
    err = capsys.readouterr().err
    assert "configuration error" in err
    for word in words:
        assert word in err


def test_a_relay_only_server_needs_no_checkpointer(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # no graph is served, so the SQLite checkpointer is not in the way; the OTLP/HTTP
    # receiver is (on by default with --relay-only)
    for key, value in {
        "RELAY_BUS": REDIS,
        "RELAY_STORE": PG,
        "RELAY_CHECKPOINTER": "sqlite",
    }.items():
        clean_env.setenv(key, value)
    assert main(["serve", "--port", "1", "--workers", "2", "--relay-only"]) == 2
    err = capsys.readouterr().err
    assert "RELAY_OTLP_HTTP" in err and "RELAY_CHECKPOINTER" not in err


def test_the_command_exits_2_with_the_message(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(RELAY_DATA_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "relay.cli", "serve", "--workers", "2"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "RELAY_BUS=memory keeps each turn's live log in one process" in done.stderr
    assert "set RELAY_BUS=redis://" in done.stderr


def test_each_worker_gets_its_own_instance_id_and_grpc_goes_to_worker_0() -> None:
    env = {"RELAY_OTLP_GRPC": "127.0.0.1:4317", "RELAY_INSTANCE_ID": "pod-7", "RELAY_WORKERS": "2"}
    first = worker_env(env, 0)
    second = worker_env(env, 1)
    assert (first["RELAY_INSTANCE_ID"], second["RELAY_INSTANCE_ID"]) == ("pod-7-w0", "pod-7-w1")
    a = RelaySettings.from_env(first)
    b = RelaySettings.from_env(second)
    assert (a.worker, b.worker) == (0, 1)
    assert (a.workers, b.workers) == (1, 1)  # a worker never starts workers of its own
    assert a.otlp_grpc == "127.0.0.1:4317" and b.otlp_grpc is None
    assert RelaySettings.from_env({}).worker is None
