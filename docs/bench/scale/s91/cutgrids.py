"""What the paper's sum boxes the scale bench measures (100 boxes, seed 7) cut in a kept
dataset's tree: leaves cut and rows in them per box, and which faces of the last box
cross its cut leaves.
   GRIDAGG_STORE=hbase python cutgrids.py STORE NAME"""
import collections
import sys

import numpy as np

from gridagg.config import Settings
from gridagg.query import QuerySpec
from gridagg_loadtest import workload
from gridagg_loadtest.systems import engine_of

store, name = sys.argv[1], sys.argv[2]
with engine_of(Settings.from_env(), store) as engine:
    ds = engine.dataset(name)
    tree = engine.trees.tree(ds)
    grids, rows = [], []
    for where in workload.paper_queries(100, 7):
        plan = engine.query(name, where, ["sum:wind_speed", "count"], explain=True).plan
        grids.append(plan.scanned_grids_after)
        rows.append(plan.rows_in_scanned_grids)
    print(f"{name}: {tree.leaf_count:,} leaves; per box: cut leaves median {np.median(grids):.1f} "
          f"(mean {np.mean(grids):.1f}), rows in them median {np.median(rows):,.0f}")
    box = QuerySpec.parse(ds, where, ["sum:wind_speed", "count"], None, engine.limits).box
    crossing = collections.Counter()
    for g in plan.grids["scanned"]:
        i = tree.index[g]
        crossing[tuple(ds.dimensions[a].name for a, (lo, hi) in enumerate(box)
                       if tree.dlo[i][a] < lo <= tree.dhi[i][a] or tree.dlo[i][a] <= hi < tree.dhi[i][a])] += 1
    print("faces of the last box crossing its cut leaves (data bounds):", dict(crossing.most_common()))
