"""``make run`` listens on 127.0.0.1 whatever the shell exports: its address comes from
``RELAY_HOST`` / ``RELAY_PORT`` (make's alone), never from ``HOST`` (zsh and tcsh set it
to the machine's name) or ``PORT`` (PaaS and CI images set it), which ``?=`` would take
from the environment. ``span-relay serve``'s own default is 127.0.0.1 too; only the
container image binds 0.0.0.0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from relay.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _make_run(*args: str, **env: str) -> str:
    """The serve command ``make run`` would run (``make -n``: printed, not run)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    environ = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT")}
    out = subprocess.run(
        [make, "-n", "-C", str(ROOT), "run", *args],
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (line,) = [line for line in out.splitlines() if "span-relay serve" in line]
    return line


def test_make_run_ignores_the_shells_host_and_port() -> None:
    line = _make_run(HOST="build-box.example.com", PORT="5000")
    assert line.endswith("span-relay serve --host 127.0.0.1 --port 8000"), line


def test_make_run_takes_its_own_names() -> None:
    line = _make_run("RELAY_PORT=9000", RELAY_HOST="0.0.0.0")
    assert line.endswith("span-relay serve --host 0.0.0.0 --port 9000"), line


def test_serve_listens_on_loopback_by_default() -> None:
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
