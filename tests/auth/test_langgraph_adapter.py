"""The framework-free adapter of LangGraph's ``Auth`` (relay/auth/langgraph_auth.py), with a
real ``langgraph_sdk.Auth``: the users ``@auth.authenticate`` may return, the one
``@auth.on`` handler LangGraph would call for a resource and action, and what each result
of a handler means."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk import Auth

from relay.auth.langgraph_auth import LangGraphAuth, LangGraphUser, RequestFacts
from relay.errors import ApiError

FACTS = RequestFacts("POST", "/chat", {b"authorization": b"Bearer t"})


class Person:
    """A user object of the app's own (LangGraph's ``MinimalUser`` shape)."""

    identity = "olga"
    permissions = ("admin",)
    team = "blue"


@pytest.mark.parametrize(
    ("returned", "identity", "permissions"),
    [
        ("sam", "sam", []),
        ({"identity": "ida", "permissions": ["read"], "org": "acme"}, "ida", ["read"]),
        (Person(), "olga", ["admin"]),
    ],
)
def test_the_users_authenticate_may_return(
    returned: Any, identity: str, permissions: list[str]
) -> None:
    auth = Auth()

    @auth.authenticate
    async def authenticate(authorization: str | None) -> Any:
        assert authorization == "Bearer t"
        return returned

    user = asyncio.run(LangGraphAuth(auth).identify(FACTS))
    assert isinstance(user, LangGraphUser)
    assert user.id == identity and list(user.permissions) == permissions
    assert user.principal is not None and user.principal.identity == identity
    if isinstance(returned, Person):
        assert user.principal.team == "blue"  # the object's own attributes
    if isinstance(returned, dict):
        assert user.principal["org"] == "acme" and user.claims["org"] == "acme"


@pytest.mark.parametrize("returned", [None, {"name": "no identity"}, 42, ""])
def test_a_returned_value_without_an_identity_is_a_500(returned: Any) -> None:
    auth = Auth()

    @auth.authenticate
    async def authenticate() -> Any:
        return returned

    with pytest.raises(ApiError) as raised:
        asyncio.run(LangGraphAuth(auth).identify(FACTS))
    assert raised.value.status == 500 and raised.value.code == "auth_handler_invalid"


def test_a_refusal_keeps_its_status_detail_and_headers() -> None:
    auth = Auth()

    @auth.authenticate
    async def authenticate() -> str:
        raise Auth.exceptions.HTTPException(403, "Suspended.", headers={"X-Why": "billing"})

    with pytest.raises(ApiError) as raised:
        asyncio.run(LangGraphAuth(auth).identify(FACTS))
    assert (raised.value.status, raised.value.code, raised.value.message) == (
        403,
        "forbidden",
        "Suspended.",
    )
    assert raised.value.headers == {"X-Why": "billing"}


def _auth_with_handlers() -> tuple[LangGraphAuth, LangGraphUser, list[str]]:
    auth = Auth()
    called: list[str] = []

    @auth.authenticate
    async def authenticate() -> str:
        return "sam"

    @auth.on
    async def everything(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> bool:
        called.append(f"global {ctx.resource}.{ctx.action}")
        return False

    @auth.on.threads
    async def threads(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> None:
        called.append(f"threads {ctx.action}")

    @auth.on.threads.create_run
    async def create_run(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> dict[str, str]:
        called.append(f"create_run {value['thread_id']} {ctx.user.identity}")
        return {"owner": ctx.user.identity}

    @auth.on(actions="search")
    async def searches(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> bool:
        called.append(f"search {ctx.resource}")
        return True

    adapter = LangGraphAuth(auth)
    return adapter, asyncio.run(adapter.identify(FACTS)), called


def test_the_most_specific_handler_is_called() -> None:
    adapter, user, called = _auth_with_handlers()

    async def run() -> list[Any]:
        return [
            await adapter.authorize(user, "threads", "create_run", {"thread_id": "t1"}),
            await adapter.authorize(user, "threads", "read", {"thread_id": "t1"}),
            await adapter.authorize(user, "assistants", "search", {}),
        ]

    assert asyncio.run(run()) == [{"owner": "sam"}, None, None]
    with pytest.raises(ApiError) as raised:
        asyncio.run(adapter.authorize(user, "assistants", "read", {}))
    assert raised.value.status == 403
    assert called == [
        "create_run t1 sam",
        "threads read",
        "search assistants",
        "global assistants.read",
    ]


@pytest.mark.parametrize(
    ("result", "status"),
    [(AssertionError("no"), 403), ("yes", 500), (["owner"], 500)],
)
def test_what_a_handler_result_means(result: Any, status: int) -> None:
    auth = Auth()

    @auth.authenticate
    async def authenticate() -> str:
        return "sam"

    @auth.on
    async def handler(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> Any:
        if isinstance(result, Exception):
            raise result
        return result

    adapter = LangGraphAuth(auth)
    user = asyncio.run(adapter.identify(FACTS))
    with pytest.raises(ApiError) as raised:
        asyncio.run(adapter.authorize(user, "threads", "read", {}))
    assert raised.value.status == status


def test_no_handler_allows_and_no_user_is_refused() -> None:
    auth = Auth()

    @auth.authenticate
    async def authenticate() -> str:
        return "sam"

    @auth.on.threads.read
    async def read(ctx: Auth.types.AuthContext, value: dict[str, Any]) -> bool:
        return True

    adapter = LangGraphAuth(auth)
    assert asyncio.run(adapter.authorize(None, "threads", "create", {})) is None
    with pytest.raises(ApiError) as raised:  # a handler, and nobody to hand it: closed
        asyncio.run(adapter.authorize(None, "threads", "read", {}))
    assert raised.value.status == 403
