"""The bench's tuning (loadtest/scale.py tune_to_workload, seed 1 + TRAINING_SEED) on a kept dataset.
   python tune.py STORE NAME MINUTES"""
import sys
from gridagg.config import Settings
from gridagg_loadtest import scale
store, name, minutes = sys.argv[1], sys.argv[2], float(sys.argv[3])
print(scale.tune_to_workload(Settings.from_env(), store, name, 248, 1 + scale.TRAINING_SEED, minutes), flush=True)
