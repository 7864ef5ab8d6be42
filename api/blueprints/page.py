"""The dashboard page at `/`: one HTML shell and the bundle built from api/page/src.

The bundle (api/page/dist, built by `bash api/page/build.sh`) ships inside the package,
so the page works on a closed network: nothing is fetched from elsewhere at run time.
The page talks to the API only through its public endpoints.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, send_from_directory

from ..contract import Media, operation
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


NOT_BUILT = "the page's bundle is not built (bash api/page/build.sh)"


@bp.get("/")
@operation(summary="the dashboard page (HTML): map, selection, answers, series, plan and grid",
           description="Served with its bundle from the installed package; it uses only this API.",
           access="open", answers={200: Media("text/html", "the page")}, problems={503: NOT_BUILT})
def index():
    _built()
    resp = send_from_directory(PAGE_DIR, "index.html", max_age=0)
    resp.headers["Content-Security-Policy"] = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:"
    return resp


@bp.get("/page/<name>")
@operation(summary="a file of the page's bundle (script, style sheet, outlines), named by the page",
           access="open", path={"name": "file name"}, answers={200: Media("*/*", "the file")},
           problems={404: "no such file", 503: NOT_BUILT})
def asset(name: str):
    """A file of the bundle (dist is flat: no subfolders)."""
    _built()
    return send_from_directory(DIST_DIR, name, max_age=0)
