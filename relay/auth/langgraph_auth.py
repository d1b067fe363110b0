"""LangGraph's own ``Auth`` object (``langgraph_sdk.Auth``) as the relay's authenticator,
with the semantics ``langgraph dev`` gives it (README "langgraph.json's auth").

- **Who**: the ``@auth.authenticate`` handler gets the request's parts its parameters name
  (``request``, ``scope``, ``method``, ``path``, ``path_params``, ``query_params``,
  ``headers`` as the ASGI scope's ``dict[bytes, bytes]``, ``authorization``, ``body``) and
  returns the user: a string (the identity), a mapping with ``identity``, or an object with
  an ``identity`` (``MinimalUser``, ``BaseUser``). That identity is the relay's user id:
  the ownership rules of every other mode apply to it. An
  ``Auth.exceptions.HTTPException`` it raises is answered with its status and detail; an
  ``AssertionError`` is a 401.
- **What**: :meth:`LangGraphAuth.authorize` calls the one handler LangGraph would call for
  a resource and action (``@auth.on.threads.create``, else ``@auth.on.threads``, else
  ``@auth.on(actions=...)``, else the global ``@auth.on``; none: allowed) with
  ``ctx=AuthContext(...)`` and ``value``. ``None``/``True`` allow, ``False`` is a 403, an
  ``HTTPException`` its status, an ``AssertionError`` a 403, a dict is a filter.
- **Filters** are matched by :func:`relay.auth.filters.matches` against the metadata the
  relay keeps of a thread (its ``owner``, ``graph_id`` and ``assistant_id``); a filter on
  any other key, or with an operator LangGraph does not define, fails closed.

Framework-free: the HTTP surface (relay/http/langgraph_auth.py) hands it a
:class:`RequestFacts` and turns the :class:`relay.errors.ApiError` it raises into answers.
"""

from __future__ import annotations

import http
import inspect
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_sdk import Auth
from langgraph_sdk.auth.exceptions import HTTPException
from langgraph_sdk.auth.types import AuthContext

from relay.auth.base import User
from relay.errors import ApiError

log = logging.getLogger("relay.auth")

#: the parameters an ``@auth.authenticate`` handler may name (as the Agent Server injects them)
AUTHENTICATE_PARAMETERS = frozenset(
    {
        "request",
        "scope",
        "method",
        "path",
        "path_params",
        "query_params",
        "headers",
        "authorization",
        "body",
    }
)
#: the longest identity taken (a turn record keeps it)
MAX_IDENTITY = 256
_CHALLENGE = 'Bearer realm="span-relay"'


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What an ``@auth.authenticate`` handler may ask for, read from one request."""

    method: str
    path: str
    headers: Mapping[bytes, bytes]
    path_params: Mapping[str, str] = field(default_factory=dict)
    query_params: Mapping[str, str] = field(default_factory=dict)
    #: the framework's request object and ASGI scope, for a handler that names them
    request: Any = None
    scope: Mapping[str, Any] | None = None
    #: the body as JSON (None: no body, or not JSON), read only for a handler that names it
    body: Any = None


class AuthUser:
    """The user handlers see as ``ctx.user`` (LangGraph's ``BaseUser``): the identity,
    display name, permissions and ``is_authenticated`` of what ``@auth.authenticate``
    returned; its other fields by key or attribute, as the Agent Server's user proxy."""

    def __init__(self, returned: Any) -> None:
        self._returned = returned
        if isinstance(returned, str):
            self._fields: dict[str, Any] = {"identity": returned}
        elif isinstance(returned, Mapping):
            self._fields = dict(returned)
        else:
            self._fields = {
                name: getattr(returned, name)
                for name in ("identity", "display_name", "is_authenticated", "permissions")
                if hasattr(returned, name)
            }
        identity = self._fields.get("identity")
        if not isinstance(identity, str) or not identity:
            raise TypeError(f"the user it returned has no identity ({type(returned).__name__})")
        self._fields.setdefault("display_name", identity)
        self._fields.setdefault("is_authenticated", True)
        permissions = self._fields.get("permissions") or []
        self._fields["permissions"] = list(permissions)

    @property
    def identity(self) -> str:
        identity: str = self._fields["identity"]
        return identity

    @property
    def display_name(self) -> str:
        return str(self._fields["display_name"])

    @property
    def is_authenticated(self) -> bool:
        return bool(self._fields["is_authenticated"])

    @property
    def permissions(self) -> Sequence[str]:
        permissions: list[str] = self._fields["permissions"]
        return permissions

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __contains__(self, key: object) -> bool:
        return key in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._fields:
            return self._fields[name]
        if isinstance(self._returned, str | Mapping):
            raise AttributeError(name)
        return getattr(self._returned, name)  # a user object's own attributes

    def dump(self) -> dict[str, Any]:
        """The user as JSON-safe fields (what a turn's ``configurable`` carries)."""
        return {k: v for k, v in self._fields.items() if _json_safe(v)}


@dataclass(frozen=True, slots=True)
class LangGraphUser(User):
    """A user ``@auth.authenticate`` returned: ``id`` is its identity, ``claims`` its
    JSON-safe fields, ``principal`` what the ``@auth.on`` handlers see as ``ctx.user``."""

    principal: AuthUser | None = None

    @property
    def permissions(self) -> Sequence[str]:
        return self.principal.permissions if self.principal is not None else ()

    def configurable(self) -> dict[str, Any]:
        """What a graph reads in ``config["configurable"]``: the relay's ``user``, and the
        keys the Agent Server sets (``langgraph_auth_user``, its id and permissions)."""
        return {
            **User.configurable(self),
            "langgraph_auth_user": self.principal,
            "langgraph_auth_user_id": self.id,
            "langgraph_auth_permissions": list(self.permissions),
        }


def _json_safe(value: Any) -> bool:
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list | tuple):
        return all(_json_safe(v) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _json_safe(v) for k, v in value.items())
    return False


