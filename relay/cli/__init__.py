"""``span-relay``: serve the app, verify a deployment's stream.

    span-relay serve [--host 127.0.0.1] [--port 8000] [--app module:factory] [--relay-only]
                     [--graph MODULE:ATTR] [--config langgraph.json] [--workers N]
    span-relay verify-stream URL [...]
    span-relay replay FILE [--turn ID] [--ndjson] [--speed S]
    span-relay collector-config [collector|loadbalancing]
    span-relay --version

``serve`` runs the demo agent's app by default (``span_relay_demo.app:create_app``, named
by string so that the relay library itself never imports the demo); ``--graph`` (or RELAY_GRAPH)
serves any compiled LangGraph graph, ``--config`` every graph of a LangGraph CLI
``langgraph.json`` (relay/cli/langgraph_config.py reads it, relay/cli/graph_app.py serves
it); ``--app`` serves another ASGI app, or a factory that returns one
(relay/cli/asgi_app.py). ``--workers N`` (RELAY_WORKERS) runs N worker processes behind
the one port (relay/cli/workers.py).

A configuration that cannot be served exits with status 2 and one sentence
(``span-relay: configuration error: ...``; a graph that fails to import or build:
``span-relay: cannot load graph 'agent' from ./src/agent/graph.py: ModuleNotFoundError:
...``), its traceback logged at DEBUG (``--log-level debug``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn

from relay import logs

if TYPE_CHECKING:
    from relay.cli.langgraph_config import LangGraphConfig

DEFAULT_APP = "span_relay_demo.app:create_app"
#: ``serve --relay-only``: the relay without the demo agent (OTLP/HTTP receiver on)
RELAY_ONLY_APP = "relay.cli.relay_only:create_relay_app"


log = logging.getLogger("relay.cli")


def _serve(args: argparse.Namespace) -> int:
    from relay.cli.graph_loading import GraphLoadError
    from relay.settings import ConfigError, RelaySettings, require_extras

    graph = getattr(args, "graph", None) or os.environ.get("RELAY_GRAPH") or None
    config_file = getattr(args, "config", None)
    try:
        if sum(map(bool, (args.relay_only, graph, config_file))) > 1:
            raise ConfigError("choose one of --relay-only, --graph (RELAY_GRAPH) and --config")
        project = _read_config(config_file)  # before the settings: its env may set RELAY_*
        settings = RelaySettings.from_env()  # refuse to start on an inconsistent config
        if args.app == DEFAULT_APP and not (args.relay_only or graph or config_file):
            require_extras(settings, demo=True)  # the demo agent's packages: [demo]
        logs.configure(args.log_level, settings.log_format)
        workers = settings.workers if args.workers is None else args.workers
        if args.worker_socket is None and workers != 1:
            return _serve_workers(args, workers, graph, config_file, project)
        app = _app(args, graph, project)
    except GraphLoadError as exc:
        print(f"span-relay: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"span-relay: configuration error: {exc}", file=sys.stderr)
        return 2
    # log_config=None: uvicorn's loggers go through the root handler configured above
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=None,
        timeout_graceful_shutdown=args.graceful_s,
        proxy_headers=True,
    )
    server = RelayServer(config)
    try:
        if args.worker_socket is None:
            server.run()
        else:  # one of serve --workers N: accept from the parent's socket
            from relay.cli.workers import exit_with_parent

            exit_with_parent()
            server.run(sockets=[socket.socket(fileno=args.worker_socket)])
    except SystemExit:  # uvicorn's exit when the app's start-up failed
        if getattr(_state_of(app), "load_error", None) is not None:
            return 2  # a graph's factory failed (its one line is logged): configuration
        raise
    return 0 if server.started else 3  # 3: uvicorn's "could not start"


def _serve_workers(
    args: argparse.Namespace,
    workers: int,
    graph: str | None,
    config_file: str | None,
    project: LangGraphConfig | None = None,
) -> int:
    """The parent of ``serve --workers N``: refuse what cannot be shared, then supervise."""
    from dataclasses import replace

    from relay.cli.langgraph_auth import load_auth_entry
    from relay.cli.workers import Supervisor, check_shared
    from relay.settings import ConfigError, RelaySettings

    if workers < 1:
        raise ConfigError(f"--workers {workers}: use 1 or more worker processes")
    if project is not None:  # its env is in already; an auth that cannot be honoured: no worker
        load_auth_entry(project.auth, project.base)
    env = dict(os.environ)  # with --config, its env already in: the workers inherit it
    if args.relay_only:  # as create_relay_app does
        env.setdefault("RELAY_OTLP_HTTP", "true")
    settings = replace(RelaySettings.from_env(env), workers=workers)
    check_shared(settings, env, graphs=not args.relay_only)
    worker_args = [
        "serve",
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--app",
        args.app,
        "--log-level",
        args.log_level,
        "--graceful-s",
        str(args.graceful_s),
    ]
    if args.relay_only:
        worker_args.append("--relay-only")
    if graph:
        worker_args += ["--graph", graph]
    if config_file:
        worker_args += ["--config", config_file]
    return Supervisor(
        workers,
        args.host,
        args.port,
        worker_args,
        env,
        stop_timeout_s=args.graceful_s + settings.shutdown_grace_s + 10,
    ).run()


def _read_config(config_file: str | None) -> LangGraphConfig | None:
    """``--config``'s file, read, its ``env`` applied: the file wins over the process's
    environment, as in the Agent Server (relay/envfile.py)."""
    if not config_file:
        return None
    from relay.cli.langgraph_config import read_config
    from relay.envfile import apply_env

    config = read_config(Path(config_file))
    apply_env(config.env)
    return config


def _app(args: argparse.Namespace, graph: str | None, config: LangGraphConfig | None) -> Any:
    if config is not None:
        from relay.cli.graph_app import create_graph_app

        warning = config.warning()
        if warning and os.environ.get("RELAY_WORKER") in (None, "0"):  # one line, not N
            log.warning("%s", warning)
        from relay.cli.langgraph_auth import load_auth_entry

        return create_graph_app(
            config.graphs,
            base=config.base,
            http=config.http,
            auth=load_auth_entry(config.auth, config.base),  # honoured, or no start
            store=config.store,
            checkpointer=config.checkpointer,
        )
    if graph:
        from relay.cli.graph_app import create_graph_app
        from relay.cli.langgraph_config import GraphEntry

        return create_graph_app([GraphEntry(None, graph)])
    from relay.cli.asgi_app import load_app

    return load_app(RELAY_ONLY_APP if args.relay_only else args.app)


def _state_of(app: object) -> Any:
    return getattr(app, "state", None)


def _relay_of(app: object) -> Any:
    return getattr(_state_of(app), "relay", None)


class RelayServer(uvicorn.Server):
    """uvicorn, plus: once the app has started, the heap built so far (imported modules,
    the compiled graph, the app) is frozen out of the cyclic garbage collector's reach
    (:func:`gc.freeze`), so its collections walk only what requests allocate: OTLP ingest
    +29% and a 10,000-span replay -20% in the bench (docs/performance.md); and on
    SIGTERM/SIGINT the relay's open streams end with a ``reconnect`` frame before uvicorn
    waits for connections to close."""

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        gc.collect()  # nothing collectable goes into the permanent generation
        gc.freeze()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        relay = _relay_of(self.config.app)
        if relay is not None:
            relay.begin_shutdown()
        super().handle_exit(sig, frame)


def _verify_stream(argv: list[str]) -> int:
    from relay.cli import verify

    return verify.main(argv)


def build_parser() -> argparse.ArgumentParser:
    from relay.version import __version__

    parser = argparse.ArgumentParser(prog="span-relay", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"span-relay {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the app (the demo agent, relay and SPA)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--app",
        default=DEFAULT_APP,
        help=f"module:attr of an ASGI app, or of a factory returning one (default {DEFAULT_APP})",
    )
    serve.add_argument(
        "--relay-only",
        action="store_true",
        help="serve the relay without the demo agent: the turn API, the SPA "
        f"and the OTLP receivers ({RELAY_ONLY_APP})",
    )
    serve.add_argument(
        "--graph",
        metavar="MODULE:ATTR",
        help="serve this compiled LangGraph graph (or a function returning "
        "one): my_pkg.agent:graph or ./agent.py:graph (RELAY_GRAPH)",
    )
    serve.add_argument(
        "--config",
        metavar="langgraph.json",
        help="serve every graph of a LangGraph CLI config (its 'graphs', 'env', "
        "'http.app' and 'http.cors'; other keys are named at start-up); the first "
        "graph is also at /chat",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes behind the one port (RELAY_WORKERS, default "
        "1); more than one needs RELAY_BUS=redis:// and "
        "RELAY_STORE=postgresql://",
    )
    serve.add_argument("--worker-socket", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    serve.add_argument(
        "--graceful-s",
        type=float,
        default=10.0,
        help="seconds open streams get to finish on shutdown",
    )
    sub.add_parser(
        "verify-stream", add_help=False, help="check that a deployed instance streams incrementally"
    )
    collector = sub.add_parser(
        "collector-config", help="print an OpenTelemetry Collector config the wheel carries"
    )
    collector.add_argument(
        "name",
        nargs="?",
        default="collector",
        help="collector (default: OTLP in, to Jaeger and the relay) or loadbalancing "
        "(in front of several relays, by trace id)",
    )
    replay = sub.add_parser("replay", help="print a trace file's turns as events (SSE)")
    replay.add_argument("file", help="OTLP JSON, Jaeger v2 API or Jaeger UI JSON; - for stdin")
    replay.add_argument("--turn", help="only this turn id (default: every turn in the file)")
    replay.add_argument("--ndjson", action="store_true", help="NDJSON instead of SSE")
    replay.add_argument(
        "--speed",
        type=float,
        default=0.0,
        help="1 keeps the original pacing, 0 (default) prints at once",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "verify-stream":
        return _verify_stream(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "collector-config":
        from relay.cli.collector import print_config

        return print_config(args.name)
    if args.command == "replay":
        from relay.cli.replay import replay_file

        return replay_file(args.file, turn=args.turn, ndjson=args.ndjson, speed=args.speed)
    return 2
