"""The dashboard's questions over HTTP, served as `python -m gridagg_loadtest.scale` serves
gridagg (2 workers; 4 threads each on HBase, 1 on the embedded store; the online tuner off):
    python docs/bench/scale/questions_http.py STORE DATASET [REPEAT]
Prints each question's p50 in ms over REPEAT requests (default 5) after one unrecorded."""
import sys
import tempfile
from pathlib import Path

from gridagg.config import Settings
from gridagg_loadtest import dashboard
from gridagg_loadtest.scale import SERVED_MAX_GRIDS, SERVED_MAX_SCAN_ROWS
from gridagg_loadtest.servers import Server, Shape
from gridagg_loadtest.systems import System

store, name = sys.argv[1], sys.argv[2]
repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 5
served = Settings.from_env().with_(max_grids=SERVED_MAX_GRIDS, max_scan_rows=SERVED_MAX_SCAN_ROWS)
server = Server(served, System(f"gridagg-{store}", name, "gridagg", store), Shape(2, 4 if store == "hbase" else 1),
                {}, Path(tempfile.mkdtemp(prefix="questions-http-")))
try:
    for label, ms in dashboard.http_p50(server.url, name, repeat=repeat).items():
        print(f"{label[:50]:50s} {ms:8.1f} ms", flush=True)
finally:
    server.stop()
