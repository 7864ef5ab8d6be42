"""gunicorn settings used by `gridagg serve` (bind, workers and the like come from the
command line). Each worker builds its own engine on its first request (no preload), so
no connection or LMDB handle crosses a fork."""

import os

preload_app = False
worker_class = "gthread"
graceful_timeout = 20


def child_exit(server, worker):
    # Drop a dead worker's live gauges from the shared Prometheus files.
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
