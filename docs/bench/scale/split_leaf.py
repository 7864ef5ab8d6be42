"""Time the bulk load's split of one leaf (gridagg.split.split_rows, as ingest.tasks
runs it) on rows of a generated archive:
    python docs/bench/scale/split_leaf.py ARCHIVE [PARTS] [N_SIZE]
takes the first PARTS Parquet parts (default 3: 3M rows), stores them as the config of
ingest/examples/weather_generated.toml would (integers at each column's scale), and
splits them down to N_SIZE rows a leaf (default 16000) five times in the files' own
order and five times shuffled (a load's rows arrive in shuffle order). Prints the
best and median seconds of each, and a digest of the leaves (ids, rows, aggregates)
that two versions of the code must agree on."""
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gridagg.aggregate import PartialAggregate
from gridagg.grid import Grid
from gridagg.split import split_rows

archive = Path(sys.argv[1])
parts = int(sys.argv[2]) if len(sys.argv) > 2 else 3
n_size = int(sys.argv[3]) if len(sys.argv) > 3 else 16000
table = pa.concat_tables([pq.read_table(p) for p in sorted(archive.glob("*.parquet"))[:parts]])
# The dimensions first (time, temperature, humidity, illuminance, longitude, latitude), then the measures.
scales = [("timestamp", 1), ("temperature", 10), ("humidity", 1), ("illuminance", 1), ("longitude", 1000),
          ("latitude", 1000), ("wind_speed", 10), ("pressure", 1)]
values = np.stack([np.round(table.column(c).to_numpy().astype(float) * s).astype(np.int64) for c, s in scales], axis=1)
ndim, ncols = 6, values.shape[1]
grid = Grid("0", tuple((int(values[:, d].min()), int(values[:, d].max()) + 1) for d in range(ndim)), 0)
shuffled = np.ascontiguousarray(values[np.random.default_rng(1).permutation(len(values))])

for name, rows in (("files' order", values), ("shuffled", shuffled)):
    agg = PartialAggregate.of_rows(rows, ncols)
    split_rows(grid, rows[:100_000], PartialAggregate.of_rows(rows[:100_000], ncols), n_size, n_size, ndim)  # compiled
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        done = split_rows(grid, rows, agg, n_size, n_size, ndim)
        times.append(time.perf_counter() - t0)
    digest = hashlib.sha1()
    for leaf, ix, a in done.leaves:
        digest.update(leaf.grid_id.encode())
        digest.update(np.sort(rows[ix], axis=0).tobytes())
        digest.update(repr((a.count, a.sums, a.mins, a.maxs)).encode())
    print(f"{len(rows):,} rows, {name}: {len(done.leaves)} leaves, best {min(times):.2f} s, "
          f"median {sorted(times)[2]:.2f} s, digest {digest.hexdigest()[:12]}")
