"""The held-out bench's WSGI entry point for its served peers: `granian --interface wsgi
gridagg_loadtest.bench.heldout_wsgi:app` (heldout_app.py). Settings and the peers'
knobs come from the environment."""

from .heldout_app import create_heldout_app

app = create_heldout_app()
