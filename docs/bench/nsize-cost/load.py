"""Load the bench's generated archive (loadtest/archive.py) into gridagg datasets of the
paper's data space on one store, one per N_size, with the Spark bulk load: what
cost.py measures.

    python docs/bench/nsize-cost/load.py ROWS WORKDIR STORE NSIZE...   # e.g. 1000000 /tmp/arch hbase 1000 8000

Datasets are named cost<ROWS/1e6>m_<store>_n<NSIZE>; the encoded archive stays in
WORKDIR/encoded and is reused when there.
"""

import sys
from pathlib import Path

from gridagg.config import Settings
from gridagg_ingest.job import spark_session
from gridagg_loadtest import workload
from gridagg_loadtest.archive import build_archive
from gridagg_loadtest.systems import bench_settings, load_gridagg

rows, workdir, store = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
sizes = [int(n) for n in sys.argv[4:]]
settings = Settings.from_env()
spark = spark_session(settings=bench_settings(settings, [store]))
try:
    encoded = workdir / "encoded"
    if not encoded.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        encoded = build_archive(spark, rows, 7, workdir)
    for n in sizes:
        name = f"cost{rows // 1_000_000}m_{'hb' if store == 'hbase' else 'em'}_n{n}"
        s = load_gridagg(settings, spark, store, workload.definition(name, n), encoded)
        print(f"{name}: {s.stats['grids']} leaves", flush=True)
finally:
    spark.stop()
