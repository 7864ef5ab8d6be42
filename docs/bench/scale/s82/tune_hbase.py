"""Tune a dataset's tree to the scale bench's workload, outside a bench run, as `python -m
gridagg_loadtest.scale --tune 248 --tune-minutes M` would before measuring:
    GRIDAGG_STORE=hbase python docs/bench/scale/s82/tune_hbase.py net100hs 21
Prints what the tuning took (rounds, changes, leaves before and after, seconds)."""
import json
import sys

from gridagg.config import Settings
from gridagg_loadtest.scale import TRAINING_SEED, tune_to_workload

name, minutes = sys.argv[1], float(sys.argv[2])
settings = Settings.from_env()
print(json.dumps(tune_to_workload(settings, settings.store, name, 248, 1 + TRAINING_SEED, minutes)))
