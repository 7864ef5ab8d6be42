"""The dashboard page at `/`: one HTML shell and the bundle built from api/page/src.

The bundle (api/page/dist, built by `bash api/page/build.sh`) ships inside the package,
so the page works on a closed network: nothing is fetched from elsewhere at run time.
The page talks to the API only through its public endpoints.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, send_from_directory

from ..problems import ApiProblem

PAGE_DIR = Path(__file__).resolve().parent.parent / "page"
DIST_DIR = PAGE_DIR / "dist"
BUNDLE = ("main.js", "main.css")

bp = Blueprint("page", __name__)


def _built() -> None:
    missing = [f for f in BUNDLE if not (DIST_DIR / f).is_file()]
    if missing:
        raise ApiProblem(503, "Page not built",
                         f"the page's bundle ({', '.join(missing)}) is missing from {DIST_DIR}; "
                         "build it with `bash api/page/build.sh`", slug="page-not-built")


@bp.get("/")
def index():
    _built()
    resp = send_from_directory(PAGE_DIR, "index.html", max_age=0)
    resp.headers["Content-Security-Policy"] = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:"
    return resp


@bp.get("/page/<name>")
def asset(name: str):
    """A file of the bundle (dist is flat: no subfolders)."""
    _built()
    return send_from_directory(DIST_DIR, name, max_age=0)