def _code(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "refused"


def _refusal(exc: HTTPException) -> ApiError:
    headers = dict(exc.headers or {})
    if exc.status_code == 401:
        headers.setdefault("WWW-Authenticate", _CHALLENGE)
    return ApiError(exc.status_code, _code(exc.status_code), str(exc.detail), headers or None)


class LangGraphAuth:
    """A ``langgraph_sdk.Auth`` that decides who is asking (``@auth.authenticate``) and
    what they may do (``@auth.on``). ``source`` names where it came from, for messages."""

    mode = "langgraph"

    def __init__(self, auth: Any, source: str = "auth") -> None:
        self.source = source
        self.auth = check_auth(auth, source)
        handler = auth._authenticate_handler
        self._handler = handler
        self._wants = frozenset(inspect.signature(handler).parameters)
        #: the handler of each (resource, action) asked so far (LangGraph's own lookup)
        self._handlers: dict[tuple[str, str], Any] = {}
        self._unkept: set[str] = set()

    @property
    def wants_body(self) -> bool:
        return "body" in self._wants

    @property
    def wants_request(self) -> bool:
        return bool(self._wants & {"request", "scope"})

    async def authenticate(self, headers: Mapping[str, str]) -> User:
        """:class:`relay.auth.Authenticator` over headers alone (no path, no request)."""
        raw = {k.lower().encode("latin-1"): v.encode("latin-1") for k, v in headers.items()}
        return await self.identify(RequestFacts("GET", "/", raw))

    async def identify(self, facts: RequestFacts) -> LangGraphUser:
        """The request's user, or the ApiError ``@auth.authenticate`` asked for (401)."""
        authorization = facts.headers.get(b"authorization")
        offered = {
            "request": facts.request,
            "scope": facts.scope,
            "method": facts.method,
            "path": facts.path,
            "path_params": dict(facts.path_params),
            "query_params": dict(facts.query_params),
            "headers": dict(facts.headers),
            "authorization": authorization.decode("latin-1") if authorization else None,
            "body": facts.body,
        }
        try:
            returned = await self._handler(**{k: v for k, v in offered.items() if k in self._wants})
        except HTTPException as exc:
            raise _refusal(exc) from None
        except AssertionError as exc:
            raise ApiError(
                401,
                "unauthorized",
                str(exc) or "Unauthorized",
                {"WWW-Authenticate": _CHALLENGE},
            ) from None
        try:
            principal = AuthUser(returned)
        except TypeError as exc:
            raise ApiError(
                500, "auth_handler_invalid", f"The {self.source} authenticate handler: {exc}."
            ) from None
        if len(principal.identity) > MAX_IDENTITY or not principal.identity.isprintable():
            raise ApiError(
                500,
                "auth_handler_invalid",
                f"The {self.source} authenticate handler returned an identity that is not "
                f"1-{MAX_IDENTITY} printable characters.",
            )
        return LangGraphUser(principal.identity, principal.dump(), principal)

    def handler_for(self, resource: str, action: str) -> Any:
        """The handler LangGraph calls for ``resource.action``: the most specific one."""
        key = (resource, action)
        if key not in self._handlers:
            handlers = self.auth._handlers
            found = next(
                (
                    handlers[k][-1]
                    for k in (key, (resource, "*"), ("*", action), ("*", "*"))
                    if k in handlers
                ),
                None,
            )
            if found is None and self.auth._global_handlers:
                found = self.auth._global_handlers[-1]
            self._handlers[key] = found
        return self._handlers[key]

    async def authorize(
        self, user: User | None, resource: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Call ``resource.action``'s handler: None (allowed, unfiltered), a filter (allowed
        where it matches), or the ApiError the handler asked for (403 when it said no)."""
        handler = self.handler_for(resource, action)
        if handler is None:
            return None
        principal = user.principal if isinstance(user, LangGraphUser) else None
        if principal is None:  # every request of this mode has one; never allow without
            raise ApiError(403, "forbidden", "This request has no user to authorize.")
        context = AuthContext(
            permissions=list(principal.permissions),
            user=principal,  # a BaseUser, structurally
            resource=resource,  # type: ignore[arg-type]
            action=action,  # type: ignore[arg-type]
        )
        try:
            result = await handler(ctx=context, value=value)
        except HTTPException as exc:
            raise _refusal(exc) from None
        except AssertionError as exc:
            raise ApiError(403, "forbidden", str(exc) or "Forbidden") from None
        if result is None or result is True:
            return None
        if result is False:
            raise ApiError(
                403, "forbidden", f"The {self.source} handler of {resource}.{action} said no."
            )
        if not isinstance(result, dict):
            raise ApiError(
                500,
                "auth_handler_invalid",
                f"The {self.source} handler of {resource}.{action} returned a "
                f"{type(result).__name__}; a handler returns None, a bool or a filter dict.",
            )
        return result

    def note_metadata(self, user: User | None, graph: str, metadata: Any) -> None:
        """What a create handler wrote in ``value["metadata"]``. The relay keeps the owner
        (the user's identity) and the graph: another value for one of those would make
        the relay's filters answer otherwise than LangGraph's, so the request is refused
        (``500 auth_metadata_unsupported``). Any other key is not kept, and a filter on it
        later fails closed; said once per key in the log."""
        if not isinstance(metadata, Mapping):
            return
        owner = user.id if user is not None else None
        kept = {"owner": owner, "graph_id": graph, "assistant_id": graph}
        for key, value in metadata.items():
            if key in kept:
                if value != kept[key]:
                    what = "the user who starts it" if key == "owner" else "its graph"
                    raise ApiError(
                        500,
                        "auth_metadata_unsupported",
                        f"The {self.source} handlers set the thread's {key!r} to {value!r}; "
                        f"the relay keeps {what} there, so it refuses rather than keep another.",
                    )
                continue
            if key not in self._unkept:
                self._unkept.add(key)
                log.warning(
                    "relay: the %s handlers set thread metadata %r=%r; the relay keeps only "
                    "the owner (the user's identity) and the graph, so a filter on it "
                    "matches no thread",
                    self.source,
                    key,
                    value,
                )


def check_auth(auth: Any, source: str) -> Any:
    """``auth`` when it is a ``langgraph_sdk.Auth`` with an ``@auth.authenticate`` handler
    whose parameters the relay can give; else a ValueError that says what is wrong."""
    if not isinstance(auth, Auth):
        raise ValueError(
            f"{source} is a {type(auth).__name__}, not a langgraph_sdk.Auth "
            "(from langgraph_sdk import Auth; auth = Auth())"
        )
    handler = auth._authenticate_handler
    if handler is None:
        raise ValueError(
            f"{source} has no @auth.authenticate handler: without one nobody is "
            "authenticated, and the relay does not serve a protected project open"
        )
    if not inspect.iscoroutinefunction(handler):
        raise ValueError(f"{source}: its @auth.authenticate handler must be an async function")
    unknown = sorted(
        name
        for name, p in inspect.signature(handler).parameters.items()
        if name not in AUTHENTICATE_PARAMETERS
        and p.default is p.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    )
    if unknown:
        raise ValueError(
            f"{source}: its @auth.authenticate handler asks for {', '.join(unknown)}; it may "
            f"ask for {', '.join(sorted(AUTHENTICATE_PARAMETERS))}"
        )
    return auth
