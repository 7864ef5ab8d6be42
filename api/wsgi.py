"""WSGI entry point: `granian --interface wsgi gridagg_api.wsgi:app`. Settings come from the
environment. Each worker process warms up as it starts (api.warming); its /healthz says
so until it is done."""

from .app import create_app
from .warming import warm_worker

app = create_app(warmup=warm_worker)
