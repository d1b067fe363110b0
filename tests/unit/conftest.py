"""Shared fixtures for the unit tests: real SDK tracer providers with a recorder."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from spanrec import RecordingProcessor, Tracing


@pytest.fixture
def make_tracing() -> Iterator[Callable[..., Tracing]]:
    providers: list[TracerProvider] = []

    def make(span_limits: SpanLimits | None = None) -> Tracing:
        provider = TracerProvider(span_limits=span_limits) if span_limits else TracerProvider()
        recorder = RecordingProcessor()
        provider.add_span_processor(recorder)
        providers.append(provider)
        return Tracing(provider, provider.get_tracer("unit-tests"), recorder)

    yield make
    for provider in providers:
        provider.shutdown()


@pytest.fixture
def tracing(make_tracing: Callable[..., Tracing]) -> Tracing:
    return make_tracing()
