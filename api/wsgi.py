"""WSGI entry point: `gunicorn api.wsgi:app`. Settings come from the environment."""

from .app import create_app

app = create_app()
