"""The routes that operate the relay rather than its turns, on the relay's router.

- ``GET /healthz``: the process answers (with ``serve --workers N``, which worker and pid);
- ``GET /readyz``: every store a request needs answers now, and what the app added with
  ``relay.add_readiness_check`` (relay/readiness.py); ``503`` with the problems if not;
- ``GET /metrics``: the Prometheus scrape, when ``RELAY_METRICS=prometheus``;
- ``GET /config``: what the SPA needs to know of the server (the trace viewer's URL,
  whether and how to ask for a bearer token).

:func:`add_operation_routes` adds them; :func:`relay.http.turns.build_router` calls it
beside the turn API.
"""

from __future__ import annotations

import os

from fastapi import APIRouter
from starlette.responses import JSONResponse, Response

from relay.http.parts import RelayParts


def add_operation_routes(router: APIRouter, relay: RelayParts) -> None:
    """``GET /config``, ``/healthz``, ``/readyz`` and (when metrics are on) ``/metrics``
    on ``router``, over ``relay``'s parts. None of them asks who is asking."""

    @router.get("/config", tags=["ui"])
    async def config() -> JSONResponse:
        return JSONResponse(
            {
                "trace_url": relay.settings.trace_url,
                # the SPA asks for a bearer token (the shared one, a JWT, or what
                # LangGraph's @auth.authenticate reads)
                "auth": relay.auth_mode,
                "auth_required": relay.auth_mode in ("token", "jwt", "langgraph"),
            }
        )

    @router.get("/healthz", tags=["ops"])
    async def healthz() -> JSONResponse:
        worker = relay.settings.worker  # serve --workers N: which one answered
        return JSONResponse(
            {"status": "ok"}
            if worker is None
            else {"status": "ok", "worker": worker, "pid": os.getpid()}
        )

    @router.get("/readyz", tags=["ops"], responses={503: {"description": "Not ready"}})
    async def readyz() -> JSONResponse:
        problems = await relay.readiness_problems()
        if problems:
            return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready"})

    if relay.metrics.enabled:

        @router.get("/metrics", tags=["ops"], include_in_schema=False)
        async def metrics() -> Response:
            from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

            return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
