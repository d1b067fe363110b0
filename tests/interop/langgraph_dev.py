"""LangGraph's own Agent Server, ``langgraph dev``, serving a project folder on 127.0.0.1 from
the peer's venv (tests/bench/peer/requirements-peer.txt: installed once, reused while the
pins are the same), for the tests that run one client against it and against span-relay.
The peer runs beside the tests, as a user runs it; it is never imported."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.interop.conftest import wait_until


@contextlib.contextmanager
def langgraph_dev(project: Path, logs: Path) -> Iterator[str]:
    """``langgraph dev --config langgraph.json`` in ``project`` (its log and the install's
    under ``logs``); its base URL while the block runs."""
    from tests.bench.peer.servers import OFFLINE_ENV, ensure_peer_venv, free_port

    exe = ensure_peer_venv(logs / "install.log")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OFFLINE_ENV)
    env["PATH"] = f"{exe.parent}{os.pathsep}{env.get('PATH', '')}"
    with (logs / "server.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                str(exe),
                "dev",
                "--no-browser",
                "--no-reload",
                "--config",
                "langgraph.json",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=project,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _answers(proc, url, logs), timeout=180, what="langgraph dev ready")
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _answers(proc: subprocess.Popen[bytes], url: str, logs: Path) -> bool:
    assert proc.poll() is None, (logs / "server.log").read_text(errors="replace")
    try:
        return httpx.get(f"{url}/ok", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
