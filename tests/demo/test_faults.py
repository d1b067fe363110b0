"""span_relay_demo.faults: the X-Relay-Fault header and the node wrapper."""

from __future__ import annotations

import asyncio

import pytest

from span_relay_demo.faults import (
    MAX_DELAY_S,
    Fault,
    InjectedFault,
    TransientModelError,
    fault_for,
    parse_faults,
    with_faults,
)


@pytest.mark.parametrize("header", [None, ""])
def test_no_header_no_faults(header: str | None) -> None:
    assert parse_faults(header) == {}


def test_parse_error_and_delay() -> None:
    assert parse_faults("generate=error") == {"generate": Fault("error")}
    assert parse_faults("generate=delay:5") == {"generate": Fault("delay", 5.0)}
    assert parse_faults("retrieve_context=delay:0.25") == {"retrieve_context": Fault("delay", 0.25)}


def test_parse_several_with_spaces() -> None:
    assert parse_faults(" generate=error , retrieve_context=delay:2 ") == {
        "generate": Fault("error"),
        "retrieve_context": Fault("delay", 2.0),
    }


def test_last_fault_for_a_node_wins() -> None:
    assert parse_faults("generate=error,generate=delay:1") == {"generate": Fault("delay", 1.0)}


@pytest.mark.parametrize("seconds", ["0", "600", str(MAX_DELAY_S)])
def test_delay_bounds_inclusive(seconds: str) -> None:
    assert parse_faults(f"n=delay:{seconds}")["n"].seconds == float(seconds)


@pytest.mark.parametrize(
    "header",
    [
        "generate",
        "=error",
        "generate=",
        "generate=crash",
        "generate=delay",
        "generate=delay:",
        "generate=delay:abc",
        "generate=delay:-1",
        "generate=delay:601",
        "generate=delay:nan",
        "generate=delay:inf",
        "generate=error,",
        "generate=ERROR",
        "generate=transient:0",
        "generate=transient:11",
        "generate=transient:",
        "generate=transient:x",
        "generate=transient:-1",
        "generate=transient:1.5",
    ],
)
def test_malformed_headers_raise_value_error_naming_the_header(header: str) -> None:
    with pytest.raises(ValueError, match="X-Relay-Fault"):
        parse_faults(header)


def cfg(**faults: Fault) -> dict:
    return {"configurable": {"relay_faults": faults}}


def test_sync_node_error_and_passthrough() -> None:
    calls: list[str] = []

    def node(state: dict, config: dict) -> dict:
        calls.append("ran")
        return {"x": 1}

    wrapped = with_faults("generate", node)
    assert wrapped.__name__ == "node"
    assert wrapped({}, {}) == {"x": 1}
    assert wrapped({}, cfg(other=Fault("error"))) == {"x": 1}
    with pytest.raises(InjectedFault, match="generate"):
        wrapped({}, cfg(generate=Fault("error")))
    assert calls == ["ran", "ran"]


async def test_async_node_delay_then_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr("span_relay_demo.faults.asyncio.sleep", fake_sleep)

    async def node(state: dict, config: dict) -> dict:
        return {"ok": True}

    wrapped = with_faults("generate", node)
    assert asyncio.iscoroutinefunction(wrapped)
    assert await wrapped({}, cfg(generate=Fault("delay", 3.0))) == {"ok": True}
    assert slept == [3.0]
    with pytest.raises(InjectedFault):
        await wrapped({}, cfg(generate=Fault("error")))


def test_sync_node_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("span_relay_demo.faults.time.sleep", slept.append)
    wrapped = with_faults("n", lambda state, config: "done")
    assert wrapped({}, cfg(n=Fault("delay", 1.5))) == "done"
    assert slept == [1.5]


def test_injected_fault_is_a_runtime_error() -> None:
    assert issubclass(InjectedFault, RuntimeError)


@pytest.mark.parametrize("n", [1, 3, 10])
def test_parse_transient(n: int) -> None:
    assert parse_faults(f"generate=transient:{n}") == {"generate": Fault("transient", count=n)}


def test_transient_is_not_raised_by_the_node_wrapper() -> None:
    # transient faults are for the model call inside generate, not the node itself
    wrapped = with_faults("generate", lambda state, config: "ran")
    assert wrapped({}, cfg(generate=Fault("transient", count=2))) == "ran"


def test_fault_for() -> None:
    assert fault_for("generate", cfg(generate=Fault("error"))) == Fault("error")
    assert fault_for("generate", None) is None
    assert fault_for("generate", {"configurable": {}}) is None


def test_transient_model_error_is_a_connection_error() -> None:
    assert issubclass(TransientModelError, ConnectionError)
