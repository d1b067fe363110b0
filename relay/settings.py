"""Configuration from RELAY_* environment variables (DESIGN.md §7).

Read once, validated as a whole: an inconsistent configuration refuses to start with a
message that names the variable to change. A setting whose optional dependencies are not
installed (``pip install span-relay`` brings the embedded default only) refuses to start
with a message that names the extra to install (:func:`require_extras`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path


class ConfigError(ValueError):
    """The configuration cannot work; the message says what to change."""


@dataclass(frozen=True, slots=True)
class RelaySettings:
    data_dir: Path = Path(".span-relay")
    heartbeat_s: float = 15.0
    disconnect_grace_s: float = 5.0
    send_timeout_s: float = 30.0
    retry_ms: int = 2000
    bus: str = "memory"
    store: str = "sqlite"
    capture_content: bool = True
    trace_url: str | None = None
    thread_policy: str = "reject"
    faults: bool = False
    api_token: str | None = None
    max_body_bytes: int = 64 * 1024
    tool_timeout_s: float = 30.0
    turn_timeout_s: float = 120.0
    server_timeout_s: float = 300.0
    shutdown_grace_s: float = 5.0
    bus_retention_s: float = 3600.0
    bus_max_turns: int = 1000
    spa_dir: Path | None = None
    cors_origins: tuple[str, ...] = ()
    rate_limit: str | None = None
    metrics: str = "off"
    log_format: str = "text"
    # span store (relay/store): retention by age and count; POST /imports size limit
    store_retention_s: float = 7 * 24 * 3600.0
    store_max_turns: int = 10_000
    import_max_bytes: int = 32 * 1024 * 1024
    # -- OTLP receiver, Redis bus, replicas -------------------------------------------
    otlp_http: bool = False
    otlp_grpc: str | None = None
    otlp_max_bytes: int = 8 * 1024 * 1024
    otlp_pending_spans: int = 10_000
    otlp_pending_s: float = 600.0
    otlp_dedup_spans: int = 200_000
    otlp_store_backlog: int = 50_000
    otlp_settle_ms: float = 250.0
    bus_max_events_per_turn: int = 10_000
    instance_id: str | None = None
    #: ``serve --workers N``: worker processes on one port; ``worker``: this one's index
    #: (set by ``serve`` in each worker it starts)
    workers: int = 1
    worker: int | None = None
    # -- who is asking (relay/auth): RELAY_AUTH none | token | jwt | proxy ---------------
    auth: str = "none"
    jwt_jwks: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_leeway_s: float = 30.0
    proxy_user_header: str = "X-Forwarded-User"
    proxy_secret: str | None = None
    # client-executed tools (relay/langgraph/client_tools.py)
    client_tool_max_rounds: int = 8
    client_tool_max_result_bytes: int = 16 * 1024
    client_tool_timeout_s: float = 300.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RelaySettings:
        env = os.environ if environ is None else environ
        settings = cls(
            data_dir=Path(env.get("RELAY_DATA_DIR", ".span-relay")),
            heartbeat_s=_float(env, "RELAY_HEARTBEAT_S", 15.0),
            disconnect_grace_s=_float(env, "RELAY_DISCONNECT_GRACE_S", 5.0),
            send_timeout_s=_float(env, "RELAY_SEND_TIMEOUT_S", 30.0),
            retry_ms=int(_float(env, "RELAY_RETRY_MS", 2000)),
            bus=env.get("RELAY_BUS", "memory"),
            store=env.get("RELAY_STORE", "sqlite"),
            capture_content=_bool(env, "RELAY_CAPTURE_CONTENT", True),
            trace_url=env.get("RELAY_TRACE_URL") or None,
            thread_policy=env.get("RELAY_THREAD_POLICY", "reject"),
            faults=_bool(env, "RELAY_FAULTS", False),
            api_token=env.get("RELAY_API_TOKEN") or None,
            max_body_bytes=int(_float(env, "RELAY_MAX_BODY_BYTES", 64 * 1024)),
            tool_timeout_s=_float(env, "RELAY_TOOL_TIMEOUT_S", 30.0),
            turn_timeout_s=_float(env, "RELAY_TURN_TIMEOUT_S", 120.0),
            server_timeout_s=_float(env, "RELAY_SERVER_TIMEOUT_S", 300.0),
            shutdown_grace_s=_float(env, "RELAY_SHUTDOWN_GRACE_S", 5.0),
            bus_retention_s=_float(env, "RELAY_BUS_RETENTION_S", 3600.0),
            bus_max_turns=int(_float(env, "RELAY_BUS_MAX_TURNS", 1000)),
            spa_dir=Path(env["RELAY_SPA_DIR"]) if env.get("RELAY_SPA_DIR") else None,
            cors_origins=tuple(
                o.strip() for o in env.get("RELAY_CORS_ORIGINS", "").split(",") if o.strip()
            ),
            rate_limit=env.get("RELAY_RATE_LIMIT") or None,
            metrics=env.get("RELAY_METRICS", "off").strip().lower() or "off",
            log_format=env.get("RELAY_LOG_FORMAT", "text").strip().lower() or "text",
            store_retention_s=_float(env, "RELAY_STORE_RETENTION_S", 7 * 24 * 3600.0),
            store_max_turns=int(_float(env, "RELAY_STORE_MAX_TURNS", 10_000)),
            import_max_bytes=int(_float(env, "RELAY_IMPORT_MAX_BYTES", 32 * 1024 * 1024)),
            otlp_http=_bool(env, "RELAY_OTLP_HTTP", False),
            otlp_grpc=env.get("RELAY_OTLP_GRPC") or None,
            otlp_max_bytes=int(_float(env, "RELAY_OTLP_MAX_BYTES", 8 * 1024 * 1024)),
            otlp_pending_spans=int(_float(env, "RELAY_OTLP_PENDING_SPANS", 10_000)),
            otlp_pending_s=_float(env, "RELAY_OTLP_PENDING_S", 600.0),
            otlp_dedup_spans=int(_float(env, "RELAY_OTLP_DEDUP_SPANS", 200_000)),
            otlp_store_backlog=int(_float(env, "RELAY_OTLP_STORE_BACKLOG", 50_000)),
            otlp_settle_ms=_float(env, "RELAY_OTLP_SETTLE_MS", 250.0),
            bus_max_events_per_turn=int(_float(env, "RELAY_BUS_MAX_EVENTS", 10_000)),
            instance_id=env.get("RELAY_INSTANCE_ID") or None,
            workers=int(_float(env, "RELAY_WORKERS", 1)),
            worker=int(env["RELAY_WORKER"]) if env.get("RELAY_WORKER", "").isdigit() else None,
            auth=(env.get("RELAY_AUTH") or ("token" if env.get("RELAY_API_TOKEN") else "none"))
            .strip()
            .lower(),
            jwt_jwks=env.get("RELAY_JWT_JWKS") or None,
            jwt_issuer=env.get("RELAY_JWT_ISSUER") or None,
            jwt_audience=env.get("RELAY_JWT_AUDIENCE") or None,
            jwt_leeway_s=_float(env, "RELAY_JWT_LEEWAY_S", 30.0),
            proxy_user_header=env.get("RELAY_PROXY_USER_HEADER") or "X-Forwarded-User",
            proxy_secret=env.get("RELAY_PROXY_SECRET") or None,
            client_tool_max_rounds=int(_float(env, "RELAY_CLIENT_TOOL_MAX_ROUNDS", 8)),
            client_tool_max_result_bytes=int(
                _float(env, "RELAY_CLIENT_TOOL_MAX_RESULT_BYTES", 16 * 1024)
            ),
            client_tool_timeout_s=_float(env, "RELAY_CLIENT_TOOL_TIMEOUT_S", 300.0),
        )
        settings.validate()
        require_extras(settings, env)
        return settings

    def validate(self) -> None:
        if self.heartbeat_s <= 0:
            raise ConfigError("RELAY_HEARTBEAT_S must be > 0 (seconds between heartbeats)")
        if self.send_timeout_s <= 0:
            raise ConfigError("RELAY_SEND_TIMEOUT_S must be > 0 (seconds a reader may stall)")
        if self.disconnect_grace_s < 0:
            raise ConfigError("RELAY_DISCONNECT_GRACE_S must be >= 0")
        if self.bus != "memory" and not self.bus.startswith(("redis://", "rediss://")):
            raise ConfigError(f"RELAY_BUS={self.bus!r}: use 'memory' or a redis:// URL")
        self._validate_scale_out()
        self._validate_auth()
        if self.store != "sqlite" and not self.store.startswith(("postgresql://", "postgres://")):
            raise ConfigError(f"RELAY_STORE={self.store!r}: use 'sqlite' or a postgresql:// URL")
        if not 0 < self.store_retention_s < float("inf"):  # also refuses nan
            raise ConfigError(
                "RELAY_STORE_RETENTION_S must be a number > 0 (seconds a turn's spans are kept)"
            )
        if self.store_max_turns < 1:
            raise ConfigError("RELAY_STORE_MAX_TURNS must be >= 1 (turns whose spans are kept)")
        if self.import_max_bytes < 1:
            raise ConfigError(
                "RELAY_IMPORT_MAX_BYTES must be >= 1 (largest trace file POST /imports accepts)"
            )
        if self.rate_limit is not None:
            count, sep, window = self.rate_limit.partition("/")
            if not (count.isdigit() and int(count) > 0 and sep and _is_number(window)):
                raise ConfigError(
                    f"RELAY_RATE_LIMIT={self.rate_limit!r}: use N/S, e.g. "
                    "20/60 for 20 requests a minute per client"
                )
        if "*" in self.cors_origins and self.api_token:
            raise ConfigError(
                "RELAY_CORS_ORIGINS=* with RELAY_API_TOKEN would let any site "
                "use the token; list the allowed origins instead"
            )
        if self.metrics not in ("off", "prometheus"):
            raise ConfigError("RELAY_METRICS must be 'off' or 'prometheus'")
        if self.log_format not in ("text", "json"):
            raise ConfigError("RELAY_LOG_FORMAT must be 'text' or 'json'")
        self._validate_client_tools()
        if self.thread_policy not in ("reject", "enqueue"):
            raise ConfigError("RELAY_THREAD_POLICY must be 'reject' or 'enqueue'")
        if not self.tool_timeout_s < self.turn_timeout_s:
            raise ConfigError(
                f"RELAY_TOOL_TIMEOUT_S ({self.tool_timeout_s:g}) must be shorter than "
                f"RELAY_TURN_TIMEOUT_S ({self.turn_timeout_s:g}): lower the tool timeout "
                "or raise the turn timeout"
            )
        if not self.turn_timeout_s < self.server_timeout_s:
            raise ConfigError(
                f"RELAY_TURN_TIMEOUT_S ({self.turn_timeout_s:g}) must be shorter than "
                f"RELAY_SERVER_TIMEOUT_S ({self.server_timeout_s:g}): lower the turn timeout "
                "or raise the server limit"
            )

    def _validate_client_tools(self) -> None:
        if self.client_tool_max_rounds < 1:
            raise ConfigError("RELAY_CLIENT_TOOL_MAX_ROUNDS must be >= 1 (client-tool pauses)")
        if not self.client_tool_timeout_s > 0:
            raise ConfigError("RELAY_CLIENT_TOOL_TIMEOUT_S must be > 0 (seconds to answer)")
        limit = self.client_tool_max_result_bytes
        body = self.max_body_bytes
        if not 0 < limit < body:
            raise ConfigError(
                f"RELAY_CLIENT_TOOL_MAX_RESULT_BYTES ({limit}) must be > 0 and "
                f"below RELAY_MAX_BODY_BYTES ({body}): the result is in the body"
            )

    def _validate_scale_out(self) -> None:
        """The OTLP receiver, the Redis bus and the replica settings."""
        if self.otlp_grpc is not None:
            host, sep, port = self.otlp_grpc.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
                raise ConfigError(
                    f"RELAY_OTLP_GRPC={self.otlp_grpc!r}: use host:port, e.g. "
                    "127.0.0.1:4317 (0.0.0.0:4317 to accept other hosts)"
                )
        for name, value in (
            ("RELAY_OTLP_MAX_BYTES", self.otlp_max_bytes),
            ("RELAY_OTLP_PENDING_SPANS", self.otlp_pending_spans),
            ("RELAY_OTLP_DEDUP_SPANS", self.otlp_dedup_spans),
            ("RELAY_OTLP_STORE_BACKLOG", self.otlp_store_backlog),
            ("RELAY_BUS_MAX_EVENTS", self.bus_max_events_per_turn),
        ):
            if value < 1:
                raise ConfigError(f"{name} must be >= 1")
        if self.workers < 1:
            raise ConfigError("RELAY_WORKERS must be >= 1 (worker processes of serve)")
        if not self.otlp_pending_s > 0:
            raise ConfigError(
                "RELAY_OTLP_PENDING_S must be > 0 (seconds received spans wait "
                "for their run's root)"
            )
        if not 0 <= self.otlp_settle_ms <= 60_000:
            raise ConfigError(
                "RELAY_OTLP_SETTLE_MS must be between 0 and 60000 (how long "
                "received spans wait for the spans racing them; 0: no wait)"
            )

    def _validate_auth(self) -> None:
        """RELAY_AUTH and what its mode needs (README "Security")."""
        if self.auth not in ("none", "token", "jwt", "proxy"):
            raise ConfigError(
                f"RELAY_AUTH={self.auth!r}: use none, token (RELAY_API_TOKEN), "
                "jwt (RELAY_JWT_*) or proxy (RELAY_PROXY_*)"
            )
        if self.auth == "token" and not self.api_token:
            raise ConfigError("RELAY_AUTH=token needs RELAY_API_TOKEN (the shared token)")
        if self.auth == "none" and self.api_token:
            raise ConfigError(
                "RELAY_AUTH=none with RELAY_API_TOKEN set: unset the token, or use RELAY_AUTH=token"
            )
        if self.auth == "jwt":
            missing = [
                name
                for name, value in (
                    ("RELAY_JWT_JWKS", self.jwt_jwks),
                    ("RELAY_JWT_ISSUER", self.jwt_issuer),
                    ("RELAY_JWT_AUDIENCE", self.jwt_audience),
                )
                if not value
            ]
            if missing:
                raise ConfigError(
                    f"RELAY_AUTH=jwt needs {', '.join(missing)} (the key set "
                    "a token is verified against, its iss and its aud)"
                )
            assert self.jwt_jwks is not None
            if (
                not self.jwt_jwks.startswith(("https://", "http://"))
                and not Path(self.jwt_jwks).is_file()
            ):
                raise ConfigError(
                    f"RELAY_JWT_JWKS={self.jwt_jwks!r} is neither an http(s) "
                    "URL nor a readable file"
                )
            if not 0 <= self.jwt_leeway_s <= 300:
                raise ConfigError(
                    "RELAY_JWT_LEEWAY_S must be between 0 and 300 (seconds of "
                    "clock skew allowed on exp and nbf)"
                )
        if (
            self.auth in ("jwt", "proxy")
            and (self.otlp_http or self.otlp_grpc)
            and not self.api_token
        ):
            raise ConfigError(
                f"RELAY_AUTH={self.auth} with the OTLP receiver on needs "
                "RELAY_API_TOKEN: the receiver keeps its own credential (the "
                "collector's), apart from the users' tokens"
            )
        if self.auth == "proxy":
            if not self.proxy_secret or len(self.proxy_secret) < 16:
                raise ConfigError(
                    "RELAY_AUTH=proxy needs RELAY_PROXY_SECRET (16 characters "
                    "or more): the proxy sends it in X-Relay-Proxy-Secret, so "
                    "a user header from anyone else is not trusted"
                )
            if not self.proxy_user_header.replace("-", "").isalnum():
                raise ConfigError(
                    f"RELAY_PROXY_USER_HEADER={self.proxy_user_header!r} is not a header name"
                )

    @property
    def has_users(self) -> bool:
        """Requests act for a user (RELAY_AUTH=jwt or proxy): turns have owners."""
        return self.auth in ("jwt", "proxy")

    def resolved_spa_dir(self) -> Path | None:
        """The SPA folder: RELAY_SPA_DIR, else ``spa/`` beside the package, else ./spa."""
        candidates = [self.spa_dir] if self.spa_dir else []
        candidates += [Path(__file__).resolve().parent.parent / "spa", Path.cwd() / "spa"]
        for candidate in candidates:
            if candidate is not None and (candidate / "index.html").is_file():
                return candidate
        return None


#: the distribution that brings each module an extra needs (for the messages)
_DISTRIBUTIONS = {
    "grpc": "grpcio",
    "opentelemetry.exporter.otlp.proto.grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "opentelemetry.exporter.otlp.proto.http": "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry.exporter.prometheus": "opentelemetry-exporter-prometheus",
    "prometheus_client": "prometheus-client",
    "redis": "redis",
    "psycopg": "psycopg",
    "psycopg_pool": "psycopg-pool",
    "langgraph.checkpoint.postgres": "langgraph-checkpoint-postgres",
    "bm25s": "bm25s",
    "langchain_openai": "langchain-openai",
    "jwt": "pyjwt",
}
_POSTGRES = ("postgresql://", "postgres://")


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing (or half there)
        return False


def missing_extras(
    settings: RelaySettings, environ: Mapping[str, str] | None = None, *, demo: bool = False
) -> list[str]:
    """One line per extra that a setting needs and that is not installed, naming the
    setting, the missing packages and the ``pip install`` that brings them. ``demo``: the
    demo agent is served too (``span-relay serve`` without ``--app``/``--relay-only``)."""
    env = os.environ if environ is None else environ
    needs: dict[str, tuple[list[str], list[str]]] = {}  # extra -> (settings, modules)

    def need(extra: str, setting: str, *modules: str) -> None:
        settings_, modules_ = needs.setdefault(extra, ([], []))
        settings_.append(setting)
        modules_.extend(m for m in modules if m not in modules_)

    if settings.bus.startswith(("redis://", "rediss://")):
        need("redis", f"RELAY_BUS={settings.bus.split('://')[0]}://...", "redis")
    if settings.store.startswith(_POSTGRES):
        need("postgres", "RELAY_STORE=postgresql://...", "psycopg", "psycopg_pool")
    checkpointer = (env.get("RELAY_CHECKPOINTER") or "").strip()
    if checkpointer.startswith(_POSTGRES) or (
        checkpointer in ("", "auto") and settings.store.startswith(_POSTGRES)
    ):
        need(
            "postgres",
            "RELAY_CHECKPOINTER=postgresql://..."
            if checkpointer
            else "the checkpointer (it follows RELAY_STORE)",
            "psycopg",
            "psycopg_pool",
            "langgraph.checkpoint.postgres",
        )
    if settings.otlp_grpc is not None:
        need("otlp", f"RELAY_OTLP_GRPC={settings.otlp_grpc}", "grpc")
    exporter = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    endpoint = next(
        (
            name
            for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
            if env.get(name)
        ),
        None,
    )
    if endpoint and exporter not in ("none", ""):
        protocol = (
            (
                env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "grpc"
            )
            .strip()
            .lower()
        )
        if protocol == "grpc":
            need(
                "otlp",
                f"{endpoint} (OTLP export over gRPC)",
                "opentelemetry.exporter.otlp.proto.grpc",
                "grpc",
            )
        elif protocol == "http/protobuf":
            need(
                "otlp",
                f"{endpoint} (OTLP export over HTTP)",
                "opentelemetry.exporter.otlp.proto.http",
            )
    if settings.auth == "jwt":
        need("auth", "RELAY_AUTH=jwt", "jwt", "cryptography")
    if settings.metrics == "prometheus":
        need(
            "metrics",
            "RELAY_METRICS=prometheus",
            "opentelemetry.exporter.prometheus",
            "prometheus_client",
        )
    if demo:
        need("demo", "the demo agent (span-relay serve without --app or --relay-only)", "bm25s")
        if env.get("RELAY_MODEL_BASE_URL"):
            need("demo", "RELAY_MODEL_BASE_URL", "langchain_openai")

    problems = []
    for extra, (names, modules) in needs.items():
        absent = [_DISTRIBUTIONS.get(m, m) for m in modules if not _installed(m)]
        if absent:
            problems.append(
                f"{' and '.join(names)} needs the {extra!r} extra "
                f"({', '.join(absent)} not installed): "
                f"pip install 'span-relay[{extra}]'"
            )
    return problems


def require_extras(
    settings: RelaySettings, environ: Mapping[str, str] | None = None, *, demo: bool = False
) -> None:
    """Refuse to start (ConfigError) when a setting needs an extra that is not installed."""
    problems = missing_extras(settings, environ, demo=demo)
    if problems:
        raise ConfigError("; ".join(problems))


def _is_number(raw: str) -> bool:
    try:
        return float(raw) > 0
    except ValueError:
        return False


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} must be a finite number")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r}: use true or false")
