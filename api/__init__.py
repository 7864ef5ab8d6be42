"""gridagg's HTTP API for dashboards: a Flask app served by granian (`gridagg serve`)."""

from .app import create_app

__all__ = ["create_app"]
