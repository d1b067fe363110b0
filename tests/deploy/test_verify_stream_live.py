"""verify-stream against the real app without a proxy: auth and an ignored fault header."""

from __future__ import annotations

import pytest

from relay.verify import EXIT_HTTP_ERROR, EXIT_INCONCLUSIVE, EXIT_INCREMENTAL

pytestmark = pytest.mark.slow

TOKEN = "deploy-test-token"


def test_token_required_then_ignored_fault_falls_back_to_ts_spread(relay_server, run_verify):
    # no RELAY_FAULTS: the server must ignore X-Relay-Fault
    server = relay_server(RELAY_API_TOKEN=TOKEN)

    denied = run_verify(server.url, "--token", "wrong")
    assert denied.code == EXIT_HTTP_ERROR, denied.stdout + denied.stderr
    assert denied.report["status_code"] == 401
    assert denied.report["verdict"] == "http_error"

    run = run_verify(server.url, "--token", TOKEN)
    r = run.report
    assert r["terminal"] == "turn_completed", run.stdout + run.stderr
    assert r["fault_honoured"] is False
    assert any("RELAY_FAULTS=1" in line for line in r["evidence"])
    # the demo turn is fast: too fast to judge, unless it happened to take long
    if r["ts_spread_s"] < 0.3:
        assert (run.code, r["verdict"]) == (EXIT_INCONCLUSIVE, "inconclusive")
    else:
        assert run.code == EXIT_INCREMENTAL


def test_token_from_environment(relay_server, run_verify, monkeypatch):
    server = relay_server(RELAY_API_TOKEN=TOKEN, RELAY_FAULTS="1")
    monkeypatch.setenv("RELAY_API_TOKEN", TOKEN)
    run = run_verify(server.url)
    assert run.code == EXIT_INCREMENTAL, run.stdout + run.stderr
    assert run.report["fault_honoured"] is True
