"""Fixtures for the deployment tests: the real app as a subprocess, nginx in front of it.

- ``relay_server(**env)`` starts ``span-relay serve`` on a free 127.0.0.1 port with its
  own RELAY_DATA_DIR and waits for ``/healthz``; every server is stopped at teardown.
- ``nginx_proxy(upstream_port, location_conf, http_version)`` writes an nginx config into a temp dir
  (non-daemon, own pid, error log and temp paths) and runs Debian's nginx on a free port.
- ``run_verify(url, *args)`` runs ``python -m relay.cli.verify URL --json ...`` as a
  subprocess and returns (exit code, parsed JSON report, stderr).

nginx missing: the tests skip (with how to install it), except under CI=true, where they
fail: CI must install nginx-light.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port, service_missing

REPO = Path(__file__).resolve().parents[2]
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
STARTUP_TIMEOUT_S = 60.0


def _wait_port(port: int, proc: subprocess.Popen, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} in {timeout:g} s:\n{_tail(log)}")


def _tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass


# --------------------------------------------------------------------------- relay


def span_relay_command() -> list[str] | None:
    """The console script beside this interpreter (the venv's), else one on PATH."""
    script = Path(sys.executable).parent / "span-relay"
    if script.is_file():
        return [str(script)]
    found = shutil.which("span-relay")
    return [found] if found else None


@dataclass
class RelayServer:
    port: int
    proc: subprocess.Popen
    data_dir: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self) -> str:
        return _tail(self.log)


class RelayLauncher:
    """Starts ``span-relay serve`` subprocesses under one directory; stops them all."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.command = span_relay_command()
        self.started: list[RelayServer] = []

    def start(self, **env: str) -> RelayServer:
        if self.command is None:
            pytest.fail("no span-relay console script: pip install -e . into the venv")
        port = free_port()
        n = len(self.started)
        data_dir = self.root / f"relay-data-{n}"
        data_dir.mkdir(parents=True)
        log = self.root / f"relay-{n}.log"
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
        environ.update(
            {
                "RELAY_DATA_DIR": str(data_dir),
                # nodes as fast as they go: the verify-stream tests slow them on purpose
                "RELAY_OFFLINE_WORD_DELAY_S": "0",
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
                "PYTHONUNBUFFERED": "1",
            }
        )
        environ.update(env)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*self.command, "serve", "--host", "127.0.0.1", "--port", str(port)],
                cwd=self.root,
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        server = RelayServer(port=port, proc=proc, data_dir=data_dir, log=log)
        self.started.append(server)
        _wait_port(port, proc, STARTUP_TIMEOUT_S, "span-relay serve", log)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        last = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(server.url + "/healthz", timeout=2) as resp:
                    if resp.status == 200:
                        return server
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"/healthz never answered 200 ({last}):\n{server.log_tail()}")

    def stop_all(self) -> None:
        for server in self.started:
            _stop(server.proc)


@pytest.fixture
def relay_server(tmp_path: Path) -> Iterator[Callable[..., RelayServer]]:
    """A factory: ``relay_server(RELAY_X="...")`` starts one app server per call."""
    launcher = RelayLauncher(tmp_path)
    yield launcher.start
    launcher.stop_all()


@pytest.fixture(scope="module")
def faulty_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayServer]:
    """One app server for a test module: faults honoured, heartbeats every 0.5 s."""
    launcher = RelayLauncher(tmp_path_factory.mktemp("relay"))
    yield launcher.start(RELAY_FAULTS="1", RELAY_HEARTBEAT_S="0.5")
    launcher.stop_all()


# --------------------------------------------------------------------------- nginx


def find_nginx() -> str | None:
    override = os.environ.get("NGINX_BIN")  # e.g. a self-built nginx; only this one then
    if override:
        return override if os.access(override, os.X_OK) else None
    for candidate in NGINX_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("nginx")


@pytest.fixture(scope="session")
def nginx_bin() -> str:
    path = find_nginx()
    if path is None:
        service_missing(
            "nginx (/usr/sbin/nginx)",
            "apt-get install nginx-light (tests/system-deps.sh does, as root)",
        )
    assert path is not None
    return path


NGINX_CONF = """\
# written by tests/deploy/conftest.py
daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;

events {{
    worker_connections 64;
}}

http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    server {{
        listen 127.0.0.1:{port};

        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version {http_version};
            proxy_set_header Connection "";
            proxy_set_header Host $host;
{location}
        }}
    }}
}}
"""


@dataclass
class NginxProxy:
    port: int
    proc: subprocess.Popen
    conf: Path
    error_log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def errors(self) -> str:
        return _tail(self.error_log, 200)


@pytest.fixture
def nginx_proxy(nginx_bin: str) -> Iterator[Callable[..., NginxProxy]]:
    """A factory: ``nginx_proxy(upstream_port, location_conf, http_version="1.1")``.

    ``location_conf`` is added to the ``location /`` block after ``proxy_pass``,
    ``proxy_http_version`` and ``proxy_set_header Connection ""`` (do not repeat those).
    nginx's own default for ``proxy_http_version`` is 1.0.
    """
    started: list[NginxProxy] = []
    # A short, world-traversable path: nginx workers run as `nobody` when the master is
    # root, and they must reach the temp paths (pytest's tmp_path is 0700).
    workdir = Path(tempfile.mkdtemp(prefix="nginx-", dir="/tmp"))
    workdir.chmod(0o755)

    def start(upstream_port: int, location_conf: str = "", http_version: str = "1.1") -> NginxProxy:
        n = len(started)
        d = workdir / f"n{n}"
        d.mkdir()
        d.chmod(0o777)
        port = free_port()
        conf = d / "nginx.conf"
        body = "\n".join("            " + line.strip() for line in location_conf.splitlines())
        conf.write_text(
            NGINX_CONF.format(
                dir=d, port=port, upstream=upstream_port, http_version=http_version, location=body
            )
        )
        stderr = d / "stderr.log"
        test = subprocess.run(
            [nginx_bin, "-t", "-q", "-p", str(d), "-e", str(d / "error.log"), "-c", str(conf)],
            capture_output=True,
            text=True,
        )
        if test.returncode != 0:
            raise RuntimeError(f"nginx -t failed:\n{test.stderr}\n{conf.read_text()}")
        with open(stderr, "wb") as out:
            proc = subprocess.Popen(
                [nginx_bin, "-p", str(d), "-e", str(d / "error.log"), "-c", str(conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        proxy = NginxProxy(port=port, proc=proc, conf=conf, error_log=d / "error.log")
        started.append(proxy)
        _wait_port(port, proc, 15.0, "nginx", stderr)
        return proxy

    yield start
    for proxy in started:
        _stop(proxy.proc, signal.SIGQUIT)  # graceful: master waits for its workers
    shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- verify


@dataclass
class VerifyRun:
    code: int
    report: dict
    stdout: str
    stderr: str


@pytest.fixture
def run_verify() -> Callable[..., VerifyRun]:
    def run(url: str, *args: str, timeout: float = 90.0) -> VerifyRun:
        proc = subprocess.run(
            [sys.executable, "-m", "relay.cli.verify", url, "--json", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            report = {}
        return VerifyRun(proc.returncode, report, proc.stdout, proc.stderr)

    return run
