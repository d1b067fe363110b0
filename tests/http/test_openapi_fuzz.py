"""schemathesis against the app's own OpenAPI document: no 5xx, every answer in schema."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.schemas import APIOperation

from span_relay_demo.app import create_app
from tests.conftest import LiveServer

pytestmark = pytest.mark.slow  # run first: tests/conftest.py orders the suite

EXAMPLES = int(os.environ.get("SPAN_RELAY_FUZZ_EXAMPLES", "25"))

# The document as the app serves it (building the app does not start it).
schema = schemathesis.openapi.from_dict(
    create_app({"RELAY_DATA_DIR": "/nonexistent-schema-only"}).openapi()
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("fuzz")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "OTEL_"))}
    env.update(
        {
            "RELAY_DATA_DIR": str(data),
            "OTEL_TRACES_EXPORTER": "none",
            "RELAY_SERVER_TIMEOUT_S": "300",
        }
    )
    server = LiveServer(create_app(env)).start()
    yield server
    server.stop()


#: every operation of the document, each a test of its own with an id that names it
#: (schemathesis's own ``schema.parametrize()`` gives its items one node id between them,
#: which xdist's grouped scheduling would run as one)
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
@given(data=st.data())
def test_api_conforms(operation: APIOperation, live: LiveServer, data: st.DataObject) -> None:
    case = data.draw(operation.as_strategy())
    if case.path == "/turns/{turn_id}/events":
        # a turn stream stays open while its turn lives; a fuzzed id is unknown (404)
        case.path_parameters = {"turn_id": "fuzz-unknown-turn"}
        if case.query and "wait" in case.query:
            # ?wait=S waits S seconds for the (unknown) turn to arrive: a real wait
            try:
                case.query["wait"] = min(float(case.query["wait"]), 1.0)
            except (TypeError, ValueError):
                pass  # not a number: the 422 is what is checked
    excluded = []
    if case.path == "/imports":
        # a trace file's schema is the OTLP / Jaeger formats, which the document does not
        # spell out: a fuzzed object is rightly refused (4xx); 5xx would still fail
        excluded.append(schemathesis.checks.positive_data_acceptance)
    case.call_and_validate(base_url=live.url, timeout=30, excluded_checks=excluded)
