"""``/docs`` and ``/redoc`` that work offline, and ``/openapi.json`` behind the API's own
credential.

The pages are Swagger UI and ReDoc, their assets served by the relay itself from the
installed ``fastapi-offline`` package (``fastapi_offline/static``, read with
:mod:`importlib.resources`; never copied into this repository) under
``/docs-assets/{name}``, beside the relay's own start-up script and its few styles
(``docs_assets/relay-docs.js``, ``relay-docs.css``). FastAPI's default pages load their
scripts from a CDN: blank offline and on many company networks.

**Who may read what.** ``/openapi.json`` (the app's ``openapi_url``) is an API route like
any other: it needs the credential the API needs (RELAY_AUTH ``token``, ``jwt``,
``proxy``, or LangGraph's ``Auth``; ``401`` in the error envelope with
``WWW-Authenticate`` without one; open when RELAY_AUTH is ``none``). The two pages and
the assets are public: they hold nothing of the API (the page is a shell: a title and
where to fetch the schema; the assets are the same static third-party files everyone
downloads from npm), and a page a browser opens from a link or the address bar cannot
send an ``Authorization`` header, so a page behind a bearer token could not be opened at
all. The page fetches the schema itself (relay-docs.js): with the bearer token of the tab
(the SPA's own, in sessionStorage), asking for one when the relay answers 401 with a
``Bearer`` challenge; Swagger UI's "Try it out" requests to this origin carry it too.
Behind an authenticating proxy (``proxy``), the proxy adds its headers to the page's
fetch as to any other request.

:func:`install_docs` replaces the pages of an app (the relay's, or a user's own
``FastAPI()`` given to ``relay.mount``) at the app's own ``docs_url`` and ``redoc_url``,
and its ``openapi_url``; an app made with ``docs_url=None`` (or ``redoc_url=None``) keeps
no such page, one with ``openapi_url=None`` none at all. Each page carries a
Content-Security-Policy that allows what it needs and no more: scripts from this origin
only (no inline script on either page); ``data:`` images (their icons); requests to this
origin only; and for ReDoc alone, the styles it injects at run time (inline styles) and
its search worker (``blob:``). ReDoc's "API docs by Redocly" logo comes from
cdn.redoc.ly: the CSP blocks it (the footer shows its text instead), nothing leaves.
"""

from __future__ import annotations

import html
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from fastapi import Depends
from fastapi.openapi.docs import swagger_ui_default_parameters
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from relay.errors import ApiError

