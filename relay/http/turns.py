"""The turn API (DESIGN.md §5), as a FastAPI router over the relay's parts.

Routes, a module each: ``GET /turns/{id}/events`` (relay/http/turn_events.py: the turn's
stream, live or re-derived from stored spans), ``GET /turns/{id}``
(relay/http/turn_record.py), ``GET /turns`` (relay/http/turn_list.py), ``POST /imports``
(relay/http/imports.py), ``POST /turns/{id}/cancel`` (relay/http/turn_cancel.py),
``POST /messages/{id}/feedback`` (relay/http/feedback.py), ``GET /graph``; on the same
router, ``GET /graphs`` (relay/http/graphs.py), ``GET /config``, ``GET /healthz``,
``GET /readyz`` and ``GET /metrics`` (relay/http/operations.py), ``POST /v1/traces``
(when the OTLP receiver is on) and the SPA's files at ``/``. The run endpoints
(``POST /chat``, ``/chat/resume``, ``/agui``) belong to the app that owns the agent.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from relay.http.feedback import Feedback
from relay.http.graphs import GraphTopology, add_graph_routes
from relay.http.imports import ImportRoute
from relay.http.operations import add_operation_routes
from relay.http.otlp import add_receiver_routes
from relay.http.parts import RelayParts
from relay.http.spa import add_spa_routes
from relay.http.turn_cancel import TurnCancel
from relay.http.turn_events import TurnEvents
from relay.http.turn_list import TurnList
from relay.http.turn_record import TurnRecordRoute


def build_router(relay: RelayParts) -> APIRouter:
    """The relay's router: the turn API over ``relay``'s parts, behind its user
    (RELAY_AUTH: a turn is only its owner's), and the routes that operate the relay."""
    router = APIRouter()
    auth = [Depends(relay.identify)]  # the user (RELAY_AUTH): a turn is only its owner's
    # in this order: the OpenAPI document lists the routes as they were added
    TurnEvents(relay).add_to(router, auth)  # GET /turns/{id}/events
    TurnRecordRoute(relay).add_to(router, auth)  # GET /turns/{id}
    TurnList(relay).add_to(router, auth)  # GET /turns
    ImportRoute(relay).add_to(router, auth)  # POST /imports
    TurnCancel(relay).add_to(router, auth)  # POST /turns/{id}/cancel
    Feedback(relay).add_to(router, auth)  # POST /messages/{id}/feedback
    GraphTopology(relay).add_to(router, auth)  # GET /graph
    add_graph_routes(
        router, relay.agents, auth, relay.langgraph_auth
    )  # GET /graphs, GET /graphs/{name}
    add_operation_routes(router, relay)  # GET /config, /healthz, /readyz, /metrics
    # POST /v1/traces (RELAY_OTLP_HTTP): the receiver keeps its own credential
    add_receiver_routes(router, relay, [Depends(relay.require_token)])
    add_spa_routes(router, relay.settings.resolved_spa_dir())
    return router
