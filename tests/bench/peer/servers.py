"""The two servers of the side-by-side benchmark, as subprocesses on 127.0.0.1.

- span-relay: ``span-relay serve --config langgraph.json`` (this Python, this checkout);
- the peer: ``langgraph dev --config langgraph.json`` from its own throwaway venv
  (``.span-relay/bench-peer-venv``, made from requirements-peer.txt and reused while that
  file is unchanged). The peer is never imported here: it runs beside us, as a user runs it.

Both get the same environment rules: offline (no tracing, no analytics), warnings-only logs
to a file, a fresh data folder, and the file-descriptor limit raised for the idle streams.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CONFIG = HERE / "langgraph.json"
REQUIREMENTS = HERE / "requirements-peer.txt"
VENV = ROOT / ".span-relay" / "bench-peer-venv"
#: the peer's own knob for concurrent runs (its default in `langgraph dev` admits one run
#: at a time here): set to the benchmark's concurrency, so its queue is not what is measured
PEER_JOBS = 100
OFFLINE_ENV = {
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_API_KEY": "",
    "LANGCHAIN_API_KEY": "",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def ensure_peer_venv(log: Path) -> Path:
    """The peer's ``langgraph`` executable, installing its venv when the pins changed. One
    process installs it at a time (a lock file beside it): the test workers that need the
    peer at once wait for the first one's install, then use it."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    stamp = VENV / ".bench-peer-pins"
    exe = VENV / "bin" / "langgraph"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with (VENV.parent / "bench-peer-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if exe.exists() and stamp.exists() and stamp.read_text().strip() == digest:
            return exe
        _install(log, digest)
    return exe


def _install(log: Path, digest: str) -> None:
    """A new venv of the peer from REQUIREMENTS, stamped with their digest."""
    shutil.rmtree(VENV, ignore_errors=True)
    print(f"# installing the peer into {VENV} (a few minutes, once)", file=sys.stderr)
    with log.open("w") as out:
        subprocess.run(
            [sys.executable, "-m", "venv", str(VENV)],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        subprocess.run(
            [
                str(VENV / "bin" / "pip"),
                "install",
                "--quiet",
                "--no-input",
                "-r",
                str(REQUIREMENTS),
            ],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=1200,
        )
    (VENV / ".bench-peer-pins").write_text(digest + "\n")


def raise_fd_limit() -> None:
    """Inherited by the servers: 500 idle streams and their client need the hard limit."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    base: str  # http://127.0.0.1:PORT
    workdir: Path
    log: Path
    extra: dict[str, str] = field(default_factory=dict)

    def tree(self) -> list[int]:
        """The server's process and its descendants."""
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry))
        found = []
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def cpu_s(self) -> float:
        """utime + stime of the whole process tree, in seconds."""
        ticks = 0
        for pid in self.tree():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                continue
        return ticks / os.sysconf("SC_CLK_TCK")

    def rss_kib(self) -> int:
        total = 0
        for pid in self.tree():
            try:
                with open(f"/proc/{pid}/status") as f:
                    total += next(
                        (int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0
                    )
            except OSError:
                continue
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _workdir(name: str) -> Path:
    """A fresh folder holding a copy of langgraph.json and graphs.py: the peer reads the
    config's paths from its working directory; both servers serve the same two files."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-peer-{name}-"))
    for source in (CONFIG, HERE / "graphs.py"):
        shutil.copy(source, workdir / source.name)
    return workdir


def _start(
    name: str,
    argv: list[str],
    env: dict[str, str],
    workdir: Path,
    port: int,
    ready_path: str,
    logs: Path,
) -> Server:
    log = logs / f"{name}.log"
    out = log.open("wb")
    proc = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    server = Server(name, proc, f"http://127.0.0.1:{port}", workdir, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            server.stop()  # removes its folder
            raise RuntimeError(f"{name} exited ({proc.returncode}); see {log}")
        try:
            if httpx.get(server.base + ready_path, timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"{name} did not answer {ready_path} within 120 s; see {log}")


def start_relay(logs: Path, root: Path = ROOT, name: str = "span-relay") -> Server:
    """span-relay from the checkout at ``root`` (this one by default: another lets a
    benchmark compare two trees, tests/bench/peer/firstbyte.py)."""
    port = free_port()
    workdir = _workdir("relay")
    env = {
        **os.environ,
        **OFFLINE_ENV,
        "RELAY_DATA_DIR": str(workdir),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    argv = [
        sys.executable,
        "-m",
        "relay.cli",
        "serve",
        "--config",
        "langgraph.json",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    return _start(name, argv, env, workdir, port, "/readyz", logs)


def start_peer(exe: Path, logs: Path) -> Server:
    port = free_port()
    workdir = _workdir("peer")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OFFLINE_ENV)
    env["PATH"] = f"{exe.parent}{os.pathsep}{env.get('PATH', '')}"
    argv = [
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
        "--server-log-level",
        "WARNING",
        "--n-jobs-per-worker",
        str(PEER_JOBS),
    ]
    return _start("peer", argv, env, workdir, port, "/ok", logs)
