"""The SPA's files, served by name (no path is ever joined from a request), with a CSP
that forbids inline script."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.responses import FileResponse

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_SPA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}


def add_spa_routes(router: APIRouter, spa_dir: Path | None) -> None:
    """Serve the SPA's files by name (no path is ever joined from a request)."""
    if spa_dir is None:
        return
    headers = {
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    for path in sorted(spa_dir.iterdir()):
        if not path.is_file() or path.suffix not in _SPA_TYPES:
            continue
        route = "/" if path.name == "index.html" else f"/{path.name}"
        router.add_api_route(
            route,
            _file_endpoint(path, _SPA_TYPES[path.suffix], headers),
            methods=["GET"],
            include_in_schema=False,
        )


def _file_endpoint(path: Path, media_type: str, headers: dict[str, str]):
    async def serve() -> FileResponse:
        return FileResponse(path, media_type=media_type, headers=headers)

    return serve
