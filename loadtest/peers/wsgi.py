"""The bench's WSGI entry point: `granian --interface wsgi gridagg_loadtest.peers.wsgi:app`
serves gridagg's API and the peers (app.py). Settings and the peers' knobs come from the
environment."""

from .app import create_peer_app

app = create_peer_app()
