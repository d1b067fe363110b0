"""``span-relay serve --workers N`` (or ``RELAY_WORKERS=N``): N worker processes, one port.

The parent binds the listening socket once and starts N workers, each
``python -m relay.cli serve ... --worker-socket FD``: a whole relay with its own event
loop, served by :class:`relay.cli.RelayServer` (``gc.freeze`` once started, open streams
told to reconnect on shutdown), accepting from the one shared socket, so the kernel hands
each new connection to one of them. A request cannot choose its worker: whatever a turn
needs after the request that started it (its stream, its resume, its cancel, its
record) must be reachable from every worker, as it is across replicas (RUNBOOK §13).
So N > 1 refuses to start (a ConfigError naming what to change, exit 2) while any of
these is per-process:

- the bus (``RELAY_BUS=memory``): a turn's live log. Use ``redis://``.
- the turn records, thread locks and span store (``RELAY_STORE=sqlite``): the thread
  lock is a lock of the process. Use ``postgresql://``.
- the LangGraph checkpointer when graphs are served (``RELAY_CHECKPOINTER=sqlite``): a
  paused turn is resumed by whichever worker the resume lands on. The graphs' LangGraph
  store (long-term memory, relay/langgraph/store.py) follows ``RELAY_STORE``, so the
  refusal of a SQLite store covers it: a memory one worker writes, every worker reads.
- the OTLP/HTTP receiver (``RELAY_OTLP_HTTP``, on by default with ``--relay-only``): a
  receiver assembles a run from its spans in memory, and an exporter's requests would be
  spread over the workers.

And made to work:

- ``RELAY_OTLP_GRPC``: one port, so worker 0 alone runs the gRPC receiver (every span of
  a run reaches the same process) while every worker streams its turns from Redis.
- ``RELAY_INSTANCE_ID``: worker *i* is ``{id}-w{i}`` (``id`` defaults to the host name),
  so a worker that starts marks as interrupted only the turns it ran itself, never a
  sibling's; a worker restarted in its slot cleans up after its predecessor.
- ``RELAY_DATA_DIR`` is shared: what is left in it with PostgreSQL (the messages'
  SQLite file, in WAL mode) is one file that every worker opens.

Supervision: SIGINT or SIGTERM to the parent sends SIGTERM to every worker, which shuts
down as one process does (streams end with ``reconnect``, runs get their grace); a second
signal sends SIGINT (uvicorn's forced exit); a worker still alive after the graces is
killed. A worker that exits on its own is restarted in its slot, unless it never started
(exit 2: configuration, 3: start-up failed), which stops every worker: serve exits with
that code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import uvicorn

from relay.settings import ConfigError, RelaySettings

log = logging.getLogger("relay.workers")

#: a worker's exit codes that mean it never started: restarting it cannot help
START_FAILURES = (2, 3)


def check_shared(settings: RelaySettings, env: Mapping[str, str], *, graphs: bool) -> None:
    """Refuse (ConfigError) a multi-worker configuration that keeps per-process state."""
    from relay.langgraph.checkpoints import checkpointer_url

    n = settings.workers
    why = (
        f"--workers {n} (RELAY_WORKERS) runs {n} processes behind one port, and a "
        "request lands on any of them"
    )
    problems = []
    if settings.bus == "memory":
        problems.append(
            "RELAY_BUS=memory keeps each turn's live log in one process: set "
            "RELAY_BUS=redis://host:port/db so that every worker streams, "
            "resumes and cancels every turn"
        )
    if not settings.store.startswith(("postgresql://", "postgres://")):
        problems.append(
            f"RELAY_STORE={settings.store} keeps turn records, thread locks and "
            "the graphs' long-term memory store per process: set "
            "RELAY_STORE=postgresql://..."
        )
    elif graphs and checkpointer_url(settings, env) is None:
        problems.append(
            "RELAY_CHECKPOINTER=sqlite: a paused turn resumes on whichever "
            "worker the resume lands on, which needs its checkpoint: unset it "
            "(it follows RELAY_STORE) or set a postgresql:// URL"
        )
    if settings.otlp_http:
        problems.append(
            "RELAY_OTLP_HTTP would spread a run's spans over the workers (a "
            "receiver assembles each run in memory): set RELAY_OTLP_HTTP=false "
            "and receive OTLP over gRPC (RELAY_OTLP_GRPC=host:port, run by "
            "worker 0 alone), or run replicas on ports of their own behind "
            "collectors that route by trace id (RUNBOOK §13)"
        )
    if problems:
        raise ConfigError(f"{why}: " + "; ".join(problems) + " (or run one worker)")


def worker_env(env: Mapping[str, str], index: int) -> dict[str, str]:
    """Worker ``index``'s environment: its instance id and index; the gRPC receiver in
    worker 0 only."""
    base = env.get("RELAY_INSTANCE_ID") or socket.gethostname()
    out = {
        **env,
        "RELAY_WORKER": str(index),
        "RELAY_INSTANCE_ID": f"{base}-w{index}",
        "RELAY_WORKERS": "1",
    }
    if index > 0:
        out["RELAY_OTLP_GRPC"] = ""
    return out


def exit_with_parent() -> None:
    """In a worker: end (SIGTERM) when the parent dies, whatever killed it (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PDEATHSIG


class Supervisor:
    """The parent of ``serve --workers N``: the socket, the workers, the signals."""

    def __init__(
        self,
        n: int,
        host: str,
        port: int,
        worker_args: list[str],
        env: Mapping[str, str],
        stop_timeout_s: float,
    ) -> None:
        self.n = n
        self.host = host
        self.port = port
        self.worker_args = worker_args  # ``serve`` arguments, without the socket
        self.env = dict(env)
        self.stop_timeout_s = stop_timeout_s
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * n
        self._stop = threading.Event()
        self._signals = 0
        self._sock: socket.socket | None = None

    def run(self) -> int:
        config = uvicorn.Config("unused:app", host=self.host, port=self.port, log_config=None)
        self._sock = sock = config.bind_socket()  # inheritable; exits 3 if the port is taken
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        log.info(
            "span-relay: %d workers on %s:%d (parent %d)",
            self.n,
            self.host,
            sock.getsockname()[1],
            os.getpid(),
        )
        code = 0
        try:
            for index in range(self.n):
                self._spawn(index)
            while not self._stop.wait(0.2):
                code = self._check()
        finally:
            self._stop_all()
            sock.close()
        return code

    def _spawn(self, index: int) -> None:
        assert self._sock is not None
        fd = self._sock.fileno()
        argv = [sys.executable, "-m", "relay.cli", *self.worker_args, "--worker-socket", str(fd)]
        proc = subprocess.Popen(argv, env=worker_env(self.env, index), pass_fds=(fd,))
        self.workers[index] = proc
        log.info("span-relay: worker %d started (pid %d)", index, proc.pid)

    def _check(self) -> int:
        """Restart a worker that exited on its own; stop all if one could not start."""
        for index, proc in enumerate(self.workers):
            code = proc.poll() if proc is not None else None
            if proc is None or code is None or self._stop.is_set():
                continue
            if code in START_FAILURES:
                log.error("span-relay: worker %d could not start (exit %d); stopping", index, code)
                self._stop.set()
                return code
            log.error(
                "span-relay: worker %d (pid %d) exited (%d); restarting it", index, proc.pid, code
            )
            self._spawn(index)
        return 0

    def _on_signal(self, sig: int, frame: Any) -> None:
        self._signals += 1
        self._stop.set()
        forward = signal.SIGTERM if self._signals == 1 else signal.SIGINT
        for proc in self.workers:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(forward)

    def _stop_all(self) -> None:
        alive = [p for p in self.workers if p is not None and p.poll() is None]
        for proc in alive:  # again, for one spawned as the signal came (harmless twice)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        for proc in alive:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.error("span-relay: worker pid %d did not stop in time; killing it", proc.pid)
                proc.kill()
                proc.wait()
