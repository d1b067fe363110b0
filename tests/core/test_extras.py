"""Optional dependencies: ``pip install span-relay`` is the embedded default and no more.

A setting that needs an extra whose packages are not installed refuses to start, and the
message names the setting, the missing packages and the ``pip install`` that brings them
(relay/extras.py: ``missing_extras``; relay/settings.py: ``require_extras``).
``find_spec`` is monkeypatched to make a package look absent; one subprocess test hides
every optional package from the import system and runs the embedded default end to end,
as a core-only install would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import relay.extras as extras_module
from relay.extras import missing_extras
from relay.settings import ConfigError, RelaySettings, require_extras

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: the top-level modules of every optional package (never imported by the default)
OPTIONAL = (
    "psycopg",
    "psycopg_pool",
    "redis",
    "hiredis",
    "grpc",
    "langchain_openai",
    "bm25s",
    "jwt",
    "prometheus_client",
    "opentelemetry.exporter",
    "langgraph.checkpoint.postgres",
    "openinference",
    "opentelemetry.instrumentation",
)


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """find_spec (as relay.extras calls it) finds none of ``modules`` nor what is under
    them."""
    real: Callable[..., Any] = extras_module.find_spec

    def fake(name: str, package: str | None = None) -> Any:
        if any(name == m or name.startswith(m + ".") for m in modules):
            return None
        return real(name, package)

    monkeypatch.setattr(extras_module, "find_spec", fake)


def _error(env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        RelaySettings.from_env(env)
    return str(info.value)


# -- the split in pyproject.toml ------------------------------------------------------------


def _names(requirements: list[str]) -> set[str]:
    import re

    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_core_dependencies_are_the_embedded_default_only() -> None:
    core = _names(PYPROJECT["project"]["dependencies"])
    for optional in (
        "redis",
        "psycopg",
        "psycopg-pool",
        "langgraph-checkpoint-postgres",
        "langchain-openai",
        "bm25s",
        "grpcio",
        "opentelemetry-exporter-otlp",
        "opentelemetry-exporter-prometheus",
        "openinference-instrumentation-langchain",
        "opentelemetry-instrumentation-langchain",
        "pytest",
    ):
        assert optional not in core, f"{optional} is an extra, not a core dependency"
    # what the embedded default runs: the turn API, AG-UI, the receiver, SQLite, LangGraph
    assert {
        "fastapi",
        "uvicorn",
        "opentelemetry-sdk",
        "opentelemetry-proto",
        "ag-ui-protocol",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "orjson",
    } <= core


def test_each_extra_brings_its_packages() -> None:
    extras = {k: _names(v) for k, v in PYPROJECT["project"]["optional-dependencies"].items()}
    assert {"opentelemetry-exporter-otlp", "grpcio"} <= extras["otlp"]
    assert "opentelemetry-exporter-prometheus" in extras["metrics"]
    assert "redis" in extras["redis"]
    assert {"psycopg", "psycopg-pool", "langgraph-checkpoint-postgres"} <= extras["postgres"]
    assert {"langchain-openai", "bm25s"} <= extras["demo"]
    assert "pyjwt" in extras["auth"]
    runtime = ("otlp", "metrics", "redis", "postgres", "demo", "auth")
    spec = next(  # every runtime extra, through span-relay[...]
        r
        for r in PYPROJECT["project"]["optional-dependencies"]["all"]
        if r.startswith("span-relay[")
    )
    assert set(spec[spec.index("[") + 1 : spec.index("]")].split(",")) == set(runtime)
    # the tests' and benchmarks' tools are dependency groups (PEP 735), never published extras
    assert set(extras) == {*runtime, "all"}
    groups = {k: _names(v) for k, v in PYPROJECT["dependency-groups"].items()}
    assert {
        "openinference-instrumentation-langchain",
        "opentelemetry-instrumentation-langchain",
        "pytest",
        "build",
    } <= groups["test"]
    assert {"pyinstrument", "py-spy"} <= groups["bench"]


# -- the messages ---------------------------------------------------------------------------


def test_the_default_needs_no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, *OPTIONAL)
    assert missing_extras(RelaySettings.from_env({}), {}) == []


def test_jwt_auth_names_the_auth_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _hide(monkeypatch, "jwt")
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": []}')
    message = _error(
        {
            "RELAY_AUTH": "jwt",
            "RELAY_JWT_JWKS": str(jwks),
            "RELAY_JWT_ISSUER": "https://issuer",
            "RELAY_JWT_AUDIENCE": "relay",
        }
    )
    assert "RELAY_AUTH=jwt" in message and "pyjwt" in message
    assert "pip install 'span-relay[auth]'" in message


def test_redis_bus_names_the_redis_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "redis")
    message = _error({"RELAY_BUS": "redis://:secret@127.0.0.1:6379/0"})
    assert message == (
        "RELAY_BUS=redis://... needs the 'redis' extra (redis not installed): "
        "pip install 'span-relay[redis]'"
    )
    assert "secret" not in message  # the URL's password is never printed


def test_postgres_store_names_the_postgres_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "psycopg_pool")
    message = _error({"RELAY_STORE": "postgresql://relay:pw@127.0.0.1/relay"})
    assert message.startswith(
        "RELAY_STORE=postgresql://... and the checkpointer (it follows "
        "RELAY_STORE) needs the 'postgres' extra"
    )
    assert "(psycopg-pool not installed)" in message
    assert message.endswith("pip install 'span-relay[postgres]'")
    assert "pw@" not in message


def test_postgres_checkpointer_needs_its_saver(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "langgraph.checkpoint.postgres")
    env = {"RELAY_STORE": "postgresql://127.0.0.1/relay"}
    assert "(langgraph-checkpoint-postgres not installed)" in _error(env)
    # a SQLite checkpointer beside the PostgreSQL store does not need it
    assert (
        missing_extras(
            RelaySettings(store="postgresql://127.0.0.1/relay"),
            {**env, "RELAY_CHECKPOINTER": "sqlite"},
        )
        == []
    )
    # nor does the embedded store; an explicit PostgreSQL checkpointer does
    assert _error({"RELAY_CHECKPOINTER": "postgresql://127.0.0.1/cp"}) == (
        "RELAY_CHECKPOINTER=postgresql://... needs the 'postgres' extra "
        "(langgraph-checkpoint-postgres not installed): pip install 'span-relay[postgres]'"
    )


def test_grpc_receiver_names_the_otlp_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "grpc")
    assert _error({"RELAY_OTLP_GRPC": "127.0.0.1:4317"}) == (
        "RELAY_OTLP_GRPC=127.0.0.1:4317 needs the 'otlp' extra (grpcio not installed): "
        "pip install 'span-relay[otlp]'"
    )


@pytest.mark.parametrize(
    ("env", "hidden", "named"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"},
            "opentelemetry.exporter",
            "OTEL_EXPORTER_OTLP_ENDPOINT (OTLP export over gRPC)",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            },
            "opentelemetry.exporter.otlp.proto.http",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (OTLP export over HTTP)",
        ),
    ],
)
def test_otlp_export_names_the_otlp_extra(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], hidden: str, named: str
) -> None:
    _hide(monkeypatch, hidden)
    message = _error(env)
    assert message.startswith(f"{named} needs the 'otlp' extra (opentelemetry-exporter-otlp-")
    assert message.endswith("pip install 'span-relay[otlp]'")
    # export switched off: nothing needed
    assert missing_extras(RelaySettings(), {**env, "OTEL_TRACES_EXPORTER": "none"}) == []


def test_prometheus_metrics_name_the_metrics_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "opentelemetry.exporter.prometheus", "prometheus_client")
    assert _error({"RELAY_METRICS": "prometheus"}) == (
        "RELAY_METRICS=prometheus needs the 'metrics' extra (opentelemetry-exporter-prometheus, "
        "prometheus-client not installed): pip install 'span-relay[metrics]'"
    )


def test_the_demo_names_the_demo_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "bm25s", "langchain_openai")
    settings = RelaySettings()
    assert missing_extras(settings, {}) == []  # the library alone
    with pytest.raises(ConfigError) as info:
        require_extras(settings, {}, demo=True)
    assert str(info.value) == (
        "the demo agent (span-relay serve without --app or --relay-only) needs the 'demo' "
        "extra (bm25s not installed): pip install 'span-relay[demo]'"
    )
    with pytest.raises(ConfigError) as info:
        require_extras(settings, {"RELAY_MODEL_BASE_URL": "http://127.0.0.1:1/v1"}, demo=True)
    assert "(bm25s, langchain-openai not installed)" in str(info.value)


def test_every_missing_extra_is_named_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, *OPTIONAL)
    message = _error(
        {
            "RELAY_BUS": "redis://127.0.0.1",
            "RELAY_STORE": "postgres://h/db",
            "RELAY_METRICS": "prometheus",
            "RELAY_OTLP_GRPC": "127.0.0.1:4317",
        }
    )
    for extra in ("redis", "postgres", "metrics", "otlp"):
        assert f"pip install 'span-relay[{extra}]'" in message


def test_relay_from_env_refuses_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from relay import Relay

    _hide(monkeypatch, "redis")
    with pytest.raises(ConfigError, match=r"span-relay\[redis\]"):
        Relay.from_env({"RELAY_BUS": "redis://127.0.0.1:1", "RELAY_DATA_DIR": str(tmp_path)})


def test_serve_refuses_the_demo_without_its_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import relay.cli as cli

    _hide(monkeypatch, "bm25s")
    monkeypatch.setenv("RELAY_DATA_DIR", str(tmp_path))
    served: list[object] = []
    monkeypatch.setattr(cli.logs, "configure", lambda *a, **k: None)

    def run(self: object, *args: object, **kwargs: object) -> None:  # a server that started
        served.append(self)
        self.started = True  # type: ignore[attr-defined]

    monkeypatch.setattr(cli.RelayServer, "run", run)
    assert cli.main(["serve"]) == 2
    assert (
        "span-relay: configuration error: the demo agent (span-relay serve without --app "
        "or --relay-only) needs the 'demo' extra"
    ) in capsys.readouterr().err
    assert served == []
    # the relay alone does not need the demo's packages
    assert cli.main(["serve", "--relay-only"]) == 0
    assert len(served) == 1


# -- a core-only install, simulated ---------------------------------------------------------

_CORE_ONLY = textwrap.dedent("""
    import asyncio, importlib.abc, json, sys

    HIDDEN = {hidden!r}

    class Hide(importlib.abc.MetaPathFinder):  # as if only the core dependencies were there
        def find_spec(self, name, path=None, target=None):
            if any(name == m or name.startswith(m + ".") for m in HIDDEN):
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Hide())

    import relay
    from fastapi.testclient import TestClient
    from relay.cli.relay_only import create_relay_app

    out = {{}}
    env = {{"RELAY_DATA_DIR": {data_dir!r}}}

    async def embedded():
        r = relay.Relay.from_env(env)
        await r.start()
        out["problems"] = await r.readiness_problems()
        async with relay.open_checkpointer(r.settings, env) as saver:
            await relay.check_checkpointer(saver)
            out["checkpointer"] = type(saver).__name__
        await r.stop()
        out["parts"] = [type(r.bus).__name__, type(r.turns.inner).__name__,
                        type(r.store).__name__]

    asyncio.run(embedded())
    with TestClient(create_relay_app(env)) as client:
        out["healthz"] = client.get("/healthz").status_code
        out["readyz"] = client.get("/readyz").status_code
        out["otlp_json"] = client.post("/v1/traces", json={{"resourceSpans": []}}).status_code
        out["otlp_bad_protobuf"] = client.post(
            "/v1/traces", content=b"\\xff\\xff\\xff",
            headers={{"content-type": "application/x-protobuf"}}).status_code
    try:
        relay.RelaySettings.from_env({{"RELAY_BUS": "redis://127.0.0.1:1"}})
    except relay.ConfigError as exc:
        out["redis_error"] = str(exc)
    out["imported"] = sorted(m for m in sys.modules
                             if any(m == h or m.startswith(h + ".") for h in HIDDEN))
    print(json.dumps(out))
""")


def test_the_embedded_default_runs_without_any_extra(tmp_path: Path) -> None:
    script = _CORE_ONLY.format(hidden=OPTIONAL, data_dir=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["parts"] == ["MemoryBus", "SQLiteTurnStore", "SQLiteSpanStore"]
    assert out["problems"] == [] and out["checkpointer"] == "AsyncSqliteSaver"
    assert (out["healthz"], out["readyz"], out["otlp_json"]) == (200, 200, 200)
    assert out["otlp_bad_protobuf"] == 400  # its google.rpc.Status body: a core dependency
    assert out["redis_error"] == (
        "RELAY_BUS=redis://... needs the 'redis' extra "
        "(redis not installed): pip install 'span-relay[redis]'"
    )
    assert out["imported"] == []
