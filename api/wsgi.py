"""WSGI entry point: `granian --interface wsgi gridagg_api.wsgi:app`. Settings come from the environment."""

from .app import create_app

app = create_app()
