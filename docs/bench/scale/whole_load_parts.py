"""Where a whole load of a dataset's tree goes:
    python docs/bench/scale/whole_load_parts.py DATASET [LOADS]   (GRIDAGG_STORE=hbase for HBase)
LOADS times (default 3): the leaves from the grid directory, the tree built from them
(TreeState.build, which reads every grid's aggregate), and those aggregates read again
alone."""
import sys
import time

from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg.tree import TreeState

engine = GridEngine.open(Settings.from_env())
ds = engine.dataset(sys.argv[1])
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    t0 = time.perf_counter()
    version, incarnation, leaves = engine.directory.load_tree(ds)
    t1 = time.perf_counter()
    tree = TreeState.build(ds, version, incarnation, leaves, engine.store)
    t2 = time.perf_counter()
    engine.store.get_aggregate_arrays(ds, tree.ids)
    t3 = time.perf_counter()
    print(f"{len(leaves):,} leaves: directory {t1 - t0:.2f} s, build {t2 - t1:.2f} s (of it the "
          f"{tree.n:,} grids' aggregates about {t3 - t2:.2f} s)", flush=True)
