"""The load tools, installed as gridagg_loadtest (the `bench` extra), in rooms:

- bench/: the benchmarks (`gridagg bench` and the `python -m gridagg_loadtest.bench.*`
  commands) and the pieces they share;
- soak/: the soak and its nemesis (`python -m gridagg_loadtest.soak`), and the narrower
  checks of writes under faults;
- peers/: the systems without the grid the benches measure gridagg against;
- hosts.py: API server processes on this machine, for the benches and the soak alike;
- reports.py: where each bench's and soak's one current report goes (docs/bench/<bench>/,
  docs/soak/), rewritten by every run of its command;
- cli.py: `gridagg bench`'s entry point.

Imports point down: cli > bench | soak > hosts | peers | reports (pyproject.toml's import
contracts). docs/benchmarks.md says how to run each bench and soak and what it measures.
"""