#: where the assets are served
ASSETS_PATH = "/docs-assets"
#: the package that ships Swagger UI's and ReDoc's assets, and its folder of them
ASSET_PACKAGE = "fastapi_offline"
#: the relay's own assets (the pages' start-up script and styles), in this package
OWN_ASSET_PACKAGE = "relay.http"
#: the assets, by name (a request names one of these, never a path): media type, package
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
    "relay-docs.js": "text/javascript; charset=utf-8",
    "relay-docs.css": "text/css; charset=utf-8",
}
_OWN_ASSETS = {"relay-docs.js", "relay-docs.css"}
#: what both pages need: scripts and styles from here (no inline script), images from
#: here and ``data:`` (icons), requests to this origin only
_CSP = (
    "default-src 'none'; script-src 'self'; style-src {styles}; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: ReDoc adds its own: the styles styled-components injects at run time (no nonce can
#: reach them), and its search index's worker, started from a ``blob:`` URL
_REDOC_CSP = "; font-src 'self' data:; worker-src 'self' blob:"

#: a page: the credential form and note (relay-docs.js shows them on a 401), the place
#: the viewer draws in, and the scripts; ``config`` is what relay-docs.js reads
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="shortcut icon" href="{assets}/favicon.png">
{styles}<link rel="stylesheet" href="{assets}/relay-docs.css">
</head>
<body>
<main id="relay-docs" data-config="{config}">
<p id="relay-docs-note" role="alert" hidden></p>
<form id="relay-docs-token" hidden>
<label for="relay-docs-token-input">Bearer token</label>
<input id="relay-docs-token-input" type="password" autocomplete="off" required>
<button type="submit">Show the API</button>
</form>
</main>
<div id="{viewer}"></div>
<noscript>These API docs need JavaScript; the OpenAPI document is at {spec}.</noscript>
<script src="{assets}/{bundle}"></script>
<script src="{assets}/relay-docs.js"></script>
</body>
</html>
"""


def asset_bytes(name: str) -> bytes:
    """One asset's bytes, from the installed package (the relay's own from this one)."""
    if name in _OWN_ASSETS:
        return (resources.files(OWN_ASSET_PACKAGE) / "docs_assets" / name).read_bytes()
    return (resources.files(ASSET_PACKAGE) / "static" / name).read_bytes()


def page_csp(inline_styles: bool = False) -> str:
    """A page's CSP: scripts from this origin only; inline styles only when
    ``inline_styles`` (ReDoc's)."""
    if not inline_styles:
        return _CSP.format(styles="'self'")
    return _CSP.format(styles="'self' 'unsafe-inline'") + _REDOC_CSP


def docs_page(
    kind: str, title: str, spec: str, assets: str, config: dict[str, Any] | None = None
) -> HTMLResponse:
    """The page of ``kind`` (``swagger`` or ``redoc``) that shows the document at
    ``spec`` with the assets under ``assets``; ``config``: Swagger UI's settings."""
    swagger = kind == "swagger"
    settings = {"kind": kind, "spec": spec, **(config or {})}
    text = _PAGE.format(
        title=html.escape(title),
        assets=html.escape(assets),
        spec=html.escape(spec),
        styles=f'<link rel="stylesheet" href="{html.escape(assets)}/swagger-ui.css">\n'
        if swagger
        else "",
        config=html.escape(json.dumps(settings, separators=(",", ":"))),
        viewer="swagger-ui" if swagger else "redoc",
        bundle="swagger-ui-bundle.js" if swagger else "redoc.standalone.js",
    )
    return HTMLResponse(
        text,
        headers={
            "Content-Security-Policy": page_csp(inline_styles=not swagger),
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )


def install_docs(app: Any, identify: Callable[..., Awaitable[Any]] | None = None) -> None:
    """Serve ``app``'s ``/docs`` and ``/redoc`` (its ``docs_url`` and ``redoc_url``) with
    the assets from ``fastapi-offline``, replacing FastAPI's CDN pages, and its
    ``openapi_url`` behind ``identify`` (the relay's dependency that finds the request's
    user: a 401 without the API's credential); again on the same app replaces the
    relay's own."""
    openapi_url = getattr(app, "openapi_url", None)
    if not openapi_url:
        return
    docs_url = getattr(app, "docs_url", None)
    redoc_url = getattr(app, "redoc_url", None)
    assets_route = f"{ASSETS_PATH}/{{name}}"
    replaced = {openapi_url, docs_url, redoc_url, assets_route} - {None}
    app.router.routes[:] = [
        r for r in app.router.routes if getattr(r, "path", None) not in replaced
    ]

    async def openapi(request: Request) -> JSONResponse:
        # as FastAPI's own route: the root path (behind a proxy's prefix) is a server
        root_path = request.scope.get("root_path", "").rstrip("/")
        schema = app.openapi()
        if root_path and getattr(app, "root_path_in_servers", True):
            if root_path not in {s.get("url") for s in schema.get("servers", [])}:
                schema = {**schema, "servers": [{"url": root_path}, *schema.get("servers", [])]}
        return JSONResponse(schema)

    app.add_api_route(
        openapi_url,
        openapi,
        methods=["GET"],
        include_in_schema=False,
        dependencies=[Depends(identify)] if identify is not None else None,
    )
    if not docs_url and not redoc_url:
        return
    cache: dict[str, bytes] = {}

    async def asset(name: str) -> Response:
        media_type = ASSET_TYPES.get(name)
        if media_type is None:
            raise ApiError(404, "unknown_asset", f"There is no documentation asset {name!r}.")
        if name not in cache:
            cache[name] = asset_bytes(name)
        return Response(
            cache[name], media_type=media_type, headers={"Cache-Control": "public, max-age=3600"}
        )

    app.add_api_route(assets_route, asset, methods=["GET"], include_in_schema=False)

    def urls(request: Request) -> tuple[str, str]:
        root = request.scope.get("root_path", "").rstrip("/")
        return f"{root}{openapi_url}", f"{root}{ASSETS_PATH}"

    if docs_url:

        async def swagger_ui(request: Request) -> HTMLResponse:
            spec, assets = urls(request)
            redirect = getattr(app, "swagger_ui_oauth2_redirect_url", None)
            root = request.scope.get("root_path", "").rstrip("/")
            return docs_page(
                "swagger",
                f"{app.title} - Swagger UI",
                spec,
                assets,
                {
                    # no badge from validator.swagger.io: nothing leaves this origin
                    "parameters": {
                        **swagger_ui_default_parameters,
                        "validatorUrl": None,
                        **(getattr(app, "swagger_ui_parameters", None) or {}),
                    },
                    "oauth2RedirectUrl": f"{root}{redirect}" if redirect else None,
                    "initOAuth": getattr(app, "swagger_ui_init_oauth", None),
                },
            )

        app.add_api_route(docs_url, swagger_ui, methods=["GET"], include_in_schema=False)

    if redoc_url:

        async def redoc(request: Request) -> HTMLResponse:
            spec, assets = urls(request)
            return docs_page("redoc", f"{app.title} - ReDoc", spec, assets)

        app.add_api_route(redoc_url, redoc, methods=["GET"], include_in_schema=False)
