"""Tuning the tree to its questions: each store's cost model (costmodel, measured by
calibrate), N_size for a new dataset (nsize), merges in place (merge), splits and merges
priced on sampled questions (adapt) and the serving process's online tuner (online)."""
