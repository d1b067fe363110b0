"""Optional dependencies: ``pip install span-relay`` is the embedded default and no more.

A setting that needs an extra which is not installed (``RELAY_BUS=redis://...`` without
``span-relay[redis]``, ``RELAY_AUTH=jwt`` without ``[auth]``...) refuses to start with a
message that names the setting, the missing packages and the ``pip install`` that brings
them (:func:`missing_extras`; :func:`relay.settings.require_extras` refuses with it, from
``RelaySettings.from_env`` and ``span-relay serve``, before anything starts).
Nothing is imported to find out: :func:`importlib.util.find_spec` says whether a module
is there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.util import find_spec
from typing import Protocol


class NeedsExtras(Protocol):
    """The settings that decide which extras are needed (:class:`relay.settings.RelaySettings`
    has them all)."""

    @property
    def bus(self) -> str: ...

    @property
    def store(self) -> str: ...

    @property
    def otlp_grpc(self) -> str | None: ...

    @property
    def auth(self) -> str: ...

    @property
    def metrics(self) -> str: ...


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
    settings: NeedsExtras, environ: Mapping[str, str] | None = None, *, demo: bool = False
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
