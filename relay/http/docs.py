"""``/docs`` and ``/redoc`` that work offline: FastAPI's own Swagger UI and ReDoc pages
(:func:`fastapi.openapi.docs.get_swagger_ui_html`, :func:`~fastapi.openapi.docs.get_redoc_html`)
pointed at assets the relay serves itself, from the installed ``fastapi-offline`` package
(``fastapi_offline/static``, read with :mod:`importlib.resources`; never copied into this
repository), under ``/docs-assets/{name}``. FastAPI's default pages load their scripts
from a CDN: blank offline and on many company networks.

:func:`install_docs` replaces the pages of an app (the relay's, or a user's own
``FastAPI()`` given to ``relay.mount``) at the app's own ``docs_url`` and ``redoc_url``;
an app made with ``docs_url=None`` (or ``redoc_url=None``, or ``openapi_url=None``) keeps
none. Each page carries a Content-Security-Policy that allows what it needs and no more:
scripts from this origin and Swagger UI's one inline start-up script by its SHA-256 hash
(no ``'unsafe-inline'`` script on either page); ``data:`` images (their icons); requests
to this origin only; and for ReDoc alone, the styles it injects at run time (inline
styles) and its search worker (``blob:``). ReDoc's "API docs by Redocly" logo comes from
cdn.redoc.ly: the CSP blocks it (the footer shows its text instead), nothing leaves.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from typing import Any

from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from relay.errors import ApiError

#: where the assets are served
ASSETS_PATH = "/docs-assets"
#: the package that ships them, and its folder of assets
ASSET_PACKAGE = "fastapi_offline"
#: the assets, by name (a request names one of these, never a path)
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
#: what both pages need: scripts from here (and their inline ones, by hash), images
#: from here and ``data:`` (icons), requests to this origin only
_CSP = (
    "default-src 'none'; script-src {scripts}; style-src {styles}; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: ReDoc adds its own: the styles styled-components injects at run time (no nonce can
#: reach them), and its search index's worker, started from a ``blob:`` URL
_REDOC_CSP = "; font-src 'self' data:; worker-src 'self' blob:"


def asset_bytes(name: str) -> bytes:
    """One asset's bytes, from the installed package."""
    return (resources.files(ASSET_PACKAGE) / "static" / name).read_bytes()


def page_csp(html: str, inline_styles: bool = False) -> str:
    """A page's CSP: scripts from this origin, and the page's inline scripts by their
    SHA-256 hashes; inline styles only when ``inline_styles`` (ReDoc's)."""
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(html)
    ]
    scripts = " ".join(["'self'", *hashes])
    if not inline_styles:
        return _CSP.format(scripts=scripts, styles="'self'")
    return _CSP.format(scripts=scripts, styles="'self' 'unsafe-inline'") + _REDOC_CSP


def _page(response: HTMLResponse, inline_styles: bool = False) -> HTMLResponse:
    html = bytes(response.body).decode()
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": page_csp(html, inline_styles),
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )


def install_docs(app: Any) -> None:
    """Serve ``app``'s ``/docs`` and ``/redoc`` (its ``docs_url`` and ``redoc_url``) with
    the assets from ``fastapi-offline``, replacing FastAPI's CDN pages; again on the same
    app replaces the relay's own."""
    openapi_url = getattr(app, "openapi_url", None)
    docs_url = getattr(app, "docs_url", None) if openapi_url else None
    redoc_url = getattr(app, "redoc_url", None) if openapi_url else None
    if not docs_url and not redoc_url:
        return
    assets_route = f"{ASSETS_PATH}/{{name}}"
    replaced = {docs_url, redoc_url, assets_route} - {None}
    app.router.routes[:] = [
        r for r in app.router.routes if getattr(r, "path", None) not in replaced
    ]
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
        root = request.scope.get("root_path", "")
        return f"{root}{openapi_url}", f"{root}{ASSETS_PATH}"

    if docs_url:

        async def swagger_ui(request: Request) -> HTMLResponse:
            spec, assets = urls(request)
            return _page(
                get_swagger_ui_html(
                    openapi_url=spec,
                    title=f"{app.title} - Swagger UI",
                    swagger_js_url=f"{assets}/swagger-ui-bundle.js",
                    swagger_css_url=f"{assets}/swagger-ui.css",
                    swagger_favicon_url=f"{assets}/favicon.png",
                    oauth2_redirect_url=getattr(app, "swagger_ui_oauth2_redirect_url", None),
                    init_oauth=getattr(app, "swagger_ui_init_oauth", None),
                    # no badge from validator.swagger.io: nothing leaves this origin
                    swagger_ui_parameters={
                        "validatorUrl": None,
                        **(getattr(app, "swagger_ui_parameters", None) or {}),
                    },
                )
            )

        app.add_api_route(docs_url, swagger_ui, methods=["GET"], include_in_schema=False)

    if redoc_url:

        async def redoc(request: Request) -> HTMLResponse:
            spec, assets = urls(request)
            return _page(
                get_redoc_html(
                    openapi_url=spec,
                    title=f"{app.title} - ReDoc",
                    redoc_js_url=f"{assets}/redoc.standalone.js",
                    redoc_favicon_url=f"{assets}/favicon.png",
                    with_google_fonts=False,
                ),
                inline_styles=True,
            )

        app.add_api_route(redoc_url, redoc, methods=["GET"], include_in_schema=False)
