"""The benchmarks: gridagg against its peers (loadtest/peers), each bench a command that
rewrites its one current report, docs/bench/<bench>/README.md with its plots (see
loadtest/reports.py), and keeps the run's logs and data in its --out directory.

- paper.py: `gridagg bench`, the paper's experiment, a module a step (archive.py,
  systems.py, inprocess.py, runs.py with servers.py, tuning.py, prewarm.py, driver.py
  and loadgen.go, cpu.py; report.py and plots.py); dashboard.py with dashboard_sql.py:
  `gridagg bench --dashboard`;
- scale.py: answer times as the archive grows, on an archive loaded with `gridagg ingest`;
- online.py: the online tuner following a change of workload;
- ingest.py: the bulk load end to end beside loading each store alone;
- scaleout.py: the paper's workload on the local HBase as laid out now;
- workload.py and paper.toml: the paper's data space and queries; log.py: progress lines.
"""
