"""WSGI entry point: `granian --interface wsgi gridagg_api.wsgi:app`. Settings come from the
environment. Each worker process warms up (gridagg.warmup) as it starts; its /healthz
says so until it is done (api.warming)."""

from gridagg.warmup import warm

from .app import create_app

app = create_app(warmup=warm)
