"""relay.settings.RelaySettings.from_env: defaults, validation, clear messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.settings import ConfigError, RelaySettings


def test_defaults_need_no_environment() -> None:
    s = RelaySettings.from_env({})
    assert s.data_dir == Path(".span-relay")
    assert (s.heartbeat_s, s.disconnect_grace_s, s.send_timeout_s) == (15.0, 5.0, 30.0)
    assert s.retry_ms == 2000
    assert (s.bus, s.store) == ("memory", "sqlite")
    assert s.capture_content is True and s.faults is False
    assert s.trace_url is None and s.api_token is None
    assert s.thread_policy == "reject"
    assert (s.tool_timeout_s, s.turn_timeout_s, s.server_timeout_s) == (30.0, 120.0, 300.0)
    assert s == RelaySettings()


def test_from_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_HEARTBEAT_S", "0.5")
    assert RelaySettings.from_env().heartbeat_s == 0.5


def test_values_are_read() -> None:
    s = RelaySettings.from_env(
        {
            "RELAY_DATA_DIR": "/tmp/x",
            "RELAY_HEARTBEAT_S": "2.5",
            "RELAY_DISCONNECT_GRACE_S": "0",
            "RELAY_SEND_TIMEOUT_S": "7",
            "RELAY_RETRY_MS": "1500",
            "RELAY_CAPTURE_CONTENT": "false",
            "RELAY_TRACE_URL": "http://jaeger:16686",
            "RELAY_THREAD_POLICY": "enqueue",
            "RELAY_FAULTS": "1",
            "RELAY_API_TOKEN": "s3cret",
            "RELAY_TOOL_TIMEOUT_S": "1",
            "RELAY_TURN_TIMEOUT_S": "2",
            "RELAY_SERVER_TIMEOUT_S": "3",
            "RELAY_STORE": "postgresql://db/x",
            "RELAY_BUS": "memory",
        }
    )
    assert s.data_dir == Path("/tmp/x") and s.heartbeat_s == 2.5
    assert s.disconnect_grace_s == 0 and s.send_timeout_s == 7 and s.retry_ms == 1500
    assert s.capture_content is False and s.faults is True
    assert s.trace_url == "http://jaeger:16686" and s.api_token == "s3cret"
    assert s.thread_policy == "enqueue" and s.store == "postgresql://db/x"
    assert (s.tool_timeout_s, s.turn_timeout_s, s.server_timeout_s) == (1, 2, 3)


def test_empty_values_mean_default() -> None:
    s = RelaySettings.from_env(
        {"RELAY_HEARTBEAT_S": "", "RELAY_TRACE_URL": "", "RELAY_API_TOKEN": "", "RELAY_FAULTS": ""}
    )
    assert s.heartbeat_s == 15.0 and s.trace_url is None and s.api_token is None
    assert s.faults is False


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        ("yes", True),
        ("on", True),
        (" On ", True),
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
    ],
)
def test_bools(raw: str, value: bool) -> None:
    assert RelaySettings.from_env({"RELAY_FAULTS": raw}).faults is value


@pytest.mark.parametrize("raw", ["maybe", "2", "tru", "y"])
def test_bad_bool_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"RELAY_CAPTURE_CONTENT=.*true or false"):
        RelaySettings.from_env({"RELAY_CAPTURE_CONTENT": raw})


@pytest.mark.parametrize(
    "name",
    [
        "RELAY_HEARTBEAT_S",
        "RELAY_SEND_TIMEOUT_S",
        "RELAY_TURN_TIMEOUT_S",
        "RELAY_RETRY_MS",
        "RELAY_BUS_MAX_TURNS",
        "RELAY_MAX_BODY_BYTES",
    ],
)
@pytest.mark.parametrize("raw", ["abc", "1,5", "5s", "--1"])
def test_bad_number_names_the_variable(name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        RelaySettings.from_env({name: raw})
    assert name in str(info.value) and "not a number" in str(info.value)


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"RELAY_TOOL_TIMEOUT_S": "200"}, ("RELAY_TOOL_TIMEOUT_S", "RELAY_TURN_TIMEOUT_S")),
        ({"RELAY_TOOL_TIMEOUT_S": "120"}, ("RELAY_TOOL_TIMEOUT_S", "RELAY_TURN_TIMEOUT_S")),
        ({"RELAY_TURN_TIMEOUT_S": "20"}, ("RELAY_TOOL_TIMEOUT_S", "RELAY_TURN_TIMEOUT_S")),
        ({"RELAY_TURN_TIMEOUT_S": "400"}, ("RELAY_TURN_TIMEOUT_S", "RELAY_SERVER_TIMEOUT_S")),
        ({"RELAY_TURN_TIMEOUT_S": "300"}, ("RELAY_TURN_TIMEOUT_S", "RELAY_SERVER_TIMEOUT_S")),
        ({"RELAY_SERVER_TIMEOUT_S": "60"}, ("RELAY_TURN_TIMEOUT_S", "RELAY_SERVER_TIMEOUT_S")),
    ],
)
def test_inverted_timeout_chain_is_refused(env: dict[str, str], names: tuple[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        RelaySettings.from_env(env)
    message = str(info.value)
    for name in names:
        assert name in message
    assert "shorter" in message


def test_consistent_chain_is_accepted() -> None:
    s = RelaySettings.from_env(
        {"RELAY_TOOL_TIMEOUT_S": "5", "RELAY_TURN_TIMEOUT_S": "6", "RELAY_SERVER_TIMEOUT_S": "7"}
    )
    assert s.turn_timeout_s == 6


@pytest.mark.parametrize("url", ["redis://localhost:6379/0", "rediss://cache.example:6380/1"])
def test_redis_bus_url_is_accepted(url: str) -> None:
    # (the Redis Streams bus landed with issue 6: a redis:// URL no longer refuses to start)
    assert RelaySettings.from_env({"RELAY_BUS": url}).bus == url


@pytest.mark.parametrize("bus", ["kafka://x", "redis", "memory://", "REDIS://x"])
def test_unknown_bus_is_refused_clearly(bus: str) -> None:
    with pytest.raises(ConfigError) as info:
        RelaySettings.from_env({"RELAY_BUS": bus})
    assert f"RELAY_BUS={bus!r}" in str(info.value)
    assert "'memory' or a redis:// URL" in str(info.value)


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"RELAY_BUS": "kafka://x"}, "RELAY_BUS"),
        ({"RELAY_STORE": "mysql://x"}, "RELAY_STORE"),
        ({"RELAY_THREAD_POLICY": "queue"}, "RELAY_THREAD_POLICY"),
        ({"RELAY_HEARTBEAT_S": "0"}, "RELAY_HEARTBEAT_S"),
        ({"RELAY_HEARTBEAT_S": "-1"}, "RELAY_HEARTBEAT_S"),
        ({"RELAY_DISCONNECT_GRACE_S": "-0.5"}, "RELAY_DISCONNECT_GRACE_S"),
        ({"RELAY_LEASE_S": "0"}, "RELAY_LEASE_S must be > 0"),
        ({"RELAY_LEASE_S": "-15"}, "RELAY_LEASE_S must be > 0"),
        ({"RELAY_LEASE_S": "15s"}, "RELAY_LEASE_S='15s' is not a number"),
        ({"RELAY_LEASE_S": "inf"}, "RELAY_LEASE_S='inf' must be a finite number"),
    ],
)
def test_invalid_values_name_the_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        RelaySettings.from_env(env)


def test_resolved_spa_dir(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html>")
    s = RelaySettings.from_env({"RELAY_SPA_DIR": str(tmp_path)})
    assert s.spa_dir == tmp_path and s.resolved_spa_dir() == tmp_path


def test_infinite_integer_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="RELAY_RETRY_MS"):
        RelaySettings.from_env({"RELAY_RETRY_MS": "inf"})


def test_nan_heartbeat_is_refused() -> None:
    with pytest.raises(ConfigError, match="RELAY_HEARTBEAT_S"):
        RelaySettings.from_env({"RELAY_HEARTBEAT_S": "nan"})


@pytest.mark.parametrize("raw", ["0", "-1"])
def test_non_positive_send_timeout_is_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match="RELAY_SEND_TIMEOUT_S"):
        RelaySettings.from_env({"RELAY_SEND_TIMEOUT_S": raw})


def test_new_defaults() -> None:
    s = RelaySettings.from_env({})
    assert s.shutdown_grace_s == 5.0 and s.cors_origins == () and s.rate_limit is None


def test_cors_origins_are_split_and_trimmed() -> None:
    s = RelaySettings.from_env({"RELAY_CORS_ORIGINS": " https://a.example , ,https://b.example"})
    assert s.cors_origins == ("https://a.example", "https://b.example")


def test_cors_wildcard_with_token_is_refused() -> None:
    assert RelaySettings.from_env({"RELAY_CORS_ORIGINS": "*"}).cors_origins == ("*",)
    with pytest.raises(ConfigError, match="RELAY_CORS_ORIGINS"):
        RelaySettings.from_env({"RELAY_CORS_ORIGINS": "*", "RELAY_API_TOKEN": "t"})


@pytest.mark.parametrize("raw", ["20/60", "1/0.5"])
def test_rate_limit_accepted(raw: str) -> None:
    assert RelaySettings.from_env({"RELAY_RATE_LIMIT": raw}).rate_limit == raw


@pytest.mark.parametrize("raw", ["20", "0/60", "-1/60", "x/60", "20/", "20/0", "20/abc", "20/-5"])
def test_rate_limit_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match="RELAY_RATE_LIMIT"):
        RelaySettings.from_env({"RELAY_RATE_LIMIT": raw})


def test_client_tool_limits_are_read_and_checked() -> None:
    settings = RelaySettings.from_env(
        {
            "RELAY_CLIENT_TOOL_MAX_ROUNDS": "3",
            "RELAY_CLIENT_TOOL_MAX_RESULT_BYTES": "1024",
            "RELAY_CLIENT_TOOL_TIMEOUT_S": "45",
        }
    )
    assert (
        settings.client_tool_max_rounds,
        settings.client_tool_max_result_bytes,
        settings.client_tool_timeout_s,
    ) == (3, 1024, 45.0)
    defaults = RelaySettings.from_env({})
    assert (
        defaults.client_tool_max_rounds,
        defaults.client_tool_max_result_bytes,
        defaults.client_tool_timeout_s,
    ) == (8, 16384, 300.0)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RELAY_CLIENT_TOOL_MAX_ROUNDS": "0"}, "RELAY_CLIENT_TOOL_MAX_ROUNDS"),
        ({"RELAY_CLIENT_TOOL_MAX_RESULT_BYTES": "0"}, "RELAY_CLIENT_TOOL_MAX_RESULT_BYTES"),
        ({"RELAY_CLIENT_TOOL_MAX_RESULT_BYTES": "70000"}, "RELAY_MAX_BODY_BYTES"),
        ({"RELAY_CLIENT_TOOL_TIMEOUT_S": "0"}, "RELAY_CLIENT_TOOL_TIMEOUT_S"),
        ({"RELAY_CLIENT_TOOL_TIMEOUT_S": "soon"}, "RELAY_CLIENT_TOOL_TIMEOUT_S"),
    ],
)
def test_bad_client_tool_limits_refuse_to_start(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        RelaySettings.from_env(env)


def test_a_postgresql_schema_without_a_postgresql_store_refuses_to_start() -> None:
    with pytest.raises(ConfigError, match="neither RELAY_STORE nor RELAY_CHECKPOINTER"):
        RelaySettings.from_env({"RELAY_PG_SCHEMA": "relay_prod"})
    for postgres in (
        {"RELAY_STORE": "postgresql://db/relay"},
        {"RELAY_CHECKPOINTER": "postgres://db/lg"},
    ):
        settings = RelaySettings.from_env({"RELAY_PG_SCHEMA": "relay_prod", **postgres})
        assert settings.pg_schema == "relay_prod"
