"""`gridagg demo`: the main job end to end on one machine (demo.cli).

A package of its own because it drives both ingest/ (the bulk load) and api/ (the HTTP
server): it sits above them, as they sit above the core (gridagg/).
"""
