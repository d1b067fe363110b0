"""``span-relay serve --relay-only``: the relay without the demo agent.

``create_relay_app()`` serves the relay's router (``/turns/...``, ``/healthz``,
``/readyz``, the SPA) and the OTLP receivers, and runs no agent of its own: the turns it
streams come from agents in other processes or languages that export their spans to it
(``POST /v1/traces``, on by default here, and ``RELAY_OTLP_GRPC=host:port``).

```sh
span-relay serve --relay-only --port 8000        # OTLP/HTTP on :8000/v1/traces
RELAY_OTLP_GRPC=127.0.0.1:4317 span-relay serve --relay-only
```
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI

from relay.core import Relay
from relay.version import __version__


def create_relay_app(environ: Mapping[str, str] | None = None) -> FastAPI:
    env = dict(os.environ if environ is None else environ)
    env.setdefault("RELAY_OTLP_HTTP", "true")
    relay = Relay.from_env(env)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await relay.start()
        try:
            yield
        finally:
            await relay.stop()

    app = FastAPI(title="span-relay", version=__version__, lifespan=lifespan)
    app.state.relay = relay
    app.include_router(relay.router)
    relay.install(app)
    return app
