"""The load tools, installed as gridagg_loadtest (the `bench` extra), in rooms:

- bench/: the benchmarks (`gridagg bench` and the `python -m gridagg_loadtest.bench.*`
  commands) and the pieces they share;
- soak/: the soak and its nemesis (`python -m gridagg_loadtest.soak`), and the narrower
  checks of writes under faults;
- peers/: the systems without the grid the benches measure gridagg against;
- hosts.py: API server processes on this machine, for the benches and the soak alike;
- cli.py: `gridagg bench`'s entry point.

Imports point down: cli > bench | soak > hosts | peers (pyproject.toml's import contracts).
"""
