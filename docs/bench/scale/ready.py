"""How long a fresh process takes to be ready for a dataset, and its memory:
    python docs/bench/scale/ready.py NAME [--whole]   (GRIDAGG_STORE=hbase for the HBase store)
prints the seconds to import, open the engine, load the dataset's tree and answer a
first count, and the process's maximum RSS. The process starts from the host's tree file
when there is one; --whole: it loads the tree whole, as on a host without one."""
import resource
import sys
import time

t0 = time.perf_counter()
from gridagg.config import Settings  # noqa: E402
from gridagg.engine import GridEngine  # noqa: E402

t1 = time.perf_counter()
engine = GridEngine.open(Settings.from_env())
ds = engine.dataset(sys.argv[1])
if "--whole" in sys.argv:
    engine.trees.files = None
t2 = time.perf_counter()
engine.trees.tree(ds)
t3 = time.perf_counter()
answer = engine.query(sys.argv[1], None, ["count"], None)
t4 = time.perf_counter()
print(f"import {t1 - t0:.2f} s, open {t2 - t1:.2f} s, tree {t3 - t2:.2f} s, first query {t4 - t3:.3f} s, "
      f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB, {answer.to_json(ds)['results']}")
