"""Configuration from RELAY_* environment variables (DESIGN.md §7).

Each setting is declared once, as a field of :class:`RelaySettings`: its type, its
default, the variable it is read from, how the variable is read, the bounds or choices
validation holds it to and the line that describes it. :func:`from_env
<RelaySettings.from_env>`, :meth:`RelaySettings.validate` and the README's configuration
table (:func:`configuration_table`) all read that one table (:data:`SETTINGS`). How a
row is declared, and how each kind of value is read and shown, is relay/setting.py's.

Read once, validated as a whole: an inconsistent configuration refuses to start with a
message that names the variable to change. Whether the optional dependencies a setting
needs are installed is relay/extras.py's question; :func:`require_extras` refuses to start
when one is missing, naming the extra to install.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from relay.extras import missing_extras
from relay.setting import (
    DAY_S,
    MIB,
    ConfigError,
    Setting,
    as_is,
    auth_mode,
    bool_value,
    float_value,
    index,
    int_value,
    optional_path,
    path,
    schema_name,
    setting,
    text,
    word,
    word_list,
)

__all__ = [
    "PACKAGE_SPA_DIR",
    "SETTINGS",
    "ConfigError",
    "RelaySettings",
    "configuration_table",
    "require_extras",
]

#: the SPA the package carries (package data of the wheel), served unless RELAY_SPA_DIR
PACKAGE_SPA_DIR = Path(__file__).resolve().parent / "spa"


@dataclass(frozen=True, slots=True)
class RelaySettings:
    """The relay's settings, read once (:meth:`from_env`) and validated as a whole. Each
    field is declared with :func:`setting`: its default, its RELAY_* variable, how that is
    read and checked, and its line in the README (:data:`SETTINGS`)."""

    data_dir: Path = setting(
        "RELAY_DATA_DIR",
        Path(".span-relay"),
        path,
        "SQLite files: turns, spans, messages, checkpoints, the graphs' store, the demo's refunds",
    )
    heartbeat_s: float = setting(
        "RELAY_HEARTBEAT_S",
        15.0,
        float_value,
        "seconds between `: hb` comments on every stream",
        bound="> 0",
        unit="seconds between heartbeats",
    )
    disconnect_grace_s: float = setting(
        "RELAY_DISCONNECT_GRACE_S",
        5.0,
        float_value,
        "wait before cancelling a running turn nobody reads",
        bound=">= 0",
    )
    send_timeout_s: float = setting(
        "RELAY_SEND_TIMEOUT_S",
        30.0,
        float_value,
        "a reader that accepts no bytes for this long is cut",
        bound="> 0",
        unit="seconds a reader may stall",
    )
    retry_ms: int = setting(
        "RELAY_RETRY_MS", 2000, int_value, "the SSE `retry:` sent first on every stream"
    )
    bus: str = setting(
        "RELAY_BUS",
        "memory",
        as_is,
        "`redis://host:port/db`: turn logs in Redis Streams, any instance streams any turn",
    )
    store: str = setting(
        "RELAY_STORE",
        "sqlite",
        as_is,
        "`postgresql://...`: spans, turn records, saved answers, checkpoints and the graphs' "
        "store shared by replicas",
    )
    pg_schema: str | None = setting(
        "RELAY_PG_SCHEMA",
        None,
        schema_name,
        "the PostgreSQL schema every table of this deployment lives in (turns, spans, saved "
        "answers, checkpoints, the graphs' store), created if missing and first on each "
        "connection's `search_path`: deployments in one database each set their own",
        shown="the connection's current schema",
    )
    capture_content: bool = setting(
        "RELAY_CAPTURE_CONTENT",
        True,
        bool_value,
        "`false` strips prompts, answers and tool arguments from OTLP export (the relay, "
        "its store and replays keep them)",
    )
    trace_url: str | None = setting(
        "RELAY_TRACE_URL", None, text, "trace viewer base URL for the SPA's links"
    )
    thread_policy: str = setting(
        "RELAY_THREAD_POLICY",
        "reject",
        as_is,
        "a second `/chat` on a busy thread: `reject` (409) or `enqueue`",
        choices=("reject", "enqueue"),
    )
    faults: bool = setting(
        "RELAY_FAULTS", False, bool_value, "the demo: `1` honours `X-Relay-Fault`"
    )
    api_token: str | None = setting(
        "RELAY_API_TOKEN",
        None,
        text,
        "`RELAY_AUTH=token`: the bearer token required on every API route; with `jwt` or "
        "`proxy`: the OTLP receivers' own credential (required when a receiver is on)",
    )
    max_body_bytes: int = setting(
        "RELAY_MAX_BODY_BYTES", 64 * 1024, int_value, "request body limit (413)"
    )
    tool_timeout_s: float = setting(
        "RELAY_TOOL_TIMEOUT_S",
        30.0,
        float_value,
        "shorter than `RELAY_TURN_TIMEOUT_S` (an inverted chain of the three timeouts "
        "refuses to start): an async tool of any `GraphAgent`'s graph (one LangChain runs "
        "as a tool: a `ToolNode`, a prebuilt agent's tools) is stopped at it (`error` "
        "event, code `tool_timeout`); a synchronous tool runs in a worker thread that "
        "nothing can stop, so only the turn timeout ends its turn",
    )
    custom_event_max_bytes: int = setting(
        "RELAY_CUSTOM_EVENT_MAX_BYTES",
        8 * 1024,
        int_value,
        "the largest payload (its JSON) a node's stream writer or custom callback event "
        "sends that a `custom` event carries whole; a larger one keeps its top-level "
        "scalar fields and says `truncated: true`",
        bound=">= 1",
        unit="largest custom payload kept whole",
    )
    turn_timeout_s: float = setting(
        "RELAY_TURN_TIMEOUT_S",
        120.0,
        float_value,
        "shorter than `RELAY_SERVER_TIMEOUT_S`: the library stops every `GraphAgent` run "
        "at it (`error` event, code `turn_timeout`)",
    )
    server_timeout_s: float = setting(
        "RELAY_SERVER_TIMEOUT_S",
        300.0,
        float_value,
        "a stream older than this ends with a `reconnect` frame",
    )
    shutdown_grace_s: float = setting(
        "RELAY_SHUTDOWN_GRACE_S",
        5.0,
        float_value,
        "on SIGTERM, how long running turns may finish or stop at their next step "
        "boundary (asked to at once) before they are cut; either way they are handed "
        "over: another instance (or the next start) takes them up from their checkpoint",
    )
    bus_retention_s: float = setting(
        "RELAY_BUS_RETENTION_S",
        3600.0,
        float_value,
        "how long the bus keeps a finished turn's log",
    )
    bus_max_turns: int = setting(
        "RELAY_BUS_MAX_TURNS", 1000, int_value, "how many finished turn logs the bus keeps"
    )
    spa_dir: Path | None = setting(
        "RELAY_SPA_DIR",
        None,
        optional_path,
        "a folder with the SPA's files to serve instead of the package's own (without an "
        "`index.html` the server refuses to start)",
        shown="the package's own (`relay/spa/`)",
    )
    cors_origins: tuple[str, ...] = setting(
        "RELAY_CORS_ORIGINS",
        (),
        word_list,
        "comma-separated origins allowed to call the API from a browser",
    )
    rate_limit: str | None = setting(
        "RELAY_RATE_LIMIT",
        None,
        text,
        "`N/S`: N run requests per S seconds per client (429 + `Retry-After`)",
    )
    metrics: str = setting(
        "RELAY_METRICS",
        "off",
        word,
        "`prometheus`: OpenTelemetry metrics served at `GET /metrics`",
        choices=("off", "prometheus"),
    )
    log_format: str = setting(
        "RELAY_LOG_FORMAT",
        "text",
        word,
        "`json`: one JSON object per line with `trace_id` and `turn_id`",
        choices=("text", "json"),
    )
    # span store (relay/store): retention by age and count; POST /imports size limit
    store_retention_s: float = setting(
        "RELAY_STORE_RETENTION_S",
        7 * DAY_S,
        float_value,
        "how long the span store keeps a turn's spans (an expired turn answers 410)",
    )
    store_max_turns: int = setting(
        "RELAY_STORE_MAX_TURNS",
        10_000,
        int_value,
        "how many turns the span store keeps the spans of",
        bound=">= 1",
        unit="turns whose spans are kept",
    )
    import_max_bytes: int = setting(
        "RELAY_IMPORT_MAX_BYTES",
        32 * MIB,
        int_value,
        "trace file limit for `POST /imports`",
        bound=">= 1",
        unit="largest trace file POST /imports accepts",
    )
    # -- OTLP receiver, Redis bus, replicas -------------------------------------------
    otlp_http: bool = setting(
        "RELAY_OTLP_HTTP",
        False,
        bool_value,
        "OTLP/HTTP receiver `POST /v1/traces` (protobuf or JSON, gzip)",
        shown="off (on with `serve --relay-only`)",
    )
    otlp_grpc: str | None = setting(
        "RELAY_OTLP_GRPC",
        None,
        text,
        "`host:port` of the OTLP/gRPC receiver (e.g. `127.0.0.1:4317`)",
    )
    otlp_max_bytes: int = setting(
        "RELAY_OTLP_MAX_BYTES",
        8 * MIB,
        int_value,
        "receiver limit: the body size (413)",
        bound=">= 1",
    )
    otlp_pending_spans: int = setting(
        "RELAY_OTLP_PENDING_SPANS",
        10_000,
        int_value,
        "receiver limit: the spans waiting for their run's root",
        bound=">= 1",
    )
    otlp_pending_s: float = setting(
        "RELAY_OTLP_PENDING_S",
        600.0,
        float_value,
        "receiver limit: how long received spans wait for their run's root",
        bound="> 0",
        unit="seconds received spans wait for their run's root",
    )
    otlp_dedup_spans: int = setting(
        "RELAY_OTLP_DEDUP_SPANS",
        200_000,
        int_value,
        "receiver limit: the de-duplication memory (span ids)",
        bound=">= 1",
    )
    otlp_store_backlog: int = setting(
        "RELAY_OTLP_STORE_BACKLOG",
        50_000,
        int_value,
        "receiver limit: the store queue (429)",
        bound=">= 1",
    )
    otlp_settle_ms: float = setting(
        "RELAY_OTLP_SETTLE_MS",
        250.0,
        float_value,
        "how long received spans that arrive before their parent (and a run's root, from "
        "its arrival) wait for the spans racing them; a span whose parent the relay has "
        "seen start goes at once; 0: none (spans after their run's root are then late: "
        '`relay.otlp.spans{outcome="late"}`)',
    )
    bus_max_events_per_turn: int = setting(
        "RELAY_BUS_MAX_EVENTS",
        10_000,
        int_value,
        "events kept per turn, in memory and in Redis (`MAXLEN ~`)",
        bound=">= 1",
    )
    lease_s: float = setting(
        "RELAY_LEASE_S",
        15.0,
        float_value,
        "the lease of the instance running a turn, renewed every third of it by a task "
        "of its own: a turn whose lease ran out (its instance was killed, or hangs) is "
        "taken over by another instance sharing `RELAY_STORE=postgresql://` within about "
        "this plus a few seconds, and recovered or ended (`RELAY_RECOVERY`); with "
        "SQLite, the next start takes it over",
        bound="> 0",
    )
    recovery: str = setting(
        "RELAY_RECOVERY",
        "safe",
        as_is,
        "what a taken-over turn becomes: `safe` goes on from the thread's last checkpoint "
        "unless a tool was running in the step that was cut (then it ends `interrupted`, "
        '`reason: "tool_running"`) or, without a shared bus (`RELAY_BUS=redis://`), its '
        "cut run's events died with its process (it ends `interrupted`), `always` goes on "
        "whatever ran (your tools are idempotent), `off` ends it `interrupted`; a graph's "
        "`GraphAgent(recovery=...)` decides for its own turns (deploy/RUNBOOK.md §13.3.1)",
        choices=("safe", "always", "off"),
    )
    recovery_max_attempts: int = setting(
        "RELAY_RECOVERY_MAX_ATTEMPTS",
        3,
        int_value,
        "how many times one turn is taken up again; past it the turn ends with `error` "
        "`recovery_exhausted` (a run that stops its server each time is not run forever)",
        bound=">= 0",
        unit="recoveries of one turn",
    )
    instance_id: str | None = setting(
        "RELAY_INSTANCE_ID",
        None,
        text,
        "a replica's stable, unique name, recorded as its running turns' owner: one that "
        "starts again under it takes those turns over at once (the others are taken over "
        "once their lease runs out, `RELAY_LEASE_S`); with `--workers N`, worker *i* is "
        "`{id}-w{i}`",
        shown="host name",
    )
    #: ``serve --workers N``: worker processes on one port; ``worker``: this one's index
    #: (set by ``serve`` in each worker it starts)
    workers: int = setting(
        "RELAY_WORKERS",
        1,
        int_value,
        "worker processes of `span-relay serve` on its one port, as `--workers N`; more "
        "than 1 needs `RELAY_BUS=redis://` and `RELAY_STORE=postgresql://`",
        bound=">= 1",
        unit="worker processes of serve",
    )
    worker: int | None = setting(
        "RELAY_WORKER",
        None,
        index,
        "set by `serve --workers N` in each worker it starts: its index (`/healthz` says "
        "it); not for you to set",
    )
    # -- who is asking (relay/auth): RELAY_AUTH none | token | jwt | proxy ---------------
    auth: str = setting(
        "RELAY_AUTH",
        "none",
        auth_mode,
        "who may call the API (see [Security](#security-users-and-their-turns)): `none`, "
        "`token` (the shared token), `jwt` (each user's bearer JWT), `proxy` (a fronting "
        "proxy's user header)",
        shown="`token` when `RELAY_API_TOKEN` is set, else `none`",
    )
    jwt_jwks: str | None = setting(
        "RELAY_JWT_JWKS",
        None,
        text,
        "the key set tokens are verified against (a file path, or an `https://` URL, "
        "re-read for an unknown key id at most once a minute and hourly); RS256 and ES256 "
        "only (`pip install 'span-relay[auth]'`)",
        shown="required with `jwt`",
    )
    jwt_issuer: str | None = setting(
        "RELAY_JWT_ISSUER",
        None,
        text,
        "the `iss` a token must carry",
        shown="required with `jwt`",
    )
    jwt_audience: str | None = setting(
        "RELAY_JWT_AUDIENCE",
        None,
        text,
        "an `aud` a token must hold",
        shown="required with `jwt`",
    )
    jwt_leeway_s: float = setting(
        "RELAY_JWT_LEEWAY_S", 30.0, float_value, "clock skew allowed on `exp` and `nbf`"
    )
    proxy_user_header: str = setting(
        "RELAY_PROXY_USER_HEADER",
        "X-Forwarded-User",
        text,
        "the header the proxy names the user in",
    )
    proxy_secret: str | None = setting(
        "RELAY_PROXY_SECRET",
        None,
        text,
        "the secret (16+ characters) the proxy sends in `X-Relay-Proxy-Secret`: without "
        "it the user header is not trusted",
        shown="required with `proxy`",
    )
    # client-executed tools (relay/langgraph/client_tools.py)
    client_tool_max_rounds: int = setting(
        "RELAY_CLIENT_TOOL_MAX_ROUNDS",
        8,
        int_value,
        "times one turn may pause for the client to run tools, over all its runs "
        "(approvals in between included); one more ends the turn (`error` "
        "`client_tool_rounds`)",
        bound=">= 1",
        unit="client-tool pauses",
    )
    client_tool_max_result_bytes: int = setting(
        "RELAY_CLIENT_TOOL_MAX_RESULT_BYTES",
        16 * 1024,
        int_value,
        "largest client-tool result (its JSON) a resume may carry (`413 "
        "client_tool_result_too_large`); below `RELAY_MAX_BODY_BYTES`",
    )
    client_tool_timeout_s: float = setting(
        "RELAY_CLIENT_TOOL_TIMEOUT_S",
        300.0,
        float_value,
        "how long a turn waits for the client's tool result; then it ends (`error` "
        "`client_tool_timeout`; a later resume is `409`)",
        bound="> 0",
        unit="seconds to answer",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RelaySettings:
        env = os.environ if environ is None else environ
        settings = cls(**{row.field: row.read(env) for row in SETTINGS})
        settings.validate()
        checkpointer = env.get("RELAY_CHECKPOINTER", "")
        if settings.pg_schema and not any(
            url.startswith(("postgresql://", "postgres://"))
            for url in (settings.store, checkpointer)
        ):
            raise ConfigError(
                f"RELAY_PG_SCHEMA={settings.pg_schema!r} names a PostgreSQL schema, but neither "
                "RELAY_STORE nor RELAY_CHECKPOINTER is a postgresql:// URL: set one, or unset it"
            )
        require_extras(settings, env)
        return settings

    def validate(self) -> None:
        """Refuse (ConfigError) a value outside its setting's bound or choices
        (:meth:`Setting.check`) and a combination of values that cannot work."""
        for row in SETTINGS:
            row.check(getattr(self, row.field))
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
        self._validate_client_tools()
        if self.spa_dir is not None and not (self.spa_dir / "index.html").is_file():
            raise ConfigError(
                f"RELAY_SPA_DIR={str(self.spa_dir)!r}: the folder {self.spa_dir.resolve()} "
                "holds no index.html; point it at a folder with the SPA's files, or unset "
                "it to serve the package's own"
            )
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
        limit = self.client_tool_max_result_bytes
        body = self.max_body_bytes
        if not 0 < limit < body:
            raise ConfigError(
                f"RELAY_CLIENT_TOOL_MAX_RESULT_BYTES ({limit}) must be > 0 and "
                f"below RELAY_MAX_BODY_BYTES ({body}): the result is in the body"
            )

    def _validate_scale_out(self) -> None:
        """The OTLP receiver's address and its settle window."""
        if self.otlp_grpc is not None:
            host, sep, port = self.otlp_grpc.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
                raise ConfigError(
                    f"RELAY_OTLP_GRPC={self.otlp_grpc!r}: use host:port, e.g. "
                    "127.0.0.1:4317 (0.0.0.0:4317 to accept other hosts)"
                )
        if not 0 <= self.otlp_settle_ms <= 60_000:
            raise ConfigError(
                "RELAY_OTLP_SETTLE_MS must be between 0 and 60000 (how long "
                "received spans that arrive before their parent wait for the spans racing "
                "them; 0: no wait)"
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
        """The SPA folder: RELAY_SPA_DIR, else the package's own (``relay/spa``, package data
        of the wheel); None when the chosen folder holds no ``index.html``."""
        folder = self.spa_dir or PACKAGE_SPA_DIR
        return folder if (folder / "index.html").is_file() else None


#: the configuration table: one row per field of :class:`RelaySettings`, in their order
SETTINGS: tuple[Setting, ...] = tuple(
    Setting(field=f.name, default=f.default, **f.metadata)
    for f in dataclasses.fields(RelaySettings)
)


def configuration_table() -> str:
    """The README's table of the RELAY_* settings (its "Configuration"), a row a setting."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| `{row.env}` | {row.shown_default()} | {row.doc} |" for row in SETTINGS]
    return "\n".join(rows) + "\n"


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
