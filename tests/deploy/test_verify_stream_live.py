"""verify-stream against the real app without a proxy: auth and an ignored fault header."""

from __future__ import annotations

import pytest

from relay.cli.verify.report import EXIT_HTTP_ERROR, EXIT_INCONCLUSIVE, EXIT_INCREMENTAL

pytestmark = pytest.mark.slow

TOKEN = "deploy-test-token"
# generate's delay where a verdict is expected: large next to a loaded machine's noise
# (the tool's hold threshold is then at its 1 s cap); see test_nginx_stream.py
SLOW = ("--delay", "2")


def test_token_required_then_ignored_fault_falls_back_to_ts_spread(relay_server, run_verify):
    # no RELAY_FAULTS: the server must ignore X-Relay-Fault
    server = relay_server(RELAY_API_TOKEN=TOKEN)

    denied = run_verify(server.url, "--token", "wrong")
    assert denied.code == EXIT_HTTP_ERROR, denied.stdout + denied.stderr
    assert denied.report["status_code"] == 401
    assert denied.report["verdict"] == "http_error"

    # an hour of ts spread needed to judge: the demo turn, however long this machine makes
    # it, is too fast to tell (verify-stream would otherwise judge a slow turn by timing)
    run = run_verify(server.url, "--token", TOKEN, "--min-spread", "3600")
    r = run.report
    assert r["terminal"] == "turn_completed", run.stdout + run.stderr
    assert r["fault_honoured"] is False
    assert any("RELAY_FAULTS=1" in line for line in r["evidence"])
    assert (run.code, r["verdict"]) == (EXIT_INCONCLUSIVE, "inconclusive")
    assert any("too fast to tell" in line for line in r["evidence"])


def test_token_from_environment(relay_server, run_verify, monkeypatch):
    server = relay_server(RELAY_API_TOKEN=TOKEN, RELAY_FAULTS="1")
    monkeypatch.setenv("RELAY_API_TOKEN", TOKEN)
    run = run_verify(server.url, *SLOW)
    assert run.code == EXIT_INCREMENTAL, run.stdout + run.stderr
    assert run.report["fault_honoured"] is True
